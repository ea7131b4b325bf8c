"""FRAN (Algorithm 1 of Luo et al. (2025)), its k-sensitivity, utility (22) and leakage bounds for correlated sequences.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025:
Definitions 7–10, Theorems 1–2 (eqs. 15, 19), Algorithm 1 (eqs. 9–10), MSE (22).  Privacy in nats, time in slots.

Leakage of FRAN with AoI vector A_t and Laplace level ε_C, in decreasing order of trust:

``exact``  (:func:`exact_leakage`)
    the CSDP leakage itself (Definition 6) for a scalar query on a small joint chain: the largest
    log ratio of the two Laplace mixtures Σ_z Pr[z | x_t] Lap(f(z), Δf/ε_C) over t-neighbouring
    snapshots.  Between consecutive atoms the ratio is a Möbius function of e^{2y/b}, hence
    monotone, and it is constant in the tails, so the supremum is attained at an atom.
``sound``  (:func:`sound_leakage`, the default everywhere)
    ε_S = ln(1 + Δ_k (e^{d(k) ε_C} − 1)), the step of Luo et al.'s (2025) proof of Theorem 1 (eq. 45) before the
    faulty one.  Proof: with L(z) = Pr[f(z) + η ∈ S], Σ_z (p − p')L ≤ δ(p, p')·(max L − min L) and
    max L ≤ e^{ε_C·s_k(f)/Δf} min L over aged snapshots that differ in the ≤ k correlated entries.
``paper``  (:func:`paper_leakage`, **unsound**)
    ε_S = d(k) Δ_k ε_C, eq. (15).  Its proof's last step uses ln(1 + x(e^y − 1)) ≤ x·y, false for
    0 < x < 1, y > 0 (the left side is concave in x with equal end values: x = 0.5, y = 2 gives
    1.434 > 1).  Kept only to reproduce the paper's numbers.
``tight``  (:func:`tight_leakage`, **not an upper bound**)
    eq. (19), Δ̄(Λ, A_t)·ε_C with Δ̄ of Definition 10 implemented as printed.  It is *not* an upper
    bound of the exact leakage: it inherits the faulty linearisation and ignores how the other
    sequences' aged entries move with x_t^(i) (the factor R3 of (51), which the proof drops).
    ``tests/privacy/test_fran.py`` exhibits a two-binary CMC where it is below the exact leakage.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from policyopt.formatting import UNIT_ROUNDOFF, round_up
from policyopt.privacy.age_dependent import max_tv_rel_error, risk_after_aging
from policyopt.models.cmc import CouplingMarkovChain
from policyopt.errors import InvalidInputError, check_int, check_positive, fmt

__all__ = [
    "sound_leakage_upper",
    "paper_leakage_upper",
    "exact_leakage_margin",
    "exact_leakage_upper",
    "Query",
    "sound_leakage",
    "paper_leakage",
    "exact_leakage",
    "tight_distance",
    "tight_leakage",
    "distortion",
    "mse",
    "FRAN",
    "simulate_release",
    "PaperBoundWarning",
]

_NAMED = ("sum", "mean", "max", "min", "identity")

#: Largest m^s · n² (snapshots × squared number of distinct query values) :func:`exact_leakage` accepts.
EXACT_WORK_LIMIT = 2e8


class PaperBoundWarning(UserWarning):
    """Issued whenever Luo et al.'s (2025) unsound bound (15) is evaluated on request."""


def _check_eps(epsilon_c, name="epsilon_c") -> float:
    return check_positive(epsilon_c, name, "nats")


