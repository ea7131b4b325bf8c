"""A million meters: the schedule model of a partitioned Parquet data set as a map-reduce over user partitions.

``policyopt schedule --data DIR_OR_GLOB --workers N`` (or ``--scheduler ADDRESS``) estimates one Markov
chain per user and reduces everything the schedule needs to a few small tables, without ever holding
all users in one process:

1. **Shared state edges, exactly.**  The serial path (:func:`policyopt.models.estimation.fit_population`)
   quantises with ``numpy.quantile`` (method ``linear``) of *all* readings.  That quantile is a fixed
   interpolation between two order statistics x_(i) and x_(i+1) of the pooled readings, so the distributed
   path finds exactly those order statistics by a radix selection on the IEEE-754 bit patterns (a float's
   bits, sign-adjusted, sort as the floats do): every pass counts, per partition, the next 16 bits of the
   readings that share the prefix found so far, the counts are summed, and once a prefix holds few enough
   readings they are collected and sorted (:mod:`policyopt.studies.distributed_quantiles`).  No approximation is
   involved; :func:`~policyopt.studies.distributed_quantiles.quantile_from_order_statistics` then applies numpy's
   own interpolation formula, so the edges equal the serial ones bit for bit (tested against ``numpy.quantile`` of
   the installed numpy).
2. **State values.**  One pass counts and sums the readings of each state (the pooled bin means).
3. **Per user partition** (a Parquet file holding whole users): transition counts per user, the smoothed
   MLE chains (Cao, Yoshikawa, Xiao, Xiong, 'Quantifying Differential Privacy in Continuous Data Release
   under Temporal Correlations', IEEE TKDE, 2019, eq. (28), as in ``fit_population``), and three partial results: the
   largest ln Δ(t) over the partition's users (Δ(t) of Zhang, Wei, Berry, Huang, 'Age-Dependent
   Differential Privacy', IEEE Trans. Inf. Theory, 2024, eq. (12) is a max over users), the largest
   spectral rate λ* (the ρ of the geometric envelope (38) of the same paper), and the sums over users
   of the MSE staleness term Σ_x π(x) Σ_y P^t(x, y)(v_x − v_y)² and of 2·Var_π(v) (the MSE penalty,
   eqs. (48)–(49) of the same paper, with the sensitivity corrected as in
   :class:`~policyopt.utility.penalty.MSEPenalty`).
4. **Reduce** by max (Δ(t), λ*) and sum (staleness, counts), then form the envelope (38) and the MSE
   penalty from the reduced tables exactly as :class:`~policyopt.models.markov.Population` and
   :class:`~policyopt.utility.penalty.MSEPenalty` do.

Memory per task is bounded by one partition (its readings and its users' chains); the client holds only
the reduced tables, the excluded users and 8 bytes per user (a hash, to prove that no user is split across
partitions).  Δ(t) and λ* are exact maxima and equal the serial values; the staleness sums and the state
values are sums of the same terms in another order (relative differences up to 2.5e-14 measured on 10^4
users; the tests and the benchmark hold them to 1e-12).  A user whose readings are split across files is
refused (the serial path, which reads every file into one table, accepts it).

The readings penalty and the model check of the same data set are map-reduces of their own
(:mod:`policyopt.studies.distributed_checks`).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, PolicyOptError, check_int, fmt
from policyopt.formatting import fmt_count
from policyopt.models.markov import MarkovChain, Population
from policyopt.models.tabulated import TabulatedMaxTV
from policyopt.studies.distributed_quantiles import (
    COLLECT_CAP,
    exact_order_statistics,
    quantile_from_order_statistics,
    quantile_indices,
    radix_partition_pass,
    state_sums_partition,
    value_count_partition,
)
from policyopt.utility.tabulated_penalty import TabulatedMSEPenalty

__all__ = [
    "DistributedFit",
    "PartitionSummary",
    "fit_partitions",
    "summarize_partition",
    "dask_client",
    "fit_partition",
    "sorted_states",
    "user_spans",
    "peak_rss_mib",
    "fold_partitions",
]


#: glibc trim and mmap thresholds (bytes) set in the environment of local Dask workers (see :func:`dask_client`).
MALLOC_THRESHOLD = 32 * 2**20



# ---------------------------------------------------------------------------------------------
# The map step: one partition of whole users
# ---------------------------------------------------------------------------------------------


@dataclass
class PartitionSummary:
    """What one partition of whole users contributes to the reduced model.

    Attributes
    ----------
    readings : int
        Readings in the partition.
    users : int
        Distinct users seen.
    kept : int
        Users whose chain was estimated (the population's I counts them).
    excluded : dict
        User → reason, as in :attr:`policyopt.models.estimation.FittedModel.excluded`.
    transitions : int
        Transitions counted over all users.
    most_transitions : int
        Largest number of transitions of one user.
    log_max_tv : numpy.ndarray, shape (horizon + 1,)
        max over the kept users of ln Δ_u(t), t = 0..horizon (−inf if none is kept).
    spectral_rate : float
        max over the kept users of λ* (0 if none is kept).
    staleness_sum : numpy.ndarray, shape (n_staleness,)
        Σ_u Σ_x π_u(x) Σ_y P_u^t(x, y)(v_x − v_y)², t = 0..n_staleness − 1 (value units squared).
    variance_sum : float
        Σ_u 2 Var_{π_u}(v).
    user_hashes : numpy.ndarray of uint64
        One 64-bit hash per distinct user (pandas ``hash_array`` of the user text).
    longest_span : int
        Longest span (last − first slot + 1) of a kept user's readings (0 if none is kept).
    seconds : float
        Time spent in the task.
    peak_rss_mib : float
        Peak resident set size of the process that ran the task, MiB, when it finished.
    """

    readings: int
    users: int
    kept: int
    excluded: dict
    transitions: int
    most_transitions: int
    log_max_tv: np.ndarray
    spectral_rate: float
    staleness_sum: np.ndarray
    variance_sum: float
    user_hashes: np.ndarray
    longest_span: int = 0
    seconds: float = 0.0
    peak_rss_mib: float = 0.0


def peak_rss_mib() -> float:
    """Peak resident set size of this process, MiB: VmHWM of /proc/self/status where there is one.

    ``getrusage``'s ru_maxrss is not used first: on Linux it survives fork + exec, so a worker spawned by a
    large parent would report the parent's size at spawn time instead of its own peak.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sorted_states(part: dict, source: str, edges) -> tuple:
    """A partition's readings sorted by (user, time) and quantised with the shared inner edges.

    State k holds the readings in [edges[k−1], edges[k]) (as :class:`policyopt.models.estimation.Quantizer`).

    Parameters
    ----------
    part : dict
        From :func:`policyopt.io.read_parquet_partition` (``user_code``, ``time``, ``value``, ``users``).
    source : str
        Names the data in messages.
    edges : array_like, shape (K − 1,)
        Inner quantile edges, in the readings' unit.

    Returns
    -------
    (code, t, x, states) : numpy.ndarray each, shape (n,)
        User codes, slots, readings and states 0..K−1, sorted by user, then time.

    Raises
    ------
    InvalidInputError
        A repeated (user, time).
    """
    code, t, x = part["user_code"], part["time"], part["value"]
    order = np.lexsort((t, code))
    code, t, x = code[order], t[order], x[order]
    dup = (code[1:] == code[:-1]) & (t[1:] == t[:-1])
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InvalidInputError(f"{source}: user {part['users'][code[i]]!r} has a second reading at time {int(t[i])}")
    return code, t, x, np.searchsorted(np.asarray(edges, dtype=float), x, side="right")


def fit_partition(part: dict, source: str, edges, state_values, smoothing: float, threshold: int) -> dict:
    """Readings of one partition sorted by (user, time), quantised with the shared edges, and each user's chain.

    Transitions between consecutive slots per user, the smoothed MLE chains (Cao et al., IEEE TKDE, 2019,
    eq. (28)) and the exclusion rules and messages of :func:`policyopt.models.estimation.fit_population`.

    Returns
    -------
    dict
        ``code``, ``t``, ``x``, ``states`` (sorted by user, then time), ``names``, ``values``, ``n_trans`` (per user),
        ``excluded`` (user → reason), ``chains`` and ``kept`` (the users' codes of the chains, in order).

    Raises
    ------
    InvalidInputError
        A repeated (user, time).
    """
    values = np.asarray(state_values, dtype=float)
    k = values.size
    names = part["users"]
    n_users = len(names)
    code, t, x, states = sorted_states(part, source, edges)
    same = code[1:] == code[:-1]
    consecutive = same & (t[1:] == t[:-1] + 1)
    who = code[:-1][consecutive]
    cell = (who * k + states[:-1][consecutive]) * k + states[1:][consecutive]
    counts = np.bincount(cell, minlength=n_users * k * k).reshape(n_users, k, k).astype(float)
    n_trans = counts.sum(axis=(1, 2)).astype(np.int64)

    excluded, chains, kept = {}, [], []
    for u in range(n_users):
        n = int(n_trans[u])
        if n < threshold:
            excluded[names[u]] = f"{n} transitions < {threshold} needed"
            continue
        rows = counts[u] + smoothing
        totals = rows.sum(axis=1, keepdims=True)
        if np.any(totals == 0):
            r = int(np.flatnonzero(totals[:, 0] == 0)[0])
            excluded[names[u]] = f"state {r} never left (no transitions from it) and smoothing is 0"
            continue
        chain = MarkovChain(rows / totals, values)  # Cao et al., IEEE TKDE 2019, eq. (28)
        if not chain.is_irreducible:
            excluded[names[u]] = "estimated chain is reducible (use smoothing > 0)"
            continue
        chains.append(chain)
        kept.append(u)
    return {"code": code, "t": t, "x": x, "states": states, "names": names, "values": values, "n_trans": n_trans,
            "excluded": excluded, "chains": chains, "kept": kept}


def user_spans(code: np.ndarray, t: np.ndarray, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """First slot and span (slots) of each user's readings (arrays sorted by user, then time)."""
    first = np.full(n_users, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n_users, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, code, t)
    np.maximum.at(last, code, t)
    return first, last - first + 1


def summarize_partition(
    path,
    option: str,
    edges,
    state_values,
    *,
    smoothing: float,
    threshold: int,
    horizon: int,
    n_staleness: int,
) -> PartitionSummary:
    """The map step on one Parquet partition of whole users.

    Counts transitions between consecutive slots per user after quantising with the shared `edges`,
    estimates each kept user's chain exactly as :func:`policyopt.models.estimation.fit_population`
    (smoothed MLE, Cao et al., IEEE TKDE, 2019, eq. (28); the same exclusion rules and messages), and returns the partial maxima
    and sums of :class:`PartitionSummary`.

    Parameters
    ----------
    path : str or Path
        Parquet file with columns user, time, value; every user's readings are in this file.
    option : str
        Option name for messages.
    edges : array_like, shape (K-1,)
        Shared inner state edges (reading units).
    state_values : array_like, shape (K,)
        Shared state values (reading units).
    smoothing : float
        Pseudo-count s ≥ 0.
    threshold : int
        Fewest transitions a kept user needs.
    horizon : int
        Last age of the ln Δ(t) table (slots).
    n_staleness : int
        Ages 0..n_staleness − 1 of the staleness sums.

    Returns
    -------
    PartitionSummary

    Raises
    ------
    InvalidInputError
        Bad readings (see :func:`policyopt.io.read_parquet_partition`) or a repeated (user, time).
    """
    import pandas as pd

    from policyopt.io import read_parquet_partition

    start = time.perf_counter()
    part = read_parquet_partition(path, option)
    pf = fit_partition(part, f"{option} {str(path)!r}", edges, state_values, smoothing, threshold)
    values, k, names, n_users = pf["values"], pf["values"].size, pf["names"], len(pf["names"])
    x, n_trans, excluded, chains = pf["x"], pf["n_trans"], pf["excluded"], pf["chains"]
    _, spans = user_spans(pf["code"], pf["t"], n_users)
    ages = np.arange(int(horizon) + 1)
    log_tv = np.full(ages.shape, -np.inf)
    rate = 0.0
    stale = np.zeros(int(n_staleness))
    var_sum = 0.0
    if chains:
        pop = Population(chains)
        log_tv = np.asarray(pop.log_max_tv(ages), dtype=float)  # eq. (12): max over this partition's users
        rate = float(pop.spectral_rate)
        P = np.stack([c.P for c in chains])
        pi = np.stack([c.stationary for c in chains])
        W = (values[:, None] - values[None, :]) ** 2
        Pt = np.broadcast_to(np.eye(k), P.shape).copy()
        for a in range(int(n_staleness)):  # as MSEPenalty's staleness table, all users at once
            stale[a] = float(np.sum(np.einsum("ux,ux->u", pi, (Pt * W).sum(axis=2))))
            Pt = np.matmul(Pt, P)
        mean = pi @ values
        var_sum = float(np.sum(2.0 * np.einsum("ux,ux->u", pi, (values[None, :] - mean[:, None]) ** 2)))
    hashes = pd.util.hash_array(np.array(names, dtype=object)) if names else np.zeros(0, dtype=np.uint64)
    return PartitionSummary(
        readings=int(x.size),
        users=n_users,
        kept=len(chains),
        excluded=excluded,
        transitions=int(n_trans.sum()),
        most_transitions=int(n_trans.max()) if n_users else 0,
        log_max_tv=log_tv,
        spectral_rate=rate,
        staleness_sum=stale,
        variance_sum=var_sum,
        user_hashes=np.asarray(hashes, dtype=np.uint64),
        longest_span=int(spans[pf["kept"]].max()) if pf["kept"] else 0,
        seconds=time.perf_counter() - start,
        peak_rss_mib=peak_rss_mib(),
    )


def users_with_hashes(path, option: str, hashes) -> list:
    """Users of one partition whose hash is in `hashes` (to name a user found in two partitions)."""
    import pandas as pd

    from policyopt.io import read_parquet_partition

    names = read_parquet_partition(path, option, columns=("user",))["users"]
    if not names:
        return []
    h = pd.util.hash_array(np.array(names, dtype=object))
    wanted = {int(v) for v in hashes}
    return [u for u, hu in zip(names, h) if int(hu) in wanted]


# ---------------------------------------------------------------------------------------------
# The reduced model
# ---------------------------------------------------------------------------------------------


@dataclass
class DistributedFit:
    """The reduced model of a partitioned data set.

    Attributes
    ----------
    population : TabulatedMaxTV
        Δ(t) table and λ* (max over users).
    penalty : TabulatedMSEPenalty
        MSE penalty from the staleness sums.
    edges, state_values : numpy.ndarray
        Shared quantile edges (K−1,) and state values (K,), as :class:`~policyopt.models.estimation.Quantizer`.
    excluded : dict
        User → reason, sorted by user (as the serial fit).
    readings, users, transitions, partitions : int
        Totals.
    timings : dict
        Seconds per phase (edges, state values, chains).
    partition_seconds : list of float
        Seconds per partition task.
    peak_rss_mib : dict
        Largest peak RSS (MiB) reported by any task, per worker (``"local"`` when run in process).
    smoothing, min_transitions : float, int
        The fit's pseudo-count and the fewest transitions a kept user needs.
    longest_span : int
        Longest span (slots) of a kept user's readings.
    """

    population: TabulatedMaxTV
    penalty: TabulatedMSEPenalty
    edges: np.ndarray
    state_values: np.ndarray
    excluded: dict
    readings: int
    users: int
    transitions: int
    partitions: int
    timings: dict = field(default_factory=dict)
    partition_seconds: list = field(default_factory=list)
    peak_rss_mib: dict = field(default_factory=dict)
    smoothing: float = 0.0
    min_transitions: int = 0
    longest_span: int = 0


# ---------------------------------------------------------------------------------------------
# Running the passes: in process or on Dask
# ---------------------------------------------------------------------------------------------


def _worker_failure(exc: Exception) -> PolicyOptError:
    from importlib.metadata import version

    return PolicyOptError(
        f"a Dask worker failed: {type(exc).__name__}: {' '.join(str(exc).split())} (the workers need policyopt "
        f"{version('policyopt')} and its dependencies installed, and must see the --data files at the same paths)"
    )


class _Runner:
    """Map a function over partitions, in this process (client None) or on a Dask client; fold results."""

    def __init__(self, client):
        self.client = client

    def fold(self, fn, paths, args, combine, init):
        """``acc = combine(acc, path, result, worker)`` over every partition, folded as results arrive.

        Only one partition's result is held at a time (besides the accumulator).
        """
        acc = init
        if self.client is None:
            for p in paths:
                acc = combine(acc, p, fn(p, *args), "local")
            return acc
        from distributed import as_completed

        futures = {self.client.submit(fn, p, *args, pure=False, priority=-i): p for i, p in enumerate(paths)}
        try:
            for fut in as_completed(futures):
                try:
                    res = fut.result()
                except PolicyOptError:
                    raise
                except Exception as exc:
                    raise _worker_failure(exc) from exc
                who = self.client.who_has([fut]).get(fut.key, ())
                acc = combine(acc, futures[fut], res, who[0] if who else "?")
                fut.release()
        finally:
            self.client.cancel(list(futures))
        return acc


def fold_partitions(fn, paths, args, combine, init, client=None):
    """``acc = combine(acc, path, fn(path, *args), worker)`` over every partition, in this process (`client` None) or on
    a Dask client, folded as results arrive (one partition's result held at a time besides the accumulator).

    Raises
    ------
    PolicyOptError
        If a Dask worker fails (a PolicyOptError raised in a task reaches the caller unchanged).
    """
    return _Runner(client).fold(fn, paths, args, combine, init)


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None):
    """A Dask client: on a new LocalCluster of `workers` processes (one thread each), or connected to `scheduler`.

    The conventions of :mod:`policyopt.studies.sweep` (``SCHEDULER_TIMEOUT``, no dashboard, quiet logs); the
    local workers run without Dask's statistical profiler and with glibc's trim and mmap thresholds at
    :data:`MALLOC_THRESHOLD` (Dask's own setting made the map step 1.6x slower).

    Raises
    ------
    InvalidInputError
        Both or neither of `workers` and `scheduler`, or `workers` < 1.
    OSError
        If the scheduler cannot be reached within ``SCHEDULER_TIMEOUT``.
    """
    import logging

    from distributed import Client, LocalCluster

    from policyopt.studies.sweep import SCHEDULER_TIMEOUT

    if (workers is None) == (scheduler is None):
        raise InvalidInputError(
            f"give either `workers` (a local cluster) or `scheduler` (an address), not both or neither; got "
            f"workers={fmt(workers)}, scheduler={fmt(scheduler)}"
        )
    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            client = stack.enter_context(Client(scheduler, timeout=SCHEDULER_TIMEOUT))
        else:
            check_int(workers, "workers", 1)
            import dask

            # The workers' statistical profiler samples the task thread every 10 ms; on this Python-heavy map step
            # (one small chain object per user) it cost a measured ~30 % of the task time on a loaded machine.
            # Dask also starts workers with MALLOC_TRIM_THRESHOLD_=65536, which switches off glibc's dynamic mmap
            # threshold: every numpy temporary above 128 KiB is then mmapped and unmapped again, and the map step
            # ran 1.6x slower than in the client process (measured 1.11 s vs 0.70 s on 1,000 users); a fixed
            # 32 MiB mmap threshold next to it gives the client's speed back (0.73 s).
            local_config = {
                "distributed.worker.profile.enabled": False,
                "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": MALLOC_THRESHOLD,
                "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": MALLOC_THRESHOLD,
            }
            with warnings.catch_warnings(), dask.config.set(local_config):
                # the scheduler's HTTP endpoint falls back to a free port when 8787 is taken, and says so
                warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
                cluster = stack.enter_context(
                    LocalCluster(
                        n_workers=int(workers),
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,
                    )
                )
            client = stack.enter_context(Client(cluster))
        yield client




def fit_partitions(
    data,
    n_states: int = 12,
    *,
    smoothing: float = 0.01,
    min_transitions: int | None = None,
    horizon: int = 169,
    n_staleness: int = 338,
    client=None,
    option: str = "--data",
    unit: str = "",
    collect_cap: int = COLLECT_CAP,
) -> DistributedFit:
    """Estimate the users' chains of a partitioned Parquet data set and reduce Δ(t), λ* and the MSE terms.

    The same model as :func:`policyopt.models.estimation.fit_population` on all readings followed by
    :class:`~policyopt.models.markov.Population` and :class:`~policyopt.utility.penalty.MSEPenalty`, computed
    as a map-reduce over the data set's files (see the module docstring).

    Parameters
    ----------
    data : str, Path or list of Path
        Directory, glob pattern or file (see :func:`policyopt.io.parquet_files`), or the files themselves.
        Each user's readings must all be in one file.
    n_states : int
        K ≥ 2 quantile states shared by all users.
    smoothing : float
        Additive pseudo-count s ≥ 0 (Cao et al., IEEE TKDE, 2019, eq. (28)).
    min_transitions : int, optional
        Fewest transitions a kept user needs (default 10·K).
    horizon : int
        Last age (slots) of the Δ(t) table; the schedule needs max(A_MAX, S_MAX) + 1.
    n_staleness : int
        Ages 0..n_staleness − 1 of the staleness table; the schedule needs A_MAX + S_MAX + 2.
    client : distributed.Client, optional
        Run the partitions on this Dask client; None runs them one after another in this process
        (the same code and the same reduction, the serial baseline of the benchmark).
    option : str
        Option name for messages.
    unit : str
        Unit of the penalty (e.g. ``"kWh^2"``).
    collect_cap : int
        Readings the exact quantile selection collects at most in one pass (see :func:`exact_order_statistics`).

    Returns
    -------
    DistributedFit

    Raises
    ------
    InvalidInputError
        Bad arguments; no file; bad readings; no reading; ties that leave a quantile bin empty; a user
        whose readings are in two files (the message names the user and both files).
    InvalidModelError
        If no user has enough transitions.
    PolicyOptError
        If a Dask worker fails for another reason.
    """
    from policyopt.io import parquet_files

    n_states = check_int(n_states, "n_states", 2)
    if not isinstance(smoothing, (int, float)) or isinstance(smoothing, bool) or not (math.isfinite(smoothing) and smoothing >= 0):
        raise InvalidInputError(f"`smoothing` must be a finite number ≥ 0, got {fmt(smoothing)}")
    horizon = check_int(horizon, "horizon", 0)
    n_staleness = check_int(n_staleness, "n_staleness", 1)
    threshold = 10 * n_states if min_transitions is None else check_int(min_transitions, "min_transitions", 0)
    if isinstance(data, (list, tuple)):
        paths = [Path(p) for p in data]
        if not paths:
            raise InvalidInputError(f"{option}: no Parquet file given")
        label = fmt_count(len(paths), "file")
    else:
        paths = parquet_files(data, option)
        label = str(data)
    paths = [str(p) for p in paths]
    runner = _Runner(client)
    timings = {}

    # pass 1: number of readings (and every value checked)
    start = time.perf_counter()
    n = runner.fold(value_count_partition, paths, (option,), lambda acc, p, r, w: acc + r, 0)
    if n == 0:
        raise InvalidInputError(f"{option} {label!r} holds no readings (every Parquet file is empty)")

    # passes 2..: the order statistics of numpy.quantile's edges, exactly
    prev, nxt, gamma = quantile_indices(n, n_states)

    def run_pass(requests):
        """One radix-selection pass over all partitions for the given order-statistic requests."""
        def combine(acc, p, res, w):
            """Fold one partition's result into the accumulator."""
            if acc is None:
                return [np.array(x) for x in res]
            return [a + b if not c else np.concatenate([a, b]) for a, b, (_, _, c) in zip(acc, res, requests)]

        return runner.fold(radix_partition_pass, paths, (option, requests), combine, None)

    ranks = sorted(set(prev.tolist()) | set(nxt.tolist()))
    stats = dict(zip(ranks, exact_order_statistics(run_pass, n, ranks, collect_cap=check_int(collect_cap, "collect_cap", 0))))
    edges = quantile_from_order_statistics([stats[i] for i in prev], [stats[i] for i in nxt], gamma)
    timings["edges_s"] = time.perf_counter() - start

    # state values: the pooled mean of each bin (Quantizer.fit)
    start = time.perf_counter()

    def add_pair(acc, p, r, w):
        """Add one partition's (counts, sums) to the accumulator."""
        c, s = r
        return (acc[0] + c, acc[1] + s)

    counts, sums = runner.fold(state_sums_partition, paths, (option, edges), add_pair, (np.zeros(n_states, dtype=np.int64), np.zeros(n_states)))
    if np.any(counts == 0) or np.any(np.diff(edges) <= 0):
        raise InvalidInputError(
            f"`n_states`={n_states} quantile bins are not all distinct for these readings (ties): only "
            f"{int(np.count_nonzero(counts))} bins hold readings; use fewer states"
        )
    state_values = sums / counts
    timings["state_values_s"] = time.perf_counter() - start

    # the map-reduce over users
    start = time.perf_counter()
    acc = {
        "readings": 0, "users": 0, "kept": 0, "transitions": 0, "most": 0, "excluded": {},
        "log_tv": np.full(horizon + 1, -np.inf), "rate": 0.0, "stale": np.zeros(n_staleness), "var": 0.0,
        "hashes": [], "seconds": [], "rss": {}, "span": 0,
    }

    def combine(acc, p, s, w):
        """Fold one partition's result into the accumulator."""
        acc["readings"] += s.readings
        acc["users"] += s.users
        acc["kept"] += s.kept
        acc["transitions"] += s.transitions
        acc["most"] = max(acc["most"], s.most_transitions)
        acc["excluded"].update(s.excluded)
        acc["log_tv"] = np.maximum(acc["log_tv"], s.log_max_tv)  # eq. (12): max over users
        acc["rate"] = max(acc["rate"], s.spectral_rate)
        acc["stale"] = acc["stale"] + s.staleness_sum
        acc["var"] += s.variance_sum
        acc["hashes"].append((p, s.user_hashes))
        acc["seconds"].append(s.seconds)
        acc["rss"][w] = max(acc["rss"].get(w, 0.0), s.peak_rss_mib)
        acc["span"] = max(acc["span"], s.longest_span)
        return acc

    acc = runner.fold(
        _summarize, paths, (option, edges, state_values, float(smoothing), threshold, horizon, n_staleness), combine, acc
    )
    _check_users_disjoint(acc["hashes"], runner, option)
    timings["chains_s"] = time.perf_counter() - start
    if acc["kept"] == 0:
        raise InvalidModelError(
            f"no user in {option} {label!r} has at least {threshold} transitions between consecutive slots "
            f"(found {acc['most']} at most); supply longer series or fewer states"
        )
    excluded = {u: acc["excluded"][u] for u in sorted(acc["excluded"])}
    population = TabulatedMaxTV(acc["log_tv"], acc["kept"], acc["rate"], n_states=n_states)
    penalty = TabulatedMSEPenalty(
        acc["kept"], (float(state_values.min()), float(state_values.max())), acc["stale"], acc["var"], unit=unit,
        n_states=n_states, n_partitions=len(paths),
    )
    return DistributedFit(
        population=population,
        penalty=penalty,
        edges=edges,
        state_values=state_values,
        excluded=excluded,
        readings=acc["readings"],
        users=acc["users"],
        transitions=acc["transitions"],
        partitions=len(paths),
        timings=timings,
        partition_seconds=acc["seconds"],
        peak_rss_mib=acc["rss"],
        smoothing=float(smoothing),
        min_transitions=threshold,
        longest_span=acc["span"],
    )


def _summarize(path, option, edges, state_values, smoothing, threshold, horizon, n_staleness):
    return summarize_partition(
        path, option, edges, state_values, smoothing=smoothing, threshold=threshold, horizon=horizon, n_staleness=n_staleness
    )


def _check_users_disjoint(hashes, runner, option) -> None:
    """Raise if a user has readings in two partitions (hash collisions of distinct users are told apart)."""
    if len(hashes) < 2:
        return
    allh = np.concatenate([h for _, h in hashes])
    uniq, cnt = np.unique(allh, return_counts=True)
    repeated = uniq[cnt > 1]
    if repeated.size == 0:
        return
    seen: dict[str, str] = {}
    for path, h in hashes:
        if not np.isin(h, repeated).any():
            continue
        for user in users_with_hashes(path, option, repeated):
            if user in seen:
                raise InvalidInputError(
                    f"{option}: user {user!r} has readings in two partitions ({seen[user]!r} and {path!r}); "
                    "write each user's readings into one Parquet file"
                )
            seen[user] = path
