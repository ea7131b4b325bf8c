"""Failure rate f_MLE of the two-state example: eqs. (50)–(51) of Zhang et al. (2024), computed exactly.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Example 1, eqs. (43)–(44), (48), (50)–(51),
Figs. 5 and 6(b).

Model.  I users follow the chain (43) on the states −1/+1 (P(−1 → +1) = p, P(+1 → −1) = q) and
are stationary and independent.  The release is M(X_0) = (1/I) Σ_i x_{i,0} + n with Laplace noise
of scale b = (2/I)/ε_C (the mean of ±1 values has sensitivity 2/I, Proposition 1; the paper's
(48) uses 1/(ε_C I), which is only 2ε_C-DP).  The analyst decides whether the *current* mean is
≥ 0, z_t = 1{(1/I) Σ_i x_{i,t} ≥ 0}, from the t-slot-old release, and the penalty is the
probability that the decision is wrong.

Exact computation.  Everything depends on X_0 only through K_0 (the number of users at +1).
Given K_0 = k, K_t is the sum of two independent binomials, Bin(k, P_t(+1, +1)) + Bin(I − k,
P_t(−1, +1)) (a Poisson-binomial with two distinct probabilities, (44)), so
q_1(k) = Pr[z_t = 1 | K_0 = k] is a finite sum.  The decision region {M : decide z_t = 1} is a
finite union of intervals whose end points are known in closed form (below), and the noise is
Laplace, so Pr[M ∈ region | K_0 = k] is a sum of Laplace CDF differences.  Then

    f(t, ε_C | K_0 = k) = q_1(k) Pr[M ∉ R | k] + (1 − q_1(k)) Pr[M ∈ R | k]          (51)

and the stationary average is Σ_k Bin(k; I, π(+1)) f(t, ε_C | k).

Speed.  The means are evenly spaced, m_k/b = (k − I/2) ε_C, so the sums that locate the region and
the integral of the posterior difference over it follow from two Horner recurrences in r = e^{−ε_C}
(:meth:`FailureRatePenalty.value`): O(I) per (t, ε_C) instead of the O(I²) of the per-count interval
algebra, which stays available as :meth:`FailureRatePenalty.conditional_value`.

Decision rules (``rule``):

* ``"posterior"`` — eq. (50) literally: decide 1 iff Pr[z_t = 1 | M] ≥ Pr[z_t = 0 | M], the
  posterior taken under the stationary prior of X_0 (ties → 1).  The sign of
  Σ_k c_k e^{−|M − m_k|/b}, c_k = w_k (q_1(k) − q_0(k)), m_k = (2k − I)/I, w the prior, is on each
  interval between consecutive m_k that of A + B e^{2M/b} with constants A, B, which changes sign
  at most once, at M = (b/2) ln(−A/B); A and B are computed as signed log-sum-exps, so large ε_C
  (b → 0) does not overflow.
* ``"sign"`` — the plug-in rule "decide 1 iff M ≥ 0".  This rule reproduces the limit 0.5 that
  the paper states for Fig. 5(a) (t → ∞, stationary X_0, p = q, any finite ε_C); the posterior
  rule has the smaller limit min(Pr[z = 1], Pr[z = 0]) (≈ 0.412 for p = q, I = 20, because ties
  count as z = 1).

Monotonicity.  For the posterior rule averaged over the stationary X_0, f is the Bayes risk of
deciding z_t from M, and it is non-increasing in ε_C: Laplace(b₂) is Laplace(b₁) plus an independent
noise for b₂ ≥ b₁ (its characteristic function is (b₁/b₂)² + (1 − (b₁/b₂)²)/(1 + b₂²ω²) times
that of Laplace(b₁)), so a noisier release is a garbling of a less noisy one (Blackwell).  No
such argument holds for the sign rule or conditional on a given X_0, nor for monotonicity in t;
those are *checked* with :meth:`~policyopt.utility.penalty.Penalty.check_monotonicity`, and the penalty
sets ``monotone_in_epsilon`` False so that the solvers scan budgets on a grid instead of
relying on it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.models.markov import as_slots
from policyopt.utility.penalty import Penalty, check_monte_carlo_args

__all__ = ["FailureRatePenalty", "simulate_failure_rate", "laplace_cdf", "RULES"]

#: Decision rules of :class:`FailureRatePenalty`.
RULES = ("posterior", "sign")


def laplace_cdf(x):
    """CDF of the standard Laplace distribution (scale 1), element-wise; ±inf allowed.

    Parameters
    ----------
    x : float or numpy.ndarray

    Returns
    -------
    numpy.ndarray
        P(L ≤ x) for L ~ Laplace(0, 1), the shape of `x` (no overflow for large ``abs(x)``).
    """
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore"):
        return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(x, 0.0)))


class FailureRatePenalty(Penalty):
    """Failure rate f_MLE(t, ε_C) of eqs. (50)–(51) for the two-state example, exact.

    Parameters
    ----------
    p, q : float
        Transition probabilities of (43): P(−1 → +1) = p, P(+1 → −1) = q, both in (0, 1].
    n_users : int
        I ≥ 1.
    x0 : None, int or array_like of ±1, optional
        ``None`` (default): average over the stationary X_0.  An int k in 0..I, or the vector
        of the I users' values at the release time: the failure rate conditional on X_0 (only
        the number of users at +1 matters), as (51) is written.
    rule : {"posterior", "sign"}
        Decision rule, see the module docstring.

    Attributes
    ----------
    sensitivity : float
        2/I, the sensitivity of the mean of ±1 values; the noise scale is sensitivity/ε_C.
    monotone_in_epsilon : bool
        True only for the posterior rule averaged over the stationary X_0 (proven); False
        otherwise (checked, not assumed).

    Raises
    ------
    InvalidInputError
        If p or q is not in (0, 1], `n_users` < 1, `x0` is not a count in 0..I or a ±1 vector of
        length I, or `rule` is unknown.

    References
    ----------
    Zhang et al. (2024), Example 1, (43)–(44), (48), (50)–(51), Fig. 5.
    """

    name = "failure-rate"
    unit = "probability"
    smooth = False

    def __init__(self, p: float, q: float, n_users: int, *, x0=None, rule: str = "posterior"):
        for nm, v in (("p", p), ("q", q)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not 0.0 < float(v) <= 1.0:
                raise InvalidInputError(f"`{nm}` must be a transition probability in (0, 1], got {fmt(v)}")
        check_int(n_users, "n_users", 1)
        if rule not in RULES:
            raise InvalidInputError(f"`rule` must be one of {list(RULES)}, got {fmt(rule)}")
        self.p, self.q, self.n_users, self.rule = float(p), float(q), int(n_users), rule
        I = self.n_users
        self.x0 = None if x0 is None else self._check_x0(x0)
        self.lam = 1.0 - self.p - self.q  # eigenvalue of (43)
        self.pi_plus = self.p / (self.p + self.q)  # stationary Pr(+1)
        self.sensitivity = 2.0 / I
        self.monotone_in_epsilon = rule == "posterior" and self.x0 is None
        k = np.arange(I + 1)
        self._means = (2.0 * k - I) / I  # m_k: the mean when k users are at +1
        from scipy.stats import binom  # here, not at import: scipy.stats costs about 1 s per process

        self._log_prior = binom.logpmf(k, I, self.pi_plus)
        self._q_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if x0 is None:
            self.name = f"failure-rate-{rule}"
        else:
            self.name = f"failure-rate-{rule}-given-x0"

    def _check_x0(self, x0) -> int:
        I = self.n_users
        if isinstance(x0, (int, np.integer)) and not isinstance(x0, bool):
            if not 0 <= x0 <= I:
                raise InvalidInputError(f"`x0` as a count of users at +1 must be in 0..{I}, got {fmt(x0)}")
            return int(x0)
        arr = np.asarray(x0)
        if arr.shape != (I,) or not np.all(np.isin(arr, (-1, 1))):
            raise InvalidInputError(f"`x0` must be None, a count in 0..{I}, or {I} values in {{-1, +1}}, got {fmt(x0)}")
        return int((arr == 1).sum())

    def __repr__(self) -> str:
        return f"FailureRatePenalty(p={self.p!r}, q={self.q!r}, n_users={self.n_users}, x0={self.x0!r}, rule={self.rule!r})"

    # --- the Poisson-binomial part -------------------------------------------------------
    def decision_probabilities(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Pr[z_t = 1 | K_0 = k] and Pr[z_t = 0 | K_0 = k] for k = 0..I, each shape (I + 1,).

        K_t | K_0 = k ~ Bin(k, P_t(+1, +1)) + Bin(I − k, P_t(−1, +1)), with P_t from (44):
        P_t(+1, +1) = π₊ + λ^t π₋ and P_t(−1, +1) = π₊(1 − λ^t), λ = 1 − p − q.  Both tails are
        summed separately (no 1 − x cancellation).

        Parameters
        ----------
        t : int
            Age (slots, ≥ 0).
        """
        (t,) = as_slots([t], "t")
        t = int(t)
        if t not in self._q_cache:
            I = self.n_users
            lam_t = self.lam**t
            pi_p, pi_m = self.pi_plus, 1.0 - self.pi_plus
            a = min(1.0, max(0.0, pi_p + lam_t * pi_m))  # (44): P_t(+1, +1)
            c = min(1.0, max(0.0, pi_p * (1.0 - lam_t)))  # (44): P_t(−1, +1)
            half = math.ceil(I / 2)  # z_t = 1 iff 2K_t − I ≥ 0 iff K_t ≥ ⌈I/2⌉
            q1 = np.empty(I + 1)
            q0 = np.empty(I + 1)
            ks = np.arange(I + 1)
            from scipy.stats import binom

            pa = binom.pmf(ks[None, :], ks[:, None], a)  # row k: Bin(k, a) (zero beyond k)
            pc = binom.pmf(ks[None, :], ks[:, None], c)
            for k in range(I + 1):
                pmf = np.convolve(pa[k, : k + 1], pc[I - k, : I - k + 1])
                q1[k] = pmf[half:].sum()
                q0[k] = pmf[:half].sum()
            self._q_cache[t] = (q1, q0)
        return self._q_cache[t]

    # --- the decision region -------------------------------------------------------------
    def _region(self, t: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Decision region {M : decide z_t = 1} as intervals [L, H]; arrays of shape (n_b, I + 2)."""
        I = self.n_users
        m = self._means
        n = b.size
        if self.rule == "sign":
            L = np.zeros((n, 1))
            return L, np.full((n, 1), np.inf)
        q1, q0 = self.decision_probabilities(t)
        w = np.exp(self._log_prior)
        coef = w * (q1 - q0)  # c_k: posterior weight of z = 1 minus that of z = 0, up to a factor
        J = I + 2  # intervals (m_{j−1}, m_j), j = 0..I+1, with m_{−1} = −∞, m_{I+1} = +∞
        left = np.arange(I + 1)[None, :] < np.arange(J)[:, None]  # (J, K): m_k left of interval j
        x = (m[None, :] / b[:, None])[:, None, :]  # (n, 1, K)
        lA, sA = logsumexp(np.broadcast_to(x, (n, J, I + 1)), axis=-1, b=coef * left, return_sign=True)
        lB, sB = logsumexp(np.broadcast_to(-x, (n, J, I + 1)), axis=-1, b=coef * ~left, return_sign=True)
        # an empty or all-zero sum (no point on that side) is 0: sign 0, log −inf (scipy may give NaN)
        sA, sB = np.nan_to_num(sA, nan=0.0), np.nan_to_num(sB, nan=0.0)
        lA, lB = np.where(sA == 0, -np.inf, lA), np.where(sB == 0, -np.inf, lB)
        lo = np.concatenate(([-np.inf], m))[None, :]
        hi = np.concatenate((m, [np.inf]))[None, :]
        with np.errstate(invalid="ignore"):
            root = np.clip(0.5 * b[:, None] * (lA - lB), lo, hi)  # where A + B e^{2M/b} = 0
        whole = (sA >= 0) & (sB >= 0)  # g ≥ 0 on the whole interval (ties decide 1)
        dec = (sA > 0) & (sB < 0)  # g decreasing: region is [lo, root]
        inc = (sA < 0) & (sB > 0)  # g increasing: region is [root, hi]
        lo_b, hi_b = np.broadcast_to(lo, (n, J)), np.broadcast_to(hi, (n, J))
        L = np.where(whole | dec, lo_b, np.where(inc, root, lo_b))
        H = np.where(whole | inc, hi_b, np.where(dec, root, lo_b))
        return L, H

    def decide(self, t: int, released, epsilon_c: float) -> np.ndarray:
        """The decision g(M) ∈ {0, 1} for released values `M` (any shape), computed directly.

        The posterior rule evaluates Pr[z_t = x | M] ∝ Σ_k w_k q_x(k) e^{−|M − m_k|/b} with
        log-sum-exps at each M (an independent path from the interval algebra used by
        :meth:`value`); the sign rule is 1{M ≥ 0}.

        Parameters
        ----------
        t : int
            Age (slots).
        released : array_like of float
            Released values M(X_0).
        epsilon_c : float
            Budget (nats, > 0) that set the noise scale b = (2/I)/ε_C.

        Returns
        -------
        numpy.ndarray of int, shape of `released`.
        """
        M = np.asarray(released, dtype=float)
        if self.rule == "sign":
            return (M >= 0).astype(int)
        b = self.sensitivity / float(epsilon_c)
        q1, q0 = self.decision_probabilities(t)
        logl = self._log_prior - np.abs(M[..., None] - self._means) / b
        with np.errstate(divide="ignore"):
            l1 = logsumexp(logl + np.log(q1), axis=-1)
            l0 = logsumexp(logl + np.log(q0), axis=-1)
        return (l1 >= l0).astype(int)

    # --- the penalty ---------------------------------------------------------------------
    def _given_k(self, t: int, eps: np.ndarray) -> np.ndarray:
        """f(t, ε_C | K_0 = k) for all k; shape (len(eps), I + 1).  ε_C = inf gives the noiseless limit."""
        q1, q0 = self.decision_probabilities(t)
        out = np.empty((eps.size, self.n_users + 1))
        fin = np.isfinite(eps)
        if fin.any():
            b = self.sensitivity / eps[fin]
            L, H = self._region(t, b)
            z_hi = (H[:, :, None] - self._means[None, None, :]) / b[:, None, None]
            z_lo = (L[:, :, None] - self._means[None, None, :]) / b[:, None, None]
            with np.errstate(invalid="ignore"):
                p_in = np.where(H[:, :, None] > L[:, :, None], laplace_cdf(z_hi) - laplace_cdf(z_lo), 0.0).sum(axis=1)
            p_in = np.clip(p_in, 0.0, 1.0)
            out[fin] = q1 * (1.0 - p_in) + q0 * p_in  # (51)
        if (~fin).any():
            # ε_C → ∞: M = m_k exactly; the posterior concentrates on K_0 = k (prior > 0)
            one = (q1 >= q0) if self.rule == "posterior" else (self._means >= 0)
            out[~fin] = np.where(one, q0, q1)
        return out

    def conditional_value(self, t, epsilon_c) -> np.ndarray:
        """f(t, ε_C | K_0 = k) of (51) for every count k = 0..I, by the interval algebra over all counts.

        The decision region is found with signed log-sum-exps over the I + 1 means on each of the
        I + 2 intervals, and Pr[M ∈ R | K_0 = k] as a sum of Laplace CDF differences for every k:
        O(I²) work per (t, ε_C).  :meth:`value` computes the same average in O(I) per point by
        recurrences (see :meth:`_risk`); this path is the independent reference for it.

        Parameters
        ----------
        t : int
            Age (slots, ≥ 0).
        epsilon_c : array_like of float
            Budgets (nats, > 0; ``inf`` for the noiseless limit), shape (n,) or scalar.

        Returns
        -------
        numpy.ndarray, shape (n, I + 1)
            Probability of a wrong decision given K_0 = k users at +1.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral, or a budget is not positive.
        """
        (tv,) = as_slots([t], "t")
        e = np.atleast_1d(np.asarray(epsilon_c, dtype=float)).reshape(-1)
        if np.any(np.isnan(e)) or np.any(e <= 0):
            raise InvalidInputError(f"`epsilon_c` must be positive (nats), got {fmt(epsilon_c)}")
        return self._given_k(int(tv), e)

    def _risk(self, t: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """f_MLE at the pairs (t[i], eps[i]) (1-D arrays, eps > 0 or inf) in O(I) per pair.

        With b = (2/I)/ε_C the means are m_k/b = (k − I/2) ε_C, so on the interval j = (m_{j−1}, m_j)
        the two sums of :meth:`_region` are A_j = e^{m_{j−1}/b} Ã_j and B_j = e^{−m_j/b} B̃_j with
        Ã_j = Σ_{k<j} c_k r^{j−1−k}, B̃_j = Σ_{k≥j} c_k r^{k−j}, r = e^{−ε_C} ≤ 1: two Horner
        recurrences whose terms never overflow.  The root of A + B e^{2M/b} is
        (m_{j−1} + m_j)/2 + (b/2) ln(|Ã_j| / |B̃_j|).  Averaged over the stationary X_0, (51) is
        Pr[z = 1] − ∫_R g(M) dM with g(M) = Σ_k c_k Lap_b(M − m_k), and on interval j
        ∫_L^H g = −½ Ã_j [e^{−(H − m_{j−1})/b} − e^{−(L − m_{j−1})/b}] + ½ B̃_j [e^{(H − m_j)/b} − e^{(L − m_j)/b}],
        again with non-positive exponents.  Given X_0 only the count x0's Laplace CDFs are needed.
        """
        I = self.n_users
        K = I + 1
        w = np.exp(self._log_prior)
        m = self._means
        ut, inv = np.unique(t, return_inverse=True)
        qs = [self.decision_probabilities(int(v)) for v in ut]
        Q1 = np.stack([q[0] for q in qs])[inv]  # (n, K)
        Q0 = np.stack([q[1] for q in qs])[inv]
        out = np.empty(t.shape)
        fin = np.isfinite(eps)
        if (~fin).any():  # ε_C → ∞: M = m_k exactly
            one = (Q1[~fin] >= Q0[~fin]) if self.rule == "posterior" else (m >= 0)[None, :]
            given = np.where(one, Q0[~fin], Q1[~fin])
            out[~fin] = given[:, self.x0] if self.x0 is not None else given @ w
        if not fin.any():
            return out
        e = eps[fin]
        q1, q0 = Q1[fin], Q0[fin]
        b = self.sensitivity / e
        n = e.size
        if self.rule == "sign":  # region [0, ∞): Pr[M ≥ 0 | k] = 1 − F(−m_k / b) per count
            ks = slice(None) if self.x0 is None else slice(self.x0, self.x0 + 1)
            p_in = np.clip(1.0 - laplace_cdf(-m[None, ks] / b[:, None]), 0.0, 1.0)
            given = q1[:, ks] * (1.0 - p_in) + q0[:, ks] * p_in
            out[fin] = given[:, 0] if self.x0 is not None else given @ w
            return out
        # (K, n): counts along the first axis, pairs contiguous; gathered from the per-age table
        Cu = np.ascontiguousarray((w * (np.stack([q[0] for q in qs]) - np.stack([q[1] for q in qs]))).T)
        c = Cu[:, inv[fin]]
        r = np.exp(-e)
        J = K + 1
        At = np.zeros((J, n))
        Bt = np.zeros((J, n))
        for j in range(1, J):
            np.multiply(At[j - 1], r, out=At[j])
            At[j] += c[j - 1]
        for j in range(K - 1, -1, -1):
            np.multiply(Bt[j + 1], r, out=Bt[j])
            Bt[j] += c[j]
        na, nb = At < 0, Bt < 0
        whole = ~(na | nb)  # g ≥ 0 on the whole interval (ties decide 1)
        dec = (At > 0) & nb  # g decreasing: region [m_{j−1}, root]
        inc = na & (Bt > 0)  # g increasing: region [root, m_j]
        # (only 1 ≤ j ≤ I can be dec or inc: Ã_0 = B̃_{I+1} = 0)
        if self.x0 is not None:
            lo = np.concatenate(([-np.inf], m))[:, None]
            hi = np.concatenate((m, [np.inf]))[:, None]
            mid = 0.5 * (np.concatenate(([m[0]], m)) + np.concatenate((m, [m[-1]])))[:, None]
            bb = b[None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                root = np.clip(mid + 0.5 * bb * (np.log(np.abs(At)) - np.log(np.abs(Bt))), lo, hi)
            L = np.where(inc, root, lo)
            H = np.where(whole | inc, hi, np.where(dec, root, lo))
            mk = m[self.x0]
            with np.errstate(invalid="ignore"):
                d = laplace_cdf((H - mk) / bb) - laplace_cdf((L - mk) / bb)
            p_in = np.clip(np.where(H > L, d, 0.0).sum(axis=0), 0.0, 1.0)
            out[fin] = q1[:, self.x0] * (1.0 - p_in) + q0[:, self.x0] * p_in
            return out
        # ∫_R g: a whole interior interval contributes ½(1 − r)(Ã_j + B̃_j), the outer ones ½B̃_0 and ½Ã_{I+1}
        full = At + Bt
        full *= whole
        integral = (0.5 * -np.expm1(-e)) * full[1:-1].sum(axis=0) + 0.5 * (Bt[0] * whole[0] + At[-1] * whole[-1])
        # a partial interval: u = (root − m_{j−1})/b ∈ [0, ε_C], the root from ln|Ã_j| − ln|B̃_j|
        jj, ii = np.nonzero(dec | inc)
        if jj.size:
            a_, b_, ee = At[jj, ii], Bt[jj, ii], e[ii]
            with np.errstate(divide="ignore"):
                u = np.clip(0.5 * (ee + np.log(np.abs(a_)) - np.log(np.abs(b_))), 0.0, ee)
            with np.errstate(over="ignore", invalid="ignore"):  # only the branch taken is used
                rise = np.where(u < 1.0, np.exp(-ee) * np.expm1(u), np.exp(u - ee) - np.exp(-ee))  # e^{u−ε} − e^{−ε}
            part = np.where(
                dec[jj, ii],
                -0.5 * a_ * np.expm1(-u) + 0.5 * b_ * rise,  # ∫ over [m_{j−1}, root]
                -0.5 * np.expm1(u - ee) * (a_ * np.exp(-u) + b_),  # ∫ over [root, m_j]
            )
            np.add.at(integral, ii, part)
        out[fin] = (q1 @ w) - integral
        return out

    def value(self, t, epsilon_c):
        """f_MLE(t, ε_C), broadcast over ages `t` (slots) and budgets `epsilon_c` (nats, > 0; ``inf`` allowed).

        Computed in O(I) per (t, ε_C) pair, all pairs at once, by the recurrences of :meth:`_risk`; it
        equals the average of :meth:`conditional_value` (the interval algebra over all counts) to
        rounding (≤ 1e-13 absolute in the tests).

        Returns
        -------
        float or numpy.ndarray
            Probability of a wrong decision, shape of the broadcast inputs.

        Raises
        ------
        InvalidInputError
            If an age is negative or not integral, or a budget is not positive.
        """
        ts = as_slots(t, "t")
        e = np.asarray(epsilon_c, dtype=float)
        if np.any(np.isnan(e)) or np.any(e <= 0):
            raise InvalidInputError(f"`epsilon_c` must be positive (nats), got {fmt(epsilon_c)}")
        ts, e = np.broadcast_arrays(ts, e)
        out = np.empty(ts.shape)
        flat_t, flat_e, flat_o = ts.reshape(-1), e.reshape(-1), out.reshape(-1)
        flat_o[:] = self._risk(flat_t.astype(np.int64), flat_e)
        return float(out) if out.ndim == 0 else out

    def noiseless(self, t):
        """lim_{ε_C → ∞} f_MLE(t, ε_C): the failure rate of deciding from the exact old mean."""
        ts = as_slots(t, "t")
        return self.value(ts, np.full(ts.shape, np.inf))

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, **_) -> np.ndarray:
        """Smallest ε_C meeting f̄ for every (A, S̄) by a vectorised grid scan plus bisection; shape (A_max + 1, S_max).

        Always the grid path of :meth:`Penalty._grid_min_epsilon_c_table` (budgets of
        :data:`~policyopt.utility.penalty.EPSILON_GRID`, 1e-3 to 200 nats): when the penalty is proven
        non-increasing in ε_C the feasible budgets form an interval and the result is its left
        end (to 1e-10 relative); otherwise it is the first feasible grid bracket.  Budgets above
        200 nats are not searched (``inf``: conservative).
        """
        from policyopt.utility.penalty import check_max_penalty

        return self._grid_min_epsilon_c_table(A_max, S_max, check_max_penalty(max_penalty))

    @property
    def limit(self) -> float:
        """lim_{t → ∞} of the noiseless stationary-average penalty (ε_C → ∞ first).

        Posterior rule: min(Pr[z = 1], Pr[z = 0]) under the stationary law (also its limit at any
        finite ε_C); sign rule: 2 Pr[z = 1] Pr[z = 0].  With Laplace noise and p = q the sign
        rule's limit at a finite ε_C is exactly 0.5 (Pr[M < 0] = 1/2 by symmetry), the value
        stated under Fig. 5.
        """
        I = self.n_users
        w = np.exp(self._log_prior)
        pz1 = float(w[math.ceil(I / 2):].sum())
        pz0 = float(w[: math.ceil(I / 2)].sum())
        if self.rule == "posterior":
            return min(pz1, pz0)
        return pz1 * pz0 + pz0 * pz1


def simulate_failure_rate(penalty: FailureRatePenalty, t: int, epsilon_c: float, *, n_samples: int, rng) -> tuple[float, float]:
    """Monte Carlo estimate of f_MLE(t, ε_C) — a *simulation*, not a private mechanism.

    Simulates I independent users of the chain (43) step by step (stationary start, or the
    penalty's given X_0), releases M(X_0) with numpy's Laplace noise (simulation only; released
    noise in policyopt comes from OpenDP), applies :meth:`FailureRatePenalty.decide` and counts
    wrong decisions about z_t.

    Parameters
    ----------
    penalty : FailureRatePenalty
    t : int
        Age (slots).
    epsilon_c : float
        Budget (nats, > 0).
    n_samples : int
        Number of simulated releases (≥ 2).
    rng : numpy.random.Generator

    Returns
    -------
    (estimate, standard_error) : tuple of float

    Raises
    ------
    InvalidInputError
        If `penalty` is not a FailureRatePenalty, `n_samples` < 2, `epsilon_c` ≤ 0 or `rng` is not
        a numpy Generator.
    """
    if not isinstance(penalty, FailureRatePenalty):
        raise InvalidInputError(f"`penalty` must be a FailureRatePenalty, got {fmt(penalty)}")
    check_monte_carlo_args(n_samples, rng, epsilon_c)
    (t,) = as_slots([t], "t")
    I = penalty.n_users
    if penalty.x0 is None:
        x = rng.random((n_samples, I)) < penalty.pi_plus  # True = +1, stationary start
    else:
        x = np.zeros((n_samples, I), dtype=bool)
        x[:, : penalty.x0] = True
    k0 = x.sum(axis=1)
    for _ in range(int(t)):
        u = rng.random(x.shape)
        x = np.where(x, u >= penalty.q, u < penalty.p)  # (43): +1 → −1 w.p. q, −1 → +1 w.p. p
    z = (2 * x.sum(axis=1) - I >= 0).astype(int)
    released = (2.0 * k0 - I) / I + rng.laplace(0.0, penalty.sensitivity / epsilon_c, size=n_samples)  # simulation
    wrong = penalty.decide(int(t), released, epsilon_c) != z
    return float(wrong.mean()), float(wrong.std(ddof=1) / math.sqrt(n_samples))