class Query:
    """A query f: X^s → R^d on snapshots, with its sensitivities (Definitions 2 and 8 of Luo et al. (2025)).

    Parameters
    ----------
    func : {"sum", "mean", "max", "min", "identity"} or callable
        A named query (``identity`` releases the whole snapshot, d = s) or a callable mapping an
        array of snapshot values of shape (n, s) to shape (n,) or (n, d).
    name : str, optional
        Label of a callable query.

    Raises
    ------
    InvalidInputError
        If `func` is neither a known name nor callable.

    Notes
    -----
    s_i(f) is the largest ℓ1 change of f when at most i entries change (Definition 8 says
    "exactly i"; "at most" makes s_i monotone in i and equals it for the named queries).
    Named queries use closed forms with r = max − min of the state values: s_1 = r (r/s for the
    mean) and d(k) = k for sum/mean/identity, 1 for max/min.  Callable queries are enumerated on
    the finite state space (m^s ≤ 4096).
    """

    def __init__(self, func="mean", *, name: str | None = None):
        if isinstance(func, str):
            if func not in _NAMED:
                raise InvalidInputError(f"`func` must be one of {_NAMED} or a callable, got {fmt(func)}")
            self.name = func
            self._func = None
        elif callable(func):
            self.name = name or getattr(func, "__name__", "custom")
            self._func = func
        else:
            raise InvalidInputError(f"`func` must be one of {_NAMED} or a callable, got {fmt(func)}")

    def __repr__(self) -> str:
        return f"Query({self.name!r})"

    def __call__(self, values) -> np.ndarray:
        """Evaluate f on snapshot values.

        Parameters
        ----------
        values : array_like, shape (n, s) or (s,)

        Returns
        -------
        numpy.ndarray, shape (n, d) (or (d,) for one snapshot).

        Raises
        ------
        InvalidInputError
            If a callable query returns the wrong number of rows or non-finite values.
        """
        v = np.asarray(values, dtype=float)
        single = v.ndim == 1
        v2 = v[None, :] if single else v
        if self._func is None:
            out = {
                "sum": lambda a: a.sum(axis=1, keepdims=True),
                "mean": lambda a: a.mean(axis=1, keepdims=True),
                "max": lambda a: a.max(axis=1, keepdims=True),
                "min": lambda a: a.min(axis=1, keepdims=True),
                "identity": lambda a: a,
            }[self.name](v2)
        else:
            out = np.asarray(self._func(v2), dtype=float)
            if out.ndim == 1:
                out = out[:, None]
            if out.shape[0] != v2.shape[0] or not np.all(np.isfinite(out)):
                raise InvalidInputError(f"query `{self.name}` must return finite values, one row per snapshot")
        return out[0] if single else out

    def _closed_form(self, state_values, s: int, i: int) -> float:
        r = float(np.max(state_values) - np.min(state_values))
        i = min(i, s)
        if self.name == "sum" or self.name == "identity":
            return i * r
        if self.name == "mean":
            return i * r / s
        return r  # max / min: one entry already moves the extreme over the whole range

    def sensitivity_at(self, cmc: CouplingMarkovChain, i: int) -> float:
        """s_i(f) of Definition 8: max ‖f(X) − f(X')‖₁ over snapshots differing in at most i entries.

        Parameters
        ----------
        cmc : CouplingMarkovChain
            Supplies s, the states and their values.
        i : int
            Number of entries allowed to differ, 1 ≤ i.

        Returns
        -------
        float ≥ 0, in the query's units.

        Raises
        ------
        InvalidInputError
            If `i` < 1.
        InvalidModelError
            If the query is a callable and m^s exceeds the exact limit.
        """
        check_int(i, "i", 1)
        if self._func is None:
            return self._closed_form(cmc.state_values, cmc.n_sequences, int(i))
        X = cmc.snapshots
        F = self(cmc.state_values[X])
        best = 0.0
        for a in range(len(X)):
            ham = (X[a + 1:] != X[a]).sum(axis=1)
            sel = ham <= i
            if np.any(sel):
                best = max(best, float(np.abs(F[a + 1:][sel] - F[a]).sum(axis=1).max()))
        return best

    def sensitivity(self, cmc: CouplingMarkovChain) -> float:
        """Δf = s_1(f), the ℓ1 sensitivity to one changed entry (eq. 2); see :meth:`sensitivity_at`."""
        return self.sensitivity_at(cmc, 1)

    def k_sensitivity(self, cmc: CouplingMarkovChain, k: int | None = None) -> float:
        """d(k) = s_k(f)/s_1(f) of Definition 8 (eq. 13); k defaults to the CMC's correlation degree.

        Returns
        -------
        float ≥ 1 (k for sum/mean/identity, 1 for max/min).

        Raises
        ------
        InvalidInputError
            If the query is constant (s_1 = 0: nothing to protect, Δf/ε_C undefined).
        """
        k = cmc.correlation_degree if k is None else k
        s1 = self.sensitivity(cmc)
        if s1 <= 0:
            raise InvalidInputError(f"query `{self.name}` is constant on this state space (s_1(f) = 0)")
        return self.sensitivity_at(cmc, k) / s1


def sound_leakage(distance, epsilon_c, d_k=1.0):
    """Sound CSDP leakage bound ε_S = ln(1 + Δ_k (e^{d(k) ε_C} − 1)) in nats (Luo et al. 2025, eq. 45, first line).

    Parameters
    ----------
    distance : float or array_like
        Δ_k(Λ, A_t) in [0, 1] (:meth:`CouplingMarkovChain.aged_distance`).
    epsilon_c : float or array_like
        Laplace level ε_C ≥ 0, nats.
    d_k : float
        k-sensitivity d(k) ≥ 0 (:meth:`Query.k_sensitivity`).

    Returns
    -------
    float or numpy.ndarray, nats; computed in log space (ε_C = 50 and Δ = 0 work).

    Raises
    ------
    InvalidInputError
        If `distance` is outside [0, 1], `epsilon_c` negative or `d_k` negative / not finite.

    Examples
    --------
    >>> round(float(sound_leakage(0.5, 1.0, 2.0)), 6)  # ln(1 + 0.5 (e^2 − 1))
    1.433781
    """
    if isinstance(d_k, bool) or not (isinstance(d_k, (int, float, np.integer, np.floating)) and math.isfinite(d_k) and d_k >= 0):
        raise InvalidInputError(f"`d_k` must be a finite number ≥ 0, got {fmt(d_k)}")
    eps = np.asarray(epsilon_c, dtype=float)
    if not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise InvalidInputError(f"`epsilon_c` must be finite and ≥ 0 (nats), got {fmt(epsilon_c)}")
    return risk_after_aging(distance, d_k * eps)  # same form as Theorem 1 (14) of Zhang et al. (2024) with d(k)·ε_C


