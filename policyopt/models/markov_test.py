r"""Tests of the Markov premise: G² likelihood-ratio statistics per lag, parametric bootstrap, family-wise level.

Theorem 3 of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024 ("If the process {X_t} is Markovian …") composes the per-release risks with Δ(t) of eq. (12) only when
each user's state series X_t is a first-order Markov chain, or, for a richer model, when an augmented state Z_t is.
This module tests that premise on quantile-state series (states 0..K−1 on the slot grid, −1 where a slot has no
reading).

**Statistic.**  For a lag ℓ ≥ 1 and a context C_t, H0: X_{t+1} ⊥ X_{t−ℓ} | C_t is tested with the G² (likelihood
ratio) statistic of conditional independence, summed over independent users u (T. W. Anderson, L. A. Goodman,
"Statistical inference about Markov chains", Ann. Math. Statist. 28(1), 1957; P. Billingsley, "Statistical methods
in Markov chains", Ann. Math. Statist. 32(1), 1961):

    G²(ℓ) = 2 Σ_u Σ_{c,a,y} n_u(c,a,y) ln[ n_u(c,a,y) n_u(c,·,·) / (n_u(c,a,·) n_u(c,·,y)) ],          (G2)

n_u(c,a,y) = #{t : C_t = c, X_{t−ℓ} = a, X_{t+1} = y, all of them observed}, with degrees of freedom

    df(ℓ) = Σ_u Σ_c (r_c − 1)(s_c − 1),                                                                 (DF)

r_c, s_c the numbers of non-empty a and y margins in context c (the usual correction for structural zeros; a
context never seen contributes nothing).  Contexts: ``context_order=k`` gives C_t = (X_t, …, X_{t−k+1}) (lags
ℓ < k lie inside the context and are not tested); ``period=P`` with ``starts`` adds the public phase
φ_t = (starts_u + t) mod P (a time-inhomogeneous chain with a daily or weekly phase).  k = 1 without a period is the
first-order test: is the next state independent of the state ℓ slots back, given the current one?

**Reference distribution.**  A parametric bootstrap: R data sets simulated from the model under test (the caller
provides them), with the observed missing slots applied, and the same statistic on each.  Monte Carlo p-values
(1 + #{draws at least as extreme}) / (R + 1) (A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their
Application", Cambridge, 1997, Sec. 4.2.5) are valid for small counts, where the χ² approximation of G² is not.

**Family-wise level.**  Single-step max-T / min-p (P. H. Westfall, S. S. Young, "Resampling-Based Multiple Testing",
Wiley, 1993): each lag's G² is mapped by a fixed monotone transform that makes lags comparable, the χ² upper-tail
probability with df(ℓ) (in log space, :func:`chi2_logsf`), and m_j = min_ℓ of it on the observed set (j = 0) and on
each simulated set j = 1..R; p_family = (1 + #{j ≥ 1 : m_j ≤ m_0}) / (R + 1).  The transform is one function of a
data set applied to every set, and the R + 1 sets are exchangeable under the model, so the test is an exact Monte
Carlo test at every level, however poor the χ² approximation (it only decides how the lags are weighed).

**Computation (map-reduce).**  :func:`g2_profile` is the map step: it returns per-lag *sums* over the users given
(G², df, triples counted), so the profiles of disjoint groups of users add (:meth:`G2Profile.merge`) into the
profile of their union (to floating-point rounding of the G² sums); the reduce step :func:`markov_test_from_parts`
takes the observed profile and the R simulated ones.  A compiled kernel (numba, ``cache=True``, imported on first
use) works user by user: it sorts the user's valid times by context once, then for each lag counts each context's
K × K table, either directly (one increment per triple) or, when the user's non-empty contexts have few cells
(:data:`BITSET_COST_RATIO`), with bit sets of the slots per (context, next state) and per past state, counting a cell
by AND and popcount of 64 slots at a time.  No (users, lags, cells) array is ever formed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.models.empirical import states_matrix

__all__ = [
    "G2Profile",
    "FamilyWiseP",
    "MarkovTestResult",
    "g2_profile",
    "chi2_logsf",
    "family_wise_p",
    "markov_test",
    "markov_test_from_parts",
    "default_markov_lags",
    "describe_context",
    "BITSET_COST_RATIO",
    "WEEK_OF_HOURS",
]

#: A user's counts use bit sets when (non-empty contexts × K²) × ⌈T/64⌉ words ≤ this ratio × its triples, else one
#: increment per triple (the cost ratio of the two inner loops, measured on the project's 2-core machine; both give
#: the same counts).
BITSET_COST_RATIO = 2.0
#: Slots of a week of hourly slots: the default number of lags when the slot length is unknown.
WEEK_OF_HOURS = 168
#: Relative tolerance under which two transformed statistics count as tied (ties count against refutation).
_TIE_RTOL = 1e-12


# --------------------------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class G2Profile:
    """Per-lag G² sums over a group of users (the map step of the test; groups add).

    Attributes
    ----------
    lags : numpy.ndarray of int64, shape (L,)
        Lags ℓ (slots), increasing, each ≥ `context_order`.
    statistic : numpy.ndarray of float64, shape (L,)
        G²(ℓ) of eq. (G2) summed over the users (dimensionless, ≥ 0).
    df : numpy.ndarray of int64, shape (L,)
        df(ℓ) of eq. (DF) summed over the users.
    pairs : numpy.ndarray of int64, shape (L,)
        Triples (C_t, X_{t−ℓ}, X_{t+1}) counted, summed over the users.
    users : int
        Users summed.
    context_order : int
        k of the context (X_t, …, X_{t−k+1}).
    period : int or None
        P of the phase in the context, or None.
    """

    lags: np.ndarray
    statistic: np.ndarray
    df: np.ndarray
    pairs: np.ndarray
    users: int
    context_order: int = 1
    period: int | None = None

    def merge(self, other: "G2Profile") -> "G2Profile":
        """The profile of the union of two disjoint groups of users: every per-lag field added.

        Raises
        ------
        InvalidInputError
            If `other` is not a :class:`G2Profile` with the same lags, context order and period.
        """
        if not isinstance(other, G2Profile):
            raise InvalidInputError(f"`other` must be a G2Profile, got {fmt(other)}")
        if (not np.array_equal(self.lags, other.lags) or self.context_order != other.context_order
                or self.period != other.period):
            raise InvalidInputError(
                f"`other` has lags {fmt(other.lags.tolist())}, context order {other.context_order}, period "
                f"{other.period}; this profile has {fmt(self.lags.tolist())}, {self.context_order}, {self.period}: "
                "only profiles of the same test add")
        return _frozen_profile(self.lags, self.statistic + other.statistic, self.df + other.df,
                               self.pairs + other.pairs, self.users + other.users, self.context_order, self.period)

    __add__ = merge


@dataclass(frozen=True)
class FamilyWiseP:
    """A single-step max-T / min-p family-wise Monte Carlo p-value over lags (Westfall & Young 1993).

    Attributes
    ----------
    p_value : float
        (1 + #{j ≥ 1 : set j at least as extreme as the observed set}) / (R + 1), in [1/(R + 1), 1].
    pointwise : numpy.ndarray, shape (L,)
        Per lag, (1 + #{draws at least as extreme at that lag}) / (R + 1) (descriptive; not family-wise).
    worst : int or None
        Index (0-based) of the lag where the observed set is most extreme after the transform; None if no lag is
        informative.
    observed_extreme : float
        m_0 (``"chi2"``: the smallest log χ² upper-tail probability, nats) or T_0 (``"z"``: the largest z).
    draws_extreme : numpy.ndarray, shape (R,)
        m_j or T_j of the simulated sets.
    transform : str
        ``"chi2"`` or ``"z"``.
    """

    p_value: float
    pointwise: np.ndarray
    worst: int | None
    observed_extreme: float
    draws_extreme: np.ndarray
    transform: str


@dataclass(frozen=True)
class MarkovTestResult:
    """Verdict of :func:`markov_test`: observed G² per lag, family-wise and pointwise Monte Carlo p-values.

    Attributes
    ----------
    lags : numpy.ndarray of int64, shape (L,)
        Lags tested (slots).
    statistic, df, pairs : numpy.ndarray, shape (L,)
        Observed G²(ℓ), df(ℓ) and triples counted (summed over users).
    p_value : float
        Family-wise p (max-T / min-p over the lags).
    pointwise_p_values : numpy.ndarray, shape (L,)
        Monte Carlo p-value of each lag alone (descriptive).
    worst_lag : int or None
        Lag (slots) of the smallest observed χ² upper-tail probability; None when no lag has df > 0.
    refuted : bool
        ``p_value ≤ 1 − level``.
    level : float
        1 − the family-wise size of the test.
    draws : int
        R, simulated data sets.
    context : str
        What is conditioned on (:func:`describe_context`).
    method : str
        One sentence on the statistic, the context, the reference distribution and the correction.
    draw_statistic, draw_df : numpy.ndarray, shape (R, L)
        G²(ℓ) and df(ℓ) of each simulated set.
    log_sf : numpy.ndarray, shape (L,)
        ln of the χ² upper-tail probability of the observed G²(ℓ) with df(ℓ) (the transform; nats).
    users : int
        Users in the test.
    """

    lags: np.ndarray
    statistic: np.ndarray
    df: np.ndarray
    pairs: np.ndarray
    p_value: float
    pointwise_p_values: np.ndarray
    worst_lag: int | None
    refuted: bool
    level: float
    draws: int
    context: str
    method: str
    draw_statistic: np.ndarray = field(repr=False)
    draw_df: np.ndarray = field(repr=False)
    log_sf: np.ndarray = field(repr=False)
    users: int = 0

    def to_dict(self) -> dict:
        """JSON-ready fields: method, level, lags, statistic, p_value, worst_lag, refuted, pointwise_p_values, df,
        draws, context."""
        return {
            "method": self.method,
            "level": float(self.level),
            "lags": [int(v) for v in self.lags],
            "statistic": [float(v) for v in self.statistic],
            "p_value": float(self.p_value),
            "worst_lag": None if self.worst_lag is None else int(self.worst_lag),
            "refuted": bool(self.refuted),
            "pointwise_p_values": [float(v) for v in self.pointwise_p_values],
            "df": [int(v) for v in self.df],
            "draws": int(self.draws),
            "context": self.context,
        }


def _frozen_profile(lags, stat, df, pairs, users, k, period) -> G2Profile:
    arrs = [np.array(lags, dtype=np.int64), np.array(stat, dtype=np.float64), np.array(df, dtype=np.int64),
            np.array(pairs, dtype=np.int64)]
    for a in arrs:
        a.setflags(write=False)
    return G2Profile(*arrs, users=int(users), context_order=int(k), period=period)


# --------------------------------------------------------------------------------------------------------------------
# validation


def _check_int(v, name: str, lower: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lower:
        raise InvalidInputError(f"`{name}` must be an integer ≥ {lower}, got {fmt(v)}")
    return int(v)


def _check_context(context_order, period, starts, U: int, K: int):
    """(k, P or None, phase of column 0 per user (U,) int64) after validation."""
    k = _check_int(context_order, "context_order", 1)
    if K > 32767:
        raise InvalidInputError(f"`n_states`={K} is above 32767, the most the counting kernel stores; quantise into "
                                "fewer states")
    if period is None:
        if starts is not None:
            raise InvalidInputError(f"`starts` was given ({fmt(starts)}) without `period`: give `period` (slots) "
                                    "for a phase context, or drop `starts`")
        P = None
        phase0 = np.zeros(U, dtype=np.int64)
    else:
        P = _check_int(period, "period", 1)
        if starts is None:
            raise InvalidInputError(f"`period`={P} needs `starts`: the absolute slot index of column 0 of each "
                                    "user's row, shape (users,)")
        s = np.asarray(starts)
        if s.shape != (U,) or not (s.dtype.kind in "iu" or (s.dtype.kind == "f" and np.all(s == np.round(s)))):
            raise InvalidInputError(f"`starts` must be {U} integer slot indices (one per user), got {fmt(starts)}")
        phase0 = np.mod(s.astype(np.int64), P)  # φ at column 0; φ_t = (starts_u + t) mod P
    cells = float(K) ** k * (P or 1)
    if cells > 2.0**62:
        raise InvalidInputError(f"`context_order`={k} with {K} states and period {P} gives {cells:.3g} contexts, "
                                "more than 2^62: use a smaller context")
    return k, P, phase0


def _check_lags(lags, k: int, T: int) -> np.ndarray:
    """Sorted distinct lags, each in k..T − 2 (an int L means k..L)."""
    if isinstance(lags, (int, np.integer)) and not isinstance(lags, bool):
        L = int(lags)
        if L < k:
            raise InvalidInputError(f"`lags`={L} asks for lags {k}..{L}, which is empty: with `context_order`={k} "
                                    f"the lags below {k} are inside the context; give an integer ≥ {k}")
        out = np.arange(k, L + 1, dtype=np.int64)
    else:
        a = np.asarray(lags)
        if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
            raise InvalidInputError(f"`lags` must be an integer L (lags k..L) or a non-empty 1-D sequence of integer "
                                    f"lags, got {fmt(lags)}")
        out = np.sort(a.astype(np.int64))
        if np.any(np.diff(out) == 0):
            raise InvalidInputError(f"`lags` has repeated lags: {fmt(lags)}")
        if out[0] < k:
            raise InvalidInputError(
                f"`lags` contains {int(out[0])}, below `context_order`={k}: lags < {k} are inside the context "
                f"(X_t, …, X_(t−{k - 1})) and cannot be tested; give lags ≥ {k}")
    if out[-1] > T - 2:
        raise InvalidInputError(f"`lags` contains {int(out[-1])}, above T − 2 = {T - 2} for series of T = {T} slots "
                                "(a triple X_(t−ℓ), X_t, X_(t+1) must fit in the series)")
    return out


def _check_sim(sim, K: int, U: int, T: int, j: int) -> np.ndarray:
    """A simulated data set (U, T' ≤ T) of integers in −1..K−1, without copying integer arrays."""
    a = sim if isinstance(sim, np.ndarray) and sim.ndim == 2 and sim.dtype.kind in "iu" else states_matrix(sim, K)
    if a.ndim != 2 or a.shape[0] != U or a.shape[1] > T:
        raise InvalidInputError(f"`simulated` data set {j} has shape {a.shape}; expected ({U}, T') with T' ≤ {T} "
                                "(the observed users and slots)")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -1 or hi >= K:
            raise InvalidInputError(f"`simulated` data set {j} holds states {lo}..{hi}, outside 0..{K - 1} "
                                    "(−1 = missing)")
    if a.dtype not in (np.int8, np.int16, np.int32, np.int64):
        a = a.astype(np.int64)
    return a


def describe_context(context_order: int = 1, period: int | None = None) -> str:
    """Words for the context C_t: ``"the current state X_t"``, ``"the last 2 states X_t, X_(t−1)"``, plus the phase.

    Parameters
    ----------
    context_order : int
        k ≥ 1.
    period : int, optional
        P of the phase (slots).

    Returns
    -------
    str
    """
    k = int(context_order)
    if k == 1:
        text = "the current state X_t"
    elif k == 2:
        text = "the last 2 states X_t, X_(t−1)"
    else:
        text = f"the last {k} states X_t, …, X_(t−{k - 1})"
    if period is not None:
        text += f" and the phase (slot mod {int(period)})"
    return text


# --------------------------------------------------------------------------------------------------------------------
# the compiled kernel


def _g2_kernel(x, mask, K, k, P, phase0, lags, logs, bit_ratio, stat, df, pairs):  # pragma: no cover - compiled
    """Add each user's G²(ℓ) (eq. (G2)), df(ℓ) (eq. (DF)) and triples counted into stat, df, pairs (L,).

    x (U, T) states, −1 missing; mask (U, ≥ T): slot t of user u is missing also where mask[u, t] < 0.  K ≤ 32767
    states, context order k, period P (1: no phase), phase0 (U,) the phase of column 0, lags (L,) in k..T − 2,
    logs[i] = ln i (logs[0] unused), bit_ratio as BITSET_COST_RATIO.  Nothing is raised (numba).
    """
    U, T = x.shape
    L = lags.size
    KK = K * K
    W = (T + 63) // 64
    one = np.uint64(1)
    m1 = np.uint64(0x5555555555555555)
    m2 = np.uint64(0x3333333333333333)
    m4 = np.uint64(0x0F0F0F0F0F0F0F0F)
    h01 = np.uint64(0x0101010101010101)
    xm = np.empty(T, np.int16)
    codes = np.empty(T, np.int64)
    times = np.empty(T, np.int32)
    tab = np.zeros(KK, np.int64)  # one context's table, cell a·K + y
    tab2 = np.zeros(KK, np.int64)  # a second table for odd triples (breaks store-to-load chains)
    touched = np.empty(KK, np.int64)
    row = np.zeros(K, np.int64)  # n(c, a, ·)
    col = np.zeros(K, np.int64)  # n(c, ·, y)
    for u in range(U):
        for t in range(T):
            v = x[u, t]
            xm[t] = v if (v >= 0 and mask[u, t] >= 0) else -1
        # times t with the whole context (X_t, …, X_{t−k+1}) and X_{t+1} observed, with the context's code
        n = 0
        run = 0  # observed slots in a row ending at t
        for t in range(T - 1):
            if xm[t] >= 0:
                run += 1
            else:
                run = 0
            if run >= k and xm[t + 1] >= 0:
                code = 0
                for i in range(k):
                    code = code * K + xm[t - i]
                if P > 1:
                    code = code * P + (phase0[u] + t) % P  # φ_t = (starts_u + t) mod P
                codes[n] = code
                times[n] = t
                n += 1
        if n < 2:
            continue
        order = np.argsort(codes[:n], kind="mergesort")  # stable: times ascending within a context
        st = np.empty(n, np.int32)
        ys = np.empty(n, np.int16)
        first = np.empty(n + 1, np.int64)  # first[b]: start of context b in the sorted order
        nb = 0
        prev = -1
        for i in range(n):
            o = order[i]
            st[i] = times[o]
            ys[i] = xm[times[o] + 1]
            if codes[o] != prev:
                first[nb] = i
                nb += 1
                prev = codes[o]
        first[nb] = n
        # bit sets when their cost (cells × words) is below bit_ratio × the triples of direct counting
        bits = nb * KK * W <= bit_ratio * n
        NC = nb * K if bits else 0
        WB = W if bits else 0
        past = np.zeros((K, WB), np.uint64)  # bit t of past[a]: X_t = a
        shifted = np.zeros((K, WB), np.uint64)  # bit t of shifted[a]: X_{t−ℓ} = a
        cur = np.zeros((NC, WB), np.uint64)  # bit t of cur[b·K + y]: context b at t and X_{t+1} = y
        acc = np.zeros(NC * K, np.int64)  # acc[(b·K + y)·K + a] = n(b, a, y)
        if bits:
            for t in range(T):
                if xm[t] >= 0:
                    past[xm[t], t >> 6] |= one << np.uint64(t & 63)
            for b in range(nb):
                for i in range(first[b], first[b + 1]):
                    t = st[i]
                    cur[b * K + ys[i], t >> 6] |= one << np.uint64(t & 63)
        for j in range(L):
            ell = lags[j]
            g_u = 0.0
            d_u = 0
            p_u = 0
            if bits:
                q = ell >> 6
                r = ell & 63
                for a in range(K):
                    for w in range(WB):
                        if w < q:
                            shifted[a, w] = 0
                        else:
                            s = past[a, w - q] << np.uint64(r)
                            if r > 0 and w > q:
                                s |= past[a, w - q - 1] >> np.uint64(64 - r)
                            shifted[a, w] = s
                for c in range(NC):
                    cw = cur[c]
                    for a in range(K):
                        sw = shifted[a]
                        tot = np.uint64(0)
                        for w in range(q, WB):
                            v = cw[w] & sw[w]  # popcount (SWAR; LLVM vectorises it)
                            v = v - ((v >> one) & m1)
                            v = (v & m2) + ((v >> np.uint64(2)) & m2)
                            v = (v + (v >> np.uint64(4))) & m4
                            tot += (v * h01) >> np.uint64(56)
                        acc[c * K + a] = np.int64(tot)
            for b in range(nb):
                m = 0
                N = 0
                lo = first[b]
                hi = first[b + 1]
                if bits:
                    for y in range(K):
                        for a in range(K):
                            v = acc[(b * K + y) * K + a]
                            if v > 0:
                                cell = a * K + y
                                tab[cell] = v
                                touched[m] = cell
                                m += 1
                                N += v
                elif hi - lo < KK:  # a sparse context: note the cells as they are touched
                    for i in range(lo, hi):
                        t = st[i]
                        if t < ell:
                            continue
                        a = xm[t - ell]
                        if a < 0:
                            continue
                        cell = a * K + ys[i]
                        if tab[cell] == 0:
                            touched[m] = cell
                            m += 1
                        tab[cell] += 1
                        N += 1
                else:  # a dense context: two tables in turn, then one pass over the K² cells
                    i = lo
                    while i < hi and st[i] < ell:
                        i += 1
                    while i + 1 < hi:
                        a = xm[st[i] - ell]
                        a2 = xm[st[i + 1] - ell]
                        if a >= 0:
                            tab[a * K + ys[i]] += 1
                        if a2 >= 0:
                            tab2[a2 * K + ys[i + 1]] += 1
                        i += 2
                    if i < hi:
                        a = xm[st[i] - ell]
                        if a >= 0:
                            tab[a * K + ys[i]] += 1
                    for cell in range(KK):
                        v = tab[cell] + tab2[cell]
                        tab2[cell] = 0
                        tab[cell] = v
                        if v > 0:
                            touched[m] = cell
                            m += 1
                            N += v
                p_u += N
                if m >= 2:
                    rc = 0
                    sc = 0
                    for i in range(m):
                        cell = touched[i]
                        a = cell // K
                        y = cell - a * K
                        if row[a] == 0:
                            rc += 1
                        row[a] += tab[cell]
                        if col[y] == 0:
                            sc += 1
                        col[y] += tab[cell]
                    g = 0.0
                    for i in range(m):
                        cell = touched[i]
                        a = cell // K
                        y = cell - a * K
                        v = tab[cell]
                        # eq. (G2): n ln[n n(c,·,·) / (n(c,a,·) n(c,·,y))]; exactly 0 where the integers agree
                        if v * N != row[a] * col[y]:
                            g += v * (logs[v] + logs[N] - logs[row[a]] - logs[col[y]])
                    if g > 0.0:  # a context's G² is ≥ 0; drop rounding below it
                        g_u += g
                    d_u += (rc - 1) * (sc - 1)  # eq. (DF)
                    for i in range(m):
                        cell = touched[i]
                        row[cell // K] = 0
                        col[cell % K] = 0
                for i in range(m):
                    tab[touched[i]] = 0
            stat[j] += 2.0 * g_u
            df[j] += d_u
            pairs[j] += p_u


@functools.cache
def _kernel():
    """The compiled :func:`_g2_kernel` (numba imported and the kernel loaded from its cache on first use)."""
    from numba import njit

    return njit(cache=True, nogil=True)(_g2_kernel)


def _accumulate(x: np.ndarray, mask: np.ndarray, K: int, k: int, P: int | None, phase0: np.ndarray, lags: np.ndarray,
                out: tuple) -> None:
    """Run the kernel on checked arrays, adding into `out` = (stat, df, pairs)."""
    T = x.shape[1]
    with np.errstate(divide="ignore"):
        logs = np.log(np.arange(T + 1, dtype=np.float64))
    logs[0] = 0.0
    if not mask.flags.c_contiguous:
        mask = np.ascontiguousarray(mask)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    _kernel()(x, mask, int(K), int(k), int(P or 1), phase0, lags, logs, float(BITSET_COST_RATIO), *out)


# --------------------------------------------------------------------------------------------------------------------
# public functions


def g2_profile(states, n_states: int, lags, *, context_order: int = 1, period: int | None = None, starts=None,
               observed=None) -> G2Profile:
    """G²(ℓ) and df(ℓ) of the conditional-independence test at each lag, summed over users (the map step).

    Parameters
    ----------
    states : array_like, shape (U, T)
        Quantile-state series as :func:`~policyopt.models.empirical.states_matrix` takes them: states 0..K−1 on
        consecutive slots, −1 (or NaN) where a slot is missing.
    n_states : int
        K ≥ 2.
    lags : int or sequence of int
        An integer L tests lags k..L (k = `context_order`); a sequence gives the lags (slots) themselves, distinct,
        each in k..T − 2.
    context_order : int
        k ≥ 1: the context is (X_t, …, X_{t−k+1}).
    period : int, optional
        P ≥ 1 (slots): add the phase φ_t = (starts_u + t) mod P to the context.
    starts : array_like of int, shape (U,), optional
        Absolute slot index of column 0 of each user's row; required with `period`, refused without it.
    observed : array_like, shape (U, T_obs), optional
        Series whose missing slots (−1) are also missing in `states` (the observed data when `states` is a
        simulated data set); `states` then has at most T_obs columns.

    Returns
    -------
    G2Profile
        Per-lag sums over the users; the profiles of disjoint groups of users add (:meth:`G2Profile.merge`).

    Raises
    ------
    InvalidInputError
        Bad `states` or `n_states`; `lags` empty, repeated, below k or above T − 2; `context_order` < 1; `period`
        without `starts` or `starts` without `period`; `starts` not one integer per user; `observed` of another
        number of users or fewer slots; more than 2^62 contexts.

    References
    ----------
    Anderson & Goodman (1957); Billingsley (1961), the G² test of Markov order.

    Examples
    --------
    >>> import numpy as np
    >>> from policyopt.models.markov_test import g2_profile
    >>> x = np.array([[0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1]])   # X_{t+1} is fixed by (X_t, X_{t−1})
    >>> prof = g2_profile(x, 2, [1])
    >>> prof.df.tolist(), prof.pairs.tolist(), round(float(prof.statistic[0]), 4)
    ([2], [10], 13.4602)
    """
    x = states_matrix(states, n_states)
    K = int(n_states)
    U, T = x.shape
    k, P, phase0 = _check_context(context_order, period, starts, U, K)
    if observed is None:
        mask = x
    else:
        mask = states_matrix(observed, n_states)
        if mask.shape[0] != U or mask.shape[1] < T:
            raise InvalidInputError(f"`observed` has shape {mask.shape}; `states` has {x.shape}: the same users and "
                                    "at least as many slots are needed")
        T = mask.shape[1]
    lg = _check_lags(lags, k, T)
    out = (np.zeros(lg.size), np.zeros(lg.size, dtype=np.int64), np.zeros(lg.size, dtype=np.int64))
    _accumulate(x, mask, K, k, P, phase0, lg, out)
    return _frozen_profile(lg, *out, U, k, P)


def chi2_logsf(statistic, df) -> np.ndarray:
    """ln Pr(χ²_df ≥ statistic), accurate far into the tail (no underflow to −inf).

    ``scipy.stats.chi2.logsf``'s own rule (ln of the survival function above the median, log1p of minus the cdf
    below) on ``scipy.special.chdtrc``/``chdtr`` — the same numbers without importing ``scipy.stats`` (about 1 s per
    process) — where it is above −600 nats; below, the upper incomplete gamma function in log
    space, ln Q(a, x) = −x + a ln x − ln Γ(a) + ln F(a, x) with a = df/2, x = statistic/2 and F the continued
    fraction of Γ(a, x) e^x x^{−a} (modified Lentz; W. H. Press et al., "Numerical Recipes", 3rd ed., Cambridge,
    2007, Sec. 6.2), which converges fast there (x > a + 1: a tail probability below e^−600 needs x far above a).  df = 0 gives 0 (probability 1: no evidence).

    Parameters
    ----------
    statistic : array_like
        G² values ≥ 0 (dimensionless).
    df : array_like of int
        Degrees of freedom ≥ 0, broadcastable with `statistic`.

    Returns
    -------
    numpy.ndarray
        ln of the upper-tail probability (nats, ≤ 0).
    """
    from scipy import special

    x = np.asarray(statistic, dtype=np.float64)
    d = np.asarray(df, dtype=np.float64)
    x, d = np.broadcast_arrays(x, d)
    out = np.zeros(x.shape)
    pos = d > 0
    if np.any(pos):
        xp, dp = np.maximum(x[pos], 0.0), d[pos]
        with np.errstate(divide="ignore"):
            out[pos] = np.where(xp > special.chdtri(dp, 0.5), np.log(special.chdtrc(dp, xp)),
                                np.log1p(-special.chdtr(dp, xp)))
    deep = pos & ~(out > -600.0)
    if np.any(deep):
        a = d[deep] / 2.0
        z = x[deep] / 2.0
        tiny = 1e-300
        b = z + 1.0 - a
        c = np.full(a.shape, 1.0 / tiny)
        dd = 1.0 / b
        h = dd.copy()
        for i in range(1, 2000):  # continued fraction of Γ(a, z) (modified Lentz)
            an = -i * (i - a)
            b = b + 2.0
            dd = an * dd + b
            dd = np.where(np.abs(dd) < tiny, tiny, dd)
            c = b + an / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            dd = 1.0 / dd
            step = dd * c
            h = h * step
            if np.all(np.abs(step - 1.0) < 1e-15):
                break
        out[deep] = -z + a * np.log(z) - special.gammaln(a) + np.log(h)  # ln Q(a, z) = ln[Γ(a, z)/Γ(a)], NR Sec. 6.2
    return out


def family_wise_p(observed, draws, *, transform: str = "chi2", df=None, draws_df=None) -> FamilyWiseP:
    """Family-wise Monte Carlo p-value over lags by the single-step max-T / min-p method (Westfall & Young 1993).

    The observed per-lag statistic (set j = 0) and R simulated ones (j = 1..R) are made comparable across lags by a
    monotone transform, reduced to one number per set, and ranked:

    * ``"chi2"``: τ_j(ℓ) = ln Pr(χ²_{df_j(ℓ)} ≥ s_j(ℓ)) (:func:`chi2_logsf`; df 0 gives 0), m_j = min_ℓ τ_j(ℓ),
      p = (1 + #{j ≥ 1 : m_j ≤ m_0}) / (R + 1);
    * ``"z"``: z_j(ℓ) = (s_j(ℓ) − mean_ℓ) / sd_ℓ with the mean and standard deviation of the R + 1 values at lag ℓ
      pooled (lags where all R + 1 values are equal are left out), T_j = max_ℓ z_j(ℓ),
      p = (1 + #{j ≥ 1 : T_j ≥ T_0}) / (R + 1).

    **Exactness.**  Each set's reduced value is the same function of that set (for ``"z"`` a function of the set and
    of the unordered collection of all R + 1 sets), so when the R + 1 sets are exchangeable — the observed data
    follow the simulated model — the rank of set 0 is uniform and Pr(p ≤ α) ≤ α for every α, with equality when
    α (R + 1) is an integer and there are no ties, whatever the quality of the χ² approximation (which only decides
    how the lags are weighed).  Ties (within a relative 1e-12) count against refutation.

    Parameters
    ----------
    observed : array_like, shape (L,)
        The statistic at each lag on the observed data (larger = more evidence against the model).
    draws : array_like, shape (R, L)
        The same statistic on R ≥ 1 simulated data sets.
    transform : {"chi2", "z"}
        The lag-wise transform.
    df : array_like of int, shape (L,)
        Degrees of freedom of the observed statistic per lag (required with ``"chi2"``).
    draws_df : array_like of int, shape (R, L), optional
        Degrees of freedom of each simulated set (``"chi2"``); default `df` for every set.

    Returns
    -------
    FamilyWiseP

    Raises
    ------
    InvalidInputError
        Shapes that disagree, R = 0, non-finite values, a bad `transform`, ``"chi2"`` without `df`, negative df.

    References
    ----------
    P. H. Westfall, S. S. Young, "Resampling-Based Multiple Testing", Wiley, 1993 (single-step min-p / max-T
    adjustment); A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge, 1997,
    Sec. 4.2.5 (Monte Carlo p-values).
    """
    s0 = np.asarray(observed, dtype=np.float64)
    if s0.ndim != 1 or s0.size == 0:
        raise InvalidInputError(f"`observed` must be a non-empty 1-D array (one value per lag), got {fmt(observed)}")
    L = s0.size
    sj = np.asarray(draws, dtype=np.float64)
    if sj.ndim != 2 or sj.shape[1] != L or sj.shape[0] < 1:
        raise InvalidInputError(f"`draws` must have shape (R ≥ 1, {L}), got shape {sj.shape}")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(sj))):
        raise InvalidInputError("`observed` and `draws` must be finite")
    R = sj.shape[0]
    if transform == "chi2":
        if df is None:
            raise InvalidInputError("`transform`='chi2' needs `df` (degrees of freedom per lag)")
        d0 = np.asarray(df)
        dj = d0[None, :] if draws_df is None else np.asarray(draws_df)
        if d0.shape != (L,) or dj.shape not in ((1, L), (R, L)):
            raise InvalidInputError(f"`df` must have shape ({L},) and `draws_df` ({R}, {L}), got {d0.shape} and "
                                    f"{np.shape(draws_df)}")
        if np.any(d0 < 0) or np.any(dj < 0):
            raise InvalidInputError(f"`df` and `draws_df` must be ≥ 0, got {fmt(d0.tolist())}")
        t0 = chi2_logsf(s0, d0)
        tj = chi2_logsf(sj, np.broadcast_to(dj, (R, L)))
        # smaller τ = more extreme: min-p
        m0 = float(np.min(t0))
        mj = np.min(tj, axis=1)
        tol = _TIE_RTOL * max(1.0, abs(m0))
        p = (1.0 + np.count_nonzero(mj <= m0 + tol)) / (R + 1.0)  # single-step min-p (Westfall & Young 1993)
        # per lag, (1 + #{τ_j ≤ τ_0}) / (R + 1) (Davison & Hinkley 1997, Sec. 4.2.5)
        point = (1.0 + np.sum(tj <= t0[None, :] + _TIE_RTOL * np.maximum(1.0, np.abs(t0))[None, :], axis=0)) / (R + 1.0)
        worst = int(np.argmin(t0)) if np.any(t0 < 0.0) else None
        return FamilyWiseP(float(p), point, worst, m0, mj, "chi2")
    if transform == "z":
        pooled = np.vstack([s0[None, :], sj])
        mean = pooled.mean(axis=0)
        sd = pooled.std(axis=0)
        live = ~np.all(pooled == pooled[:1], axis=0)  # lags where the R + 1 values differ
        # per lag, (1 + #{s_j ≥ s_0}) / (R + 1) (Davison & Hinkley 1997, Sec. 4.2.5)
        point = (1.0 + np.sum(sj >= s0[None, :] - _TIE_RTOL * np.maximum(1.0, np.abs(s0))[None, :], axis=0)) / (R + 1.0)
        if not np.any(live):
            return FamilyWiseP(1.0, point, None, -math.inf, np.full(R, -math.inf), "z")
        z = (pooled[:, live] - mean[live]) / sd[live]  # z_j(ℓ), pooled over the R + 1 sets
        tmax = z.max(axis=1)  # T_j = max_ℓ z_j(ℓ)
        t0 = float(tmax[0])
        tol = _TIE_RTOL * max(1.0, abs(t0))
        p = (1.0 + np.count_nonzero(tmax[1:] >= t0 - tol)) / (R + 1.0)  # single-step max-T (Westfall & Young 1993)
        worst = int(np.flatnonzero(live)[int(np.argmax(z[0]))])
        return FamilyWiseP(float(p), point, worst, t0, tmax[1:], "z")
    raise InvalidInputError(f"`transform` must be 'chi2' or 'z', got {fmt(transform)}")


def _lag_ranges(lags) -> str:
    """``[1, 2, 3, 7]`` → ``"1–3, 7"``."""
    parts, start, prev = [], None, None
    for t in [int(v) for v in lags] + [None]:
        if t is not None and prev is not None and t == prev + 1:
            prev = t
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = t
    return ", ".join(parts)


def markov_test_from_parts(observed: G2Profile, draws, *, level: float = 0.95) -> MarkovTestResult:
    """The reduce step of :func:`markov_test`: the verdict from the observed profile and R simulated ones.

    Parameters
    ----------
    observed : G2Profile
        :func:`g2_profile` of the observed data (merged over all groups of users).
    draws : sequence of G2Profile
        The same for each of R ≥ 1 simulated data sets (same users, lags and context, observed missing slots).
    level : float
        In (0, 1); refuted iff the family-wise p ≤ 1 − level.

    Returns
    -------
    MarkovTestResult

    Raises
    ------
    InvalidInputError
        Bad `level`, no draws, or a draw of another test (lags, context, users).
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if not isinstance(observed, G2Profile):
        raise InvalidInputError(f"`observed` must be a G2Profile, got {fmt(observed)}")
    draws = list(draws)
    if not draws:
        raise InvalidInputError("`draws` is empty: the test needs R ≥ 1 simulated data sets (19 for a verdict at "
                                "level 0.95)")
    for j, d in enumerate(draws):
        if (not isinstance(d, G2Profile) or not np.array_equal(d.lags, observed.lags) or d.users != observed.users
                or d.context_order != observed.context_order or d.period != observed.period):
            raise InvalidInputError(f"`draws` item {j} is not a G2Profile of the same test (lags, context, "
                                    f"{observed.users} users): {fmt(d)}")
    R = len(draws)
    stat = np.vstack([d.statistic for d in draws])
    ddf = np.vstack([d.df for d in draws])
    fw = family_wise_p(observed.statistic, stat, transform="chi2", df=observed.df, draws_df=ddf)
    lv = float(level)
    context = describe_context(observed.context_order, observed.period)
    lags = observed.lags
    method = (
        f"G² likelihood-ratio test (Anderson & Goodman 1957) of X_(t+1) independent of X_(t−ℓ) given {context}, "
        f"summed over {observed.users} users, at lags {_lag_ranges(lags)}; reference: parametric bootstrap of {R} "
        "data sets simulated from the model under test (same users, missing slots); family-wise over the lags by the "
        "single-step max-T/min-p method (Westfall & Young 1993) on the χ² upper-tail probability with df(ℓ): exact "
        f"Monte Carlo p-value (1 + #sets with min p ≤ observed)/({R} + 1), smallest possible {1 / (R + 1):.4g}"
    )
    return MarkovTestResult(
        lags=lags, statistic=observed.statistic, df=observed.df, pairs=observed.pairs, p_value=fw.p_value,
        pointwise_p_values=fw.pointwise, worst_lag=None if fw.worst is None else int(lags[fw.worst]),
        refuted=bool(fw.p_value <= 1.0 - lv + 1e-12), level=lv, draws=R, context=context, method=method,
        draw_statistic=stat, draw_df=ddf, log_sf=chi2_logsf(observed.statistic, observed.df), users=observed.users,
    )


def markov_test(observed_states, n_states: int, simulated, lags, *, level: float = 0.95, context_order: int = 1,
                period: int | None = None, starts=None) -> MarkovTestResult:
    """Test the Markov premise on state series against R data sets simulated from the model under test.

    G²(ℓ) (eq. (G2)) on the observed series and on each simulated data set (with the observed missing slots
    applied), then the family-wise max-T / min-p Monte Carlo p-value over the lags (:func:`family_wise_p` with the
    χ² transform).  The test is exact at every level when the observed data follow the model that simulated the
    sets, started as the observed series starts, and the missing slots do not depend on the states (the R + 1 sets
    are then exchangeable; see :func:`family_wise_p`); with a *fitted* model it is a parametric bootstrap test, whose
    size is measured in ``tests/benchmarks/bench_markov_test.py`` (4.5 % at level 0.95 for K = 3).  With many states
    per slot of data (K = 12 fitted on 4,380 slots), fitted chains make transitions unseen in the fit almost
    impossible, the simulated sets have fewer non-empty cells (df) than the data, and the test becomes conservative
    (no true chain refuted in 100 data sets; an order-2 chain still refuted in 8 of 10, through distant lags).

    Parameters
    ----------
    observed_states : array_like, shape (U, T)
        As :func:`~policyopt.models.empirical.states_matrix`: states 0..K−1, −1 missing.
    n_states : int
        K ≥ 2.
    simulated : array_like of shape (R, U, T') or iterable of R arrays (U, T')
        Data sets simulated from the model under test (e.g. :func:`~policyopt.models.empirical.simulate_chain_states`
        with one stream per user, :func:`~policyopt.models.empirical.user_streams`), T' ≤ T (columns beyond T' are
        missing); consumed one at a time, so a generator keeps one set in memory.  Simulation randomness only.
    lags : int or sequence of int
        As :func:`g2_profile` (an integer L: lags k..L).
    level : float
        1 − the family-wise size; refuted iff p ≤ 1 − level.
    context_order, period, starts
        The context, as :func:`g2_profile`.

    Returns
    -------
    MarkovTestResult

    Raises
    ------
    InvalidInputError
        As :func:`g2_profile`; `simulated` empty, a 2-D array, or a data set of another shape or with states
        outside −1..K−1; bad `level`.

    References
    ----------
    Anderson & Goodman (1957); Billingsley (1961); Westfall & Young (1993); Davison & Hinkley (1997), Sec. 4.2.5.
    """
    x = states_matrix(observed_states, n_states)
    K = int(n_states)
    U, T = x.shape
    k, P, phase0 = _check_context(context_order, period, starts, U, K)
    lg = _check_lags(lags, k, T)
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < float(level) < 1.0:
        raise InvalidInputError(f"`level` must be a probability strictly between 0 and 1, got {fmt(level)}")
    if isinstance(simulated, np.ndarray) and simulated.ndim != 3:
        raise InvalidInputError(f"`simulated` must be an array (R, U, T) or an iterable of (U, T) arrays, got an "
                                f"array of shape {simulated.shape}")

    def profile(arr, mask):
        """The G² profile of states `arr` (U, T), the observed states `mask`'s missing slots (< 0) applied (as
        :func:`g2_profile` with ``observed``)."""
        out = (np.zeros(lg.size), np.zeros(lg.size, dtype=np.int64), np.zeros(lg.size, dtype=np.int64))
        _accumulate(arr, mask, K, k, P, phase0, lg, out)
        return _frozen_profile(lg, *out, U, k, P)

    obs = profile(x, x)
    draws = [profile(_check_sim(sim, K, U, T, j), x) for j, sim in enumerate(simulated)]
    if not draws:
        raise InvalidInputError("`simulated` holds no data set: the test needs R ≥ 1 (19 for a verdict at level 0.95)")
    return markov_test_from_parts(obs, draws, level=level)


def default_markov_lags(slots_per_week: int | None, box_last_age: int, series_length: int) -> int:
    """Default number of lags L of the Markov test: a week of slots or the design box's last age, whichever is larger.

    L = max(slots_per_week (168 when None: hourly slots), box_last_age), at most T − 2 (a triple X_{t−ℓ}, X_t,
    X_{t+1} must fit), at least 1.  A week covers daily and weekly routines; the box's last age covers every Δ(t)
    the design uses (Zhang et al. 2024, Theorem 3).

    Parameters
    ----------
    slots_per_week : int or None
        Slots in a week (≥ 1), None when the slot length is unknown.
    box_last_age : int
        Largest age (slots, ≥ 0) at which the design uses Δ(t), e.g. A_max + S_max − 1.
    series_length : int
        T ≥ 1, slots of the longest series.

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        If an argument is not an integer in its range.
    """
    week = WEEK_OF_HOURS if slots_per_week is None else _check_int(slots_per_week, "slots_per_week", 1)
    age = _check_int(box_last_age, "box_last_age", 0)
    T = _check_int(series_length, "series_length", 1)
    return int(max(1, min(max(week, age), T - 2)))
