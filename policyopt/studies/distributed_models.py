"""The per-user augmented-state Markov models of a partitioned Parquet data set, fitted as a map-reduce over its files.

:func:`~policyopt.models.markov_model.fit_markov_model` fits one model per user (``chain``, ``phase:P``, ``order:k``)
from that user's transition counts alone, and Δ_Z(t) of Zhang, Wei, Berry, Huang, "Age-Dependent Differential
Privacy", IEEE Trans. Inf. Theory 70(2), 2024, eq. (12), is a maximum over users.  So the fit of a data set too large
for one process is a map-reduce (:func:`markov_model_partitions`): per file of whole users
(:func:`markov_model_partition`), the readings are quantised with the chains' shared edges
(:func:`~policyopt.studies.distributed.fit_partitions`), each user's model is fitted on its own state series, and the
file returns the maximum over its users of ln Δ_Z(t) and the sum over its users of the transition counts; the files'
results reduce by a maximum and a sum.  Every user's model is the serial one, so the reduced Δ_Z(t) is the serial
maximum exactly (maxima do not depend on the order).  The hidden-regime model (``hmm:R``) is fitted by EM, not from
counts, and is not offered here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import fmt_count
from policyopt.studies.distributed import DistributedFit, fold_partitions, peak_rss_mib, sorted_states, user_spans

__all__ = ["DistributedModelFit", "markov_model_partition", "markov_model_partitions", "MODEL_CHUNK_USERS"]

#: Users whose state matrix and models a map step holds at once (the numbers do not depend on it).
MODEL_CHUNK_USERS = 2000

#: The models fitted from counts (``hmm:R`` is fitted by EM).
COUNT_KINDS = ("chain", "phase", "order")


@dataclass
class DistributedModelFit:
    """The reduced per-user models of a partitioned data set (:func:`markov_model_partitions`).

    Attributes
    ----------
    spec : str
        The model, e.g. ``"order:2"``.
    description : str
        What Z is (the model's one line).
    n_parameters : int
        Free parameters of one user's model.
    log_max_tv : numpy.ndarray, shape (horizon + 1,)
        max over users of ln Δ_Z(t), t = 0..horizon (eq. (12) of Zhang et al. 2024 on the Z chains; −inf where
        Δ_Z(t) = 0).
    counts : numpy.ndarray
        Transition counts summed over users: (K, K) for ``chain`` (x → y), (P, K, K) for ``phase:P`` (by the phase of
        the step's start), (K^k, K) for ``order:k`` (the k last states → the next).
    transitions : int
        Transitions counted over all users (for ``order:k``, windows of k + 1 consecutive observed slots).
    users : int
        Users fitted (those the chains' fit kept).
    partitions : int
        Files.
    seconds : float
        Wall time of the map-reduce.
    partition_seconds : list of float
        Seconds per file task.
    peak_rss_mib : dict
        Largest peak RSS (VmHWM, MiB) reported by a task, per worker (``"local"`` in process).
    """

    spec: str
    description: str
    n_parameters: int
    log_max_tv: np.ndarray
    counts: np.ndarray
    transitions: int
    users: int
    partitions: int
    seconds: float = 0.0
    partition_seconds: list = field(default_factory=list)
    peak_rss_mib: dict = field(default_factory=dict)

    @property
    def max_tv(self) -> np.ndarray:
        """Δ_Z(t), t = 0..horizon (max over users; underflows to 0 below 1e-308)."""
        return np.exp(self.log_max_tv)


def markov_model_partition(path, option: str, spec: str, edges, excluded, horizon: int, smoothing: float,
                           chunk_users: int) -> dict:
    """The map step of :func:`markov_model_partitions` on one file of whole users.

    The readings are sorted by (user, time) and quantised with the shared `edges` (state k holds the readings in
    [edges[k−1], edges[k]), as :func:`~policyopt.studies.distributed.sorted_states`); every user not in `excluded`
    gets its state series in a row starting at its first slot (``starts`` = that slot, so a phase is the absolute
    slot mod P), and in groups of `chunk_users` users its model is fitted by
    :func:`~policyopt.models.markov_model.fit_markov_model`.

    Returns
    -------
    dict
        ``log_max_tv`` (horizon + 1,): max over the file's users of ln Δ_Z(t) (−inf when none); ``counts``: the
        users' transition counts summed (``None`` when none); ``transitions``, ``users``, ``description``,
        ``n_parameters``, ``seconds``, ``peak_rss_mib``.

    Raises
    ------
    InvalidInputError
        Bad readings; a repeated (user, time); a user whose series is mostly gaps (span > 10 × readings + 1000 slots,
        the rule of the held-out check); a user with no transition of the model.
    """
    from policyopt.io import read_parquet_partition
    from policyopt.models.markov_model import fit_markov_model

    start = time.perf_counter()
    part = read_parquet_partition(path, option)
    names = part["users"]
    n = len(names)
    ages = np.arange(int(horizon) + 1)
    out = {"log_max_tv": np.full(ages.size, -np.inf), "counts": None, "transitions": 0, "users": 0,
           "description": None, "n_parameters": None}
    if part["value"].size:
        code, t, _, states = sorted_states(part, f"{option} {str(path)!r}", edges)
        first, span = user_spans(code, t, n)
        readings = np.bincount(code, minlength=n)
        kept = [u for u in range(n) if names[u] not in excluded]
        for u in kept:
            if span[u] > 10 * readings[u] + 1000:
                raise InvalidInputError(
                    f"user {names[u]!r} has {int(readings[u])} readings spread over {int(span[u])} slots: the series "
                    "is mostly gaps; put the readings on a regular slot grid")
        K = len(edges) + 1
        bounds = np.searchsorted(code, np.arange(n + 1))  # user u's readings: bounds[u]..bounds[u + 1] (sorted)
        for g0 in range(0, len(kept), int(chunk_users)):
            chunk = kept[g0:g0 + int(chunk_users)]
            x = np.full((len(chunk), int(span[chunk].max())), -1, dtype=np.int64)
            for i, u in enumerate(chunk):
                a, b = bounds[u], bounds[u + 1]
                x[i, t[a:b] - first[u]] = states[a:b]
            model = fit_markov_model(spec, x, K, users=tuple(names[u] for u in chunk), starts=first[chunk],
                                     smoothing=smoothing)
            out["log_max_tv"] = np.maximum(out["log_max_tv"], model.log_max_tv(ages))  # eq. (12): max over users
            c = model.counts.sum(axis=0)
            out["counts"] = c if out["counts"] is None else out["counts"] + c
            out["transitions"] += int(sum(model.transitions.values()))
            out["users"] += len(chunk)
            out["description"], out["n_parameters"] = model.description, int(model.n_parameters)
    out["seconds"] = time.perf_counter() - start
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def markov_model_partitions(data, spec, fit: DistributedFit, *, horizon: int | None = None,
                            smoothing: float | None = None, default_period: int | None = None, client=None,
                            option: str = "--data", chunk_users: int = MODEL_CHUNK_USERS) -> DistributedModelFit:
    """Fit a per-user augmented-state Markov model on a partitioned Parquet data set: Δ_Z(t) and counts, map-reduced.

    Each user's model (:func:`~policyopt.models.markov_model.fit_markov_model` of `spec`) is fitted on the user's
    quantile states — the readings quantised with the chains' shared edges ``fit.edges`` — from the user's transition
    counts alone; per file (:func:`markov_model_partition`) the maximum over its users of ln Δ_Z(t) (Zhang, Wei,
    Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, eq. (12), on the Z
    chains) and the sum of their counts are formed, and the files' results reduce by a maximum and a sum.  The users
    are those the chains' fit kept (not in ``fit.excluded``).  The result equals ``fit_markov_model`` on all these
    users' states at once: Δ_Z exactly (a maximum of the same per-user values), the counts exactly (integer sums).

    Parameters
    ----------
    data : str, Path or list of Path
        The Parquet data set (each user's readings in one file), as given to
        :func:`~policyopt.studies.distributed.fit_partitions`.
    spec : str or MarkovModelSpec
        ``chain``, ``phase[:P]`` or ``order:k`` (``hmm:R`` is fitted by EM, not from counts: refused).
    fit : DistributedFit
        The chains' fit of the same data (:func:`~policyopt.studies.distributed.fit_partitions`): its edges (K − 1,)
        give the states, its ``excluded`` users are left out, its smoothing is the default.
    horizon : int, optional
        Last age (slots) of the Δ_Z(t) table (default ``fit.population.horizon``, the chains' table).
    smoothing : float, optional
        Pseudo-count s > 0 of the models (counts + s, Cao et al., IEEE TKDE 2019, eq. (28)); default ``fit.smoothing``.
    default_period : int, optional
        P of ``phase`` given without one (e.g. 24 for hourly slots).
    client : distributed.Client, optional
        ``None``: the same map step, file after file in this process.
    option : str
        Option name for messages.
    chunk_users : int
        Users a map step fits at once (bounds its memory; the numbers do not depend on it).

    Returns
    -------
    DistributedModelFit
        ``log_max_tv`` shape (horizon + 1,), ``counts`` (K, K), (P, K, K) or (K^k, K), summed over users.

    Raises
    ------
    InvalidInputError
        `spec` ``hmm:R`` or ``auto`` or not a model; bad `horizon`, `smoothing`, `chunk_users`; no file; bad readings;
        a mostly-gaps series; a user with no transition of the model; no user kept.
    PolicyOptError
        A Dask worker failed for another reason.
    """
    from policyopt.io import parquet_files
    from policyopt.models.markov_model import MarkovModelSpec
    from policyopt.models.model_fitting import check_smoothing

    start = time.perf_counter()
    try:
        sp = MarkovModelSpec.parse(spec, default_period=default_period)
    except InvalidInputError as exc:
        raise InvalidInputError(f"`spec` {fmt(spec)} is not a model: {exc}") from None
    if sp.kind not in COUNT_KINDS:
        why = ("is fitted by EM, not from transition counts: fit it on one process with fit_markov_model"
               if sp.kind == "hmm" else "selects among models, which the caller does")
        raise InvalidInputError(f"`spec` {str(sp)!r} {why}; give 'chain', 'phase:P' or 'order:k', got {fmt(spec)}")
    if not isinstance(fit, DistributedFit):
        raise InvalidInputError(f"`fit` must be a DistributedFit (from fit_partitions), got {fmt(fit)}")
    T = int(fit.population.horizon) if horizon is None else check_int(horizon, "horizon", 0)
    s = check_smoothing(fit.smoothing if smoothing is None else smoothing)
    cu = check_int(chunk_users, "chunk_users", 1)
    if isinstance(data, (list, tuple)):
        paths = [str(Path(p)) for p in data]
        label = fmt_count(len(paths), "file")
    else:
        paths = [str(p) for p in parquet_files(data, option)]
        label = str(data)
    if not paths:
        raise InvalidInputError(f"{option}: no Parquet file given")
    acc = {"log_max_tv": np.full(T + 1, -np.inf), "counts": None, "transitions": 0, "users": 0, "description": None,
           "n_parameters": None, "seconds": [], "rss": {}}

    def combine(acc, p, r, w):
        """ln Δ_Z maxima combine by a maximum, counts add."""
        acc["seconds"].append(r["seconds"])
        acc["rss"][w] = max(acc["rss"].get(w, 0.0), r["peak_rss_mib"])
        if r["users"]:
            acc["log_max_tv"] = np.maximum(acc["log_max_tv"], r["log_max_tv"])
            acc["counts"] = r["counts"] if acc["counts"] is None else acc["counts"] + r["counts"]
            acc["transitions"] += r["transitions"]
            acc["users"] += r["users"]
            acc["description"], acc["n_parameters"] = r["description"], r["n_parameters"]
        return acc

    acc = fold_partitions(markov_model_partition, paths, (option, str(sp), np.asarray(fit.edges, dtype=float),
                                                          frozenset(fit.excluded), T, s, cu), combine, acc, client)
    if acc["users"] == 0:
        raise InvalidInputError(f"{option} {label!r}: no user the chains' fit kept is in these files")
    return DistributedModelFit(
        spec=str(sp), description=acc["description"], n_parameters=int(acc["n_parameters"]),
        log_max_tv=acc["log_max_tv"], counts=acc["counts"], transitions=int(acc["transitions"]), users=int(acc["users"]),
        partitions=len(paths), seconds=time.perf_counter() - start, partition_seconds=acc["seconds"],
        peak_rss_mib=acc["rss"],
    )