def sound_leakage_upper(value, epsilon_c, d_k, max_age):
    """A computed sound leakage `value` rounded outward, for reports (nats; ``None`` stays ``None``).

    ε_S = ln(1 + Δ_k(e^{d(k)ε_C} − 1)) is computed in log space like Theorem 1 of Zhang et al.; its
    relative error is at most δ_Δ + 16·(8 + ``|ln Δ_k|`` + d(k)ε_C)·u, δ_Δ the relative error of Δ_k and
    u = 2⁻⁵³ (x/((1 + x) ln(1 + x)) ≤ 1 carries a relative error of x = Δ_k(e^{d(k)ε_C} − 1) to ε_S).
    Without Δ_k at hand the margin uses ``|ln Δ_k|`` ≤ 745 (every positive double) and
    δ_Δ = :func:`~policyopt.privacy.age_dependent.max_tv_rel_error` at `max_age`; that δ_Δ was measured
    for ``Population.log_max_tv``, and is assumed, not measured, for the coupled chain's distances.

    Parameters
    ----------
    value : float or None
        The computed ε_S (nats).
    epsilon_c : float
        ε_C (nats).
    d_k : float
        k-sensitivity d(k).
    max_age : int
        Largest AoI (slots) at which Δ_k was evaluated.

    References
    ----------
    Luo et al. (2025), FRAN, eq. (45); Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy",
    IEEE Trans. Inf. Theory, 2024, eq. (14).
    """
    if value is None or epsilon_c is None:
        return value
    m = max_tv_rel_error(max_age) + 16.0 * (8.0 + 745.0 + abs(d_k * epsilon_c)) * UNIT_ROUNDOFF
    return round_up(value, m)


def paper_leakage(distance, epsilon_c, d_k=1.0, *, warn: bool = True):
    """Luo et al.'s (2025) "loose" bound (15), ε_S = d(k)·Δ_k·ε_C — **unsound**, for reproducing the paper only.

    The paper derives it from ln(1 + x(e^y − 1)) ≤ x·y (Appendix B, eq. 45), which fails for every
    0 < x < 1, y > 0; this value can be below the true leakage (see :func:`exact_leakage`).

    Parameters
    ----------
    distance, epsilon_c, d_k : float or array_like
        As in :func:`sound_leakage`.
    warn : bool, keyword-only
        Issue a :class:`PaperBoundWarning` (default True).

    Returns
    -------
    float or numpy.ndarray, nats.

    Raises
    ------
    InvalidInputError
        As :func:`sound_leakage`.
    """
    sound_leakage(distance, epsilon_c, d_k)  # validation only
    if warn:
        warnings.warn("Luo et al.'s (2025) bound (15) is not an upper bound of the leakage (its proof's last step is false); "
                      "use the sound bound", PaperBoundWarning, stacklevel=2)
    out = d_k * np.asarray(distance, dtype=float) * np.asarray(epsilon_c, dtype=float)
    return float(out) if out.ndim == 0 else out


def paper_leakage_upper(value, max_age):
    """A computed paper value d(k)·Δ_k·ε_C (eq. 15) rounded outward, for reports (nats; ``None`` stays ``None``).

    Eq. (15) is **not** an upper bound of the leakage (see :func:`paper_leakage`); it is rounded up only so
    that every printed leakage is rounded in the same direction.  The product of three floats has a
    relative error of at most δ_Δ + 8u: δ_Δ = :func:`~policyopt.privacy.age_dependent.max_tv_rel_error` at
    `max_age` for Δ_k (assumed, as in :func:`sound_leakage_upper`), at most 4u for the computed d(k)
    (a quotient of two sensitivities) and 2u for the two products, u = 2⁻⁵³.

    Parameters
    ----------
    value : float or None
        The computed eq. (15) value, nats.
    max_age : int
        Largest AoI (slots) at which Δ_k was evaluated.

    Returns
    -------
    float or None

    References
    ----------
    Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025, eq. (15).
    """
    if value is None:
        return None
    return round_up(value, max_tv_rel_error(max_age) + 8.0 * UNIT_ROUNDOFF)


