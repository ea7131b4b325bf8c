"""Temporal privacy leakage BPL / FPL / TPL of a continuous release (Cao et al. (2019), eqs. (10)–(16)).

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019 (cited below as *Cao et al. (2019)*).  Privacy is in nats, time in steps (t = 1..T).  ``tpl_level`` (α of α-DP_T,
Definition 8) is a leakage level in nats, not a Rényi order.  The recursions BPL_t = L_B(BPL_{t−1}) + ε_t (eq. (13))
and FPL_t = L_F(FPL_{t+1}) + ε_t (eq. (15)) evaluate the loss function of
:mod:`policyopt.privacy.tpl_loss`.

Paper error handled here
------------------------
* Eq. (11) states TPL = max_i BPL_i + max_i FPL_i − ε.  By definition (3) TPL is
  max_i (BPL_i + FPL_i − ε), which is ≤ the printed sum (equal when one user attains both
  maxima).  :func:`leakage` reports the definition (3); the sum (11) is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import UNIT_ROUNDOFF, fmt_upper, fmt_value
from policyopt.privacy.tpl_envelope import check_budgets
from policyopt.privacy.tpl_loss import LossFunction, scalar_piecewise
from policyopt.result import result_repr

__all__ = [
    "TemporalLeakage",
    "format_leakage",
    "leakage",
    "leakage_rounding_error",
    "leakage_upper",
    "paired_users",
    "window_leakage",
]

# ----------------------------------------------------------------------------------------
# leakage over time
# ----------------------------------------------------------------------------------------


def _as_loss(P, name: str) -> LossFunction | None:
    if P is None or isinstance(P, LossFunction):
        return P
    return LossFunction(P, name)


def _as_users(P, name: str) -> list:
    """One user (None, a matrix or a LossFunction) or a list of them."""
    if P is None or isinstance(P, LossFunction):
        return [P]
    if isinstance(P, (list, tuple)) and P and (
        P[0] is None or isinstance(P[0], LossFunction) or np.ndim(P[0]) == 2
    ):
        return [_as_loss(p, f"{name}[{u}]") for u, p in enumerate(P)]
    return [_as_loss(P, name)]


def paired_users(P_B, P_F) -> tuple[list, list]:
    """Loss functions of each user for the backward and forward correlations, paired up.

    Parameters
    ----------
    P_B, P_F : None, array_like (n, n), LossFunction, or list of these
        A list is a population; a single ``None`` on one side is repeated for every user of
        the other side (that correlation is unknown to the adversary, L ≡ 0).

    Returns
    -------
    (backward, forward) : two lists of LossFunction or None, of equal length

    Raises
    ------
    InvalidInputError
        If an empty list is given, or the two lists have different lengths.
    InvalidModelError
        If a matrix is not square and row-stochastic.
    """
    for P, name in ((P_B, "P_B"), (P_F, "P_F")):
        if isinstance(P, (list, tuple)) and len(P) == 0:
            raise InvalidInputError(f"`{name}` must be a matrix, a LossFunction, None or a non-empty list of them, got {P!r}")
    ub, uf = _as_users(P_B, "P_B"), _as_users(P_F, "P_F")
    if len(ub) != len(uf):
        if len(ub) == 1 and ub[0] is None:
            ub = ub * len(uf)
        elif len(uf) == 1 and uf[0] is None:
            uf = uf * len(ub)
        else:
            raise InvalidInputError(f"`P_B` and `P_F` must list the same users, got {len(ub)} and {len(uf)} matrices")
    return ub, uf


@dataclass(frozen=True)
class TemporalLeakage:
    """BPL, FPL and TPL at each step of a finite release t = 1..T (eqs. 11, 13, 15).

    Attributes
    ----------
    bpl, fpl, tpl : numpy.ndarray, shape (T,)
        Maximum over users of BPL_t, FPL_t and TPL_t = BPL_t + FPL_t − ε_t (eq. 10), nats.
        ``tpl`` is definition (3), max_i TPL_i; eq. (11) as printed (max BPL + max FPL − ε)
        is an upper bound of it.
    budgets : numpy.ndarray, shape (T,)
        ε_t = PL_0(M^t), nats.
    bpl_users, fpl_users : numpy.ndarray, shape (U, T)
        Per-user values.
    margin : float
        0 for the computed values of :func:`leakage`; for :func:`leakage_upper` the largest amount
        (nats) added to a BPL/FPL value before rounding up, (T − 1)·c with c from
        :func:`leakage_rounding_error`.
    """

    bpl: np.ndarray
    fpl: np.ndarray
    tpl: np.ndarray
    budgets: np.ndarray
    bpl_users: np.ndarray
    fpl_users: np.ndarray
    margin: float = 0.0

    @property
    def tpl_users(self) -> np.ndarray:
        """Per-user TPL_t = BPL_t + FPL_t − ε_t (eq. 10), shape (U, T), nats."""
        return self.bpl_users + self.fpl_users - self.budgets[None, :]

    @property
    def tpl_level(self) -> float:
        """max_t TPL_t: the smallest α for which the release is α-DP_T (Definition 8), nats."""
        return float(np.max(self.tpl))

    def __str__(self) -> str:
        """The text ``policyopt tpl`` prints (:func:`format_leakage`; no model, supremum or time lines)."""
        return format_leakage(self)

    def __repr__(self) -> str:
        """One field a line, arrays by shape and range; the lead line gives T, the users and max TPL rounded up."""
        return result_repr(self, head=f"{self.budgets.size} steps, {self.bpl_users.shape[0]} user(s), max TPL "
                                      f"{fmt_upper(self.tpl_level)} nats; print() for the table")

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: max TPL, then t, ε_t, BPL, FPL, TPL (privacy rounded up)."""
        from html import escape

        T = self.budgets.size
        steps = sorted(set(list(range(min(T, 5))) + list(range(max(0, T - 3), T))))
        head = "".join(f"<th>{h}</th>" for h in ("t", "ε_t", "BPL", "FPL", "TPL"))
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(v)}</td>" for v in (
                str(t + 1), fmt_value(float(self.budgets[t])), fmt_upper(self.bpl[t]), fmt_upper(self.fpl[t]),
                fmt_upper(self.tpl[t]))) + "</tr>"
            for t in steps
        )
        caption = f"max TPL = {fmt_upper(self.tpl_level)} nats over {T} steps (nats; first and last steps shown)"
        return f"<table class='policyopt-leakage'><caption>{escape(caption)}</caption><tr>{head}</tr>{body}</table>"


