"""The held-out check of the chains of a partitioned data set (Markov test and Δ(t) check), as a map-reduce.

The ``model_check`` of ``policyopt schedule --workers N`` and the held-out Markov test of ``policyopt check-model
--workers N``: the serial :func:`~policyopt.studies.markov_check.check_markov_model` of the first-order chains —
fitted on the first part of each user's series, checked on the rest by the G² Markov test and the Δ(t) check, each
family-wise against posterior-predictive data sets simulated from each user's own random streams (keyed by the
user's name) — with the G² profiles of groups of users added (:meth:`~policyopt.models.g2_profile.G2Profile.merge`)
and the maxima over users of Δ̂(t) combined by a maximum, so the verdict is the serial one (Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3 needs the Markov premise it tests).
"""

from __future__ import annotations

import time

import numpy as np

from policyopt.errors import InvalidInputError, check_int
from policyopt.studies.distributed import DistributedFit, fold_partitions, peak_rss_mib, sorted_states, user_spans

__all__ = ["held_out_widths_partition", "held_out_partition", "held_out_check_partitions", "SelectionSummary",
           "HELD_OUT_CHUNK_BYTES"]


class SelectionSummary(dict):
    """:func:`~policyopt.studies.markov_check.check_summary` of a model selection before the schedule is known
    (``design_lags`` null), carrying the :class:`~policyopt.studies.markov_check.ModelSelection` itself as
    :attr:`selection`, so that the schedule report redoes the summary with the chosen schedule's lags (what
    ``policyopt schedule --workers`` reads from :func:`policyopt.app.inputs.load_distributed_model`).

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
    R = CHECK_DRAWS if draws is None else check_int(draws, "draws", 1)
    seed = check_int(seed, "seed", 0)
    mp = DEFAULT_MIN_PAIRS if min_pairs is None else check_int(min_pairs, "min_pairs", 1)
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
    L = default_markov_lags(slots_per_week, check_int(box_last_age, "box_last_age", 0), T2)
    Lm = int(min(L if markov_lags is None else check_int(markov_lags, "markov_lags", 1), max(1, T2 - 2)))
    Ld = int(min(L if max_tv_lags is None else check_int(max_tv_lags, "max_tv_lags", 1), T2 - 1))
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
    chunk = None if chunk_bytes is None else check_int(chunk_bytes, "chunk_bytes", 1)
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