def _scalar_values(cmc, query) -> np.ndarray:
    F = query(cmc.state_values[cmc.snapshots])
    if F.shape[1] != 1:
        raise InvalidInputError(
            f"the exact leakage needs a scalar query (d = 1), query `{query.name}` has d = {F.shape[1]}"
        )
    return F[:, 0]


def exact_leakage(cmc: CouplingMarkovChain, query: Query, aoi, epsilon_c, *, kernel=None) -> float:
    """Exact CSDP leakage (Definition 6) of FRAN for a scalar query on a small joint chain, nats.

    sup over t-neighbouring snapshots x, x' (one entry differs) and output sets S of
    ln Pr[M ∈ S | x_t = x] / Pr[M ∈ S | x_t = x'], where M = f(z) + Lap(Δf/ε_C) and z is the aged
    snapshot (chain stationary).  For two Laplace mixtures with common atoms v_1 < … < v_n the
    density ratio is monotone between atoms (a Möbius map of e^{2y/b}) and constant beyond the
    extreme atoms, so the supremum over y is attained at an atom; all sums are log-sum-exp.

    Parameters
    ----------
    cmc : CouplingMarkovChain
    query : Query
        Scalar query (d = 1).
    aoi : int or array_like of int, shape (s,)
        AoI vector, slots.
    epsilon_c : float
        Laplace level ε_C > 0 (scale Δf/ε_C), nats.
    kernel : numpy.ndarray, optional
        Pr[z | x_t] if already computed (:meth:`CouplingMarkovChain.aged_kernel`).

    Returns
    -------
    float ≥ 0, nats.

    Raises
    ------
    InvalidInputError
        If the query is vector-valued or constant, `epsilon_c` is not positive, or
        m^s · n² exceeds :data:`EXACT_WORK_LIMIT` (n = number of distinct query values).
    InvalidModelError
        If m^s exceeds the exact limit.
    """
    from scipy.special import logsumexp

    eps = _check_eps(epsilon_c)
    F = _scalar_values(cmc, query)
    df = query.sensitivity(cmc)
    if df <= 0:
        raise InvalidInputError(f"query `{query.name}` is constant on this state space (s_1(f) = 0)")
    b = df / eps
    C = cmc.aged_kernel(aoi) if kernel is None else kernel
    v, inv = np.unique(F, return_inverse=True)
    if C.shape[0] * v.size ** 2 > EXACT_WORK_LIMIT:
        raise InvalidInputError(
            f"the exact leakage needs m^s · n² = {C.shape[0]} · {v.size}² operations for n = {v.size} distinct query "
            f"values, above {EXACT_WORK_LIMIT:.0e}; use the sound bound, or a query with fewer distinct values"
        )
    A = np.zeros((C.shape[0], v.size))
    np.add.at(A.T, inv, C.T)  # A[x, i] = Pr[f(z) = v_i | x]
    with np.errstate(divide="ignore"):
        logA = np.log(A)
    K = -np.abs(v[:, None] - v[None, :]) / b  # log of the Laplace kernel up to 1/(2b)
    L = logsumexp(logA[:, :, None] + K[None, :, :], axis=1)  # L[x, j] = ln(2b·g_x(v_j))
    pairs = cmc.neighbour_pairs()
    return float(max(0.0, np.max(L[pairs[:, 0]] - L[pairs[:, 1]])))


def _row_defect(T) -> float:
    """Largest ``|Σ_b T[a, b] − 1|`` over the rows of a stack of matrices, as an upper bound (fsum, + 2u)."""
    rows = np.asarray(T, dtype=float).reshape(-1, np.asarray(T).shape[-1])
    return max(abs(math.fsum(r) - 1.0) for r in rows) + 2.0 * UNIT_ROUNDOFF


