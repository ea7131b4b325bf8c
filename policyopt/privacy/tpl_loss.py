"""The temporal privacy loss function L(α) of a transition matrix (Cao et al. (2019), eq. (24)).

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (cited below as *Cao et al. (2019)*).  Privacy is in nats.  The row-pair geometry it is built from (Theorem 5's
prefixes, Algorithm 2's tables, Algorithm 4's envelope) is in :mod:`policyopt.privacy.tpl_envelope`; the
recursions BPL/FPL/TPL that use it are in :mod:`policyopt.privacy.tpl_leakage`, the supremum (Theorem 11) in
:mod:`policyopt.privacy.tpl_supremum`.

The privacy loss function of eq. (24) is::

    L(α) = max over ordered pairs (q, d) of distinct rows of P of
           max over x with e^{−α} ≤ x_j / x_k ≤ e^{α} of log (q·x)/(d·x)        (18)–(21)
         = max_{q,d} log [q⁺(e^α − 1) + 1] / [d⁺(e^α − 1) + 1]                  (24)

where q⁺, d⁺ are sums over the optimal index set of Theorem 5.  Every value is computed in log
space as log(Q + Q̄e^{−α}) − log(D + D̄e^{−α}) (Q̄ = 1 − Q, D̄ = 1 − D summed from the
complement), which is exact for any α ≥ 0: α = 1000 works, and a pair with D = 0, Q = 1 gives
exactly α (Theorem 7).

Paper errors and pitfalls handled here
--------------------------------------
* Algorithm 1, line 10, tests q_j/d_j ≤ f(α) in floating point.  For Example 4's matrix at
  α = 40 the ratio f(40) rounds to exactly q_1/d_1 = 5, the last index is removed and the
  public MATLAB code returns 0 instead of ≈ log 5; it returns NaN for α ≥ 710 (e^α overflows).
  Here the test is made in logs, log q_j − log d_j > log f(α), the index of largest ratio is never
  removed (f(S) is a mediant of the ratios in S and of (1 − Q)/(1 − D) < 1, so it is strictly
  below the largest ratio in S), and the value returned is the largest over all index sets the
  loop visits (each is a feasible point of (19)–(21), so this never overshoots).
* Algorithms 2 and 4: see :mod:`policyopt.privacy.tpl_envelope`.

Beyond the paper: one L(α) on a fresh matrix
--------------------------------------------
Algorithm 1 sorts the likelihood ratios of every ordered row pair (O(n³ log n)), and so does
the construction of the piecewise function (Algorithms 2 and 4).  :class:`LossFunction` builds
nothing until it is needed: :meth:`LossFunction.exact` on a fresh object bounds every pair's
value by 1 + uT (T its total variation, one pass of min and sum over the pairs i < j), rules
pairs out with Dinkelbach's test 1 − λ + u Σ(q_k − λd_k)⁺ ≤ 0 (one pass per pair, no sort),
and applies Theorem 5 (sorted prefixes) only to the pairs left, with the same result.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from policyopt.models.markov import validate_transition_matrix
from policyopt.privacy.tpl_envelope import (
    PRUNE_SEEDS,
    TINY_X,
    PairBounds,
    all_zero_prefixes,
    check_nonneg,
    envelope,
    envelope_small,
    log_f,
    pair_table,
    scan_list,
    scan_pairs,
)
from policyopt.privacy.tpl_prune import in_threads, prune_pairs

__all__ = ["LossFunction", "scalar_piecewise"]

_PRUNE_N = 160  # from this many states the envelope's pairs are first pruned on a grid of λ (tpl_prune)


def _disjoint_pair(P: np.ndarray) -> int | None:
    """Id i·n + j of an ordered pair of rows with disjoint supports (exact: counts of common positive entries), or None."""
    S = (P > 0.0).astype(float)
    common = S @ S.T  # integers below 2^53: exact
    np.fill_diagonal(common, 1.0)
    hit = np.flatnonzero(common.reshape(-1) < 0.5)
    return int(hit[0]) if hit.size else None


# ----------------------------------------------------------------------------------------
# The envelope on a bounded range [0, a_max] from the row pairs that can attain L there (beyond the paper)
# ----------------------------------------------------------------------------------------
#
# At α the maximiser of eq. (24) is a hull vertex supporting the direction λ* − 1, λ* = e^{L(α)}
# (Dinkelbach: it maximises Q − λ*D).  For α ≤ a_max, λ* ≤ Λ = e^{L(a_max)}, so only pairs whose
# φ_p(λ) = Σ_k (q_k − λd_k)⁺ = max over their prefixes of Q − λD reaches Φ(λ) = max_p φ_p(λ) for some
# λ ∈ [1, Λ] matter.  A lower bound Φ_S ≤ Φ comes from a few seed pairs (largest T); φ_p is convex
# and decreasing, so on [1, Λ] it lies below its chord from (1, T_p) to (Λ, φ_p(Λ)), and a pair whose
# chord is below Φ_S at 1, at Λ and at every breakpoint of Φ_S between them (the chord minus the
# piecewise-linear Φ_S is linear between breakpoints) cannot attain L on [0, a_max].  Two O(n³)
# passes without sorting (T, then φ_p(Λ) for the pairs whose T is not already below Φ_S(Λ)) leave a
# handful of pairs on typical matrices, whose tables give the same L as the full envelope there.

_RANGE_SLACK = 1e-6  # a range [0, a] is built for [0, a·(1 + slack)] (recursions overshoot by ulps)
_RANGE_MAX_LAMBDA = 4.0  # beyond Λ = e^{L(a_max)} ≈ 4 the range envelope is not tried (restrict builds the full one)
_RANGE_MAX_PAIRS = 256  # nor when more pairs than this (and than 2 % of all pairs) survive the tests


def _range_pairs(P: np.ndarray, bounds: PairBounds, lam_max: float):
    """Ids i·n + j of the ordered row pairs that can attain L(α) at some α with e^{L(α)} ≤ `lam_max`.

    Every comparison is made with a margin that covers its rounding, so a pair is dropped only if
    it provably cannot attain the maximum of eq. (24) there.  Returns (ids, chain): ``chain`` is
    the candidate chain (x, y, pair id) of exactly those pairs when it was formed on the way
    (only the seed pairs survive), else None.
    """
    n, flat, tv = bounds.n, bounds.flat, bounds.tv
    if flat.size == 0 or not lam_max > 1.0:
        return flat[:0], None
    k = min(PRUNE_SEEDS, flat.size)
    if k == flat.size:
        return flat, None
    seeds = np.argpartition(-tv, k - 1)[:k]
    f = flat[seeds]
    sx, sy, sp, _ = scan_list(P, f // n, f % n)  # the seeds' hull: Φ_S(λ) = max(0, max_v y_v − (λ − 1)x_v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hx, hy = np.concatenate([[0.0], sx]), np.concatenate([[0.0], sy])
        lam_b = 1.0 + np.diff(hy) / np.diff(hx)  # breakpoints of Φ_S (edge slopes + 1)
    lam = np.concatenate([[1.0], lam_b[(lam_b > 1.0) & (lam_b < lam_max)], [lam_max]])
    u = np.finfo(float).eps
    # Φ_S at the grid, minus its rounding (prefix sums: n + 2 ulps of each term; the subtraction: 4)
    phi_s = np.max(hy[None, :] - (lam[:, None] - 1.0) * hx[None, :], axis=1)
    phi_s -= 4.0 * (n + 8) * u * (1.0 + lam)
    # Pairs with T_p ≤ Φ_S(Λ) lie below Φ_S on all of [1, Λ] (φ_p ≤ T_p, Φ_S decreasing).
    is_seed = np.zeros(flat.size, dtype=bool)
    is_seed[seeds] = True
    cand = np.flatnonzero((tv > phi_s[-1]) & ~is_seed)
    if cand.size == 0:
        return f, (sx, sy, sp)
    # φ_p(Λ), an upper bound (rounding covered)
    if cand.size * n <= _PHI_DIRECT or cand.size * 4 <= flat.size:  # Σ(q − Λd)⁺ per listed pair, inflated as in PairBounds.loss
        phi_l = bounds._psi(cand, P * (1.0 + 8.0 * u), P * (lam_max * (1.0 - 8.0 * u)))
        phi_l = phi_l * (1.0 + (n + 2) * u) + n * 2.0 ** -1074
    else:  # all ordered pairs by Σq − Σ min(q, Λd), row blocks and BLAS sums (no gathers)
        phi_l = _phi_all(P, lam_max)[flat[cand]]
    t = tv[cand]
    slope = (phi_l - t) / (lam_max - 1.0)
    if cand.size * lam.size <= _CHORD_BLOCK:  # chord > Φ_S somewhere on the grid, all at once
        chord = t[:, None] + (lam[None, :] - 1.0) * slope[:, None]
        keep = np.any(chord + 4.0 * u * (t[:, None] + np.abs(chord)) > phi_s[None, :], axis=1)  # chord's rounding
    else:  # one grid point at a time (O(pairs) memory)
        keep = np.zeros(cand.size, dtype=bool)
        for lam_e, phi_e in zip(lam.tolist(), phi_s.tolist()):
            chord = t + (lam_e - 1.0) * slope
            keep |= chord + 4.0 * u * (t + np.abs(chord)) > phi_e
    if not keep.any():
        return f, (sx, sy, sp)
    return np.concatenate([f, flat[cand[keep]]]), None


_PHI_DIRECT = 1 << 17  # up to this many entries (or a quarter of the pairs) φ_p(Λ) is summed per listed pair;
# beyond, for all pairs by row blocks (a gather per pair costs about 4 blocked entries)
_PHI_BLOCK = 1 << 18  # matrix entries per work block of _phi_all (2 MiB)
_CHORD_BLOCK = 1 << 18  # up to this many (pair, grid point) chord tests at once


def _phi_all(P: np.ndarray, lam: float) -> np.ndarray:
    """Upper bounds of φ_ij(λ) = Σ_k (P_ik − λP_jk)⁺ for all ordered pairs, flattened (index i·n + j).

    Computed as Σ_k P_ik − Σ_k min(P_ik, λP_jk) (one minimum and one BLAS sum per entry, in row
    blocks); the absolute rounding error of the two sums and of λP_jk, at most (2n + 8)·u·(1 + λ),
    is added.
    """
    n = P.shape[0]
    ones = np.ones(n)
    rows = P @ ones
    lp = P * lam
    out = np.empty((n, n))
    per = max(1, _PHI_BLOCK // n)

    def fill(part):
        """Σ_k min(P_ik, λP_jk) for the rows i of this part (each worker its own buffer)."""
        buf = np.empty((min(per, n), n))
        for i in part:
            for s in range(0, n, per):
                e = min(n, s + per)
                b = buf[: e - s]
                np.minimum(P[i], lp[s:e], out=b)
                out[i, s:e] = b @ ones

    in_threads(fill, range(n), n)
    np.subtract(rows[:, None], out, out=out)
    out += (2 * n + 8) * np.finfo(float).eps * (1.0 + lam)
    np.maximum(out, 0.0, out=out)
    return out.reshape(-1)


class _RangeEnvelope:
    """Algorithm 2's tables and Algorithm 4's envelope of the pairs that can attain L on [0, cap].

    Use :meth:`build`, which returns None where the full envelope is the better buy."""

    @classmethod
    def build(cls, loss: "LossFunction", a_max: float):
        """The range envelope, or None if [0, a_max] needs too many pairs (then build the full one)."""
        cap = a_max * (1.0 + _RANGE_SLACK) + 1e-300
        bounds = loss._bounds
        # Λ ≥ e^{L(cap)}: L(α) ≤ α (Remark 1) and e^{L(α)} ≤ 1 + (e^α − 1)·max T (see PairBounds)
        t_max = float(bounds.tv.max()) if bounds.tv.size else 0.0
        if cap > 700.0:  # e^cap would overflow; Λ is far beyond _RANGE_MAX_LAMBDA anyway (unless T ≈ 0)
            return None
        lam_max = min(math.exp(cap), 1.0 + math.expm1(cap) * t_max) * (1.0 + 1e-9)
        if lam_max > _RANGE_MAX_LAMBDA:  # the chord test prunes little this far from λ = 1
            return None
        pairs, chain = _range_pairs(loss.P, bounds, lam_max)
        if pairs.size > max(_RANGE_MAX_PAIRS, bounds.flat.size // 50):
            return None
        return cls(loss, cap, lam_max, pairs, chain)

    def __init__(self, loss: "LossFunction", cap: float, lam_max: float, pairs: np.ndarray, chain):
        P, n = loss.P, loss.P.shape[0]
        self.cap = cap
        if pairs.size:
            cx, cy, cp = chain if chain is not None else scan_list(P, pairs // n, pairs % n)[:3]
            # Only the vertices supporting a direction λ − 1 ≤ Λ − 1 can be a maximiser on [0, cap]:
            # a vertex supports the slopes between those of its right and left edges.
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                right = np.append(np.diff(cy) / np.diff(cx), 0.0)  # slope of the edge to the right
            need = right <= (lam_max - 1.0) * (1.0 + 1e-9)
            first = int(np.argmax(need))  # from the first such vertex on (slopes decrease)
            # the vertex before is kept too: its right edge's slope may be rounded just above Λ − 1
            rel = np.unique(cp[max(first - 1, 0):])
            x0 = cx[max(first - 1, 0)]
        else:
            rel = pairs
        self.tables = [t for p in rel.tolist() if (t := pair_table(P, p // n, p % n, with_points=False))]
        cand = LossFunction._candidate_rows(self.tables, unique=False)  # duplicates are inert in envelope
        if pairs.size and cand.shape[0]:
            # Prefixes below the chain (by more than rounding) are no maximiser for any λ, and those
            # left of the needed vertices only for λ > Λ: both dropped.
            x, y = cand[:, 2], cand[:, 4]
            on = (x < TINY_X) | (y >= np.interp(x, cx, cy) * (1.0 - 1e-9))
            cand = cand[on & (x >= x0 * (1.0 - 1e-12))]
        self.cand = cand
        env = envelope_small if cand.shape[0] <= _SMALL_ENVELOPE else envelope
        self.breakpoints, self.seg = env(self.cand, stop=self.cap)


_SMALL_ENVELOPE = 24  # up to this many candidates, Algorithm 4 runs in plain floats (no numpy overhead)


class LossFunction:
    """Temporal privacy loss function L(α) of a transition matrix (eq. 24).

    Parameters
    ----------
    P : array_like, shape (n, n)
        Backward (``P_B``, ``P[j, k] = Pr(l^{t−1} = k | l^t = j)``) or forward (``P_F``,
        ``Pr(l^{t+1} = k | l^t = j)``) transition matrix; rows must sum to 1 within 1e-9.
    name : str
        Argument name used in error messages (e.g. ``"P_B"``).

    Attributes
    ----------
    P : numpy.ndarray, shape (n, n)
        The validated matrix.
    pairs : list
        Algorithm 2's tables (``qM``, ``dM``, ``aM`` rows) for the ordered row pairs that have
        some q_k > d_k; empty when all rows are identical.  Built on first access (O(n^2) tables).
    breakpoints, segment_Q, segment_D : numpy.ndarray, shape (m,)
        The piecewise representation of L (Algorithm 4): on [breakpoints[s], breakpoints[s+1])
        L(α) = log f_{Q,D}(α) with Q = segment_Q[s], D = segment_D[s]; ``breakpoints[0] = 0``.
        Empty when L ≡ 0.  Built on first access, together with the tables of the pairs that
        can attain the maximum (as are :meth:`piecewise` and :meth:`per_pair`); a fresh object
        answers :meth:`exact` without building them.
    is_zero : bool
        Theorem 6: all rows identical, L ≡ 0.
    is_identity : bool
        Some two rows have disjoint supports, so L(α) = α: with S the support of q, Q = 1 and D = 0
        in eq. (24).  Theorem 7's condition q_i = 1, d_i = 0 is the case S = {i}; disjoint supports
        are also necessary (beyond the paper: L(α) = α at one α > 0 forces Q = 1, D = 0).

    Raises
    ------
    InvalidModelError
        If `P` is not a square stochastic matrix (see :class:`policyopt.models.markov.MarkovChain`).

    Notes
    -----
    Three evaluations are provided and agree to ~1e-12 (tests: 1e-9): :meth:`exact`
    (Theorem 5 / Algorithm 1), :meth:`piecewise` (Theorems 8–10 / Algorithms 2, 4, 5, binary
    search) and :meth:`lp` (the linear-fractional program (19)–(21) by Charnes–Cooper,
    solved by HiGHS; slow, for checks).  :meth:`per_pair` is Algorithm 3.  Remark 1:
    0 ≤ L(α) ≤ α; L is non-decreasing.

    References
    ----------
    Cao et al. (2019): eqs. (18)–(25), Theorems 5–10, Corollaries 2–3, Algorithms 1–5, Example 4.

    Examples
    --------
    >>> L = LossFunction([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]])
    >>> round(float(L.piecewise(40.0)), 12) == round(float(np.log(5.0)), 12)
    True
    """

    def __init__(self, P, name: str = "P"):
        self._name = name
        self.P = validate_transition_matrix(P, name)
        self.is_zero = bool(np.all(self.P == self.P[0]))  # Theorem 6: no pair has some q_k > d_k
        # Theorem 7, generalised: two rows with disjoint supports (S = supp q gives Q = 1, D = 0); the
        # id i·n + j of one such ordered pair, or None
        self._disjoint_pair = _disjoint_pair(self.P)
        self.is_identity = self._disjoint_pair is not None
        self._pairs = None
        # Built on first use: the pair bounds (one O(n³) pass, see PairBounds) for a single
        # L(α), and Algorithm 2's tables plus the envelope (Algorithm 4) for everything else.
        self._bounds_cache = None
        self._env = None
        self._scalar_fn = None  # scalar_piecewise's plain-float evaluator, built on first use
        self._range = None  # envelope of the pairs that can attain L on [0, cap] (see restrict)

    @property
    def _bounds(self) -> PairBounds:
        if self._bounds_cache is None:
            self._bounds_cache = PairBounds(self.P)
        return self._bounds_cache

    def _built(self) -> dict:
        """Algorithm 2's tables of the chain-vertex pairs, the candidate rows and the envelope."""
        if self._env is None:
            env = {}
            n = self.P.shape[0]
            rel = None
            if self._disjoint_pair is not None:  # L(α) = α: one pair's sub-function (Q = 1, D = 0) is the envelope
                rel = np.array([self._disjoint_pair])  # (every other pair's φ_p ≤ Σ_k q_k = 1 = this pair's φ)
                env["zero_cand"] = None  # formed over all pairs when supremum() asks for it
            elif n >= _PRUNE_N:  # bound and prune the pairs on a grid of λ first (tpl_prune), no sorting
                rel = prune_pairs(self.P, scan_list)
                if rel is not None:
                    rel = np.unique(scan_list(self.P, rel // n, rel % n)[2])
                    env["zero_cand"] = None  # formed over all pairs when supremum() asks for it
            if rel is None:
                rel, env["zero_cand"] = scan_pairs(self.P)
            # Algorithm 2's tables, only for the pairs that own a vertex of the candidate chain (the
            # others never attain the maximum of eq. 24 at any α; see _upper_chain); all pairs: `pairs`.
            env["tables"] = [t for p in rel.tolist() if (t := pair_table(self.P, p // n, p % n))]
            env["cand"] = self._candidate_rows(env["tables"])  # (Q, Q̄, D, D̄, Q − D) of eq. (25): qM, dM
            env.update(zip(("breakpoints", "seg"), envelope(env["cand"])))
            self._env = env
        return self._env

    @property
    def _tables(self) -> list:
        return self._built()["tables"]

    @property
    def _cand(self) -> np.ndarray:
        return self._built()["cand"]

    @property
    def _seg(self) -> np.ndarray:
        return self._built()["seg"]

    @property
    def _zero_cand(self) -> np.ndarray:
        env = self._built()
        if env["zero_cand"] is None:
            env["zero_cand"] = all_zero_prefixes(self.P)
        return env["zero_cand"]

    @property
    def breakpoints(self) -> np.ndarray:
        """Start of each segment of the piecewise L (Algorithm 4), shape (m,), nats; built on first use."""
        return self._built()["breakpoints"]

    def _segment_column(self, col: int) -> np.ndarray:
        """Column `col` of the candidate rows (Q, Q̄, D, D̄, Q − D) of eq. (25) at each segment, shape (m,)."""
        env = self._built()
        return env["cand"][env["seg"], col] if env["seg"].size else np.zeros(0)

    @property
    def segment_Q(self) -> np.ndarray:
        """q⁺ of the sub-function of each segment (eq. 25), shape (m,)."""
        return self._segment_column(0)

    @property
    def segment_D(self) -> np.ndarray:
        """d⁺ of the sub-function of each segment (eq. 25), shape (m,)."""
        return self._segment_column(2)

    def restrict(self, alpha_max: float) -> "LossFunction":
        """Declare that L will be evaluated on [0, `alpha_max`] by the recursions (a speed hint).

        Until the full envelope is built (by :meth:`piecewise`, :meth:`per_pair` or the envelope
        attributes), :func:`leakage` and the allocators evaluate L with the envelope of only the
        row pairs that can attain L(α) for some α ≤ `alpha_max` (two O(n³) passes without sorting
        select them; see ``_range_pairs``), which has the same values there.  Where that would
        keep many pairs (e^{L(alpha_max)} may exceed 4, or more than 2 % of the pairs survive), the
        full envelope is built instead.  A later α beyond the range builds the full envelope, so the
        hint never changes a value of L.  (The proven rounding margin of :func:`leakage_upper` counts
        the sub-functions actually evaluated, so it usually shrinks after the hint and may differ by a
        rounding-size amount either way.)

        Parameters
        ----------
        alpha_max : float
            Largest α (nats) expected, finite and ≥ 0.

        Returns
        -------
        LossFunction
            self.

        Raises
        ------
        InvalidInputError
            If `alpha_max` is negative, non-finite or not numeric.
        """
        a = float(check_nonneg(alpha_max, "alpha_max", scalar=True))
        if self._env is None and not (self.is_identity or self.is_zero):
            if self._range is None or self._range.cap < a:
                self._range = _RangeEnvelope.build(self, a)
                if self._range is None:
                    self._built()  # the range needs most pairs: the full envelope (Algorithm 4)
                self._scalar_fn = None
        return self

    @staticmethod
    def _candidate_rows(tables, unique: bool = True) -> np.ndarray:
        if not tables:
            return np.zeros((0, 5))
        cand = np.concatenate([np.stack([t.Q, t.Qc, t.D, t.Dc, np.cumsum(t.q - t.d)], axis=1) for t in tables])
        return np.unique(cand, axis=0) if unique else cand

    @property
    def pairs(self) -> list:
        """Algorithm 2's tables of every ordered pair with some q_k > d_k (built on first use)."""
        if self._pairs is None:
            n = self.P.shape[0]
            self._pairs = [t for i in range(n) for j in range(n) if i != j if (t := pair_table(self.P, i, j))]
        return self._pairs

    def __repr__(self) -> str:
        return f"LossFunction(n_states={self.P.shape[0]}, n_segments={self.breakpoints.size})"

    # -- evaluations ----------------------------------------------------------------------------
    def _alpha(self, alpha, name="tpl_level"):
        return check_nonneg(alpha, name)

    def _finish(self, alpha, value):
        out = np.clip(value, 0.0, alpha)  # Remark 1: 0 ≤ L(α) ≤ α
        if self.is_identity:
            out = np.array(alpha, dtype=float, copy=True)  # Theorem 7: L(α) = α
        return float(out) if np.ndim(out) == 0 else out

    def exact(self, alpha):
        """L(α) by Theorem 5 / Algorithm 1, one linear-fractional program per row pair.

        Parameters
        ----------
        alpha : float or array_like
            Previous BPL α^B_{t−1} (or next FPL α^F_{t+1}), nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.

        Notes
        -----
        Algorithm 1 (Cao et al. 2019) with a robust test: inequality (22) is checked in logs,
        log q_j − log d_j > log f(α) (log f formed as in eq. 24's log-space form), the index of largest ratio is never removed
        (Corollary 2 and the mediant argument in the module docstring), and the value is the
        largest over the index sets visited (all feasible for (19)–(21)).  Only the row pairs
        owning a vertex of the candidate chain (see ``_upper_chain``) are run: every other pair's
        value is at most theirs at every α, so the maximum of eq. (24) is unchanged.

        Before those tables exist (a fresh object: :meth:`piecewise`, :meth:`per_pair` and the
        envelope attributes build them), each α is evaluated directly, without building them:
        every ordered pair gets the bounds 1 + uT and (R − 1 + uRT)/(R − 1 + uT) on its value
        e^{L} (u = e^α − 1, T = Σ(q_k − d_k)⁺, R = max q_k/d_k; both follow from Q − D ≤ T and
        Q ≤ RD for every index set), and Theorem 5's maximum over the sorted prefixes is taken
        only for the pairs whose bound reaches the best value found so far.  Same result (the
        pruned pairs cannot attain the maximum), O(n³) without sorting instead of O(n³ log n).
        """
        if (type(alpha) is float and 0.0 < alpha < math.inf and self._env is None
                and not (self.is_identity or self.is_zero)):  # one α on a fresh object: the bounds' search only
            return min(max(self._bounds.loss(alpha), 0.0), alpha)  # Remark 1: 0 ≤ L(α) ≤ α
        a = self._alpha(alpha)
        flat = a.reshape(-1)
        best = np.zeros(flat.size)
        if self.is_identity or self.is_zero:  # Theorems 6–7: nothing to search
            return self._finish(a, best.reshape(a.shape))
        if self._env is None:  # no tables built: Theorem 5 directly on the pairs the bounds keep
            vals = {x: (self._bounds.loss(x) if x > 0 else 0.0) for x in set(flat.tolist())}
            best = np.array([vals[x] for x in flat.tolist()])
            return self._finish(a, best.reshape(a.shape))
        for t in self._tables:
            K = t.q.size
            with np.errstate(divide="ignore"):
                log_ratio = np.log(t.q) - np.log(t.d)  # +inf where d_j = 0
            m = np.full(flat.size, K)  # Algorithm 1 lines 3–4: start from all q_j > d_j
            val = log_f(t.Q[m - 1], t.Qc[m - 1], t.D[m - 1], t.Dc[m - 1], flat)
            cur = val
            for _ in range(K):
                # Inequality (22), q_j/d_j > f(α), compared in logs: log f is formed in log space
                # (eq. 24), and products of subnormal entries with e^{−α} would underflow.
                keep = log_ratio[None, :] > cur[:, None]
                keep[:, 0] = True  # the largest ratio always satisfies (22)
                keep &= np.arange(K)[None, :] < m[:, None]
                new_m = np.maximum(keep.sum(axis=1), 1)  # Algorithm 1 line 11: drop the failing pairs
                if np.array_equal(new_m, m):
                    break
                m = new_m
                cur = log_f(t.Q[m - 1], t.Qc[m - 1], t.D[m - 1], t.Dc[m - 1], flat)
                val = np.maximum(val, cur)
            best = np.maximum(best, val)  # eq. (24): max over pairs (Algorithm 1 line 13)
        return self._finish(a, best.reshape(a.shape))

    def per_pair(self, alpha):
        """L(α) by Algorithm 3: per-pair tables of Algorithm 2 and a binary search per pair.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.

        Notes
        -----
        Algorithm 3 line 5 prints log[(qArr[k](e^α − 1) + 1)/(qArr[k](e^{α_{k−1}} − 1) + 1)];
        the denominator must be dArr[k](e^α − 1) + 1 (eq. 25), which is what is computed.
        The neighbouring sub-functions are also evaluated (every one is a feasible value), so
        rounding in the transition points cannot move the result.  As in :meth:`exact`, only
        the pairs owning a vertex of the candidate chain are searched.
        """
        a = self._alpha(alpha)
        flat = a.reshape(-1)
        best = np.zeros(flat.size)
        for t in self._tables:
            K = t.q.size
            asc = t.points[::-1]  # ascending transition points
            m = K - np.searchsorted(asc, flat, side="right")  # Theorem 9: prefix length in use
            for off in (-1, 0, 1):
                k = np.clip(m + off, 1, K) - 1
                best = np.maximum(best, log_f(t.Q[k], t.Qc[k], t.D[k], t.Dc[k], flat))  # eq. (25)
        return self._finish(a, best.reshape(a.shape))

    def piecewise(self, alpha):
        """L(α) by Algorithm 5: binary search in the precomputed piecewise function.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`
            L(α) in nats; O(log m) per value after the one-off construction.

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.
        """
        a = self._alpha(alpha)
        if self.breakpoints.size == 0:  # Theorem 6 (Algorithm 5 line 1)
            return self._finish(a, np.zeros(a.shape))
        flat = a.reshape(-1)
        s = np.searchsorted(self.breakpoints, flat, side="right") - 1  # Algorithm 5 line 2
        best = np.zeros(flat.size)
        C = self._cand
        for off in (-1, 0, 1):  # neighbours too: robust at the breakpoints
            c = self._seg[np.clip(s + off, 0, self._seg.size - 1)]
            best = np.maximum(best, log_f(C[c, 0], C[c, 1], C[c, 2], C[c, 3], flat))  # Algorithm 5 line 3
        return self._finish(a, best.reshape(a.shape))

    __call__ = piecewise

    def lp(self, alpha):
        """L(α) from the linear-fractional program (19)–(21), by Charnes–Cooper and HiGHS.

        For each ordered pair (q, d) of distinct rows: maximise q·y subject to d·y = 1,
        e^{−α} y_j − y_k ≤ 0 for all j ≠ k, y ≥ 0 (y = x / (d·x); the open bounds (21) are
        immaterial because the ratio is scale invariant).  The optimum is re-evaluated as
        log(q·x) − log(d·x) at the solution clipped into the feasible set and at the solution
        snapped to the two levels {m, m e^α} (Lemma 1); the larger is kept.

        Parameters
        ----------
        alpha : float or array_like
            Nats, finite and ≥ 0.  Agrees with :meth:`exact` to ~1e-9 for α ≲ 20 and entries of
            `P` that are 0 or ≳ 1e-6: HiGHS drops matrix coefficients below 1e-9 (e^{−α} and
            tiny entries of d), which scipy does not let us change.

        Returns
        -------
        float or numpy.ndarray, same shape as `alpha`

        Raises
        ------
        InvalidInputError
            If `alpha` is negative, non-finite or not numeric.
        RuntimeError
            If HiGHS does not report an optimal solution.
        """
        from scipy.optimize import linprog

        a = self._alpha(alpha)
        flat = a.reshape(-1)
        P = self.P
        n = P.shape[0]
        jj, kk = np.nonzero(~np.eye(n, dtype=bool))
        best = np.zeros(flat.size)
        opts = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
        for ia, al in enumerate(flat):
            A_ub = np.zeros((jj.size, n))
            A_ub[np.arange(jj.size), jj] = np.exp(-al)  # (20): x_j ≤ e^{α} x_k
            A_ub[np.arange(jj.size), kk] -= 1.0
            for i in range(n):
                for j in range(n):
                    if i == j:
                        continue
                    q, d = P[i], P[j]
                    kw = dict(A_ub=A_ub, b_ub=np.zeros(jj.size), A_eq=d[None, :], b_eq=[1.0],
                              bounds=[(0, None)] * n, method="highs")
                    res = linprog(-q, options=opts, **kw)
                    if res.status != 0:  # tight tolerances occasionally stall HiGHS: retry with defaults
                        res = linprog(-q, **kw)
                    if res.status != 0:
                        raise RuntimeError(f"HiGHS failed on rows ({i}, {j}) at alpha={al!r}: {res.message}")
                    x = np.maximum(res.x, 0.0)
                    x = np.clip(x, x.max() * np.exp(-al), None)  # restore (20) exactly
                    # The LP's vertex, snapped to the two levels {m, m e^α} of Lemma 1 / eq. (34)
                    # so that its objective is evaluated without the solver's tolerances.
                    top = np.log(x) > np.log(x.max()) - al / 2
                    v = np.where(top, 1.0, np.exp(-al))
                    best[ia] = max(best[ia], np.log(q @ x) - np.log(d @ x),  # objective (19)
                                   np.log(q @ v) - np.log(d @ v))
        return self._finish(a, best.reshape(a.shape))

    def candidates(self):
        """All coefficient pairs (q, d) of eq. (25) over all row pairs, shape (C, 2) (Algorithm 2's qM, dM)."""
        return self._candidate_rows(self.pairs)[:, [0, 2]].copy()


def scalar_piecewise(loss: LossFunction):
    """A plain-float version of LossFunction.piecewise for one α ≥ 0 (the recursions' fast path).

    Built once per LossFunction and cached on it.  After :meth:`LossFunction.restrict` and while
    the full envelope is not built, it evaluates the envelope of the pairs that can attain L on the
    declared range (same values there), and builds the full envelope on the first α beyond it."""
    if loss._scalar_fn is None:
        loss._scalar_fn = _ScalarLoss(loss)
    return loss._scalar_fn


class _ScalarLoss:
    """Callable L(a) for plain floats: Algorithm 5 on the full or on a range-limited envelope."""

    def __init__(self, loss: LossFunction):
        self.loss = loss
        self.cap = math.inf
        self.cand = None
        if loss.is_identity:
            self.f = lambda a: a
        elif loss._env is None and loss._range is not None:
            self.cap, self.cand = loss._range.cap, loss._range.cand
            self.f = _scalar_envelope(loss._range.breakpoints, loss._range.cand, loss._range.seg)
        else:
            self.f = self._full()

    def _full(self):
        loss = self.loss
        self.cap, self.cand = math.inf, None
        return _scalar_envelope(loss.breakpoints, loss._cand, loss._seg)

    def __call__(self, a: float) -> float:
        if a > self.cap:  # beyond the declared range: the full envelope from now on
            self.f = self._full()
        return self.f(a)


def _scalar_envelope(breakpoints: np.ndarray, cand: np.ndarray, seg: np.ndarray):
    if breakpoints.size == 0:
        return lambda a: 0.0
    bp = breakpoints.tolist()
    with np.errstate(divide="ignore"):
        logs = np.log(cand[seg][:, :4]).tolist()  # log Q, log Q̄, log D, log D̄ per segment
    last = len(logs) - 1
    exp, log1p, log2 = math.exp, math.log1p, 0.6931471805599453

    def f(a: float) -> float:
        """L(a) by Algorithm 5 with plain floats (same formula as LossFunction.piecewise)."""
        s = bisect_right(bp, a) - 1  # Algorithm 5 line 2
        best = 0.0
        for k in range(s - 1 if s > 0 else 0, (s + 1 if s < last else last) + 1):  # neighbours too, as piecewise
            lQ, lQc, lD, lDc = logs[k]
            # eq. (24), Algorithm 5 line 3: logaddexp(lQ, lQc − a) − logaddexp(lD, lDc − a), written out as
            # logaddexp (same operations, so the same rounding)
            y = lQc - a
            num = lQ + log2 if lQ == y else (lQ + log1p(exp(y - lQ)) if lQ > y else y + log1p(exp(lQ - y)))
            y = lDc - a
            den = lD + log2 if lD == y else (lD + log1p(exp(y - lD)) if lD > y else y + log1p(exp(lD - y)))
            v = num - den
            if v > best:
                best = v
        return a if best > a else best  # Remark 1

    return f