def format_leakage(res: TemporalLeakage, *, source: str | None = None, supremum: dict | None = None,
                   wall_time_s: float | None = None) -> str:
    """The text of ``policyopt tpl`` for a :class:`TemporalLeakage`; privacy numbers rounded up.

    Parameters
    ----------
    res : TemporalLeakage
        The leakage of a release.
    source : str, optional
        Where P_B and P_F come from (the ``model`` line; omitted when ``None``).
    supremum : dict, optional
        ``bpl``, ``fpl``, ``tpl`` suprema (numbers or ``"divergent"``) for the constant budget max ε_t
        (Theorem 11 of Cao et al. (2019)); the ``supremum`` line is omitted when ``None``.
    wall_time_s : float, optional
        Seconds, for the last line (omitted when ``None``).

    Returns
    -------
    str
        One line per item and the first five and last three steps of the table.
    """
    budgets = res.budgets
    eps_sup = float(np.max(budgets))
    lines = ["policyopt tpl: temporal privacy leakage (Cao et al. 2019, eqs. (11), (13), (15); nats)"]
    if source is not None:
        lines.append(f"model    : {source}")
    lines += [
        f"steps    : {budgets.size}, budgets from {fmt_value(float(budgets.min()))} to {fmt_value(eps_sup)} nats",
        f"max TPL  : {fmt_upper(res.tpl_level)} nats (the release is α-DP_T for α ≥ this)",
    ]
    if supremum is not None:
        show = lambda v: v if isinstance(v, str) else fmt_upper(v)  # noqa: E731
        lines.append(f"supremum : BPL {show(supremum['bpl'])}, FPL {show(supremum['fpl'])}, TPL {show(supremum['tpl'])} "
                     f"(Theorem 11, constant budget {fmt_value(eps_sup)})")
    lines.append("   t        ε_t        BPL        FPL        TPL")
    T = budgets.size
    previous = -1
    for t in sorted(set(list(range(min(T, 5))) + list(range(max(0, T - 3), T)))):
        if t > previous + 1:
            lines.append(f"{'…':>4} ({t - previous - 1} steps not shown; all T in --json)")
        previous = t
        lines.append(f"{t + 1:>4} {budgets[t]:>10.6g} {fmt_upper(res.bpl[t]):>10} {fmt_upper(res.fpl[t]):>10} {fmt_upper(res.tpl[t]):>10}")
    if wall_time_s is not None:
        lines.append(f"wall time: {wall_time_s:.3f} s")
    return "\n".join(lines)