def exact_leakage_margin(cmc: CouplingMarkovChain, query: Query, aoi, epsilon_c) -> float:
    """Absolute error bound (nats) of :func:`exact_leakage` at (`aoi`, `epsilon_c`), for :func:`exact_leakage_upper`.

    The exact leakage is that of the chain the inputs stand for: every row of every P^(jk) and of the
    coupling λ divided by its exact sum (rows of floats sum to 1 only within rounding, or within the
    1e-9 the model accepts).  With u = 2⁻⁵³, N = m^s snapshots, a = max A^(i), n distinct query values
    and R = (v_max − v_min)/Δf, the computation is followed step by step; every quantity up to the
    log is a sum of products of non-negative numbers, so relative errors add (first order):

    1. joint transition P (``CouplingMarkovChain.joint_chain``): δ_P = s·η + (3s² + s + 2)u, η the largest
       row defect ``|Σ_b P^(jk)[a, b] − 1|`` of the inputs (measured with ``math.fsum``);
    2. stationary π (GTH): δ_π = 2(N − 1)δ_P + 8N³u — by the Markov chain tree theorem π_x is a ratio of
       sums of products of N − 1 off-diagonal entries, so entry-wise relative perturbations δ_P move π_x by
       at most 2(N − 1)δ_P; GTH's own rounding is entry-wise O(N³u) (O'Cinneide, "Entrywise perturbation
       theory and error analysis for Markov chains", Numer. Math. 65, 1993); the constant 8 is a generous
       choice checked against 60-digit mpmath in ``tests/studies/test_fran_report.py``, not proved here;
    3. aged law W and kernel C = Pr[z | x_t] (``aged_joint``, ``aged_kernel``): a matrix products of
       non-negative N × N matrices add δ_P + Nu each, s recording steps Nu each, the division by π and the
       row normalisation give δ_C = 2(δ_W + δ_π + u) + (N + 1)u with δ_W = δ_π + a(δ_P + Nu) + sNu;
    4. A = Pr[f(z) = v_i | x]: δ_A = δ_C + Nu; ln A is then off by ≤ 1.01·δ_A + 745u (``|ln A|`` ≤ 745);
    5. the Laplace exponents K = −``|v_i − v_j|``·ε_C/Δf (``|K|`` ≤ ε_C R) are off by ≤ 5u·ε_C R, and log-sum-exp adds
       ≤ u(3(745 + ε_C R + ln n) + n + 4);
    6. the computed atoms v (sum/mean of state values) may be off by e_v ≤ (s + 1)u·s·V (sum) or (s + 1)u·V
       (mean), V = max ``|state value|`` (0 for max/min); moving every atom by ≤ e_v moves every log density
       by ≤ e_v ε_C/Δf, so the leakage by ≤ 2e_v ε_C/Δf;
    7. underflow: every operation may add an absolute 2⁻¹⁰⁷⁴; through (a + s + 4)N² operations, the
       division by π_min and log-sum-exp (whose argument is ≥ e^{−ε_C R}/n) this adds ≤
       (a + s + 4)N²n·2⁻¹⁰⁷⁴·e^{ε_C R}/π_min to ln A — negligible unless ε_C R is several hundred.

    The leakage is a difference of two log-sum-exps: margin = 1.001·(2·(errors of 4, 5, 7) + error of 6),
    the factor 1.001 covering second-order terms (all first-order relative errors are required ≤ 10⁻³).

    Parameters
    ----------
    cmc : CouplingMarkovChain
    query : Query
        A named scalar query (``sum``, ``mean``, ``max``, ``min``).
    aoi : int or array_like of int, shape (s,)
        AoI vector, slots.
    epsilon_c : float
        ε_C > 0, nats.

    Returns
    -------
    float
        ≥ 0, nats; ``math.inf`` for a callable query (its rounding is not analysed) or when a first-order
        relative error exceeds 10⁻³ (then no finite margin is claimed).

    Raises
    ------
    InvalidInputError
        As :func:`exact_leakage` (vector query, constant query, `epsilon_c` not positive, bad `aoi`).

    References
    ----------
    Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025,
    Definition 6 and Algorithm 1 (eqs. 9–10).
    """
    u = UNIT_ROUNDOFF
    eps = _check_eps(epsilon_c)
    F = _scalar_values(cmc, query)
    df = query.sensitivity(cmc)
    if df <= 0:
        raise InvalidInputError(f"query `{query.name}` is constant on this state space (s_1(f) = 0)")
    ages = np.broadcast_to(np.asarray(aoi), (cmc.n_sequences,))
    if query._func is not None:
        return math.inf
    s, N = cmc.n_sequences, cmc.n_snapshots
    a = int(np.max(ages))
    v = np.unique(F)
    n = int(v.size)
    R = float(v[-1] - v[0]) / df
    V = float(np.max(np.abs(cmc.state_values)))
    eta = max(_row_defect(cmc.transitions), _row_defect(cmc.coupling))
    d_P = s * eta + (3 * s * s + s + 2) * u  # 1.
    d_pi = 2 * (N - 1) * d_P + 8.0 * N ** 3 * u  # 2.
    d_W = d_pi + a * (d_P + N * u) + s * N * u  # 3.
    d_C = 2 * (d_W + d_pi + u) + (N + 1) * u
    d_A = d_C + N * u  # 4.
    if d_A > 1e-3:
        return math.inf
    e_logA = 1.01 * d_A + 745.0 * u
    e_K = 5.0 * u * eps * R  # 5.
    e_lse = u * (3.0 * (745.0 + eps * R + math.log(n)) + n + 4)
    e_v = {"sum": (s + 1) * u * s * V, "mean": (s + 1) * u * V}.get(query.name, 0.0)  # 6.
    e_atoms = 2.0 * e_v * eps / df
    pi_min = float(np.min(cmc.joint_stationary))
    log_uf = math.log((a + s + 4) * N * N * n) - 1074 * math.log(2.0) + eps * R - math.log(pi_min)  # 7.
    e_uf = math.exp(log_uf) if log_uf < 700 else math.inf
    return 1.001 * (2.0 * (e_logA + e_K + e_lse + e_uf) + e_atoms)


