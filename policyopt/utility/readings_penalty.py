"""The MSE of the released mean estimated from the readings themselves, not from a chain model.

A deployment releases, every S̄ slots, the mean of its I users' readings taken a = A … A + S̄ − 1 slots
earlier plus Laplace noise.  For a deployment whose users are drawn like the pilot's (a new user is
another home of the same kind), the expected squared error against the current mean is

    E[(m_{t−a} − m_t)²] = cross(a) + (self(a) − cross(a)) / I,                     (R1)

where, with d_i(t) = x_i(t) − x_i(t − a) the a-step change of user i's (clipped) reading,

    self(a)  = mean over slots t of (1/n_t) Σ_i d_i(t)²                 (a user's own change),
    cross(a) = mean over slots t of [(Σ_i d_i(t))² − Σ_i d_i(t)²] / (n_t (n_t − 1))   (pairs i ≠ j),

n_t the pilot users with readings at t − a and t.  (R1) is the variance of a mean of I draws without
replacement from the pilot at one slot (exact for I ≤ n), averaged over slots; it needs no Markov
model, no independence between users and no stationarity beyond "the pilot's time range is like the
deployment's".  The cross term is what no deployment size averages away: homes move together (hour
of day, weather).  The penalty adds the Laplace noise of an ε_C-DP release of the mean, Δf = (HI − LO)/I:

    f(a, ε_C) = staleness(a) + 2 (Δf / ε_C)².                                       (R2)

Compare Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024, eqs. (48)–(49) (:class:`~policyopt.utility.penalty.MSEPenalty`): independent users on stationary
chains over quantile-state values, where the cross term is 0 and the staleness falls as 1/I.

Phases.  The staleness of hourly readings depends on the hour of day (evening ramps).  With a phase
period P (24 for hourly data) self and cross are averaged per phase h = t mod P (t the slot at which the
error is measured), and the design uses the **worst phase** at every age,
staleness(a) = max_h [cross_h(a) + (self_h(a) − cross_h(a))/I], so that the bound holds whatever hour
a release is read at (a stationary schedule's releases drift through every phase unless S̄ divides P).

Uncertainty.  A circular block bootstrap over whole periods (days) (Politis & Romano 1992,
``arch.bootstrap.CircularBlockBootstrap``), block length by the automatic rule of Politis & White
(2004) with the correction of Patton, Politis & White (2009) (``arch.bootstrap.optimal_block_length``)
on the per-period means of self and cross at three ages, and at least 2L + 1 slots (d(t) = x(t) − x(t − a)
shares x(t) with d(t + a), so the per-slot terms depend at lags up to 2L; a shorter block undercovers); the band is the pointwise two-sided percentile
interval of the worst-phase staleness at a level (default 0.95).  ``design="upper"`` designs against
its upper end (never below the point estimate).

Map-reduce.  Everything is a sum over users per (age, slot): Σ_i d_i², Σ_i d_i and n_t are computed per
chunk of users as banded products of the readings (Σ_i x_i(t − a) x_i(t) for all a ≤ L, one matrix
product per block of slots) and added; the cross term is formed once, from the summed Σ_i d_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.io.result_cache import cached
from policyopt.models.markov import as_slots
from policyopt.utility.penalty import MSEPenalty

__all__ = [
    "SlotTerms",
    "ReadingsMoments",
    "ReadingsMSEPenalty",
    "readings_panel",
    "lag_products",
    "slot_terms",
    "slot_sums",
    "readings_moments",
    "block_length",
    "BOOTSTRAP_REPS",
    "DEFAULT_LEVEL",
    "MIN_BOOTSTRAP_PERIODS",
    "MAX_PANEL_CELLS",
]

#: Bootstrap replicates of the band: (B + 1)·0.025 is a whole number for B = 399.
BOOTSTRAP_REPS = 399
#: Two-sided level of the bootstrap band.
DEFAULT_LEVEL = 0.95
#: Fewer whole periods than this and no band is formed (a block bootstrap needs several blocks).
MIN_BOOTSTRAP_PERIODS = 10
#: Largest users × slots panel held in memory (float64 cells): 2·10^8 (1.6 GB).
MAX_PANEL_CELLS = 200_000_000
#: Users per chunk of the map step (bounds the memory of one banded product).
CHUNK_USERS = 512


def readings_panel(data, value_range=None) -> tuple[list, np.ndarray, np.ndarray, int]:
    """Readings as a users × slots panel, clipped to the public range.

    Parameters
    ----------
    data : pandas.DataFrame or numpy.ndarray
        Long table with columns ``user``, ``time`` (integer slots) and ``value``, or a dense
        array of shape (n_users, n_slots) (slots 0..n_slots − 1; NaN marks a missing reading).
    value_range : (float, float), optional
        Public range (LO, HI); every reading is clipped into it.  ``None``: no clipping.

    Returns
    -------
    (users, times, X, clipped) : list, ndarray (T,) int64, ndarray (n, T) float64, int
        User names, the slots t_0 … t_0 + T − 1 (every slot of the time range, also those without
        readings), the panel (NaN where a user has no reading) and the number of clipped readings.

    Raises
    ------
    InvalidInputError
        Bad columns or values (:func:`~policyopt.models.estimation.validate_readings`), fewer than two
        users, or a panel larger than :data:`MAX_PANEL_CELLS`.
    """
    if isinstance(data, np.ndarray):
        X = np.asarray(data, dtype=float)  # no copy of a float64 panel unless it must be clipped (below)
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 2:
            raise InvalidInputError(f"`data` must be a (users, slots) array with ≥ 2 of each, got shape {X.shape}")
        if np.isinf(X).any():
            raise InvalidInputError("`data` has infinite readings; use NaN for a missing reading")
        users = [str(i) for i in range(X.shape[0])]
        times = np.arange(X.shape[1], dtype=np.int64)
    else:
        from policyopt.models.estimation import validate_readings

        df = validate_readings(data)
        users = sorted(df["user"].unique().tolist())
        if len(users) < 2:
            raise InvalidInputError(f"`data` needs readings of at least 2 users for the cross term, got {len(users)}")
        t0, t1 = int(df["time"].min()), int(df["time"].max())
        T = t1 - t0 + 1
        if len(users) * T > MAX_PANEL_CELLS:
            raise InvalidInputError(
                f"`data` spans {T} slots for {len(users)} users ({len(users) * T} cells, at most {MAX_PANEL_CELLS}); "
                "use a shorter time range or fewer users"
            )
        import pandas as pd

        X = np.full((len(users), T), np.nan)
        rows = pd.Index(users).get_indexer(df["user"])  # a hash look-up (Series.map of a dict went through Python)
        X[rows, df["time"].to_numpy() - t0] = df["value"].to_numpy(dtype=float)
        times = np.arange(t0, t1 + 1, dtype=np.int64)
    if X.shape[0] * X.shape[1] > MAX_PANEL_CELLS:
        raise InvalidInputError(f"`data` has {X.size} cells, at most {MAX_PANEL_CELLS}")
    clipped = 0
    if value_range is not None:
        from policyopt.errors import check_value_range

        lo, hi = check_value_range(value_range)
        finite = np.isfinite(X)
        outside = finite & ((X < lo) | (X > hi))
        clipped = int(np.count_nonzero(outside))
        if clipped:
            if isinstance(data, np.ndarray) and np.shares_memory(X, data):
                X = X.copy()  # never clip the caller's array in place
            np.clip(X, lo, hi, out=X, where=finite)
    return users, times, X, clipped


def lag_products(U: np.ndarray, V: np.ndarray, max_lag: int, block: int | None = None) -> np.ndarray:
    """Banded products B[a, t] = Σ_i U[i, t − a] · V[i, t] for a = 0..max_lag (0 where t < a).

    One matrix product per block of slots: U[:, s0:t1]ᵀ V[:, t0:t1] holds every pair of slots less than
    max_lag + block apart; the band is read off its diagonals.

    Parameters
    ----------
    U, V : numpy.ndarray, shape (n, T)
        Zero where a reading is missing.
    max_lag : int
        L ≥ 0 (slots).
    block : int, optional
        Slots per block (default max(256, L)).

    Returns
    -------
    numpy.ndarray, shape (L + 1, T)
    """
    n, T = U.shape
    L = int(max_lag)
    B = max(256, L) if block is None else int(block)
    out = np.zeros((L + 1, T))
    for t0 in range(0, T, B):
        t1 = min(T, t0 + B)
        s0 = max(0, t0 - L)
        w = t1 - t0
        # Gp[L − (t0 − s0) + s − s0, t − t0] = Σ_i U[i, s] V[i, t]: zero rows above stand for the slots s < 0, so
        # B[a, t] = Gp[L + (t − t0) − a, t − t0] is one strided read of the band (rows step −w, columns w + 1)
        Gp = np.zeros((L + w, w))
        Gp[L - (t0 - s0):] = U[:, s0:t1].T @ V[:, t0:t1]
        flat = Gp.reshape(-1)[L * w:]
        out[:, t0:t1] = np.lib.stride_tricks.as_strided(flat, shape=(L + 1, w), strides=(-w * flat.itemsize, (w + 1) * flat.itemsize),
                                                        writeable=False)
    return out


@dataclass(frozen=True)
class SlotTerms:
    """Per-slot moments of the a-step changes of a panel of readings (the map-reduce's reduced sums).

    Attributes
    ----------
    times : numpy.ndarray, shape (T,)
        Slot of each column (the slot t at which the error is measured).
    n : numpy.ndarray, shape (L + 1, T)
        n_t(a): users with readings at t − a and t.
    sum_sq : numpy.ndarray, shape (L + 1, T)
        Σ_i d_i(t)², d_i(t) = x_i(t) − x_i(t − a) (value units squared).
    sum_d : numpy.ndarray, shape (L + 1, T)
        Σ_i d_i(t).
    n_users : int
        Users of the panel.
    value_range : (float, float)
        Range the readings were clipped into (declared) or their own range.
    value_range_declared : bool
        True when `value_range` was given (public); False when it is the data's own range (not private).
    clipped : int
        Readings changed by clipping.
    """

    times: np.ndarray
    n: np.ndarray
    sum_sq: np.ndarray
    sum_d: np.ndarray
    n_users: int
    value_range: tuple
    value_range_declared: bool
    clipped: int

    @property
    def max_age(self) -> int:
        """L, the largest age tabulated (slots)."""
        return self.n.shape[0] - 1

    def self_slot(self) -> np.ndarray:
        """(1/n_t) Σ_i d_i(t)² per age and slot, NaN where n_t = 0; shape (L + 1, T)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.n >= 1, self.sum_sq / np.maximum(self.n, 1), np.nan)

    def cross_slot(self) -> np.ndarray:
        """[(Σ_i d_i)² − Σ_i d_i²] / (n_t (n_t − 1)) per age and slot, NaN where n_t < 2; shape (L + 1, T)."""
        pairs = self.n * (self.n - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.n >= 2, (self.sum_d**2 - self.sum_sq) / np.maximum(pairs, 1), np.nan)


