"""The readings penalty and the model check of a partitioned Parquet data set, as map-reduces over its files.

The Dask path of ``policyopt schedule --data DIR --workers N`` (:mod:`policyopt.studies.distributed` fits the
chains; this module adds what the serial path computes from the readings themselves):

* **Readings penalty** (:func:`readings_moments_partitions`): per partition, the per-slot sums n_t(a), Σ_i d_i(t)
  and Σ_i d_i(t)² of the users' a-step changes (:func:`policyopt.utility.readings_penalty.slot_sums`, in chunks of
  users as the serial path) are added up slot by slot, then
  :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` is formed from the summed terms exactly as the
  serial path forms it.
* **Held-out model check** (:func:`~policyopt.studies.distributed_heldout.held_out_check_partitions`, in
  :mod:`policyopt.studies.distributed_heldout`; the ``model_check`` of ``schedule --workers``): the
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
  (:func:`split_partition`); the held-out Markov test is
  :func:`~policyopt.studies.distributed_heldout.held_out_check_partitions` on the original files.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, check_int
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
from policyopt.studies.distributed_heldout import held_out_check_partitions

__all__ = ["readings_sums_partition", "readings_moments_partitions", "model_check_partition", "check_partitions",
           "check_model_partitions", "split_partition", "kept_span_partition"]


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

    L = check_int(max_age, "max_age", 1)
    chunk = CHUNK_USERS if chunk_users is None else check_int(chunk_users, "chunk_users", 1)
    if phase_period is not None:
        check_int(phase_period, "phase_period", 1)
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
    seed = check_int(seed, "seed", 0)
    R = QUICK_DRAWS if draws is None else check_int(draws, "draws", 1)
    width = int(fit.longest_span)
    if width < 2:
        raise InvalidInputError(f"{option}: the kept users' series span {width} slot(s); the model check needs ≥ 2")
    L = quick_max_lag(check_int(A_max, "A_max", 0), check_int(S_max, "S_max", 1), width)
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
    :func:`~policyopt.studies.distributed_heldout.held_out_check_partitions` (the chains fitted on the first part of each series, `holdout` or
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
    K = check_int(n_states, "n_states", 2)
    seed = check_int(seed, "seed", 0)
    R = DEFAULT_DRAWS if draws is None else check_int(draws, "draws", 1)
    B = DEFAULT_N_BOOT if n_boot is None else check_int(n_boot, "n_boot", 20)
    mp = DEFAULT_MIN_PAIRS if min_pairs is None else check_int(min_pairs, "min_pairs", 1)
    if not (isinstance(level, (int, float)) and not isinstance(level, bool) and 0.0 < float(level) < 1.0):
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if holdout is not None and (isinstance(holdout, bool) or not isinstance(holdout, (int, float))
                                or not 0.0 < float(holdout) < 1.0):
        raise InvalidInputError(f"`holdout` must be a fraction strictly between 0 and 1, got {fmt(holdout)}")
    if value_range is not None:
        value_range = check_value_range(value_range)
    if max_lag is not None:
        check_int(max_lag, "max_lag", 1)
    if markov_lags is not None:
        check_int(markov_lags, "markov_lags", 1)
    if slot_seconds is not None:
        check_int(slot_seconds, "slot_seconds", 1)
    paths = [str(p) for p in (data if isinstance(data, (list, tuple)) else parquet_files(data, option))]
    if not paths:
        raise InvalidInputError(f"{option}: no Parquet file given")
    tmp = None
    try:
        if holdout is not None or value_range is not None:
            tmp = tempfile.mkdtemp(prefix="policyopt-check-model-")
            pairs, fit_paths = _split_files(paths, data, option, holdout, value_range, tmp, client)
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


def _split_files(paths, data, option: str, holdout, value_range, out_dir: str, client) -> tuple[list, list]:
    """The clip-and-split pass of :func:`check_model_partitions`: every file split (:func:`split_partition`) into
    `out_dir`; returns the (fit file or None, test file) pairs to check (fit file None without `holdout`: the test
    file is fitted too) and the fit files (the quantile edges come from every fit reading).

    Raises
    ------
    InvalidInputError
        If no file holds a reading, or `holdout` leaves no readings to test on.
    """
    jobs = [(p, i) for i, p in enumerate(paths)]
    split = fold_partitions(_split_job, jobs, (option, holdout, value_range, out_dir), _collect, [], client)
    split.sort(key=lambda r: r[0])
    fit_paths = [r[1]["fit"] for r in split if r[1]["fit"] is not None]  # edges from every fit reading
    if not fit_paths:
        raise InvalidInputError(f"{option} {str(data)!r} holds no readings (every Parquet file is empty)")
    pairs = [(None if holdout is None else r[1]["fit"], r[1]["test"]) for r in split  # fit file = test file
             if r[1]["fit"] is not None and r[1]["test"] is not None]                # without holdout
    if not pairs:
        raise InvalidInputError(f"`holdout`={holdout} leaves no readings to test on")
    return pairs, fit_paths


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
