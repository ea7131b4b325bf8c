"""The readings penalty and the model check of a partitioned Parquet data set, as map-reduces over its files.

The Dask path of ``policyopt schedule --data DIR --workers N`` (:mod:`policyopt.studies.distributed` fits the
chains; this module adds what the serial path computes from the readings themselves):

* **Readings penalty** (:func:`readings_moments_partitions`): per partition, the per-slot sums n_t(a), Σ_i d_i(t)
  and Σ_i d_i(t)² of the users' a-step changes (:func:`policyopt.utility.readings_penalty.slot_sums`, in chunks of
  users as the serial path) are added up slot by slot, then
  :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` is formed from the summed terms exactly as the
  serial path forms it.
* **Held-out model check** (:func:`held_out_check_partitions`, the ``model_check`` of ``schedule --workers``): the
  serial :func:`~policyopt.studies.markov_check.check_markov_model` of the first-order chains — fitted on the first
  part of each user's series, checked on the rest by the G² Markov test and the Δ(t) check, each family-wise against
  posterior-predictive data sets simulated from each user's own random streams (keyed by the user's name) — with
  the G² profiles of groups of users added (:meth:`~policyopt.models.markov_test.G2Profile.merge`) and the maxima over
  users of Δ̂(t) combined by a maximum, so the verdict is the serial one (Zhang, Wei, Berry, Huang, "Age-Dependent
  Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3 needs the Markov premise it tests).
* **Quick model check** (:func:`check_partitions`): per partition, its kept users' state series, Δ̂(t) (max over its
  users), the chains' Δ(t) (eq. (12)) and the statistic on data sets simulated from each user's chain with the
  user's own random stream; all are maxima over users, so the partitions' maxima combine by a maximum, draw by
  draw, into the serial :func:`~policyopt.studies.check_model.quick_check`'s numbers.
* **The full check of** ``policyopt check-model --workers N`` (:func:`check_model_partitions`): the same map step
  with the block-bootstrap replicates of the direct estimate (each user resampled from its own stream, so each
  replicate's maximum over users combines by a maximum too), reduced per file into a
  :class:`~policyopt.models.empirical.MaxTVPart`; the band and the verdict are formed once from the merged part.
  ``--holdout`` / ``--value-range`` first split/clip each file into temporary fit and test files
  (:func:`split_partition`); the held-out Markov test is :func:`held_out_check_partitions` on the original files.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_count
from policyopt.models.markov import Population
from policyopt.studies.distributed import (
    DistributedFit,
    fit_partition,
    fold_partitions,
    peak_rss_mib,
    sorted_states,
    user_spans,
)

__all__ = ["readings_sums_partition", "readings_moments_partitions", "model_check_partition", "check_partitions",
           "check_model_partitions", "split_partition", "kept_span_partition", "held_out_widths_partition",
           "held_out_partition", "held_out_check_partitions", "SelectionSummary", "HELD_OUT_CHUNK_BYTES"]


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


def _partition_states(path, option: str, edges, state_values, smoothing: float, threshold: int, fit_path=None) -> dict:
    """Chains fitted on `fit_path` (default `path`), states of `path`'s readings: what both model-check map steps share.

    Returns
    -------
    dict
        ``code``, ``t``, ``states`` (sorted by user, then time), ``names`` (of `path`), ``users`` (codes of the users
        kept by the fit and read in `path`), ``chains`` (theirs, in that order), ``K``; with `fit_path` also
        ``fit_code``, ``fit_t``, ``fit_names``, ``fit_kept`` (the same of the fitted partition).
    """
    from policyopt.io import read_parquet_partition

    pf = fit_partition(read_parquet_partition(fit_path or path, option), f"{option} {str(fit_path or path)!r}", edges,
                       state_values, smoothing, threshold)
    K = pf["values"].size
    if fit_path is None:
        return {"code": pf["code"], "t": pf["t"], "states": pf["states"], "names": pf["names"], "users": list(pf["kept"]),
                "chains": pf["chains"], "K": K}
    chain_of = {pf["names"][u]: c for u, c in zip(pf["kept"], pf["chains"])}
    part = read_parquet_partition(path, option)
    names = part["users"]
    code, t, _, states = sorted_states(part, f"{option} {str(path)!r}", edges)  # the quantisation of fit_partition
    users = [j for j, n in enumerate(names) if n in chain_of]
    return {"code": code, "t": t, "states": states, "names": names, "users": users,
            "chains": [chain_of[names[j]] for j in users], "K": K,
            "fit_code": pf["code"], "fit_t": pf["t"], "fit_names": pf["names"], "fit_kept": list(pf["kept"])}


def _refuse_mostly_gaps(code: np.ndarray, t: np.ndarray, names, kept) -> tuple[np.ndarray, np.ndarray]:
    """First slot and span of every user (:func:`~policyopt.studies.distributed.user_spans`), after refusing a kept
    user whose span exceeds ten times its readings plus 1000 slots, the rule of
    :func:`policyopt.studies.check_model.readings_states`.

    Raises
    ------
    InvalidInputError
        Naming the first such user, its readings and its span.
    """
    first, spans = user_spans(code, t, len(names))
    counts = np.bincount(code, minlength=len(names))
    for u in kept:
        if spans[u] > 10 * counts[u] + 1000:
            raise InvalidInputError(
                f"user {names[u]!r} has {int(counts[u])} readings spread over {int(spans[u])} slots: the series is "
                "mostly gaps; put the readings on a regular slot grid"
            )
    return first, spans


def model_check_partition(path, option: str, edges, state_values, smoothing: float, threshold: int, max_lag: int,
                          width: int, draws: int, min_pairs: int, seed: int, n_boot: int = 0, fit_path=None) -> dict:
    """The map step of the model check on one partition: its kept users' maxima over users.

    The users' state series (each from its first reading, −1 where a slot has none, padded to `width`
    slots, as :func:`policyopt.studies.check_model.readings_states`), then the map step of the direct estimate
    (:func:`~policyopt.models.empirical.max_tv_part`: Δ̂(t) and, with `n_boot` > 0, the block-bootstrap replicates'
    maxima, each user resampled from its own stream, :func:`~policyopt.models.empirical.user_streams` stream 2),
    the chains' Δ(t) (eq. (12)) and the statistic on `draws` data sets simulated from the chains, each user from
    its own stream (stream 1), t = 1..`max_lag`.  With `fit_path` (a hold-out split) the chains are fitted on that
    file and the statistic is computed on `path`'s readings of the same users.

    Returns
    -------
    dict
        ``part`` (:class:`~policyopt.models.empirical.MaxTVPart`, no per-user arrays), ``estimate``, ``model`` (L,),
        ``draws`` (R, L), ``users_without_claim`` (L,), ``users`` (kept), ``seconds``, ``peak_rss_mib``; ``None``
        entries when no user is kept.

    Raises
    ------
    InvalidInputError
        Bad readings; a user whose series is mostly gaps (as the serial check).
    """
    from policyopt.models.empirical import chain_statistic_draws, max_tv_part, user_streams

    start = time.perf_counter()
    ps = _partition_states(path, option, edges, state_values, smoothing, threshold, fit_path)
    kept, names, K = ps["users"], ps["names"], ps["K"]
    out = {"part": None, "estimate": None, "model": None, "draws": None, "users_without_claim": None, "users": len(kept)}
    if kept:
        code, t = ps["code"], ps["t"]
        if "fit_code" in ps:  # a hold-out split: the training part is refused alike (as the serial check does)
            _refuse_mostly_gaps(ps["fit_code"], ps["fit_t"], ps["fit_names"], ps["fit_kept"])
        first, spans = _refuse_mostly_gaps(code, t, names, kept)
        row = np.full(len(names), -1, dtype=np.int64)
        row[kept] = np.arange(len(kept))
        x = np.full((len(kept), int(width)), -1, dtype=np.int64)
        sel = row[code] >= 0
        x[row[code[sel]], (t - first[code])[sel]] = ps["states"][sel]
        L = int(max_lag)
        who = [names[u] for u in kept]
        part = max_tv_part(x, K, L, min_pairs=min_pairs, n_boot=int(n_boot), rng=user_streams(who, int(seed), stream=2),
                           keep_users=False)
        chains = ps["chains"]
        out["part"] = part
        out["estimate"] = np.asarray(part.estimate, dtype=float)
        out["users_without_claim"] = np.asarray(part.users_without_claim, dtype=np.int64)
        out["model"] = np.asarray(Population(chains).max_tv(np.arange(1, L + 1)), dtype=float)
        out["draws"] = chain_statistic_draws([c.P for c in chains], x, K, L, min_pairs=min_pairs, draws=int(draws),
                                             rng=user_streams(who, int(seed)))
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
            "source": f"{option} {str(data)!r} (Dask map over {fmt_count(len(paths), 'file')})"}
    report = check_from_maxima(acc["estimate"], acc["model"], acc["draws"], users_without_claim=acc["no_claim"],
                               min_pairs=DEFAULT_MIN_PAIRS, info=info, start=start)
    return report, {"seconds": time.perf_counter() - start, "partition_seconds": acc["seconds"], "peak_rss_mib": acc["rss"]}


# ---------------------------------------------------------------------------------------------
# policyopt check-model on Dask: the full check, with the band
# ---------------------------------------------------------------------------------------------


def split_partition(path, option: str, holdout, value_range, out_dir, index: int) -> dict:
    """The preparation step of a hold-out or clipped check on one partition: write its fit and test files.

    Readings are clipped into `value_range` (when given), then each user's readings are split at
    t0 + ⌈(1 − holdout)·span⌉ (t0 its first slot, span its slots), as the serial
    :func:`~policyopt.studies.check_model.check_model`: the part before goes to ``fit-INDEX.parquet``, the rest to
    ``test-INDEX.parquet`` in `out_dir` (without `holdout` one clipped file serves both).

    Returns
    -------
    dict
        ``fit``, ``test`` (paths, ``None`` when empty), ``readings``, ``test_readings``.

    Raises
    ------
    InvalidInputError
        Bad readings (see :func:`policyopt.io.read_parquet_partition`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from policyopt.io import read_parquet_partition

    part = read_parquet_partition(path, option)
    code, t, x = part["user_code"], part["time"], part["value"]
    if value_range is not None:
        x = np.clip(x, float(value_range[0]), float(value_range[1]))
    names = np.asarray(part["users"], dtype=object)

    def write(mask, stem):
        """Write the readings selected by the boolean `mask` (n,) to ``STEM-INDEX.parquet`` in `out_dir` (user, time
        in slots, value in the readings' unit, clipped); its path, or ``None`` when `mask` selects nothing."""
        if not mask.any():
            return None
        out = str(Path(out_dir) / f"{stem}-{index:06d}.parquet")
        pq.write_table(pa.table({"user": pa.array(names[code[mask]].tolist(), type=pa.string()), "time": t[mask],
                                 "value": x[mask]}), out)
        return out

    everything = np.ones(x.size, dtype=bool)
    if holdout is None:
        p = write(everything, "fit")
        return {"fit": p, "test": p, "readings": int(x.size), "test_readings": int(x.size)}
    first, span = user_spans(code, t, len(names)) if x.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    cut = first + np.ceil((1.0 - float(holdout)) * span).astype(np.int64)
    test = t >= cut[code] if x.size else everything
    return {"fit": write(~test, "fit"), "test": write(test, "test"), "readings": int(x.size),
            "test_readings": int(test.sum())}


def kept_span_partition(path, option: str, fit_path, edges, state_values, smoothing: float, threshold: int) -> int:
    """Longest span (slots) in `path` of a user kept by the chains fitted on `fit_path` (0 if none)."""
    ps = _partition_states(path, option, edges, state_values, smoothing, threshold, fit_path)
    if not ps["users"]:
        return 0
    _, spans = user_spans(ps["code"], ps["t"], len(ps["names"]))
    return int(spans[ps["users"]].max())


def check_model_partitions(data, *, n_states: int = 12, value_range=None, max_lag: int | None = None,
                           level: float = 0.95, holdout: float | None = None, min_pairs: int | None = None,
                           draws: int | None = None, n_boot: int | None = None, smoothing: float = 0.01,
                           seed: int = 0, client=None, workers: int | None = None, scheduler: str | None = None,
                           option: str = "--data", source: str | None = None, slot_seconds: int | None = None,
                           markov_lags: int | None = None):
    """``policyopt check-model`` on a partitioned Parquet data set: the full check with its band and the held-out
    Markov test of the chains, as a map-reduce.

    Chains and quantile edges as :func:`~policyopt.studies.distributed.fit_partitions` (the serial fit's numbers);
    per partition (whole users per file, :func:`model_check_partition`): the users' lagged-pair statistic Δ̂_u(t),
    the block-bootstrap replicates' maxima over the partition's users (B, L), the chains' Δ(t), the statistic on the
    R data sets simulated from the chains (R, L) and the users without claim; reduced by maxima and sums
    (:meth:`~policyopt.models.empirical.MaxTVPart.merge`); then the band (quantiles, max-statistic shift) and the
    verdict (:func:`~policyopt.studies.check_model.check_from_part`).  The Markov test is
    :func:`held_out_check_partitions` (the chains fitted on the first part of each series, `holdout` or
    :data:`~policyopt.studies.markov_check.DEFAULT_HOLDOUT`, lags 1..`markov_lags`, default `max_lag` when given,
    else a week of slots), attached by :func:`~policyopt.studies.check_model.with_markov_test`.  Every user resamples
    and simulates from its own streams keyed by its name, so the report equals the serial
    :func:`~policyopt.studies.check_model.check_model`'s on the same readings, whatever the partitioning (tested; the
    Markov test's G² sums to rounding, since they are added in another order).  With `holdout` or `value_range` every file is first
    clipped and split into a fit part and a test part, written to a temporary directory (removed at the end; with a
    remote scheduler its workers must see the system's temporary directory at the same path).

    Parameters
    ----------
    data : str, Path or list of Path
        Directory, glob pattern or file (see :func:`policyopt.io.parquet_files`), or the files themselves; each
        user's readings in one file.
    n_states, value_range, max_lag, level, holdout, min_pairs, draws, n_boot, smoothing, seed, slot_seconds, markov_lags
        As :func:`~policyopt.studies.check_model.check_model` (``None``: its defaults; the model is the chains).
    client : distributed.Client, optional
        Run the partitions on this Dask client.
    workers, scheduler : int or str, optional
        Without `client`: start a local Dask cluster of `workers` processes, or connect to `scheduler`, for this
        call (:func:`~policyopt.studies.distributed.dask_client`); all three ``None``: the same map-reduce in this
        process, one file after another.
    option : str
        Option name for messages.
    source : str, optional
        How to name the data in the report.

    Returns
    -------
    (report, stats) : ModelCheckReport, dict
        ``stats``: ``partitions``, ``seconds``, ``fit_seconds``, ``markov_test_seconds``, ``partition_seconds``,
        ``peak_rss_mib`` (largest VmHWM per worker, MiB, over the check's map steps).

    Raises
    ------
    InvalidInputError
        Bad arguments; bad readings; a user in two files; no reading to test; L not below the longest series.
    InvalidModelError
        No user with enough transitions.
    PolicyOptError
        A Dask worker failed for another reason.
    """
    import shutil
    import tempfile

    from policyopt.errors import check_value_range, fmt

    if client is None and (workers is not None or scheduler is not None):
        from policyopt.studies.distributed import dask_client

        with dask_client(workers=workers, scheduler=scheduler) as new_client:
            return check_model_partitions(
                data, n_states=n_states, value_range=value_range, max_lag=max_lag, level=level, holdout=holdout,
                min_pairs=min_pairs, draws=draws, n_boot=n_boot, smoothing=smoothing, seed=seed, client=new_client,
                option=option, source=source, slot_seconds=slot_seconds, markov_lags=markov_lags,
            )
    from policyopt.io import parquet_files
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS, DEFAULT_N_BOOT, default_max_lag
    from policyopt.studies.check_model import DEFAULT_DRAWS, check_from_part
    from policyopt.studies.distributed import fit_partitions

    start = time.perf_counter()
    K = _check_int(n_states, "n_states", 2)
    seed = _check_int(seed, "seed", 0)
    R = DEFAULT_DRAWS if draws is None else _check_int(draws, "draws", 1)
    B = DEFAULT_N_BOOT if n_boot is None else _check_int(n_boot, "n_boot", 20)
    mp = DEFAULT_MIN_PAIRS if min_pairs is None else _check_int(min_pairs, "min_pairs", 1)
    if not (isinstance(level, (int, float)) and not isinstance(level, bool) and 0.0 < float(level) < 1.0):
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if holdout is not None and (isinstance(holdout, bool) or not isinstance(holdout, (int, float))
                                or not 0.0 < float(holdout) < 1.0):
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    if value_range is not None:
        value_range = check_value_range(value_range)
    if max_lag is not None:
        _check_int(max_lag, "max_lag", 1)
    if markov_lags is not None:
        _check_int(markov_lags, "markov_lags", 1)
    if slot_seconds is not None:
        _check_int(slot_seconds, "slot_seconds", 1)
    paths = [str(p) for p in (data if isinstance(data, (list, tuple)) else parquet_files(data, option))]
    if not paths:
        raise InvalidInputError(f"{option}: no Parquet file given")
    tmp = None
    try:
        if holdout is not None or value_range is not None:
            tmp = tempfile.mkdtemp(prefix="policyopt-check-model-")
            jobs = [(p, i) for i, p in enumerate(paths)]
            split = fold_partitions(_split_job, jobs, (option, holdout, value_range, tmp), _collect, [], client)
            split.sort(key=lambda r: r[0])
            fit_paths = [r[1]["fit"] for r in split if r[1]["fit"] is not None]  # edges from every fit reading
            if not fit_paths:
                raise InvalidInputError(f"{option} {str(data)!r} holds no readings (every Parquet file is empty)")
            pairs = [(None if holdout is None else r[1]["fit"], r[1]["test"]) for r in split  # fit file = test file
                     if r[1]["fit"] is not None and r[1]["test"] is not None]                # without holdout
            if not pairs:
                raise InvalidInputError(f"`holdout`={holdout} leaves no readings to test on")
        else:
            pairs = [(None, p) for p in paths]
            fit_paths = paths
        fit_start = time.perf_counter()
        fit = fit_partitions(fit_paths if tmp is not None else data, K, smoothing=smoothing, client=client,
                             option=option, horizon=1, n_staleness=1)
        fit_seconds = time.perf_counter() - fit_start
        args = (option, fit.edges, fit.state_values, float(fit.smoothing), int(fit.min_transitions))
        if holdout is None:
            width = int(fit.longest_span)
            fit_slots = width
        else:
            jobs = [(tst, f) for f, tst in pairs]
            width = fold_partitions(_span_job, jobs, args, lambda acc, p, r, w: max(acc, r), 0, client)
            fit_slots = int(fit.longest_span)
            if width == 0:
                raise InvalidInputError("no user kept by the fit has readings in the held-out part")
        if max_lag is not None and max_lag >= width:  # the message of estimate_max_tv (the CLI names --max-lag)
            raise InvalidInputError(f"`max_lag`={int(max_lag)} must be below the series length T = {width} slots")
        L = default_max_lag(width) if max_lag is None else int(max_lag)
        acc = {"part": None, "model": None, "draws": None, "users": 0, "seconds": [], "rss": {}}

        def combine(acc, p, r, w):
            """Maxima over users combine by a maximum, counts by a sum."""
            acc["seconds"].append(r["seconds"])
            acc["rss"][w] = max(acc["rss"].get(w, 0.0), r["peak_rss_mib"])
            if r["part"] is None:
                return acc
            acc["part"] = r["part"] if acc["part"] is None else acc["part"].merge(r["part"])
            for key in ("model", "draws"):
                acc[key] = r[key] if acc[key] is None else np.maximum(acc[key], r[key])
            acc["users"] += r["users"]
            return acc

        jobs = [(tst, f) for f, tst in pairs]
        acc = fold_partitions(_check_job, jobs, args + (L, width, R, mp, seed, B), combine, acc, client)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if acc["part"] is None:
        raise InvalidInputError("no user kept by the fit has readings in the held-out part")
    info = {
        "source": source or f"{option} {str(data)!r}",
        "holdout": None if holdout is None else float(holdout),
        "fit_slots": int(fit_slots),
        "value_range": None if value_range is None else list(value_range),
        "smoothing": float(fit.smoothing),
        "slot_seconds": None if slot_seconds is None else int(slot_seconds),
        "states": K, "users": acc["users"], "slots": int(width), "seed": seed, "excluded_users": dict(fit.excluded),
    }
    report = check_from_part(acc["part"], acc["model"], acc["draws"], level=float(level), info=info, start=start)
    # the held-out Markov test of the chains (check_model: as every design on data checks its model), on the original
    # files clipped in memory: the fit's users and edges, the cut at `holdout` (else the design check's default)
    from policyopt.studies.check_model import with_markov_test
    from policyopt.studies.markov_check import periods_from_slot

    mk_start = time.perf_counter()
    check, mk_stats = held_out_check_partitions(
        paths, fit, holdout=holdout, value_range=value_range,
        markov_lags=markov_lags if markov_lags is not None else max_lag, max_tv_lags=1,
        slots_per_week=periods_from_slot(slot_seconds)[1], level=float(level), draws=R, seed=seed, min_pairs=mp,
        smoothing=float(fit.smoothing), client=client, option=option)
    report = replace(with_markov_test(report, check, requested="chain"), wall_time_s=time.perf_counter() - start)
    rss = dict(acc["rss"])
    for w, v in mk_stats["peak_rss_mib"].items():
        rss[w] = max(rss.get(w, 0.0), v)
    stats = {"partitions": len(paths), "seconds": time.perf_counter() - start, "fit_seconds": fit_seconds,
             "markov_test_seconds": time.perf_counter() - mk_start,
             "partition_seconds": acc["seconds"] + mk_stats["partition_seconds"], "peak_rss_mib": rss}
    return report, stats


def _split_job(job, option, holdout, value_range, out_dir):
    return split_partition(job[0], option, holdout, value_range, out_dir, job[1])


def _collect(acc, job, r, w):
    acc.append((job[1], r))
    return acc


def _span_job(job, option, edges, state_values, smoothing, threshold):
    return kept_span_partition(job[0], option, job[1], edges, state_values, smoothing, threshold)


def _check_job(job, option, edges, state_values, smoothing, threshold, max_lag, width, draws, min_pairs, seed, n_boot):
    return model_check_partition(job[0], option, edges, state_values, smoothing, threshold, max_lag, width, draws,
                                 min_pairs, seed, n_boot, job[1])


# ---------------------------------------------------------------------------------------------
# The held-out check of the chains (Markov test and Δ(t) check), as a map-reduce
# ---------------------------------------------------------------------------------------------


class SelectionSummary(dict):
    """:func:`~policyopt.studies.markov_check.check_summary` of a model selection before the schedule is known
    (``design_lags`` null), carrying the :class:`~policyopt.studies.markov_check.ModelSelection` itself as
    :attr:`selection`, so that the schedule report redoes the summary with the chosen schedule's lags (what
    ``policyopt schedule --workers`` reads from :func:`policyopt.cli.options.load_distributed_model`).

    Parameters
    ----------
    selection : policyopt.studies.markov_check.ModelSelection
    """

    def __init__(self, selection):
        from policyopt.studies.markov_check import check_summary

        super().__init__(check_summary(selection))
        self.selection = selection


def _holdout_cut(code: np.ndarray, t: np.ndarray, n_users: int, holdout: float):
    """First slot, span and cut of every user (the cut of :func:`policyopt.studies.markov_check.split_states`:
    t0 + ⌈(1 − holdout)·span⌉), and whether each reading is in the held-out part."""
    first, span = user_spans(code, t, n_users)
    cut = first + np.ceil((1.0 - float(holdout)) * span).astype(np.int64)
    return first, cut, t >= cut[code]


def _part_extents(code: np.ndarray, t: np.ndarray, test: np.ndarray, n_users: int) -> dict:
    """Per user: readings, first and last slot of the fitting part and of the held-out part (−1 / 0 when empty)."""
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    out = {}
    for name, sel in (("train", ~test), ("test", test)):
        lo = np.full(n_users, big, dtype=np.int64)
        hi = np.full(n_users, small, dtype=np.int64)
        np.minimum.at(lo, code[sel], t[sel])
        np.maximum.at(hi, code[sel], t[sel])
        out[name] = (np.bincount(code[sel], minlength=n_users), lo, hi)
    return out


def held_out_widths_partition(path, option: str, excluded, holdout: float) -> dict:
    """The first pass of :func:`held_out_check_partitions` on one partition: the widths of its users' two parts.

    A user takes part when the fit kept it (its name is not in `excluded`) and it has readings on both sides of its
    cut (as :func:`policyopt.studies.markov_check.split_states`).  Only the user and time columns are read.

    Returns
    -------
    dict
        ``fit_slots`` and ``test_slots`` (the longest span of a taking-part user's fitting and held-out readings,
        slots; 0 when none) and ``users`` (how many take part).
    """
    from policyopt.io import read_parquet_partition

    part = read_parquet_partition(path, option, columns=("user", "time"))
    code, t, names = part["user_code"], part["time"], part["users"]
    n = len(names)
    if t.size == 0:
        return {"fit_slots": 0, "test_slots": 0, "users": 0}
    first, _, test = _holdout_cut(code, t, n, holdout)
    ext = _part_extents(code, t, test, n)
    (_, _, tr_hi), (te_n, te_lo, te_hi) = ext["train"], ext["test"]
    keep = np.array([names[u] not in excluded for u in range(n)], dtype=bool) & (te_n > 0)
    if not keep.any():
        return {"fit_slots": 0, "test_slots": 0, "users": 0}
    return {"fit_slots": int((tr_hi - first + 1)[keep].max()), "test_slots": int((te_hi - te_lo + 1)[keep].max()),
            "users": int(keep.sum())}


def _lengths_initial(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: slots up to the last observed one, and the first observed state (as the serial check)."""
    obs = x >= 0
    lengths = np.where(obs.any(axis=1), x.shape[1] - np.argmax(obs[:, ::-1], axis=1), 1)
    first = np.array([int(r[r >= 0][0]) if (r >= 0).any() else 0 for r in x], dtype=np.int64)
    return lengths.astype(np.int64), first


def _padded(x: np.ndarray, width: int) -> np.ndarray:
    """`x` (U, T ≤ width) padded with −1 (missing) to `width` columns."""
    if x.shape[1] >= width:
        return x
    return np.concatenate([x, np.full((x.shape[0], width - x.shape[1]), -1, dtype=x.dtype)], axis=1)


#: Bytes of state matrices a map step of the held-out check holds at once (its users are handled in groups below it).
HELD_OUT_CHUNK_BYTES = 256 * 2**20


def held_out_partition(path, option: str, edges, excluded, holdout: float, value_range, width: int, markov_lags: int,
                       max_tv_lags: int, draws: int, min_pairs: int, seed: int, smoothing: float,
                       chunk_bytes: int | None = None) -> dict:
    """The map step of the held-out check of the chains on one partition (the serial
    :func:`~policyopt.studies.markov_check.check_markov_model` restricted to its users).

    The partition's readings are clipped into `value_range` (when given), quantised with the shared `edges` and cut
    per user at t0 + ⌈(1 − holdout)·span⌉; every user the fit kept (not in `excluded`) with readings on both sides
    takes part.  In groups of users (at most `chunk_bytes` of state matrices, default :data:`HELD_OUT_CHUNK_BYTES`):
    each user's first-order chain is
    fitted on its first part (smoothing `smoothing`, and the Jeffreys prior
    :data:`~policyopt.studies.markov_check.CHECK_PRIOR` for the Markov test's reference), its held-out series is put
    in a row of `width` columns (the longest held-out part over the whole data set, so every user's counts are those
    of the serial run), and the map step adds the G² profiles (:func:`~policyopt.models.markov_test.g2_profile`) and
    takes the maxima over users of Δ̂(t) (:func:`~policyopt.models.empirical.max_tv_statistic`), on the data and on
    `draws` posterior-predictive data sets simulated from each user's own streams
    (:func:`~policyopt.models.empirical.user_streams` 3 and 4, in the serial order), so the draws do not depend on
    the partitioning.

    Returns
    -------
    dict
        ``observed`` (:class:`~policyopt.models.markov_test.G2Profile`), ``draws`` (R profiles), ``observed_max_tv``
        (L',), ``draws_max_tv`` (R, L'), ``users``, ``fit_slots``, ``description``, ``n_parameters``, ``seconds``,
        ``peak_rss_mib``; ``None`` entries when no user takes part.

    Raises
    ------
    InvalidInputError
        Bad readings; a repeated (user, time); a taking-part user whose fitting or held-out part is mostly gaps (as
        :func:`policyopt.studies.check_model.readings_states`).
    """
    from policyopt.io import read_parquet_partition
    from policyopt.models.empirical import max_tv_statistic, user_streams
    from policyopt.models.markov_model import fit_markov_model
    from policyopt.models.markov_test import g2_profile
    from policyopt.studies.markov_check import CHECK_PRIOR

    start = time.perf_counter()
    part = read_parquet_partition(path, option)
    if value_range is not None:
        part["value"] = np.clip(part["value"], float(value_range[0]), float(value_range[1]))
    names = part["users"]
    n = len(names)
    out = {"observed": None, "draws": None, "observed_max_tv": None, "draws_max_tv": None, "users": 0, "fit_slots": 0,
           "description": None, "n_parameters": None}
    if part["value"].size:
        code, t, _, states = sorted_states(part, f"{option} {str(path)!r}", edges)
        first, cut, test = _holdout_cut(code, t, n, holdout)
        ext = _part_extents(code, t, test, n)
        kept = [u for u in range(n) if names[u] not in excluded and ext["test"][0][u] > 0]
        for side in ("train", "test"):  # the rule of readings_states, in both parts
            cnt, lo, hi = ext[side]
            for u in kept:
                if hi[u] - lo[u] + 1 > 10 * cnt[u] + 1000:
                    raise InvalidInputError(
                        f"user {names[u]!r} has {int(cnt[u])} readings spread over {int(hi[u] - lo[u] + 1)} slots: the "
                        "series is mostly gaps; put the readings on a regular slot grid")
        K = len(edges) + 1
        R, W = int(draws), int(width)
        lags = np.arange(1, int(markov_lags) + 1)
        Ld = int(max_tv_lags)
        bounds = np.searchsorted(code, np.arange(n + 1))  # user u's readings: bounds[u]..bounds[u + 1] (sorted)
        obs_prof, sim_prof = None, [None] * R
        obs_tv, sim_tv = np.zeros(Ld), np.zeros((R, Ld))
        per_user = 8 * 8 * max(W, 1)  # int64 rows: held-out, two simulated, padded copies, the simulator's buffers
        group = max(1, int(HELD_OUT_CHUNK_BYTES if chunk_bytes is None else chunk_bytes) // per_user)
        for g0 in range(0, len(kept), group):
            chunk = kept[g0:g0 + group]
            c = len(chunk)
            tr_w = int(max(ext["train"][2][u] - first[u] + 1 for u in chunk))
            tr = np.full((c, tr_w), -1, dtype=np.int64)
            te = np.full((c, W), -1, dtype=np.int64)
            te0 = np.array([ext["test"][1][u] for u in chunk], dtype=np.int64)
            for i, u in enumerate(chunk):
                a, b = bounds[u], bounds[u + 1]
                sel_tr = ~test[a:b]
                tr[i, t[a:b][sel_tr] - first[u]] = states[a:b][sel_tr]
                te[i, t[a:b][~sel_tr] - te0[i]] = states[a:b][~sel_tr]
            who = tuple(names[u] for u in chunk)
            tr0 = first[chunk]
            fitted = fit_markov_model("chain", tr, K, users=who, starts=tr0, smoothing=smoothing, seed=int(seed))
            g2_model = fitted if smoothing >= CHECK_PRIOR else fit_markov_model(
                "chain", tr, K, users=who, starts=tr0, smoothing=CHECK_PRIOR, seed=int(seed))
            p = g2_profile(te, K, lags)
            obs_prof = p if obs_prof is None else obs_prof.merge(p)
            obs_tv = np.maximum(obs_tv, max_tv_statistic(te, K, Ld, min_pairs=min_pairs).max(axis=0))
            lengths, initial = _lengths_initial(te)
            streams = user_streams(who, int(seed), stream=3)
            draw_streams = user_streams(who, int(seed), stream=4)
            for r in range(R):  # per user the serial order of the streams: G² set r, then Δ̂ set r
                sim = g2_model.posterior_draw(draw_streams).simulate(lengths, 1, streams, starts=te0, initial=initial)[0]
                p = g2_profile(_padded(sim, W), K, lags, observed=te)  # the observed missing slots applied
                sim_prof[r] = p if sim_prof[r] is None else sim_prof[r].merge(p)
                sim = fitted.posterior_draw(draw_streams).simulate(lengths, 1, streams, starts=te0, initial=initial)[0]
                sim[te[:, : sim.shape[1]] < 0] = -1
                sim_tv[r] = np.maximum(sim_tv[r], max_tv_statistic(_padded(sim, W), K, Ld, min_pairs=min_pairs).max(axis=0))
            out["fit_slots"] = max(out["fit_slots"], tr_w)
            out["description"], out["n_parameters"] = fitted.description, int(fitted.n_parameters)
        if kept:
            out.update({"observed": obs_prof, "draws": sim_prof, "observed_max_tv": obs_tv, "draws_max_tv": sim_tv,
                        "users": len(kept)})
    out["seconds"] = time.perf_counter() - start
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def held_out_check_partitions(data, fit: DistributedFit, *, holdout: float | None = None, value_range=None,
                              markov_lags: int | None = None, max_tv_lags: int | None = None,
                              slots_per_week: int | None = None, box_last_age: int = 0, level: float | None = None,
                              draws: int | None = None, seed: int = 0, min_pairs: int | None = None,
                              smoothing: float | None = None, client=None, option: str = "--data",
                              chunk_bytes: int | None = None):
    """The held-out check of the first-order chains on a partitioned data set: the serial
    :func:`~policyopt.studies.markov_check.check_markov_model` (``"chain"``) as a map-reduce, with its numbers.

    Per user the chain is fitted on the first 1 − `holdout` of its span and checked on the rest: the G² Markov test
    (Anderson & Goodman 1957; the profiles of groups of users add, :meth:`~policyopt.models.markov_test.G2Profile.merge`,
    and :func:`~policyopt.models.markov_test.markov_test_from_parts` reduces them) and the Δ(t) check (Δ̂(t) of
    Zhang et al. 2024, eq. (12), a maximum over users, so the partitions' maxima combine by a maximum; family-wise
    by max-T, :func:`~policyopt.models.markov_test.family_wise_p`), each against `draws` posterior-predictive data sets
    simulated user by user from the user's own streams.  Two passes over the files: the widths of the two parts
    (:func:`held_out_widths_partition`, user and time columns only), then the map step (:func:`held_out_partition`);
    a worker holds one file's readings and a bounded group of its users' state matrices at a time.  The users are
    those the fit kept (not in ``fit.excluded``) with readings on both sides of their cut, the states those of the
    fit's edges, as the serial check of the same readings with the fit's quantizer; the numbers equal the serial
    check's (the G² sums to rounding: they are added in another order).

    Parameters
    ----------
    data : str, Path or list of Path
        The Parquet data set (each user's readings in one file).
    fit : DistributedFit
        From :func:`~policyopt.studies.distributed.fit_partitions` (edges, excluded users, smoothing).
    holdout : float, optional
        Fraction in (0, 1) of each user's span held out (default
        :data:`~policyopt.studies.markov_check.DEFAULT_HOLDOUT`).
    value_range : (float, float), optional
        Public range the readings are clipped into first.
    markov_lags, max_tv_lags : int, optional
        L of the Markov test and of the Δ(t) check (slots; each capped below the held-out length as the serial
        check caps it); default :func:`~policyopt.models.markov_test.default_markov_lags` of `slots_per_week`,
        `box_last_age` and the held-out length.
    slots_per_week : int, optional
        A week of slots (``None``: unknown, 168 lags).
    box_last_age : int
        The largest age (slots) a design looks Δ up at (``schedule``: A_max + S_max − 1).
    level : float, optional
        Level of both tests (default :data:`~policyopt.studies.markov_check.DEFAULT_LEVEL`).
    draws : int, optional
        Data sets simulated per test (default :data:`~policyopt.studies.markov_check.CHECK_DRAWS`).
    seed : int
        Simulation seed (≥ 0; never released noise).
    min_pairs : int, optional
        Pairs a row needs for Δ̂ (default :data:`~policyopt.models.empirical.DEFAULT_MIN_PAIRS`).
    smoothing : float, optional
        Pseudo-count of the chains (default ``fit.smoothing``).
    client : distributed.Client, optional
        ``None``: in this process, one file after another.
    option : str
        Option name for messages.
    chunk_bytes : int, optional
        Bytes of state matrices a map step holds at once (default :data:`HELD_OUT_CHUNK_BYTES`); the numbers do not
        depend on it.

    Returns
    -------
    (check, stats) : policyopt.studies.markov_check.MarkovModelCheck, dict
        The check (no fitted model attached: ``fitted`` is ``None``); ``stats``: ``seconds``, ``partition_seconds``,
        ``peak_rss_mib`` (largest VmHWM per worker, MiB).

    Raises
    ------
    InvalidInputError
        Bad arguments; bad readings; no user with readings on both sides of its cut; a held-out part too short for one
        lag; a mostly-gaps series.
    PolicyOptError
        A Dask worker failed for another reason.
    """
    from policyopt.errors import fmt
    from policyopt.io import parquet_files
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS
    from policyopt.models.markov_test import default_markov_lags, markov_test_from_parts
    from policyopt.studies.markov_check import CHECK_DRAWS, DEFAULT_HOLDOUT, DEFAULT_LEVEL, MarkovModelCheck, max_tv_check_result

    start = time.perf_counter()
    h = DEFAULT_HOLDOUT if holdout is None else holdout
    if isinstance(h, bool) or not isinstance(h, (int, float, np.floating)) or not 0.0 < float(h) < 1.0:
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    lv = DEFAULT_LEVEL if level is None else level
    if isinstance(lv, bool) or not isinstance(lv, (int, float, np.floating)) or not 0.0 < float(lv) < 1.0:
        raise InvalidInputError(f"`level` must be strictly between 0 and 1, got {fmt(level)}")
    R = CHECK_DRAWS if draws is None else _check_int(draws, "draws", 1)
    seed = _check_int(seed, "seed", 0)
    mp = DEFAULT_MIN_PAIRS if min_pairs is None else _check_int(min_pairs, "min_pairs", 1)
    s = float(fit.smoothing) if smoothing is None else float(smoothing)
    paths = [str(p) for p in (data if isinstance(data, (list, tuple)) else parquet_files(data, option))]
    if not paths:
        raise InvalidInputError(f"{option}: no Parquet file given")
    excluded = frozenset(fit.excluded)
    sizes = fold_partitions(
        held_out_widths_partition, paths, (option, excluded, float(h)),
        lambda acc, p, r, w: {k: (acc[k] + r[k] if k == "users" else max(acc[k], r[k])) for k in acc},
        {"fit_slots": 0, "test_slots": 0, "users": 0}, client)
    if sizes["users"] == 0:
        raise InvalidInputError("no user has readings on both sides of its held-out cut: give longer series")
    T2 = int(sizes["test_slots"])
    L = default_markov_lags(slots_per_week, _check_int(box_last_age, "box_last_age", 0), T2)
    Lm = int(min(L if markov_lags is None else _check_int(markov_lags, "markov_lags", 1), max(1, T2 - 2)))
    Ld = int(min(L if max_tv_lags is None else _check_int(max_tv_lags, "max_tv_lags", 1), T2 - 1))
    if Ld < 1:
        raise InvalidInputError(f"the held-out part has {T2} slots: too short to check chain (give longer series)")
    acc = {"observed": None, "draws": None, "observed_max_tv": None, "draws_max_tv": None, "users": 0, "fit_slots": 0,
           "description": None, "n_parameters": None, "seconds": [], "rss": {}}

    def combine(acc, p, r, w):
        """G² profiles add, Δ̂ maxima combine by a maximum."""
        acc["seconds"].append(r["seconds"])
        acc["rss"][w] = max(acc["rss"].get(w, 0.0), r["peak_rss_mib"])
        if r["observed"] is None:
            return acc
        if acc["observed"] is None:
            for k in ("observed", "draws", "observed_max_tv", "draws_max_tv", "description", "n_parameters"):
                acc[k] = r[k]
        else:
            acc["observed"] = acc["observed"].merge(r["observed"])
            acc["draws"] = [a.merge(b) for a, b in zip(acc["draws"], r["draws"])]
            acc["observed_max_tv"] = np.maximum(acc["observed_max_tv"], r["observed_max_tv"])
            acc["draws_max_tv"] = np.maximum(acc["draws_max_tv"], r["draws_max_tv"])
        acc["users"] += r["users"]
        acc["fit_slots"] = max(acc["fit_slots"], r["fit_slots"])
        return acc

    vr = None if value_range is None else (float(value_range[0]), float(value_range[1]))
    chunk = None if chunk_bytes is None else _check_int(chunk_bytes, "chunk_bytes", 1)
    acc = fold_partitions(held_out_partition, paths, (option, np.asarray(fit.edges, dtype=float), excluded, float(h),
                                                      vr, T2, Lm, Ld, R, mp, seed, s, chunk), combine, acc, client)
    # the reduce step of check_markov_model: the two family-wise tests on the merged statistics
    mtd = markov_test_from_parts(acc["observed"], acc["draws"], level=float(lv)).to_dict()
    obs_tv, sim_tv = acc["observed_max_tv"], acc["draws_max_tv"]
    mv = max_tv_check_result(obs_tv, sim_tv, level=float(lv), min_pairs=mp, model_name="chain")
    info = {"holdout": float(h), "fit_slots": int(acc["fit_slots"]), "test_slots": T2, "users": int(acc["users"]),
            "draws": R, "seed": seed, "wall_time_s": time.perf_counter() - start}
    check = MarkovModelCheck(model="chain", description=acc["description"], n_parameters=int(acc["n_parameters"]),
                             markov_test=mtd, max_tv_check=mv, passed=not (mtd["refuted"] or mv["refuted"]), info=info,
                             fitted=None)
    return check, {"seconds": time.perf_counter() - start, "partition_seconds": acc["seconds"], "peak_rss_mib": acc["rss"]}
