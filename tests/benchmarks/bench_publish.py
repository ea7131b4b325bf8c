"""Benchmark of ``policyopt publish`` / ``policyopt ledger`` (policyopt.deploy).

Run: ``.venv/bin/python tests/benchmarks/bench_publish.py``.

1. Per-release cost of :class:`policyopt.deploy.Publisher` on a stream of 17 users (uniform
   readings in [0, 4], seed 2026), A = 0, S̄ = 1, ε_C = 1, 400 releases into a fresh ledger in a
   temporary directory, accounting model the two-state chain p = q = 0.45: wall time of the
   release loop divided by the releases (one OpenDP draw, one SQLite transaction with
   ``synchronous=FULL``, one fsync'd CSV append each).  Baseline in the same run: the OpenDP
   measurement (clamp → mean → Laplace) alone, median of 400 calls.  Target < 50 ms per release.
2. ``Ledger.risk`` (Theorem 3 trajectory) for a year of hourly slots with the designed schedule
   A = S̄ = 168 on the bundled CityLearn model (52 releases over 8737 slots), warm (model
   loaded).  Baseline in the same run: ``compose_all_ages`` (tests/_compose_ref.py, ``compose`` before it
   evaluated Δ only up to the largest lag needed), which evaluates Δ at every age up to the horizon.  Target < 2 s;
   the two trajectories must agree bit for bit (asserted).
3. ``policyopt publish --data DIR`` at the deployment's scale: a week of hourly releases (A = 0, S̄ = 1,
   ε_C = 1, value range 0:10 kWh, 168 releases) of 10⁶ synthetic meters (``make_meters.py``: 169 hourly
   slots, 100 Parquet files of 10⁴ meters, seed 2026), accounted with the two-state chain p = q = 0.45 (the
   model is not what is measured here).  The publisher spills the input slots to one folder per slot in one
   scan, then reads one slot (10⁶ readings) at a time.  Wall time and the peak resident memory of the
   ``policyopt`` process (``ru_maxrss`` from ``os.wait4`` of that child; ``workers=N`` adds ``--workers N``, whose
   Dask workers are not counted), beside the size of the data set in
   memory as one table (the cost of reading it whole).  Targets: peak RSS < 1 GiB (the data set as one Arrow table
   is ≈ 4.7 GB, 28 bytes per reading), the 168 releases made.  Measured 2026-11-26 at load 6–7: 485 s, 801 MiB.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

RELEASES = 400
TARGET_RELEASE_S, TARGET_RISK_S = 0.050, 2.0
TARGET_METERS_RSS_MIB = 1024


def verdict(value: float, target: float) -> str:
    """"OK" below the target, else "OVER TARGET"."""
    return "OK" if value < target else "OVER TARGET"


def bench_release() -> None:
    from policyopt.deploy import ModelSpec, Publisher, ScheduleSpec

    rng = np.random.default_rng(2026)
    df = pd.DataFrame([(f"u{i}", t, float(rng.uniform(0, 4))) for t in range(RELEASES + 1) for i in range(17)],
                      columns=["user", "time", "value"])
    with tempfile.TemporaryDirectory() as d:
        pub = Publisher(Path(d) / "l.sqlite", ScheduleSpec(0, 1, 1.0, (0.0, 4.0)),
                        model=ModelSpec("two-state:p=0.45,q=0.45"), out=Path(d) / "r.csv")
        start = time.perf_counter()
        rep = pub.publish(df)
        total = time.perf_counter() - start
    assert len(rep.new_rows) == RELEASES
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=17), dp.symmetric_distance()
    mean = space >> dp.t.then_clamp((0.0, 4.0)) >> dp.t.then_mean()
    meas = mean >> dp.m.then_laplace(float(mean.map(2)) / 1.0)  # the publisher's measurement for I = 17
    vals = df[df.time == 0]["value"].tolist()
    times = []
    for _ in range(RELEASES):
        t0 = time.perf_counter()
        meas(vals)
        times.append(time.perf_counter() - t0)
    per = total / RELEASES
    print(f"publish: {RELEASES} releases in {total:.2f} s (incl. model and set-up) = {1e3 * per:.2f} ms per release "
          f"[target < {1e3 * TARGET_RELEASE_S:g} ms] {verdict(per, TARGET_RELEASE_S)}; "
          f"baseline OpenDP draw alone: median {1e3 * statistics.median(times):.3f} ms")


def bench_risk() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the baseline in _compose_ref.py
    from _compose_ref import compose_all_ages
    from policyopt.deploy import Ledger, LedgerRow, ModelSpec, ScheduleSpec

    sch = ScheduleSpec(168, 168, 2.251584402219576, (0.0, 3.9), origin=0)
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(Path(d) / "l.sqlite", writer=True)
        led.initialise(sch, ModelSpec())
        for n in range(1, 53):
            s = sch.publish_time(n)
            led.append(LedgerRow(n, s, s - 168, "released", 17, 0, sch.epsilon_c, sch.epsilon_c, None, None, 0.0, None,
                                 None, None, sch.id, "bench", "bench", "now"))
        pop = led.model.load()
        t0 = time.perf_counter()
        got = led.risk(pop)
        t_ledger = time.perf_counter() - t0
        led.close()
    S = np.array([sch.publish_time(n) for n in range(1, 53)])
    t0 = time.perf_counter()
    ref = compose_all_ages(S, 168, sch.epsilon_c, pop, horizon=int(S[-1]))
    t_ref = time.perf_counter() - t0
    assert got.risk.tobytes() == ref.risk.tobytes(), "the ledger's trajectory differs from the all-ages baseline"
    print(f"ledger risk: {got.times.size} slots, {got.released} releases: {t_ledger:.3f} s [target < {TARGET_RISK_S:g} s] "
          f"{verdict(t_ledger, TARGET_RISK_S)}; baseline compose with Δ at every age: {t_ref:.3f} s (bit for bit equal)")


def bench_meters(users: int = 10**6, slots: int = 169, users_per_file: int = 10_000, workdir=None,
                 workers: int | None = None) -> dict:
    """Publish a week of hourly releases of `users` Parquet meters with the CLI; wall time and peak RSS of that process.

    Returns
    -------
    dict
        ``releases``, ``wall_s``, ``peak_rss_mib`` (of the ``policyopt`` process; with `workers`, not of its Dask
        workers), ``readings``, ``data_bytes`` (Parquet on disk) and the CLI's JSON report (``report``).
    """
    import json
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_meters import write_meters

    exe = str(Path(sys.executable).with_name("policyopt"))
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        data = Path(d) / "meters"
        write_meters(data, users, users_per_file=users_per_file, slots=slots)
        size = sum(f.stat().st_size for f in data.iterdir())
        args = [exe, "publish", "--A", "0", "--S-bar", "1", "--epsilon-c", "1", "--value-range", "0:10",
                "--model", "two-state:p=0.45,q=0.45", "--data", str(data), "--ledger", str(Path(d) / "l.db"), "--json"]
        if workers is not None:
            args += ["--workers", str(workers)]  # the split into slots on a local Dask cluster
        out_path, err_path, rss_path = Path(d) / "out.json", Path(d) / "err.txt", Path(d) / "maxrss"
        with open(out_path, "w") as out_f, open(err_path, "w") as err_f:
            start = time.perf_counter()
            # Through a small launcher: Linux keeps in ru_maxrss the resident size of the process a child was forked
            # from (a test runner that has grown to 1 GiB would be counted), so policyopt is forked from the launcher,
            # which reports its child's own peak (KiB)
            proc = subprocess.run([sys.executable, "-c", _LAUNCHER, str(rss_path), *args], stdout=out_f, stderr=err_f)
            wall = time.perf_counter() - start
        assert proc.returncode == 0, err_path.read_text()
        out = out_path.read_text()
        rep = json.loads(out)
        maxrss_kib = int(rss_path.read_text())
    return {"releases": rep["released"], "wall_s": wall, "peak_rss_mib": maxrss_kib / 1024, "data_bytes": size,
            "readings": users * slots, "report": rep}


#: Runs argv[2:] as a child forked from this small process and writes the child's own peak RSS (KiB) to argv[1].
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def report_meters(users: int = 10**6) -> None:
    """Print the line of :func:`bench_meters`."""
    r = bench_meters(users)
    print(f"publish --data Parquet: {users} meters, {r['releases']} hourly releases (a week) in {r['wall_s']:.1f} s; "
          f"peak RSS of the policyopt process {r['peak_rss_mib']:.0f} MiB [target < {TARGET_METERS_RSS_MIB} MiB] "
          f"{verdict(r['peak_rss_mib'], TARGET_METERS_RSS_MIB)}; data set {r['data_bytes'] / 2**20:.0f} MiB of Parquet, "
          f"{r['readings']} readings")


def bench() -> None:
    """Run the three measurements and print one line each."""
    bench_release()
    bench_risk()
    report_meters()


if __name__ == "__main__":
    bench()
