"""Synthetic smart meters as a partitioned Parquet data set (a generator script, not a shipped data file).

Each user follows a sticky random Markov chain over 12 consumption levels (simulation only: numpy's
generator, seeded; nothing here is released): at every slot the level stays with a user-specific
probability in [0.80, 0.97], otherwise it jumps to a level drawn from the user's own random preference
over the 12 levels.  A reading is the level's kWh (0.05 .. 5 kWh, log-spaced) times the user's scale
(0.5 .. 2) times 1 + 5 % Gaussian noise, floored at 0.001 kWh, so readings are distinct floats.  About
1 % of the slots are missing (gaps, which break transitions as real meter data does).

Files hold whole users (``users_per_file`` each, the Dask partitions), columns user (string ``m0000042``),
time (int64 slot), value (float64 kWh), written with pyarrow.

Usage::

    .venv/bin/python tests/benchmarks/make_meters.py OUT_DIR --users 1000000 [--users-per-file 10000]
        [--slots 168] [--seed 2026]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

LEVELS = np.geomspace(0.05, 5.0, 12)  # kWh per slot
MISSING = 0.01


def simulate_users(rng: np.random.Generator, n_users: int, slots: int, first_id: int) -> dict:
    """Readings of `n_users` users over `slots` slots: dict of numpy arrays user (str), time, value."""
    k = LEVELS.size
    stay = rng.uniform(0.80, 0.97, size=n_users)
    pref = rng.dirichlet(np.full(k, 0.7), size=n_users)  # (U, K) jump distribution per user
    cum = np.cumsum(pref, axis=1)
    cum[:, -1] = 1.0
    scale = rng.uniform(0.5, 2.0, size=n_users)
    level = np.empty((n_users, slots), dtype=np.int64)
    level[:, 0] = (rng.random(n_users)[:, None] > cum).sum(axis=1)
    for t in range(1, slots):
        jump = rng.random(n_users) >= stay
        new = (rng.random(n_users)[:, None] > cum).sum(axis=1)
        level[:, t] = np.where(jump, new, level[:, t - 1])
    value = scale[:, None] * LEVELS[level] * (1.0 + 0.05 * rng.standard_normal((n_users, slots)))
    value = np.maximum(value, 0.001)
    keep = rng.random((n_users, slots)) >= MISSING
    uid, tt = np.nonzero(keep)
    names = np.array([f"m{first_id + u:07d}" for u in range(n_users)], dtype=object)
    return {"user": names[uid], "time": tt.astype(np.int64), "value": value[uid, tt]}


def write_meters(out_dir, n_users: int, *, users_per_file: int = 10_000, slots: int = 168, seed: int = 2026) -> list:
    """Write `n_users` synthetic users as Parquet files ``part-00000.parquet``... in `out_dir`; return the paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, first in enumerate(range(0, n_users, users_per_file)):
        rng = np.random.default_rng([seed, index])
        cols = simulate_users(rng, min(users_per_file, n_users - first), slots, first)
        table = pa.table({"user": pa.array(cols["user"], type=pa.string()), "time": cols["time"], "value": cols["value"]})
        path = out / f"part-{index:05d}.parquet"
        pq.write_table(table, path)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--users-per-file", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=168)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    paths = write_meters(args.out_dir, args.users, users_per_file=args.users_per_file, slots=args.slots, seed=args.seed)
    print(f"wrote {args.users} users in {len(paths)} files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