def slot_sums(X: np.ndarray, max_age: int, *, chunk_users: int = CHUNK_USERS, complete=None,
              finite=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The map step of :func:`slot_terms` on one panel: n_t(a), Σ_i d_i(t)², Σ_i d_i(t), summed over chunks of users.

    Sums of panels of disjoint users over the same slots add up to the sums of their union, which is how
    the Dask path (:func:`policyopt.studies.distributed_checks.readings_moments_partitions`) reduces a partitioned
    data set.  The raw sums are returned: :func:`slot_terms` clamps Σ d² at 0 and zeroes age 0 after the sum.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, T)
        Readings (already clipped), NaN where missing.
    max_age : int
        L ≥ 1 (slots).
    chunk_users : int
        Users per chunk.
    complete : bool, optional
        As :func:`slot_terms`.
    finite : numpy.ndarray of bool, shape (n, T), optional
        ``np.isfinite(X)`` if already computed.

    Returns
    -------
    (n, sum_sq, sum_d) : numpy.ndarray, shape (L + 1, T) each

    Raises
    ------
    InvalidInputError
        `complete` True for a panel with missing readings.
    """
    L = int(max_age)
    n, T = X.shape
    finite = np.isfinite(X) if finite is None else finite
    if complete is None:
        complete = bool(finite.all())
    elif complete and not finite.all():
        raise InvalidInputError("`complete` = True but the panel has missing readings")
    cnt = np.zeros((L + 1, T))
    sq = np.zeros((L + 1, T))
    sd = np.zeros((L + 1, T))
    lag_mask = np.arange(T)[None, :] >= np.arange(L + 1)[:, None]  # t ≥ a
    for i0 in range(0, n, chunk_users):
        Z = np.where(finite[i0:i0 + chunk_users], X[i0:i0 + chunk_users], 0.0)
        if complete:
            Q = (Z * Z).sum(axis=0)
            S = Z.sum(axis=0)
            P = lag_products(Z, Z, L)
            for a in range(min(L, T - 1) + 1):
                # Σ_i (x_t − x_{t−a})² = Q_t + Q_{t−a} − 2 Σ_i x_{t−a} x_t; Σ_i d_i = S_t − S_{t−a}
                sq[a, a:] += Q[a:] + Q[: T - a] - 2.0 * P[a, a:]
                sd[a, a:] += S[a:] - S[: T - a]
            cnt += np.where(lag_mask, Z.shape[0], 0.0)
        else:
            M = finite[i0:i0 + chunk_users].astype(float)
            W = Z * Z
            cnt += lag_products(M, M, L)
            sq += lag_products(W, M, L) + lag_products(M, W, L) - 2.0 * lag_products(Z, Z, L)
            sd += lag_products(M, Z, L) - lag_products(Z, M, L)
    return cnt, sq, sd


def slot_terms(data, max_age: int, *, value_range=None, chunk_users: int = CHUNK_USERS, complete=None) -> SlotTerms:
    """Σ_i d_i², Σ_i d_i and n_t for every age a ≤ `max_age` and slot t, summed over chunks of users.

    Parameters
    ----------
    data : pandas.DataFrame or numpy.ndarray
        Readings (see :func:`readings_panel`).
    max_age : int
        L ≥ 1, largest age (slots); the data must span more than L slots.
    value_range : (float, float), optional
        Public range (LO, HI) the readings are clipped into first.  Default: the readings' own range
        (not private; ``value_range_declared`` False).
    chunk_users : int
        Users per map step.
    complete : bool, optional
        Force (True) or forbid (False) the path for panels without missing readings (one banded product
        per chunk instead of six); default: chosen from the data.  Both give the same numbers (tested).

    Returns
    -------
    SlotTerms

    Raises
    ------
    InvalidInputError
        Bad data (see :func:`readings_panel`), `max_age` not an integer ≥ 1 or not below the number of
        slots, all readings equal and no `value_range`.
    """
    L = check_int(max_age, "max_age", 1, "slots")
    chunk = check_int(chunk_users, "chunk_users", 1, "users")
    users, times, X, clipped = readings_panel(data, value_range)
    n, T = X.shape
    if L >= T:
        raise InvalidInputError(f"`max_age` = {L} slots needs readings spanning more than {L} slots; the data span {T}")
    finite = np.isfinite(X)
    if value_range is None:
        lo, hi = float(np.nanmin(X)), float(np.nanmax(X))
        if not hi > lo:
            raise InvalidInputError(f"all readings equal {lo!r}: the mean has sensitivity 0; declare `value_range`")
        vr, declared = (lo, hi), False
    else:
        vr, declared = (float(value_range[0]), float(value_range[1])), True
    cnt, sq, sd = slot_sums(X, L, chunk_users=chunk, complete=complete, finite=finite)
    np.maximum(sq, 0.0, out=sq)  # a sum of squares: remove the rounding of the expanded form below 0
    sq[0] = 0.0
    sd[0] = 0.0
    return SlotTerms(times, cnt, sq, sd, n, vr, declared, clipped)


@dataclass(frozen=True)
class ReadingsMoments:
    """Self and cross terms summed per (period, phase, age): what the penalty and its bootstrap need.

    Attributes
    ----------
    phase_period : int
        P (slots); 1 means no phase split.
    self_sum, self_cnt, cross_sum, cross_cnt : numpy.ndarray, shape (D, P, L + 1)
        Per whole period d and phase h = t mod P: the sum over its slots of the per-slot self / cross
        term and the number of slots where it is defined.
    n_users : int
    value_range : (float, float)
    value_range_declared : bool
    clipped : int
    slots : int
        Slots of the time range.
    first_slot : int
    """

    phase_period: int
    self_sum: np.ndarray
    self_cnt: np.ndarray
    cross_sum: np.ndarray
    cross_cnt: np.ndarray
    n_users: int
    value_range: tuple
    value_range_declared: bool
    clipped: int
    slots: int
    first_slot: int
    #: periods of the readings when the per-period sums were added up (:meth:`compact`); ``None``: ``self_sum.shape[0]``
    periods_read: int | None = None

    @property
    def max_age(self) -> int:
        """L (slots)."""
        return self.self_sum.shape[2] - 1

    @property
    def periods(self) -> int:
        """D, whole or partial periods covered."""
        return self.self_sum.shape[0] if self.periods_read is None else self.periods_read

    def compact(self) -> "ReadingsMoments":
        """The same moments with the periods added up (shape (1, P, L + 1)): per-phase and pooled values unchanged,
        no bootstrap possible (what a worker of a distributed sweep needs once the band is formed)."""
        from dataclasses import replace

        return replace(self, self_sum=self.self_sum.sum(axis=0, keepdims=True),
                       self_cnt=self.self_cnt.sum(axis=0, keepdims=True),
                       cross_sum=self.cross_sum.sum(axis=0, keepdims=True),
                       cross_cnt=self.cross_cnt.sum(axis=0, keepdims=True), periods_read=self.periods)

    def pooled(self, ages) -> dict:
        """self(a) and cross(a) averaged over every slot (all phases), value units squared.

        Raises
        ------
        InvalidInputError
            If an age is beyond ``max_age``.
        """
        ts = self.check_ages(ages)
        with np.errstate(divide="ignore", invalid="ignore"):  # NaN for an age no slot defines
            # over periods first, then phases: the same numbers after compact()
            s = self.self_sum.sum(axis=0)[:, ts].sum(axis=0) / self.self_cnt.sum(axis=0)[:, ts].sum(axis=0)
            c = self.cross_sum.sum(axis=0)[:, ts].sum(axis=0) / self.cross_cnt.sum(axis=0)[:, ts].sum(axis=0)
        return {"self": s, "cross": c}

    def by_phase(self) -> tuple[np.ndarray, np.ndarray]:
        """(self_h(a), cross_h(a)), shape (P, L + 1) each; NaN for a phase without slots."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.self_sum.sum(axis=0) / self.self_cnt.sum(axis=0),
                    self.cross_sum.sum(axis=0) / self.cross_cnt.sum(axis=0))

    def check_ages(self, ages) -> np.ndarray:
        """`ages` as whole slots; InvalidInputError if one is beyond ``max_age``."""
        ts = as_slots(ages, "ages")
        if ts.size and int(np.max(ts)) > self.max_age:
            raise InvalidInputError(f"age {int(np.max(ts))} is beyond the ages estimated from the readings (0..{self.max_age})")
        return ts