def exact_leakage_upper(value, cmc: CouplingMarkovChain, query: Query, aoi, epsilon_c):
    """A computed :func:`exact_leakage` `value` rounded outward with :func:`exact_leakage_margin` (nats).

    Returns ``round_up(value, 2u, margin)``: the relative 2u covers the final subtraction of two
    log-sum-exps, u = 2⁻⁵³.  ``None`` stays ``None``; an infinite margin gives ``inf`` (no finite bound).

    Parameters
    ----------
    value : float or None
        The computed exact leakage, nats.
    cmc, query, aoi, epsilon_c
        As in :func:`exact_leakage`.

    Returns
    -------
    float or None

    Raises
    ------
    InvalidInputError
        As :func:`exact_leakage_margin`.
    """
    if value is None:
        return None
    margin = exact_leakage_margin(cmc, query, aoi, epsilon_c)
    if not math.isfinite(margin):
        return math.inf
    return round_up(value, 2.0 * UNIT_ROUNDOFF, margin)


def tight_distance(cmc: CouplingMarkovChain, aoi) -> float:
    """Δ̄(Λ, A_t) of Definition 10 (eqs. 16–18), implemented as printed.

    For each sequence i and snapshot x = (x_{−i}, x_i):
    ḡ(x) / g̲(x) = max / min over (z_{−i}, z_i) of
    Pr[x_i | x_{−i}, z_{−i}] Pr[x_{−i} | x_i, z_i] / (Pr[x_i | x_{−i}] Pr[x_{−i} | x_i]), over the
    aged values whose conditioning event has positive probability (the ratio separates into a
    z_{−i} factor and a z_i factor).  Δ̄ = max over i, x_{−i}, x_i ≠ x'_i of
    δ(ḡ(x_{−i}, x_i) Pr[z_i | x_i], g̲(x_{−i}, x'_i) Pr[z_i | x'_i]) with δ(P, Q) = sup_E ``|P(E) − Q(E)|``
    (the measures need not sum to 1).

    Parameters
    ----------
    cmc : CouplingMarkovChain
    aoi : int or array_like of int, shape (s,)

    Returns
    -------
    float ≥ 0 (may exceed 1 because ḡ ≥ 1).

    Raises
    ------
    InvalidModelError
        If m^s exceeds the exact limit.
    """
    W = cmc.aged_joint(aoi)
    s, m = cmc.n_sequences, cmc.n_states
    pi = cmc.joint_stationary
    shape = (m,) * s
    Wt = W.reshape(shape + shape)  # Wt[z_1..z_s, x_1..x_s]
    pit = pi.reshape(shape)
    best = 0.0
    tiny = 1e-300
    for i in range(s):
        # Pr[x_i | x_-i] and Pr[x_-i | x_i]
        p_xi_given_rest = pit / pit.sum(axis=i, keepdims=True)
        p_rest_given_xi = pit / pit.sum(axis=tuple(j for j in range(s) if j != i), keepdims=True)
        # J[z_-i, x] = Pr[z_-i, x]; R1 = Pr[x_i | x_-i, z_-i] / Pr[x_i | x_-i]
        J = Wt.sum(axis=i)  # shape (m,)*(s-1) + shape
        J_norm = J.sum(axis=(s - 1) + i, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            R1 = (J / J_norm) / p_xi_given_rest
        defined1 = np.broadcast_to(J_norm > tiny, R1.shape)
        zr_axes = tuple(range(s - 1))
        r1_max = np.where(defined1, R1, -np.inf).max(axis=zr_axes) if s > 1 else np.ones(shape)
        r1_min = np.where(defined1, R1, np.inf).min(axis=zr_axes) if s > 1 else np.ones(shape)
        # K[z_i, x] = Pr[z_i, x]; R2 = Pr[x_-i | x_i, z_i] / Pr[x_-i | x_i]
        K = Wt.sum(axis=tuple(j for j in range(s) if j != i))  # shape (m,) + shape
        rest_x = tuple(1 + j for j in range(s) if j != i)
        K_norm = K.sum(axis=rest_x, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            R2 = (K / K_norm) / p_rest_given_xi[None]
        defined2 = np.broadcast_to(K_norm > tiny, R2.shape)
        r2_max = np.where(defined2, R2, -np.inf).max(axis=0)
        r2_min = np.where(defined2, R2, np.inf).min(axis=0)
        g_hi = r1_max * r2_max  # eq. (17), shape (m,)*s over x
        g_lo = r1_min * r2_min  # eq. (18)
        # Pr[z_i | x_i]: (m, m) matrix [x_i, z_i]
        Kz = K.sum(axis=rest_x)  # [z_i, x_i]
        cond = (Kz / Kz.sum(axis=0, keepdims=True)).T
        g_hi_m = np.moveaxis(g_hi, i, -1).reshape(-1, m)  # rows: x_-i, cols: x_i
        g_lo_m = np.moveaxis(g_lo, i, -1).reshape(-1, m)
        for a in range(m):
            for b in range(m):
                if a == b:
                    continue
                P = g_hi_m[:, a:a + 1] * cond[a][None, :]
                Qm = g_lo_m[:, b:b + 1] * cond[b][None, :]
                diff = P - Qm
                dist = np.maximum(np.clip(diff, 0, None).sum(axis=1), np.clip(-diff, 0, None).sum(axis=1))
                best = max(best, float(np.nanmax(dist)))
    return best


def tight_leakage(cmc: CouplingMarkovChain, aoi, epsilon_c) -> float:
    """Luo et al.'s (2025) "tight" bound (19), ε_S = Δ̄(Λ, A_t)·ε_C — **not an upper bound** of the leakage.

    Implemented as printed for comparison.  It is below :func:`exact_leakage` on some CMCs
    (``tests/privacy/test_fran.py::test_tight_bound_is_not_an_upper_bound``): the proof bounds only the
    ratios R1, R2 of (51), drops R3 ("incorporated into the bounded aged correlation") and ends
    with the same false linearisation as Theorem 1; nor does it carry the k-sensitivity.

    Parameters
    ----------
    cmc, aoi : see :func:`tight_distance`
    epsilon_c : float
        ε_C > 0, nats.

    Returns
    -------
    float, nats.

    Raises
    ------
    InvalidInputError
        If `epsilon_c` is not positive.
    """
    return tight_distance(cmc, aoi) * _check_eps(epsilon_c)


def distortion(cmc: CouplingMarkovChain, query: Query, aoi, *, joint=None) -> float:
    """Aging part of the MSE (22): E‖f(z) − f(x_t)‖² under the stationary joint chain.

    Parameters
    ----------
    cmc : CouplingMarkovChain
    query : Query
    aoi : int or array_like of int, shape (s,)
    joint : numpy.ndarray, optional
        Pr[z, x_t] (:meth:`CouplingMarkovChain.aged_joint`) if already computed.

    Returns
    -------
    float ≥ 0, squared query units.
    """
    W = cmc.aged_joint(aoi) if joint is None else joint
    F = query(cmc.state_values[cmc.snapshots])
    sq = (F * F).sum(axis=1)
    # Σ_{z,x} W[z,x] (|F_z|² − 2 F_z·F_x + |F_x|²)
    val = W.sum(axis=1) @ sq + W.sum(axis=0) @ sq - 2.0 * np.einsum("zd,zx,xd->", F, W, F)
    return max(0.0, float(val))


def mse(cmc: CouplingMarkovChain, query: Query, aoi, epsilon_c, *, joint=None) -> float:
    """l_MSE(A_t, ε_C) of eq. (22) in closed form: distortion + d·2(Δf/ε_C)².

    The Laplace noise is independent of the data with variance 2(Δf/ε_C)² in each of the d
    output dimensions, so the cross term vanishes.

    Parameters
    ----------
    cmc, query, aoi, joint : see :func:`distortion`
    epsilon_c : float
        ε_C > 0, nats.

    Returns
    -------
    float, squared query units.

    Raises
    ------
    InvalidInputError
        If `epsilon_c` is not positive.
    """
    eps = _check_eps(epsilon_c)
    df = query.sensitivity(cmc)
    d = query(cmc.state_values[cmc.snapshots[:1]]).shape[1]
    return distortion(cmc, query, aoi, joint=joint) + d * 2.0 * (df / eps) ** 2


class FRAN:
    """The FRAN release mechanism, Algorithm 1 of Luo et al. (2025): age every sequence, then add Laplace noise.

    Parameters
    ----------
    query : Query or str
        f; a name is passed to :class:`Query`.
    aoi : array_like of int, shape (s,)
        AoI vector A_t (slots): sequence i is released as x^(i)_{t − A^(i)} (eq. 9).
    epsilon_c : float
        Laplace level ε_C > 0 (nats); the noise scale is Δf/ε_C (eq. 10).
    sensitivity : float
        Δf > 0 of `query` (e.g. ``Query("mean").sensitivity(cmc)``; for a mean of s values in
        [lo, hi] it is (hi − lo)/s).

    Raises
    ------
    InvalidInputError
        If `aoi` has a negative/non-integral age, or `epsilon_c` / `sensitivity` is not positive.

    Notes
    -----
    :meth:`release` draws the noise with OpenDP's Laplace measurement (a vector-domain
    ``make_laplace`` on floats, ``scale`` = Δf/ε_C, density e^{−``|y|``/scale}/(2·scale)); this is the
    only path meant for publication.  :attr:`opendp_epsilon` is OpenDP's own privacy map at
    input distance Δf (≥ ε_C by OpenDP's rounding-safe arithmetic).  :func:`simulate_release`
    uses numpy and is for Monte Carlo utility estimates only — **not private**.
    """

    def __init__(self, query, aoi, epsilon_c, sensitivity):
        self.query = query if isinstance(query, Query) else Query(query)
        from policyopt.models.markov import as_slots

        ages = as_slots(np.asarray(aoi).reshape(-1), "aoi")
        if ages.size == 0:
            raise InvalidInputError(f"`aoi` must hold one age per sequence, got {fmt(aoi)}")
        self.aoi = tuple(int(a) for a in ages)
        self.epsilon_c = _check_eps(epsilon_c)
        self.sensitivity = _check_eps(sensitivity, "sensitivity")
        self.scale = self.sensitivity / self.epsilon_c
        self._meas = {}

    def __repr__(self) -> str:
        return f"FRAN(query={self.query.name!r}, aoi={list(self.aoi)}, epsilon_c={self.epsilon_c:g})"

    def age(self, history, t: int | None = None) -> np.ndarray:
        """Phase 1 of Algorithm 1 (eq. 9): the aged snapshot x̃_t = (x^(i)_{t − A^(i)})_i.

        Parameters
        ----------
        history : array_like, shape (T, s)
            Values of the s sequences in slots 0..T−1.
        t : int, optional
            Current slot (default T − 1).

        Returns
        -------
        numpy.ndarray, shape (s,)

        Raises
        ------
        InvalidInputError
            If the shape does not match the AoI vector or t − A^(i) < 0 for some i.
        """
        H = np.asarray(history, dtype=float)
        s = len(self.aoi)
        if H.ndim != 2 or H.shape[1] != s:
            raise InvalidInputError(f"`history` must have shape (T, {s}), got {H.shape}")
        t = H.shape[0] - 1 if t is None else t
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not (0 <= t < H.shape[0]):
            raise InvalidInputError(f"`t` must be a slot in 0..{H.shape[0] - 1}, got {fmt(t)}")
        idx = t - np.asarray(self.aoi)
        if np.any(idx < 0):
            i = int(np.flatnonzero(idx < 0)[0])
            raise InvalidInputError(f"`t`={t} is younger than the age A^({i})={self.aoi[i]}: no aged value yet")
        return H[idx, np.arange(s)]

    def _measurement(self, d: int):
        if d not in self._meas:
            import opendp.prelude as dp

            dp.enable_features("contrib")
            space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=d), dp.l1_distance(T=float)
            self._meas[d] = dp.m.make_laplace(*space, scale=self.scale)
        return self._meas[d]

    @property
    def opendp_epsilon(self) -> float:
        """OpenDP's privacy map of the noise measurement at input distance Δf (nats), ≥ ε_C."""
        d = 1 if self.query.name != "identity" else len(self.aoi)
        return float(self._measurement(d).map(self.sensitivity))

    def release(self, history, t: int | None = None) -> np.ndarray:
        """Algorithm 1: f(x̃_t) + Lap(Δf/ε_C) with OpenDP's sampler (the private path).

        Parameters
        ----------
        history : array_like, shape (T, s)
        t : int, optional

        Returns
        -------
        numpy.ndarray, shape (d,)

        Raises
        ------
        InvalidInputError
            As :meth:`age`.
        """
        value = np.ascontiguousarray(self.query(self.age(history, t)), dtype=float)
        return np.asarray(self._measurement(value.size)(value), dtype=float)


def simulate_release(mechanism: FRAN, history, rng, t: int | None = None, size: int | None = None) -> np.ndarray:
    """SIMULATION ONLY, NOT PRIVATE: FRAN's output with numpy's Laplace noise, for Monte Carlo.

    Parameters
    ----------
    mechanism : FRAN
    history : array_like, shape (T, s)
    rng : numpy.random.Generator
        Seeded generator.
    t : int, optional
        Current slot.
    size : int, optional
        Number of independent noise draws (output shape (size, d)).

    Returns
    -------
    numpy.ndarray, shape (d,) or (size, d).
    """
    value = mechanism.query(mechanism.age(history, t))
    shape = value.shape if size is None else (size,) + value.shape
    return value + rng.laplace(0.0, mechanism.scale, size=shape)  # simulation only, not private
