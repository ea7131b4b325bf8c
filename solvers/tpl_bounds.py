"""Bounds on the budgets of the utility-optimal TPL allocation (:mod:`policyopt.solvers.tpl_optimal`): optimality-based
bound tightening on a linear relaxation (HiGHS, safe dual bounds) and monotone interval propagation.

The relaxation under-estimates each step's TPL constraint by tangent cuts of its pieces and over-estimates the
objective, so a column bound it proves holds for every allocation at least as good as the incumbent; SCIP then
searches the tightened box.

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under
Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019, eqs. (10)–(15), (24)–(25).
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from policyopt.problems.tpl_budget import BudgetAllocationProblem

__all__ = ["envelope_rows", "under_cuts", "over_cuts", "tighten_bounds", "propagate_bounds", "tighten_budget_bounds"]


def envelope_rows(lf, alpha: float) -> np.ndarray:
    """(Q, Q̄, D, D̄) rows of the sub-functions of eq. (24) that form L on [0, α] (Algorithm 4).

    The envelope segments starting at or below α; their max is L on [0, α] (Theorem 8,
    Algorithm 4).  Empty for L ≡ 0.
    """
    if lf is None or lf.breakpoints.size == 0:
        return np.zeros((0, 4))
    keep = lf.breakpoints <= alpha
    rows = lf._cand[lf._seg[keep]][:, :4]
    return np.unique(rows, axis=0)


def _pieces(lf, alpha: float) -> np.ndarray:
    """(Q, Q̄, D, D̄) rows whose log f (eq. 25) are each ≤ L everywhere; empty for L ≡ 0."""
    if lf is None:
        return np.zeros((0, 4))
    return envelope_rows(lf, alpha)


def _A(row, x):
    """log(Q e^x + Q̄) (convex in x) of one sub-function (eq. 25); vectorised."""
    Q, Qc = row[0], row[1]
    return np.log(Q) + x if Qc == 0 else np.logaddexp(math.log(Q) + x, math.log(Qc))


def _B(row, x):
    """log(D e^x + D̄) (convex in x) of one sub-function (eq. 25); vectorised."""
    D, Dc = row[2], row[3]
    return math.log(Dc) + 0.0 * x if D == 0 else np.logaddexp(math.log(D) + x, math.log(Dc))


def _dlogistic(p, pc, x):
    """d/dx log(p e^x + pc) = p e^x / (p e^x + pc) (0 if p = 0)."""
    if p == 0:
        return 0.0 * x
    if pc == 0:
        return 1.0 + 0.0 * x
    from scipy.special import expit

    return expit(x + math.log(p) - math.log(pc))  # logistic, no overflow


def under_cuts(row, lo: float, hi: float, k: int = 3):
    """Affine (m, c) with m·x + c ≤ log f_row(x) on [lo, hi] (eq. 25).

    log f = A − B with A, B convex: a tangent of A minus the secant of B (which lies above B
    on [lo, hi]) is below log f there.  k tangent points.  A margin of 1e-12 absorbs rounding.
    """
    bl, bh = float(_B(row, lo)), float(_B(row, hi))
    s = (bh - bl) / (hi - lo) if hi - lo > 1e-12 else float(_dlogistic(row[2], row[3], lo))
    out = []
    for x0 in np.linspace(lo, hi, k):
        g = float(_dlogistic(row[0], row[1], x0))
        out.append((g - s, float(_A(row, x0)) - g * x0 - (bl - s * lo) - 1e-12))
    return out


def over_cuts(lf, lo: float, hi: float, k: int = 3):
    """Affine (m, c) with L(x) ≤ m·x + c on [lo, hi] (L of eq. 24, the true recursion side).

    If [lo, hi] lies inside one segment of L's piecewise form (Algorithm 4; 1e-9 away from the
    breakpoints), L = A − B there with A, B convex: the secant of A minus tangents of B.
    Otherwise the constant L(hi) (L is non-decreasing).  L ≡ 0 gives (0, 0).  Margin 1e-10.
    """
    if lf is None or lf.breakpoints.size == 0:
        return [(0.0, 0.0)]
    bp = lf.breakpoints
    s0, s1 = np.searchsorted(bp, [lo - 1e-9, hi + 1e-9], side="right") - 1
    if s0 != s1 or hi - lo <= 1e-12 or lf.is_identity:
        return [(0.0, float(lf(hi)) + 1e-10)]
    row = lf._cand[lf._seg[s0]][:4]
    al, ah = float(_A(row, lo)), float(_A(row, hi))
    s = (ah - al) / (hi - lo)
    out = []
    for x0 in np.linspace(lo, hi, k):
        g = float(_dlogistic(row[2], row[3], x0))
        out.append((s - g, (al - s * lo) - (float(_B(row, x0)) - g * x0) + 1e-10))
    return out



@contextlib.contextmanager
def _stdout_fd_silenced():
    """Send file descriptor 1 to ``/dev/null`` while the block runs (C-level output such as HiGHS' banner).

    Python's ``sys.stdout`` is flushed before, and C's stdio buffers (``fflush(NULL)``) before the descriptor is
    restored, so nothing printed inside leaks onto stdout later and nothing printed before is lost.  The descriptor
    is 1, C's stdout, whatever ``sys.stdout`` is: under ipykernel ``sys.stdout.fileno()`` is a copy of the original
    terminal while descriptor 1 is the pipe the kernel forwards to the notebook (silencing the copy let the banner
    into stored notebook outputs, depending on thread timing).
    """
    import ctypes
    import os
    import sys

    fd = 1
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # pragma: no cover - a closed or odd sys.stdout
        pass
    try:
        saved = os.dup(fd)
    except OSError:  # pragma: no cover - no descriptor 1 (a daemon): nothing to silence
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
        yield
    finally:
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):  # pragma: no cover - no C library handle on this platform
            pass
        os.dup2(saved, fd)
        os.close(saved)

class _Relaxation:
    """Linear relaxation of the allocation problem on a box, solved by HiGHS (highspy).

    Columns: ε_t (T), BPL_{u,t}, FPL_{u,t} (U·T each), v_t (T, the variance term of step t).
    Rows (all ``≤``), for the set S(V) of true-recursion points with total variance ≤ V:

    * BPL_{u,t} − ε_t ≥ affine under-estimators of every sub-function at BPL_{u,t−1}, and
      BPL_{u,t} − ε_t ≤ affine over-estimators of L_B (the recursion (13) holds with equality
      at the true leakage); BPL_{u,1} = ε_1; likewise FPL with (15);
    * BPL_{u,t} + FPL_{u,t} − ε_t ≤ α (10);
    * v_t ≥ tangents of 2Δf²/ε² (convex), Σ_t v_t ≤ V.

    Every point of S(V) with its true BPL/FPL satisfies these rows, so minima/maxima of a
    column over the relaxation bound it over S(V).
    """

    def __init__(self, problem: BudgetAllocationProblem, box, v_cut: float, k: int = 3, k_obj: int = 7):
        import highspy

        self.T, self.U = problem.horizon, len(problem.loss_B)
        T, U, alpha, D2 = self.T, self.U, problem.tpl_level, problem.sensitivity ** 2
        e_lo, e_hi, b_lo, b_hi, f_lo, f_hi = box
        self.n = n = T + 2 * U * T + T
        E = lambda t: t  # noqa: E731
        Bc = lambda u, t: T + u * T + t  # noqa: E731
        Fc = lambda u, t: T + U * T + u * T + t  # noqa: E731
        Vc = lambda t: T + 2 * U * T + t  # noqa: E731
        ri, ci, vals, rhs = [], [], [], []

        def row(coefs, r):
            """Append the row Σ coefs·x ≤ r."""
            i = len(rhs)
            for j, v in coefs:
                ri.append(i)
                ci.append(j)
                vals.append(v)
            rhs.append(r)

        for u in range(U):
            lb, lf = problem.loss_B[u], problem.loss_F[u]
            pB, pF = _pieces(lb, alpha), _pieces(lf, alpha)
            for t in range(T):
                row([(E(t), 1.0), (Bc(u, t), -1.0)], 0.0)  # L ≥ 0
                row([(E(t), 1.0), (Fc(u, t), -1.0)], 0.0)
                row([(Bc(u, t), 1.0), (Fc(u, t), 1.0), (E(t), -1.0)], alpha)  # eq. (10)
                if t == 0:
                    row([(Bc(u, t), 1.0), (E(t), -1.0)], 0.0)  # BPL_1 = ε_1
                else:
                    lo_, hi_ = b_lo[u, t - 1], b_hi[u, t - 1]
                    for r in pB:
                        for m, c in under_cuts(r, lo_, hi_, k):
                            row([(Bc(u, t - 1), m), (Bc(u, t), -1.0), (E(t), 1.0)], -c)  # (13) ≥
                    for m, c in over_cuts(lb, lo_, hi_, k):
                        row([(Bc(u, t - 1), -m), (Bc(u, t), 1.0), (E(t), -1.0)], c)  # (13) ≤
                if t == T - 1:
                    row([(Fc(u, t), 1.0), (E(t), -1.0)], 0.0)  # FPL_T = ε_T
                else:
                    lo_, hi_ = f_lo[u, t + 1], f_hi[u, t + 1]
                    for r in pF:
                        for m, c in under_cuts(r, lo_, hi_, k):
                            row([(Fc(u, t + 1), m), (Fc(u, t), -1.0), (E(t), 1.0)], -c)  # (15) ≥
                    for m, c in over_cuts(lf, lo_, hi_, k):
                        row([(Fc(u, t + 1), -m), (Fc(u, t), 1.0), (E(t), -1.0)], c)  # (15) ≤
        for t in range(T):
            for e0 in np.linspace(max(e_lo[t], 0.05 * e_hi[t]), e_hi[t], k_obj):
                g = -4.0 * D2 / e0 ** 3
                row([(E(t), g), (Vc(t), -1.0)], g * e0 - 2.0 * D2 / e0 ** 2)  # tangent ≤ v_t
        row([(Vc(t), 1.0) for t in range(T)], v_cut)
        from scipy.sparse import csc_matrix

        A = csc_matrix((vals, (ri, ci)), shape=(len(rhs), n))
        A.sum_duplicates()
        self.A, self.rhs = A, np.asarray(rhs, dtype=float)
        self.lo = np.concatenate([e_lo, b_lo.ravel(), f_lo.ravel(), np.zeros(T)])
        self.hi = np.concatenate([e_hi, b_hi.ravel(), f_hi.ravel(), np.full(T, v_cut)])
        with _stdout_fd_silenced():  # highspy prints its banner when the object is created, before any option
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        # only the cost changes between the OBBT solves: the last basis stays primal feasible,
        # so primal simplex from it (no presolve, which would discard it) is fastest
        h.setOptionValue("presolve", "off")
        h.setOptionValue("simplex_strategy", 4)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(rhs)
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_, lp.col_upper_ = self.lo.copy(), self.hi.copy()
        lp.row_lower_ = np.full(len(rhs), -highspy.kHighsInf)
        lp.row_upper_ = self.rhs.copy()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
        h.passModel(lp)
        self._h, self._hs = h, highspy
        self._cost = None

    def safe_min(self, c: np.ndarray) -> float | None:
        """A rigorous lower bound on min c·x over the relaxation, or None (LP not solved).

        Neumaier–Shcherbina: for any y ≤ 0, c·x ≥ y·rhs + Σ_j min(r_j lo_j, r_j hi_j) with
        r = c − Aᵀy, so HiGHS' dual (clipped to y ≤ 0) gives a bound that does not depend on
        its tolerances.  +inf if HiGHS proves the relaxation infeasible.
        """
        h = self._h
        idx = np.arange(self.n, dtype=np.int32)
        h.changeColsCost(self.n, idx, np.asarray(c, dtype=float))
        h.run()
        st = h.getModelStatus()
        if st == self._hs.HighsModelStatus.kInfeasible:
            return math.inf
        if st != self._hs.HighsModelStatus.kOptimal:
            return None
        y = np.minimum(np.asarray(h.getSolution().row_dual, dtype=float), 0.0)
        r = c - self.A.T @ y
        terms = np.concatenate([y * self.rhs, np.minimum(r * self.lo, r * self.hi)])
        return float(np.sum(terms) - 1e-12 * (1.0 + np.sum(np.abs(terms))))

    def set_col_bounds(self, j: int, lo: float, hi: float) -> None:
        """Tighten column j's bounds in the LP and in the safe-bound data."""
        self.lo[j], self.hi[j] = lo, hi
        self._h.changeColBounds(j, lo, hi)


def _round_bound(problem: BudgetAllocationProblem, box, v_cut: float, lower: float):
    """One tightening round's relaxation on `box` and the larger of `lower` and its safe minimum of Σ_t v_t."""
    rel = _Relaxation(problem, box, v_cut)
    nv = problem.horizon * (1 + 2 * len(problem.loss_B))
    c = np.zeros(rel.n)
    c[nv:] = 1.0
    lb = rel.safe_min(c)
    return rel, (lower if lb is None else max(lower, lb))


def _tighten_columns(rel, columns, deadline: float) -> str:
    """Minimise and maximise each listed column of `rel` (safe dual-based bounds, padded by 1e-9).

    Each new bound is applied at once (sequential OBBT).  Returns ``"empty"`` when HiGHS claims
    the relaxation empty (it holds the cutoff point, so only numerically: the caller keeps its
    last box), ``"late"`` when `deadline` stopped the loop (the bounds found so far stay valid),
    else ``"done"``.
    """
    for j in columns:
        if time.perf_counter() > deadline:
            return "late"
        for sgn in (1.0, -1.0):
            c = np.zeros(rel.n)
            c[j] = sgn
            v = rel.safe_min(c)
            if v is None:
                continue
            if v == math.inf:
                return "empty"
            if sgn > 0:
                rel.set_col_bounds(j, max(rel.lo[j], v - 1e-9), rel.hi[j])
            else:
                rel.set_col_bounds(j, rel.lo[j], min(rel.hi[j], -v + 1e-9))
    return "done"


def tighten_bounds(problem: BudgetAllocationProblem, box, v_cut: float, *, deadline: float,
                   max_rounds: int = 60, target_gap: float = 1e-7, min_shrink: float = 0.02):
    """Optimality-based bound tightening (OBBT) of ε_t, BPL_{u,t}, FPL_{u,t} for cutoff v_cut.

    Parameters
    ----------
    problem : BudgetAllocationProblem
    box : tuple
        (e_lo, e_hi, b_lo, b_hi, f_lo, f_hi) valid for S(v_cut) (e.g. :func:`variable_bounds`).
    v_cut : float
        Total variance of a verified allocation (an upper bound on the optimum).
    deadline : float
        ``time.perf_counter()`` value after which no new LP is started (the bounds found
        so far are returned; each is valid on its own).
    max_rounds, target_gap, min_shrink
        Stop after `max_rounds`, when the relaxation's bound is within `target_gap`
        (relative) of v_cut, or when a round shrinks the total width by less than `min_shrink`.

    Returns
    -------
    box : tuple
        Tightened bounds, still containing every true-recursion point with variance ≤ v_cut.
    lower_bound : float
        A rigorous lower bound on the optimal total variance: the largest safe minimum of
        Σ_t v_t over the rounds' relaxations (0.0 if HiGHS solved none).
    rounds : int

    Notes
    -----
    Each round builds :class:`_Relaxation` on the current box (the cuts tighten as the box
    shrinks) and minimises / maximises every column with HiGHS; the new bounds are the
    safe (dual-based) bounds padded by 1e-9.  Within a round each new bound is applied
    at once (sequential OBBT).  Validity: every point of S(v_cut) satisfies every row, so
    it lies in the new box.
    """
    e_lo, e_hi, b_lo, b_hi, f_lo, f_hi = (np.array(a, dtype=float) for a in box)
    T, U = problem.horizon, len(problem.loss_B)
    nv = T + 2 * U * T
    lower, rounds = 0.0, 0
    width = np.inf
    for rounds in range(1, max_rounds + 1):
        rel, lower = _round_bound(problem, (e_lo, e_hi, b_lo, b_hi, f_lo, f_hi), v_cut, lower)
        if lower >= v_cut * (1 - target_gap) or time.perf_counter() > deadline:
            break
        state = _tighten_columns(rel, range(nv), deadline)
        if state == "empty":  # keep the last box, whose validity does not depend on HiGHS
            return (e_lo, e_hi, b_lo, b_hi, f_lo, f_hi), lower, rounds
        late = state == "late"  # bounds tightened so far in this round stay valid
        lo_, hi_ = rel.lo[:nv], rel.hi[:nv]
        e_lo, e_hi = lo_[:T].copy(), hi_[:T].copy()
        b_lo, b_hi = lo_[T:T + U * T].reshape(U, T).copy(), hi_[T:T + U * T].reshape(U, T).copy()
        f_lo, f_hi = lo_[T + U * T:].reshape(U, T).copy(), hi_[T + U * T:].reshape(U, T).copy()
        new_width = float(np.sum(hi_ - lo_))
        if late or new_width > (1 - min_shrink) * width:
            break
        width = new_width
    return (e_lo, e_hi, b_lo, b_hi, f_lo, f_hi), lower, rounds


def propagate_bounds(problem: BudgetAllocationProblem, box, *, pad: float = 1e-9):
    """Intersect the BPL/FPL bounds with those implied by the ε box through the recursions.

    BPL_{u,1} = ε_1, BPL_{u,t} = L_B,u(BPL_{u,t−1}) + ε_t (13) and FPL_{u,T} = ε_T,
    FPL_{u,t} = L_F,u(FPL_{u,t+1}) + ε_t (15) with every L non-decreasing (eq. 24): interval
    arithmetic gives bounds valid for every ε in the box; (10) adds BPL ≤ α + ε − FPL and
    FPL ≤ α + ε − BPL.  `pad` (nats) absorbs the rounding of L.  Returns the new box.
    """
    e_lo, e_hi, b_lo, b_hi, f_lo, f_hi = (np.array(a, dtype=float) for a in box)
    T, U, alpha = problem.horizon, len(problem.loss_B), problem.tpl_level

    def L(lf, x):
        """L(x) of a user's loss function (0 when the correlation is unknown)."""
        return 0.0 if lf is None else float(lf(x))

    for u in range(U):
        lb, lf = problem.loss_B[u], problem.loss_F[u]
        for t in range(T):
            lo = e_lo[t] if t == 0 else L(lb, b_lo[u, t - 1]) + e_lo[t]
            hi = e_hi[t] if t == 0 else L(lb, b_hi[u, t - 1]) + e_hi[t]
            b_lo[u, t] = max(b_lo[u, t], lo - pad)
            b_hi[u, t] = min(b_hi[u, t], hi + pad)
        for t in range(T - 1, -1, -1):
            lo = e_lo[t] if t == T - 1 else L(lf, f_lo[u, t + 1]) + e_lo[t]
            hi = e_hi[t] if t == T - 1 else L(lf, f_hi[u, t + 1]) + e_hi[t]
            f_lo[u, t] = max(f_lo[u, t], lo - pad)
            f_hi[u, t] = min(f_hi[u, t], hi + pad)
        b_hi[u] = np.minimum(b_hi[u], alpha + e_hi - f_lo[u] + pad)
        f_hi[u] = np.minimum(f_hi[u], alpha + e_hi - b_lo[u] + pad)
    return e_lo, e_hi, b_lo, b_hi, f_lo, f_hi


def tighten_budget_bounds(problem: BudgetAllocationProblem, box, v_cut: float, *, deadline: float,
                          max_rounds: int = 60, target_gap: float = 1e-7, min_shrink: float = 0.02):
    """Bound tightening on the T budgets only, the U·T BPL/FPL bounds by propagation.

    Like :func:`tighten_bounds` (same relaxation, same safe dual-based bounds, same stopping
    rules), but each round minimises / maximises only the T columns ε_t (2T LPs instead of
    2T(1 + 2U)) and then derives the BPL/FPL bounds from the ε box by :func:`propagate_bounds`
    (the recursions are monotone), before the next round rebuilds the cuts on the smaller box.
    Every step keeps every true-recursion point with variance ≤ v_cut in the box.

    Returns
    -------
    (box, lower_bound, rounds) as :func:`tighten_bounds`.
    """
    box = propagate_bounds(problem, box)
    T = problem.horizon
    lower, rounds = 0.0, 0
    width = np.inf
    for rounds in range(1, max_rounds + 1):
        rel, lower = _round_bound(problem, box, v_cut, lower)
        if lower >= v_cut * (1 - target_gap) or time.perf_counter() > deadline:
            break
        if _tighten_columns(rel, range(T), deadline) == "empty":
            return box, lower, rounds
        e_lo, e_hi = rel.lo[:T].copy(), rel.hi[:T].copy()
        box = propagate_bounds(problem, (e_lo, e_hi) + tuple(box[2:]))
        new_width = float(np.sum(box[1] - box[0]) + np.sum(box[3] - box[2]) + np.sum(box[5] - box[4]))
        if new_width > (1 - min_shrink) * width:
            break
        width = new_width
    return box, lower, rounds