def readings_moments(data, max_age: int, *, value_range=None, phase_period: int | None = None,
                     chunk_users: int = CHUNK_USERS, terms: SlotTerms | None = None) -> ReadingsMoments:
    """Per-slot self and cross terms of the readings, summed per (period, phase, age).

    Parameters
    ----------
    data : pandas.DataFrame or numpy.ndarray or None
        Readings (see :func:`readings_panel`); ignored when `terms` is given.
    max_age : int
        L, largest age (slots).
    value_range : (float, float), optional
        Public range (LO, HI); readings are clipped into it.
    phase_period : int, optional
        P (slots per cycle, 24 for hourly readings and the hour of day); ``None`` or 1: one phase.
    chunk_users : int
        Users per map step.
    terms : SlotTerms, optional
        Already computed per-slot sums (e.g. reduced on a cluster).

    Returns
    -------
    ReadingsMoments

    Raises
    ------
    InvalidInputError
        See :func:`slot_terms`; `phase_period` not an integer ≥ 1.
    """
    P = 1 if phase_period is None else check_int(phase_period, "phase_period", 1, "slots per cycle")
    st = slot_terms(data, max_age, value_range=value_range, chunk_users=chunk_users) if terms is None else terms
    L = st.max_age
    times = st.times
    base = int(times[0]) - int(times[0]) % P
    D = (int(times[-1]) - base) // P + 1
    idx = (times - base).astype(np.int64)
    out = {}
    for name, per_slot in (("self", st.self_slot()), ("cross", st.cross_slot())):
        ok = np.isfinite(per_slot)
        s = np.zeros((L + 1, D * P))
        c = np.zeros((L + 1, D * P))
        s[:, idx] = np.where(ok, per_slot, 0.0)
        c[:, idx] = ok
        out[name] = (s.reshape(L + 1, D, P).transpose(1, 2, 0).copy(), c.reshape(L + 1, D, P).transpose(1, 2, 0).copy())
    return ReadingsMoments(P, out["self"][0], out["self"][1], out["cross"][0], out["cross"][1], st.n_users,
                           st.value_range, st.value_range_declared, st.clipped, int(times.size), int(times[0]))