def _run(loss: LossFunction | None, budgets: np.ndarray, method: str) -> np.ndarray:
    """α_t = L(α_{t−1}) + ε_t, α_1 = ε_1 (eq. 13; eq. 15 on the reversed budgets)."""
    if loss is None or method == "piecewise":
        f = (lambda a: 0.0) if loss is None else scalar_piecewise(loss)
        eps_list = budgets.tolist()
        T = len(eps_list)
        # end (exclusive) of the run of equal budgets containing t: once α repeats inside such a run (a float fixed
        # point, or a 2-cycle of the last ulp), every later step of the run repeats it — filled without evaluating L,
        # bit for bit what the loop would compute (issue 26: --horizon 10^6 took tens of minutes)
        change = np.flatnonzero(np.diff(budgets) != 0) + 1
        run_end = np.repeat(np.append(change, T), np.diff(np.concatenate([[0], change, [T]]))).tolist() if T else []
        out = [0.0] * T
        prev = 0.0
        t = 0
        while t < T:
            prev = (f(prev) if t else 0.0) + eps_list[t]
            out[t] = prev
            if t >= 2 and run_end[t - 2] == run_end[t] and out[t - 2] == prev:
                end = run_end[t]
                n = end - t - 1
                out[t + 1:end] = ([out[t - 1], prev] * ((n + 1) // 2))[:n]  # the 2-cycle (period 1 if equal)
                if end > t + 1:
                    prev = out[end - 1]
                t = end
                continue
            t += 1
        return np.array(out, dtype=float)
    out = np.empty(budgets.size)
    prev = 0.0
    for t, eps in enumerate(budgets):
        if loss is None or t == 0:
            inc = 0.0
        else:
            inc = loss.exact(prev) if method == "exact" else loss.piecewise(prev)
        prev = out[t] = inc + eps
    return out


def leakage(P_B, P_F, budgets, *, method: str = "piecewise") -> TemporalLeakage:
    """BPL, FPL and TPL of a release with budgets ε_1..ε_T (eqs. 10–15).

    Parameters
    ----------
    P_B, P_F : None, array_like (n, n), LossFunction, or list of these
        Backward / forward transition matrix of each user (a list = a population; the
        lengths must agree when both are lists).  None means that correlation is unknown
        to the adversary (L ≡ 0).
    budgets : array_like, shape (T,)
        ε_t ≥ 0 of the ε_t-DP mechanism M^t, nats.
    method : {"piecewise", "exact"}
        Evaluation of L (Algorithm 5 or Algorithm 1).

    Returns
    -------
    TemporalLeakage
        BPL_1 = ε_1, BPL_t = L_B(BPL_{t−1}) + ε_t (13); FPL_T = ε_T, FPL_t = L_F(FPL_{t+1}) + ε_t
        (15); TPL_t = BPL_t + FPL_t − ε_t (10), each maximised over users (7), (9), (3).

    Raises
    ------
    InvalidInputError
        If `budgets` is empty, not 1-D, negative or non-finite; if `method` is unknown; if
        the two populations have different sizes.
    InvalidModelError
        If a matrix is not square stochastic.

    References
    ----------
    Cao et al. (2019): eqs. (3), (7), (9)–(15), Examples 2–3.
    """
    if method not in ("piecewise", "exact"):
        raise InvalidInputError(f"`method` must be 'piecewise' or 'exact', got {method!r}")
    eps = check_budgets(budgets)
    ub, uf = paired_users(P_B, P_F)
    bpl_u = np.array([_run(lb, eps, method) for lb in ub])  # eq. (13)
    fpl_u = np.array([_run(lf, eps[::-1], method)[::-1] for lf in uf])  # eq. (15)
    tpl_u = bpl_u + fpl_u - eps[None, :]  # eq. (10)
    return TemporalLeakage(
        bpl=bpl_u.max(axis=0), fpl=fpl_u.max(axis=0), tpl=tpl_u.max(axis=0),  # eqs. (7), (9), (3)
        budgets=eps, bpl_users=bpl_u, fpl_users=fpl_u,
    )


def _log_magnitude(loss: LossFunction | None) -> tuple[float, int]:
    """(Λ, n): the largest |ln Q| + |ln Q̄| + |ln D| + |ln D̄| over L's candidate sub-functions
    (finite logs only) and the number of states; (0, 0) for L ≡ 0."""
    if loss is None:
        return 0.0, 0
    ev = scalar_piecewise(loss)
    cand = loss._cand if ev.cand is None else ev.cand  # the sub-functions the recursions evaluated
    if cand.shape[0] == 0:
        return 0.0, loss.P.shape[0]
    with np.errstate(divide="ignore"):
        logs = np.abs(np.log(cand[:, :4]))
    logs[~np.isfinite(logs)] = 0.0
    return float(logs.sum(axis=1).max()), loss.P.shape[0]


def leakage_rounding_error(P_B, P_F, result: TemporalLeakage) -> float:
    """Bound c (nats) on the rounding error that one step of the recursions (13), (15) adds.

    The recursion (13) computes B̂_1 = ε_1 exactly and B̂_t = fl(L̂(B̂_{t−1}) + ε_t).  L is
    non-decreasing with slope ≤ 1 (each sub-function of eq. (24) has derivative
    (Q − D)e^α/((Q(e^α − 1) + 1)(D(e^α − 1) + 1)) ≤ 1), so
    ``|B̂_t − B_t| ≤ |B̂_{t−1} − B_{t−1}| + e_L + u·B_t``: after k steps the error is at most
    k·(e_L + u·B_max).  One evaluation of L in log space (Algorithm 5 with
    log(Q + Q̄e^{−α}) − log(D + D̄e^{−α})) errs by e_L ≤ u·(4α + 2Λ + 2n + 16), Λ the largest sum of
    the magnitudes of the four logarithms of a sub-function and n the number of states (the prefix
    sums Q, D of non-negative entries carry ≤ n·u relative error).  The bound returned doubles the
    constants and covers BPL and FPL at once:

        c = 2u·(6(B_max + F_max) + 4Λ + 4n + 40),

    maximised over users; BPL_t then errs by ≤ (t − 1)·c, FPL_t by ≤ (T − t)·c and
    TPL_t = BPL_t + FPL_t − ε_t by ≤ (T − 1)·c plus the rounding of that sum.  The envelope itself (which
    sub-function is evaluated where) is taken as exact: the three neighbouring segments are
    evaluated at every α (see :meth:`LossFunction.piecewise`).  Measured against a 60-digit mpmath
    evaluation (tests/privacy/test_outward_rounding.py) the actual error is below 1 % of this bound.

    Parameters
    ----------
    P_B, P_F
        As given to :func:`leakage`.
    result : TemporalLeakage
        Its output.

    Returns
    -------
    float
        c in nats per step.

    References
    ----------
    Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release under
    Temporal Correlations", IEEE TKDE, 2019, eqs. (13), (15), (24).
    """
    ub, uf = paired_users(P_B, P_F)
    lam, n = 0.0, 0
    for lf in list(ub) + list(uf):
        a, b = _log_magnitude(lf)
        lam, n = max(lam, a), max(n, b)
    top = float(np.max(result.bpl)) + float(np.max(result.fpl))
    return 2.0 * UNIT_ROUNDOFF * (6.0 * top + 4.0 * lam + 4.0 * n + 40.0)


def leakage_upper(P_B, P_F, budgets) -> TemporalLeakage:
    """:func:`leakage` with every BPL, FPL and TPL rounded outward: proven ≥ the exact recursion's value.

    With c = :func:`leakage_rounding_error`, BPL_t is raised by (t − 1)·c, FPL_t by (T − t)·c and
    TPL_t (per user) by (T − 1)·c plus the exact rounding errors of BPL_t + FPL_t − ε_t (TwoSum), each
    then by one float step towards +∞; values with nothing to add (BPL_1 = ε_1, FPL_T = ε_T, an
    exact TPL_1 for T = 1) stay unchanged.  ``margin`` holds the largest BPL/FPL raise,
    (T − 1)·c.  Use it for every reported leakage; use :func:`leakage` inside solvers.

    Parameters, Raises: as :func:`leakage` (method ``"piecewise"``).

    References
    ----------
    Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release under
    Temporal Correlations", IEEE TKDE, 2019, eqs. (10)–(15).
    """
    res = leakage(P_B, P_F, budgets)
    c = leakage_rounding_error(P_B, P_F, res)
    T = res.budgets.size
    steps = np.arange(T, dtype=float)
    eb, ef = c * steps, c * steps[::-1]

    def up(a, e):
        """a + e rounded one float step up where the margin e is positive (exact values stay)."""
        return np.where(e > 0, np.nextafter(a + e, np.inf), a)

    # TPL_t = BPL_t + FPL_t − ε_t per user, with the two roundings of this sum recovered exactly
    # (Knuth's TwoSum), so an exact sum (e.g. T = 1: ε + ε − ε) is not enlarged.
    s, r1 = _two_sum(res.bpl_users, res.fpl_users)
    d, r2 = _two_sum(s, -res.budgets[None, :])
    tpl_users = up(d, (eb + ef)[None, :] + np.abs(r1) + np.abs(r2))
    return TemporalLeakage(
        bpl=up(res.bpl, eb), fpl=up(res.fpl, ef), tpl=tpl_users.max(axis=0), budgets=res.budgets,
        bpl_users=up(res.bpl_users, eb[None, :]), fpl_users=up(res.fpl_users, ef[None, :]), margin=(T - 1) * c,
    )


def _two_sum(a, b):
    """(fl(a + b), exact rounding error), elementwise (Knuth's TwoSum, exact in binary floating point)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def window_leakage(result: TemporalLeakage, w: int) -> np.ndarray:
    """TPL of every window of w consecutive releases (Theorem 3, eq. 16).

    Parameters
    ----------
    result : TemporalLeakage
        Output of :func:`leakage`.
    w : int
        Window length 1 ≤ w ≤ T (steps).  w = 1 is event level (TPL_t), w = T user level.

    Returns
    -------
    numpy.ndarray, shape (T − w + 1,)
        Entry t (0-based) bounds the leakage of {M^{t+1}, ..., M^{t+w}}, maximised over
        users: α^B_t + α^F_{t+j} + Σ_{k=t+1}^{t+j−1} ε_k with j = w − 1 ≥ 1 (eq. 16), and
        TPL_t for j = 0.  Its maximum is the w-event level; for w = T it equals Σ ε_t
        (Corollary 1).

    Raises
    ------
    InvalidInputError
        If `w` is not an integer in [1, T].

    References
    ----------
    Cao et al. (2019): Definition 9, Theorem 3 (eq. 16), Corollary 1, Table 2.
    """
    T = result.budgets.size
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= T:
        raise InvalidInputError(f"`w` must be an integer window length in [1, T={T}] (steps), got {fmt(w)}")
    if w == 1:
        return result.tpl.copy()
    j = w - 1
    csum = np.concatenate([[0.0], np.cumsum(result.budgets)])
    starts = np.arange(T - j)
    inner = csum[starts + j] - csum[starts + 1]  # Σ_{k=t+1}^{t+j−1} ε_k
    per_user = result.bpl_users[:, starts] + result.fpl_users[:, starts + j] + inner[None, :]  # eq. (16)
    return per_user.max(axis=0)
