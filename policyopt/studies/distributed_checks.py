"""The readings penalty and the model check of a partitioned Parquet data set, as map-reduces over its files.

The Dask path of ``policyopt schedule --data DIR --workers N`` (:mod:`policyopt.studies.distributed` fits the
chains; this module adds what the serial path computes from the readings themselves):

* **Readings penalty** (:func:`readings_moments_partitions`): per partition, the per-slot sums n_t(a), Σ_i d_i(t)
  and Σ_i d_i(t)² of the users' a-step changes (:func:`policyopt.utility.readings_penalty.slot_sums`, in chunks of
  users as the serial path) are added up slot by slot, then
  :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` is formed from the summed terms exactly as the
  serial path forms it.
* **Model check** (:func:`check_partitions`, the ``model_check`` of ``schedule``): per partition, its kept users'
  state series, Δ̂(t) (max over its users), the chains' Δ(t) (Zhang, Wei, Berry, Huang, "Age-Dependent Differential
  Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12)) and the statistic on data sets simulated from each user's
  chain with the user's own random stream (keyed by the user's name); all are maxima over users, so the
  partitions' maxima combine by a maximum, draw by draw, into the serial
  :func:`~policyopt.studies.check_model.quick_check`'s numbers.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import InvalidInputError
from policyopt.models.markov import Population
from policyopt.studies.distributed import (
    DistributedFit,
    fit_partition,
    fold_partitions,
    peak_rss_mib,
    user_spans,
)

__all__ = ["readings_sums_partition", "readings_moments_partitions", "model_check_partition", "check_partitions"]


def _check_int(value, name: str, lower: int) -> int:
    from policyopt.errors import fmt

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lower:
        raise InvalidInputError(f"`{name}` must be an integer ≥ {lower}, got {fmt(value)}")
    return int(value)



# ---------------------------------------------------------------------------------------------
# The readings penalty: per-slot sums over users, added up over partitions
# ---------------------------------------------------------------------------------------------


def readings_sums_partition(path, option: str, max_age: int, chunk_users: int) -> dict | None:
    """The map step of the readings penalty on one partition: n_t(a), Σ_i d_i(t)², Σ_i d_i(t) over its users.

    The panel of the partition's users over its own time range is built and summed one chunk of
    `chunk_users` users at a time (:func:`policyopt.utility.readings_penalty.slot_sums`), so memory is
    bounded by the chunk, the partition's readings and the (L + 1, T) sums.

    Returns
    -------
    dict or None
        ``first_slot``, ``n``/``sum_sq``/``sum_d`` (shape (L + 1, T_p)), ``users``, ``min``, ``max``
        (readings), ``seconds``, ``peak_rss_mib``; ``None`` for a file without readings.

    Raises
    ------
    InvalidInputError
        Bad readings (see :func:`policyopt.io.read_parquet_partition`).
    """
    from policyopt.io import read_parquet_partition
    from policyopt.utility.readings_penalty import slot_sums

    start = time.perf_counter()
    part = read_parquet_partition(path, option)
    code, t, x = part["user_code"], part["time"], part["value"]
    if x.size == 0:
        return None
    L = int(max_age)
    t0 = int(t.min())
    T = int(t.max()) - t0 + 1
    order = np.argsort(code, kind="stable")
    code, t, x = code[order], t[order], x[order]
    n_users = len(part["users"])
    bounds = np.searchsorted(code, np.arange(0, n_users + chunk_users, chunk_users))
    cnt, sq, sd = (np.zeros((L + 1, T)) for _ in range(3))
    for i, (r0, r1) in enumerate(zip(bounds[:-1], bounds[1:])):
        if r1 <= r0:
            continue
        X = np.full((min(chunk_users, n_users - i * chunk_users), T), np.nan)
        X[code[r0:r1] - i * chunk_users, t[r0:r1] - t0] = x[r0:r1]
        c, q, d = slot_sums(X, L, chunk_users=chunk_users)
        cnt += c
        sq += q
        sd += d
    return {"first_slot": t0, "n": cnt, "sum_sq": sq, "sum_d": sd, "users": n_users, "min": float(x.min()),
            "max": float(x.max()), "seconds": time.perf_counter() - start, "peak_rss_mib": peak_rss_mib()}


def _add_aligned(acc, first: int, arrays):
    """Add (L + 1, T_p) arrays starting at slot `first` into the accumulator [first slot, arrays], growing it."""
    if acc is None:
        return [first, [np.array(a, dtype=float) for a in arrays]]
    a0, sums = acc
    T_acc, T_new = sums[0].shape[1], arrays[0].shape[1]
    lo, hi = min(a0, first), max(a0 + T_acc, first + T_new)
    if lo != a0 or hi != a0 + T_acc:
        grown = []
        for a in sums:
            g = np.zeros((a.shape[0], hi - lo))
            g[:, a0 - lo:a0 - lo + T_acc] = a
            grown.append(g)
        sums = grown
    for acc_a, a in zip(sums, arrays):
        acc_a[:, first - lo:first - lo + T_new] += a
    return [lo, sums]


def readings_moments_partitions(data, max_age: int, *, phase_period: int | None = None, client=None,
                                option: str = "--data", chunk_users: int | None = None):
    """The readings' self and cross terms of a partitioned Parquet data set, as a map-reduce over its files.

    The same :class:`~policyopt.utility.readings_penalty.ReadingsMoments` as
    :func:`policyopt.utility.readings_penalty.readings_moments` on all readings with no declared value range
    (the readings' own range, not private): every per-slot sum is a sum over users, so the partitions'
    sums are added slot by slot and the self and cross terms formed once from the totals (cross from the
    summed Σ_i d_i: Σ_{i≠j} d_i d_j = (Σ_i d_i)² − Σ_i d_i²).  The sums are of the same terms in another
    order (rounding differences only; tested to 1e-12 relative against the serial path).

    Parameters
    ----------
    data : str, Path or list of Path
        Directory, glob pattern or file (see :func:`policyopt.io.parquet_files`), or the files themselves.
    max_age : int
        L ≥ 1, the largest age (slots); the data must span more than L slots.
    phase_period : int, optional
        P (slots per cycle); ``None`` or 1: one phase.
    client : distributed.Client, optional
        Run the partitions on this Dask client; ``None``: in this process, one after another.
    option : str
        Option name for messages.
    chunk_users : int, optional
        Users per map step (default :data:`policyopt.utility.readings_penalty.CHUNK_USERS`).

    Returns
    -------
    (moments, stats) : ReadingsMoments, dict
        ``stats``: ``partitions``, ``seconds`` (wall), ``partition_seconds`` (list) and ``peak_rss_mib``
        (largest VmHWM per worker, MiB).

    Raises
    ------
    InvalidInputError
        Bad arguments; no file or no reading; readings spanning ≤ `max_age` slots; all readings equal; fewer
        than two users.
    PolicyOptError
        If a Dask worker fails for another reason.
    """
    from policyopt.io import parquet_files
    from policyopt.utility.readings_penalty import CHUNK_USERS, SlotTerms, readings_moments

    L = _check_int(max_age, "max_age", 1)
    chunk = CHUNK_USERS if chunk_users is None else _check_int(chunk_users, "chunk_users", 1)
    if phase_period is not None:
        _check_int(phase_period, "phase_period", 1)
    paths = [str(p) for p in (data if isinstance(data, (list, tuple)) else parquet_files(data, option))]
    if not paths:
        raise InvalidInputError(f"{option}: no Parquet file given")
    start = time.perf_counter()
    acc = {"sums": None, "users": 0, "min": math.inf, "max": -math.inf, "seconds": [], "rss": {}}

    def combine(acc, p, r, w):
        """Add one partition's per-slot sums (aligned on the slots) into the accumulator."""
        if r is None:
            return acc
        acc["sums"] = _add_aligned(acc["sums"], r["first_slot"], (r["n"], r["sum_sq"], r["sum_d"]))
        acc["users"] += r["users"]
        acc["min"], acc["max"] = min(acc["min"], r["min"]), max(acc["max"], r["max"])
        acc["seconds"].append(r["seconds"])
        acc["rss"][w] = max(acc["rss"].get(w, 0.0), r["peak_rss_mib"])
        return acc

    acc = fold_partitions(readings_sums_partition, paths, (option, L, chunk), combine, acc, client)
    if acc["sums"] is None:
        raise InvalidInputError(f"{option} {str(data)!r} holds no readings (every Parquet file is empty)")
    first, (cnt, sq, sd) = acc["sums"]
    T = cnt.shape[1]
    if L >= T:
        raise InvalidInputError(f"the readings span {T} slots; the readings penalty needs ages up to {L} within them: "
                                "lower --max-age/--max-interval, give longer readings, or use --penalty chain")
    if acc["users"] < 2:
        raise InvalidInputError(f"{option} needs readings of at least 2 users for the cross term, got {acc['users']}")
    if not acc["max"] > acc["min"]:
        raise InvalidInputError(f"all readings equal {acc['min']!r}: the mean has sensitivity 0; declare a value range")
    np.maximum(sq, 0.0, out=sq)  # as slot_terms: a sum of squares, rounding below 0 removed after the sum
    sq[0] = 0.0
    sd[0] = 0.0
    terms = SlotTerms(np.arange(first, first + T, dtype=np.int64), cnt, sq, sd, acc["users"],
                      (acc["min"], acc["max"]), False, 0)
    moments = readings_moments(None, L, phase_period=phase_period, terms=terms)
    stats = {"partitions": len(paths), "seconds": time.perf_counter() - start, "partition_seconds": acc["seconds"],
             "peak_rss_mib": acc["rss"]}
    return moments, stats


# ---------------------------------------------------------------------------------------------
# The model check: maxima over users, per partition, combined by max
# ---------------------------------------------------------------------------------------------


def model_check_partition(path, option: str, edges, state_values, smoothing: float, threshold: int, max_lag: int,
                          width: int, draws: int, min_pairs: int, seed: int) -> dict:
    """The map step of the model check on one partition: its kept users' maxima over users.

    The users' state series (each from its first reading, −1 where a slot has none, padded to `width`
    slots, as :func:`policyopt.studies.check_model.readings_states`), then Δ̂(t) (point estimate,
    :func:`~policyopt.models.empirical.estimate_max_tv`), the chains' Δ(t) (eq. (12)) and the statistic on
    `draws` data sets simulated from the chains, each user from its own stream
    (:func:`~policyopt.models.empirical.user_streams`), t = 1..`max_lag`.

    Returns
    -------
    dict
        ``estimate``, ``model`` (L,), ``draws`` (R, L), ``users_without_claim`` (L,), ``users`` (kept),
        ``seconds``, ``peak_rss_mib``; ``None`` entries when no user is kept.

    Raises
    ------
    InvalidInputError
        Bad readings; a user whose series is mostly gaps (as the serial check).
    """
    from policyopt.io import read_parquet_partition
    from policyopt.models.empirical import chain_statistic_draws, estimate_max_tv, user_streams

    start = time.perf_counter()
    part = read_parquet_partition(path, option)
    pf = fit_partition(part, f"{option} {str(path)!r}", edges, state_values, smoothing, threshold)
    kept, names, K = pf["kept"], pf["names"], pf["values"].size
    out = {"estimate": None, "model": None, "draws": None, "users_without_claim": None, "users": len(kept)}
    if kept:
        code, t = pf["code"], pf["t"]
        first, spans = user_spans(code, t, len(names))
        counts = np.bincount(code, minlength=len(names))
        for u in kept:
            if spans[u] > 10 * counts[u] + 1000:
                raise InvalidInputError(
                    f"user {names[u]!r} has {int(counts[u])} readings spread over {int(spans[u])} slots: the series is "
                    "mostly gaps; put the readings on a regular slot grid"
                )
        row = np.full(len(names), -1, dtype=np.int64)
        row[kept] = np.arange(len(kept))
        x = np.full((len(kept), int(width)), -1, dtype=np.int64)
        sel = row[code] >= 0
        x[row[code[sel]], (t - first[code])[sel]] = pf["states"][sel]
        L = int(max_lag)
        emp = estimate_max_tv(x, K, L, min_pairs=min_pairs, n_boot=0)
        chains = pf["chains"]
        out["estimate"] = np.asarray(emp.estimate, dtype=float)
        out["users_without_claim"] = np.asarray(emp.users_without_claim, dtype=np.int64)
        out["model"] = np.asarray(Population(chains).max_tv(emp.lags), dtype=float)
        out["draws"] = chain_statistic_draws([c.P for c in chains], x, K, L, min_pairs=min_pairs, draws=int(draws),
                                             rng=user_streams([names[u] for u in kept], int(seed)))
    out["seconds"] = time.perf_counter() - start
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def check_partitions(data, fit: DistributedFit, A_max: int, S_max: int, *, seed: int = 0, client=None,
                     option: str = "--data", draws: int | None = None):
    """The model check of a design run (:func:`policyopt.studies.check_model.quick_check`) on a partitioned data set.

    Lags 1..A_max + S_max − 1 (below the longest kept series), :data:`~policyopt.studies.check_model.QUICK_DRAWS`
    simulated data sets, no band: the per-partition maxima of :func:`model_check_partition` combined by a maximum
    (every statistic is a max over users; each user is simulated from its own stream, so draw r of the union is
    the max of the partitions' draws r).  The same numbers as the serial check of the same users (tested).

    Parameters
    ----------
    data : str, Path or list of Path
        The Parquet data set `fit` was estimated from.
    fit : DistributedFit
        From :func:`fit_partitions` (edges, state values, smoothing, threshold, longest span).
    A_max, S_max : int
        The search box (slots).
    seed : int
        Simulation seed (≥ 0).
    client : distributed.Client, optional
        ``None``: in this process.
    option : str
        Option name for messages.
    draws : int, optional
        Simulated data sets (default :data:`~policyopt.studies.check_model.QUICK_DRAWS`).

    Returns
    -------
    (report, stats) : ModelCheckReport, dict
        ``stats``: ``seconds``, ``partition_seconds``, ``peak_rss_mib`` (per worker, MiB).

    Raises
    ------
    InvalidInputError
        Bad `seed`, `A_max`, `S_max`; a kept series of one slot; see :func:`model_check_partition`.
    """
    from policyopt.io import parquet_files
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS
    from policyopt.studies.check_model import QUICK_DRAWS, check_from_maxima, quick_max_lag

    start = time.perf_counter()
    seed = _check_int(seed, "seed", 0)
    R = QUICK_DRAWS if draws is None else _check_int(draws, "draws", 1)
    width = int(fit.longest_span)
    if width < 2:
        raise InvalidInputError(f"{option}: the kept users' series span {width} slot(s); the model check needs ≥ 2")
    L = quick_max_lag(_check_int(A_max, "A_max", 0), _check_int(S_max, "S_max", 1), width)
    paths = [str(p) for p in (data if isinstance(data, (list, tuple)) else parquet_files(data, option))]
    acc = {"estimate": None, "model": None, "draws": None, "no_claim": np.zeros(L, dtype=np.int64), "users": 0,
           "seconds": [], "rss": {}}

    def combine(acc, p, r, w):
        """Maxima over users combine by a maximum; users without claim add up."""
        acc["seconds"].append(r["seconds"])
        acc["rss"][w] = max(acc["rss"].get(w, 0.0), r["peak_rss_mib"])
        if r["estimate"] is None:
            return acc
        for key in ("estimate", "model", "draws"):
            acc[key] = r[key] if acc[key] is None else np.maximum(acc[key], r[key])
        acc["no_claim"] = acc["no_claim"] + r["users_without_claim"]
        acc["users"] += r["users"]
        return acc

    args = (option, fit.edges, fit.state_values, float(fit.smoothing), int(fit.min_transitions), L, width, R,
            DEFAULT_MIN_PAIRS, seed)
    acc = fold_partitions(model_check_partition, paths, args, combine, acc, client)
    info = {"states": int(fit.state_values.size), "users": acc["users"], "slots": width, "seed": seed,
            "source": f"{option} {str(data)!r} (Dask map over {len(paths)} files)"}
    report = check_from_maxima(acc["estimate"], acc["model"], acc["draws"], users_without_claim=acc["no_claim"],
                               min_pairs=DEFAULT_MIN_PAIRS, info=info, start=start)
    return report, {"seconds": time.perf_counter() - start, "partition_seconds": acc["seconds"], "peak_rss_mib": acc["rss"]}