def block_length(series: np.ndarray, periods: int) -> int:
    """Circular block bootstrap block length (whole periods) by Politis & White (2004) / Patton et al. (2009).

    ``arch.bootstrap.optimal_block_length`` on each column of `series` (NaN rows dropped), the
    largest "circular" estimate rounded up, kept within [1, periods // 2] (a column without spread has none: it
    gives 1, and ``arch`` is imported only for a column that has one).
    """
    from policyopt.models.arch_bootstrap import arch_bootstrap

    x = np.asarray(series, dtype=float)
    x = x[np.all(np.isfinite(x), axis=1)]
    best = 1.0
    if x.shape[0] >= 4:
        for j in range(x.shape[1]):
            if np.ptp(x[:, j]) > 0:
                best = max(best, float(arch_bootstrap().optimal_block_length(x[:, j])["circular"].iloc[0]))
    return int(min(max(1, math.ceil(best)), max(1, periods // 2)))


class _Bootstrap:
    """Replicates of the per-phase self and cross means (shared by every deployment size)."""

    def __init__(self, moments: ReadingsMoments, reps: int, seed: int):
        from policyopt.models.arch_bootstrap import arch_bootstrap

        CircularBlockBootstrap = arch_bootstrap().CircularBlockBootstrap
        m = moments
        D, P, L1 = m.self_sum.shape
        L = L1 - 1
        ages = sorted({1, max(1, (L + 1) // 2), L})
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.column_stack(
                [m.self_sum[:, :, a].sum(axis=1) / m.self_cnt[:, :, a].sum(axis=1) for a in ages]
                + [m.cross_sum[:, :, a].sum(axis=1) / m.cross_cnt[:, :, a].sum(axis=1) for a in ages]
            )
        # an a-step change d(t) = x(t) − x(t − a) is correlated with d(t ± a) (they share x(t)), so the per-slot terms
        # depend at lags up to 2L: the block covers at least 2L + 1 slots, whatever the automatic rule says
        self.block = max(block_length(per, D), min(math.ceil((2 * L + 1) / P), max(1, D // 2)))
        self.ages_for_block = ages
        self.reps = reps
        self.seed = seed
        bs = CircularBlockBootstrap(self.block, np.arange(D), seed=np.random.default_rng(seed))  # simulation only
        weights = np.zeros((reps, D))
        for r, (pos, _) in enumerate(bs.bootstrap(reps)):
            weights[r] = np.bincount(pos[0], minlength=D)
        flat = (D, P * L1)
        self_cnt = _weighted_counts(weights, m.self_cnt.reshape(flat))
        cross_cnt = (self_cnt if np.array_equal(m.cross_cnt, m.self_cnt)
                     else _weighted_counts(weights, m.cross_cnt.reshape(flat)))
        with np.errstate(divide="ignore", invalid="ignore"):
            self.self_rep = ((weights @ m.self_sum.reshape(flat)) / self_cnt).reshape(reps, P, L1)
            self.cross_rep = ((weights @ m.cross_sum.reshape(flat)) / cross_cnt).reshape(reps, P, L1)


@cached("readings-bootstrap")
def _bootstrap_replicates(moments: ReadingsMoments, reps: int, seed: int) -> _Bootstrap:
    """:class:`_Bootstrap` of `moments` (deterministic in its arguments: the seed is one), kept on disk and reused
    across runs when ``POLICYOPT_CACHE_DIR`` is set (:func:`policyopt.io.result_cache.cached`)."""
    return _Bootstrap(moments, reps, seed)


def _weighted_counts(weights: np.ndarray, cnt: np.ndarray) -> np.ndarray:
    """``weights @ cnt`` for whole-number `weights` (R, D) and `cnt` (D, F), from the periods whose counts are not all 1.

    Almost every period has a slot at every (phase, age), so ``cnt`` is 1 nearly everywhere:
    ``weights @ cnt = (Σ_d weights[:, d]) − weights[:, rows] @ (1 − cnt)[rows]`` over the rows that differ from 1.
    Sums of whole numbers below 2⁵³ are exact in floating point in any order: the result equals the direct product
    bit for bit, at the cost of the few periods with gaps (the first one, missing readings)."""
    gap = 1.0 - cnt
    rows = np.flatnonzero(np.any(gap != 0.0, axis=1))
    return weights.sum(axis=1)[:, None] - weights[:, rows] @ gap[rows]


class ReadingsMSEPenalty(MSEPenalty):
    """MSE of the released mean of I users estimated from the readings: (R1) + (R2) of the module docstring.

    f(a, ε_C) = max(0, max_h [cross_h(a) + (self_h(a) − cross_h(a))/I]) + 2(Δf/ε_C)², Δf = (HI − LO)/I,

    in the readings' unit squared, measured against the current mean of the I users' readings.  It is a
    :class:`~policyopt.utility.penalty.MSEPenalty` (staleness table, closed-form inverse in ε_C, window
    maxima over the ages A..A+S̄−1 of an epoch), so every solver takes it unchanged.  The staleness is
    tabulated for ages 0..L only (``max_age`` of the moments); it is not monotone in the age (daily cycles).

    Parameters
    ----------
    moments : ReadingsMoments
        From :func:`readings_moments`.
    users : int
        Deployment size I ≥ 1.
    unit : str
        Penalty unit (e.g. ``"kWh^2"``).
    design : {"point", "upper", "auto"}
        Design against the point estimate (default), the upper end of the bootstrap band, or (``"auto"``) the
        upper end wherever the pilot cannot tell the staleness from 0: when the band's lower end is 0 at some age
        1..L, the point estimate there is no promise at the band's level, so the whole table is the band's upper
        end; otherwise (and without a band: fewer than :data:`MIN_BOOTSTRAP_PERIODS` periods) the point estimate.
        :attr:`design` is the one used, :attr:`design_reason` says why.
    level : float
        Two-sided level of the band, in (0, 1).
    reps : int
        Bootstrap replicates (≥ 20).
    seed : int
        Seed of the bootstrap's resampling (simulation only, never released noise).

    Raises
    ------
    InvalidInputError
        `moments` not ReadingsMoments; bad `users`, `design`, `level`, `reps` or `seed`; ``design="upper"``
        with fewer than :data:`MIN_BOOTSTRAP_PERIODS` periods of data.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
    eqs. (27), (48)–(49), Proposition 1 (the Laplace noise of an ε_C-DP mean).  Politis & Romano, "A circular
    block-resampling procedure for stationary data", 1992; Politis & White, "Automatic block-length selection
    for the dependent bootstrap", Econometric Reviews, 2004; Patton, Politis & White, correction, 2009.
    """

    name = "readings-mse"

    def __init__(self, moments: ReadingsMoments, *, users: int, unit: str = "", design: str = "point",
                 level: float = DEFAULT_LEVEL, reps: int = BOOTSTRAP_REPS, seed: int = 0, _shared=None):
        if not isinstance(moments, ReadingsMoments):
            raise InvalidInputError(f"`moments` must be ReadingsMoments (policyopt.utility.readings_penalty.readings_moments), got {fmt(moments)}")
        self.users = check_int(users, "users", 1, "deployment size I")
        if not isinstance(unit, str):
            raise InvalidInputError(f"`unit` must be a string such as 'kWh^2', got {fmt(unit)}")
        if design not in ("point", "upper", "auto"):
            raise InvalidInputError(f"`design` must be 'point', 'upper' or 'auto', got {fmt(design)}")
        if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
            raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
        self.reps = check_int(reps, "reps", 20, "bootstrap replicates")
        self.seed = check_int(seed, "seed", 0, "bootstrap seed")
        self.moments = moments
        self.population = None
        self.unit = unit
        self.level = float(level)
        self.value_range = moments.value_range
        self.value_range_declared = moments.value_range_declared
        lo, hi = moments.value_range
        self.sensitivity = (hi - lo) / self.users
        self._shared = {} if _shared is None else _shared  # the bootstrap replicates, shared with with_users copies
        self._windows = {}
        self._self_h, self._cross_h = moments.by_phase()
        point = self._worst(self._self_h, self._cross_h)
        self.point_table = np.where(np.isfinite(point), point, 0.0)
        self.point_table[0] = 0.0  # age 0: the released readings are the current ones
        self._band = None
        self.design_requested = design
        design, self.design_reason = self._resolve_design(design)
        self.design = design
        if design == "upper":
            if not self.has_band:
                raise InvalidInputError(
                    f"design against the band's upper end needs ≥ {MIN_BOOTSTRAP_PERIODS} periods of "
                    f"{moments.phase_period} slots; the readings cover {moments.periods}"
                )
            self._table = np.maximum(self.point_table, self.band()[1])
        else:
            self._table = self.point_table
        self._table.setflags(write=False)

    def _resolve_design(self, design: str) -> tuple[str, str]:
        """The design used for `design` (``"auto"`` decided here: see the class docstring) and why, in words."""
        if design != "auto":
            return design, "given"
        if not self.has_band:
            return "point", (f"no band: the readings cover {self.moments.periods} periods of "
                             f"{self.moments.phase_period} slots, fewer than {MIN_BOOTSTRAP_PERIODS}; the point "
                             "estimate is not a promise at a stated confidence")
        lo = self.band()[0][1:]
        zero = np.flatnonzero(lo <= 0.0) + 1
        if zero.size:
            return "upper", (f"the {100 * self.level:g}% band's lower end is 0 at {zero.size} of the ages 1..{self.max_age} "
                             f"(first at age {int(zero[0])}): the pilot cannot tell the staleness there from 0")
        return "point", f"the {100 * self.level:g}% band's lower end is above 0 at every age 1..{self.max_age}"

    def _worst(self, self_h, cross_h) -> np.ndarray:
        """max over phases of cross_h + (self_h − cross_h)/I along the last axis's ages, at least 0; NaN phases ignored.

        The staleness E[(m_{t−a} − m_t)²] is ≥ 0, but its estimate can fall below 0 when the users are nearly
        independent (the cross term's sampling error outweighs (self − cross)/I at large I); such an estimate is
        raised to 0, which is closer to every possible true value."""
        v = cross_h + (self_h - cross_h) / self.users
        with np.errstate(invalid="ignore"):
            v = np.where(np.isfinite(v), v, -np.inf).max(axis=-2)
        return np.where(np.isfinite(v), np.maximum(v, 0.0), np.nan)

    def __getstate__(self):
        """Pickle compactly (a sweep ships the penalty to its workers): the band and its description are formed
        here, then the per-period sums and the bootstrap replicates are left out (the periods added up)."""
        state = dict(self.__dict__)
        state["_band"] = self.band()
        state["_info"] = self.bootstrap_info()
        state["moments"] = self.moments.compact()
        state["_shared"] = {}
        return state

    @classmethod
    def from_readings(cls, readings, max_age: int, *, users: int | None = None, value_range=None,
                      phase_period: int | None = None, moments: ReadingsMoments | None = None, **options):
        """The readings penalty of long readings (user, time, value) over ages 0..`max_age`: their
        :func:`readings_moments`, then the penalty of I = `users` (default: the readings' own users).

        The one place a design on readings builds its MSE model: ``schedule`` (:func:`policyopt.design_schedule` with
        ``data``, and the deployment of ``policyopt schedule``), ``sweep`` and ``backtest``'s design on the training
        readings.  `moments`, when given, are these readings' moments computed before (a caller's cache); `options`
        are the other keywords of the class (``unit``, ``design``, ``level``, ``seed``).

        Raises
        ------
        InvalidInputError
            Bad readings or options (as :func:`readings_moments` and the class raise them).
        """
        if moments is None:
            moments = readings_moments(readings, max_age, value_range=value_range, phase_period=phase_period)
        return cls(moments, users=moments.n_users if users is None else users, **options)

    def with_users(self, users: int) -> "ReadingsMSEPenalty":
        """The same readings for another deployment size I; moments and bootstrap replicates are shared.

        Raises
        ------
        InvalidInputError
            If `users` is not an integer ≥ 1; if this penalty was unpickled (its per-period sums added up, see
            ``__getstate__``) and its design (``upper``, or ``auto``) needs the band, which cannot be re-formed for
            another I without them (make the copies before pickling, as ``sweep`` does).
        """
        if self.moments.periods_read is not None and self.has_band and self.design_requested != "point":
            raise InvalidInputError(
                f"with_users({fmt(users)}): this readings penalty was unpickled (its per-period sums added up), so the "
                f"band its design {self.design_requested!r} needs cannot be re-formed for another I; make the copy "
                "before pickling")
        return ReadingsMSEPenalty(self.moments, users=users, unit=self.unit, design=self.design_requested, level=self.level,
                                  reps=self.reps, seed=self.seed, _shared=self._shared)

    @property
    def max_age(self) -> int:
        """Largest age tabulated (slots)."""
        return self.moments.max_age

    @property
    def has_band(self) -> bool:
        """True when the readings cover enough periods for the block bootstrap."""
        return self.moments.periods >= MIN_BOOTSTRAP_PERIODS

    def bootstrap(self) -> _Bootstrap | None:
        """The bootstrap replicates (computed once, shared by :meth:`with_users` copies); ``None`` without a band."""
        if not self.has_band or self.moments.periods_read is not None:  # compacted: the band was formed before
            return None
        key = (self.reps, self.seed)
        if key not in self._shared:
            self._shared[key] = _bootstrap_replicates(self.moments, self.reps, self.seed)
        return self._shared[key]

    def band(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise two-sided percentile band (lower, upper) of the worst-phase staleness, shape (L + 1,) each.

        The lower end is the ⌊(1 − level)/2 · B⌋-th and the upper the ⌈(1 + level)/2 · B⌉-th replicate
        (rounded outward).  ``None`` when the readings cover fewer than :data:`MIN_BOOTSTRAP_PERIODS` periods.
        """
        if self._band is None:
            bs = self.bootstrap()
            if bs is None:
                return None
            reps = self._worst(bs.self_rep, bs.cross_rep)  # (B, L + 1)
            reps = np.where(np.isfinite(reps), reps, 0.0)
            q_lo, q_hi = (1.0 - self.level) / 2.0, (1.0 + self.level) / 2.0
            lo = np.quantile(reps, q_lo, axis=0, method="lower")
            hi = np.quantile(reps, q_hi, axis=0, method="higher")
            lo[0] = hi[0] = 0.0
            self._band = (lo, hi)
        return self._band

    def bootstrap_info(self) -> dict | None:
        """How the band was made: ``method``, ``block_periods``, ``block_slots``, ``reps``, ``level``, ``seed``, ``periods``."""
        if getattr(self, "_info", None) is not None:
            return self._info
        bs = self.bootstrap()
        if bs is None:
            return None
        P = self.moments.phase_period
        return {
            "method": "circular block bootstrap over whole periods (arch.bootstrap.CircularBlockBootstrap)",
            "block_rule": "Politis-White (2004) automatic length, Patton-Politis-White (2009) correction "
                          f"(arch.bootstrap.optimal_block_length), max over self/cross per-period means at ages {bs.ages_for_block}, "
                          "and at least the periods covering 2L + 1 slots (a-step changes share a reading with those a slots away)",
            "block_periods": bs.block,
            "block_slots": bs.block * P,
            "reps": bs.reps,
            "level": self.level,
            "interval": "pointwise two-sided percentile",
            "seed": bs.seed,
            "periods": self.moments.periods,
        }

    def staleness(self, t):
        """Worst-phase staleness (R1) at ages `t` (slots): the point estimate, or the band's upper end with ``design="upper"``.

        Raises
        ------
        InvalidInputError
            If an age is beyond the ages estimated (``max_age``).
        """
        ts = as_slots(t, "t")
        if ts.size and int(np.max(ts)) > self.max_age:
            raise InvalidInputError(
                f"`t` = {int(np.max(ts))} slots is beyond the ages estimated from the readings (0..{self.max_age}); "
                "estimate the moments with a larger `max_age`"
            )
        out = self._table[ts]
        return float(out) if out.ndim == 0 else out

    @property
    def staleness_limit(self) -> float:
        """The largest staleness over the ages estimated (0..L): readings say nothing beyond L.

        With a daily or seasonal cycle the staleness has no limit; this is what the trade-off range's upper
        end uses (above it data of any tabulated age meets f̄).
        """
        return float(np.max(self._table))

    @property
    def staleness_rel_error(self) -> float:
        """Relative rounding error allowed for in the closed-form inverse: 1e-9.

        The per-slot sums are formed from ≤ n·(L + block) products of readings within [LO, HI]; the statistical
        error (the bootstrap band, typically 5–30 %) is many orders larger.  The margin makes the returned ε_C
        meet the tabulated staleness in exact arithmetic whenever the table's rounding error is below 1e-9 of it.
        """
        return 1e-9

    def phase_profile(self, t: int) -> dict:
        """Staleness at age `t` per phase (list of P values), the worst phase and the pooled (all slots) value."""
        (a,) = self.moments.check_ages([t])
        v = self._self_h[:, a], self._cross_h[:, a]
        per = v[1] + (v[0] - v[1]) / self.users
        pooled = self.moments.pooled([a])
        pool = float(pooled["cross"][0] + (pooled["self"][0] - pooled["cross"][0]) / self.users)
        worst = int(np.nanargmax(per)) if np.isfinite(per).any() else None
        return {"t": int(a), "per_phase": [None if not np.isfinite(x) else float(x) for x in per],
                "worst_phase": worst, "worst": float(self.point_table[a]), "pooled": pool}

    def summary(self, t: int, epsilon_c: float | None = None) -> dict:
        """Everything a report says about age `t` (slots): self, cross, staleness (point, band), noise, total."""
        (a,) = self.moments.check_ages([t])
        pooled = self.moments.pooled([a])
        band = self.band()
        prof = self.phase_profile(a)
        out = {
            "age": int(a),
            "self": float(pooled["self"][0]),
            "cross": float(pooled["cross"][0]),
            "staleness_pooled": prof["pooled"],
            "staleness_worst_phase": prof["worst"],
            "worst_phase": prof["worst_phase"],
            "phase_period": self.moments.phase_period,
            "staleness_lower": None if band is None else float(band[0][a]),
            "staleness_upper": None if band is None else float(band[1][a]),
            "design": self.design,
        }
        if epsilon_c is not None:
            out["noise"] = float(self.noise_variance(epsilon_c))
        return out
