"""The AR(1) Gaussian process of Appendix I of Zhang et al. and its Δ(t); the MSE penalties are in
:mod:`policyopt.utility.ar1_penalty`.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, Appendix I, eqs. (81)–(92), Fig. 8.

Model (81) with one coefficient: x_{i,t+1} = ρ x_{i,t} + e_{i,t}, e ~ N(0, σ²) i.i.d., ``|ρ|`` < 1,
users independent and stationary, so x ~ N(0, v) with v = σ²/(1 − ρ²) and, by (84),
x_{i,t} | x_{i,0} ~ N(ρ^t x_{i,0}, s_t²), s_t² = v(1 − ρ^{2t}).

Clipping (mandatory).  Gaussian readings are unbounded, so the mean of the raw readings has
no finite sensitivity and sup over pairs of values of the TV distance in (88) is 1 for every t.
The model therefore takes a clipping bound B > 0: the mechanism releases the mean of
clip(x_{i,0}, −B, B) plus Laplace noise of scale (2B/I)/ε_C (sensitivity 2B/I), and the
age-dependent guarantee is stated for pairs of current readings in [−B, B].

Δ(t) (12) for this chain.  The process is reversible (Lemma 7), so the backward conditionals
are the forward ones: Δ(t) = sup_{``|a|``, ``|a'|`` ≤ B} TV(N(ρ^t a, s_t²), N(ρ^t a', s_t²)).  The TV distance
between two Gaussians with equal variance is 2Φ(``|μ − μ'|``/(2s)) − 1, so

    Δ(t) = 2Φ(``|ρ|^t`` B / s_t) − 1 = erf(``|ρ|^t`` B / (√2 s_t)),   Δ(0) = 1              (exact)

(the clipped input clip(x_0) is a function of x_0, so its TV distance is at most this).  Pinsker
(86) gives Δ(t) ≤ ``|ρ|^t`` B / s_t, and since s_t ≥ σ for t ≥ 1 the paper's (88) with
``|x − x'|`` ≤ 2B, Δ(t) ≤ ``|ρ|^t`` B/σ, also holds for t ≥ 1 — but not at t = 0, where Δ(0) = 1
(the paper's (87) is garbled and (88) as printed would give B/σ < 1 at t = 0 when B < σ).
:meth:`AR1Model.pinsker_max_tv` returns min(1, (88)) with Δ(0) = 1.

Two estimators of the current mean (1/I) Σ_i x_{i,t} from the release M(X_0) (both exact
including clipping, via E[clip(x)²] and E[x·clip(x)] = v(2Φ(B/√v) − 1) for x ~ N(0, v)):

* ``"release"`` — use M(X_0) itself, as (91) says.  Without clipping its MSE is
  2σ²(1 − ρ^t)/(I(1 − ρ²)) + 2(2B/(I ε_C))².
* ``"predictor"`` — use ρ^t M(X_0) (the conditional mean (82)).  Without clipping its MSE is
  (1 − ρ^{2t})σ²/(I(1 − ρ²)) + ρ^{2t}·2(2B/(I ε_C))².  This is the staleness term the paper prints
  in (92); (92) pairs it with the estimator M(X_0) and with the noise term 1/(ε_C² I²), which
  matches neither (90)'s Laplace(1/ε_C) (variance 2/ε_C²) nor a calibrated mechanism.
  Its noise term shrinks with t, so it is not monotone in t in general (checked, not assumed).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erf, ndtr

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.models.markov import GeometricEnvelope, as_slots

__all__ = ["AR1Model", "positive_number"]

def positive_number(value, name: str) -> float:
    """Return `value` as a float if it is a positive finite real number; else raise InvalidInputError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        math.isfinite(float(value)) and float(value) > 0
    ):
        raise InvalidInputError(f"`{name}` must be a positive finite number, got {fmt(value)}")
    return float(value)


class AR1Model:
    """I independent stationary AR(1) users with clipped readings: the Δ(t) source of Appendix I.

    Usable wherever policyopt needs a population's Δ(t): it has ``n_users``, :meth:`max_tv`,
    :meth:`log_max_tv`, :meth:`envelope` and ``spectral_rate``, so
    :class:`~policyopt.problems.ScheduleProblem` and :func:`~policyopt.studies.schedule.design_schedule`
    accept it in place of a :class:`~policyopt.models.markov.Population`.

    Parameters
    ----------
    rho : float
        AR coefficient ρ, 0 < ``|ρ|`` < 1 (ρ = 0 is i.i.d. data with Δ(t) = 0 for t ≥ 1).
    sigma : float
        Innovation standard deviation σ > 0 (units of the readings).
    n_users : int
        I ≥ 1.
    clip_bound : float
        B > 0, keyword-only and mandatory: readings are clipped to [−B, B] before the mean is
        released (sensitivity 2B/I), and the age-dependent guarantee covers current readings
        in [−B, B].

    Raises
    ------
    InvalidInputError
        If a parameter is out of range.

    References
    ----------
    Zhang et al. (2024), (81)–(84), (86)–(88).
    """

    def __init__(self, rho: float, sigma: float, n_users: int, *, clip_bound: float):
        if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)) or not (
            0.0 < abs(float(rho)) < 1.0
        ):
            raise InvalidInputError(f"`rho` must satisfy 0 < |rho| < 1, got {fmt(rho)}")
        self.rho = float(rho)
        self.sigma = positive_number(sigma, "sigma")
        check_int(n_users, "n_users", 1)
        self.n_users = int(n_users)
        self.clip_bound = positive_number(clip_bound, "clip_bound")
        self.variance = self.sigma**2 / (1.0 - self.rho**2)  # stationary variance v
        self.sensitivity = 2.0 * self.clip_bound / self.n_users  # of the clipped mean

    def __repr__(self) -> str:
        return f"AR1Model(rho={self.rho!r}, sigma={self.sigma!r}, n_users={self.n_users}, clip_bound={self.clip_bound!r})"

    @property
    def spectral_rate(self) -> float:
        """``|ρ|``: Δ(t) = O(``|ρ|^t``) (the rate under (88))."""
        return abs(self.rho)

    def conditional_std(self, t):
        """s_t = sqrt(v(1 − ρ^{2t})), the std of x_t given x_0, eq. (83); shape of `t`."""
        ts = as_slots(t, "t").astype(float)
        return np.sqrt(-self.variance * np.expm1(2.0 * ts * math.log(abs(self.rho))))

    def log_max_tv(self, t):
        """ln Δ(t) with Δ(t) = erf(``|ρ|^t`` B/(√2 s_t)) exact (module docstring); 0 at t = 0.

        Computed in log space: for arguments below 1e-8 the bound erf(y) ≤ 2y/√π is used (relative
        error < 1e-16, on the safe side), so Δ(t) far below the float range still counts.

        Parameters
        ----------
        t : int or array_like of int
            Ages (slots).

        Returns
        -------
        float or numpy.ndarray, shape of `t`.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        """
        ts = as_slots(t, "t")
        tf = ts.astype(float)
        log_r = math.log(abs(self.rho))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_s = 0.5 * (math.log(self.variance) + np.log(-np.expm1(2.0 * tf * log_r)))
            log_y = tf * log_r + math.log(self.clip_bound) - 0.5 * math.log(2.0) - log_s  # y = |ρ|^t B/(√2 s_t)
            small = log_y < math.log(1e-8)
            out = np.where(
                small,
                math.log(2.0 / math.sqrt(math.pi)) + log_y,  # erf(y) ≤ 2y/√π
                np.log(erf(np.exp(np.minimum(log_y, 700.0)))),
            )
        out = np.where(ts == 0, 0.0, out)
        return float(out) if out.ndim == 0 else out

    def max_tv(self, t):
        """Δ(t) = erf(``|ρ|^t`` B/(√2 s_t)) for t ≥ 1, Δ(0) = 1; shape of `t` (may underflow to 0)."""
        out = np.exp(self.log_max_tv(t))
        return float(out) if np.ndim(out) == 0 else out

    def pinsker_max_tv(self, t):
        """The paper's bound (88) with ``|x − x'|`` ≤ 2B: min(1, ``|ρ|^t`` B/σ) for t ≥ 1, and 1 at t = 0.

        Always ≥ :meth:`max_tv` (Pinsker (86) and s_t ≥ σ for t ≥ 1).
        """
        ts = as_slots(t, "t").astype(float)
        out = np.minimum(1.0, np.power(abs(self.rho), ts) * self.clip_bound / self.sigma)
        out = np.where(ts == 0, 1.0, out)
        return float(out) if out.ndim == 0 else out

    def envelope(self, horizon: int, rho: float | None = None) -> GeometricEnvelope:
        """Geometric envelope (38) from (88): Δ(t) ≤ c|ρ|^t with c = max(1, B/σ), valid for every t.

        Parameters
        ----------
        horizon : int
            Recorded as the envelope's horizon (slots); the bound holds for all t.
        rho : float, optional
            Must be omitted or equal ``|ρ|`` (another rate is not implied by (88)).

        Raises
        ------
        InvalidInputError
            If `rho` is given and differs from ``|ρ|``, or `horizon` < 0.
        """
        (h,) = as_slots([horizon], "horizon")
        if rho is not None and float(rho) != abs(self.rho):
            raise InvalidInputError(f"the AR(1) envelope (88) decays at |rho| = {abs(self.rho)!r}, got `rho`={fmt(rho)}")
        return GeometricEnvelope(c=max(1.0, self.clip_bound / self.sigma), rho=abs(self.rho), horizon=int(h))

    # --- moments of the clipped reading ----------------------------------------------------
    @property
    def clipped_moments(self) -> tuple[float, float]:
        """(E[clip(x)²], E[x·clip(x)]) for x ~ N(0, v), clip to [−B, B].

        With a = B/√v: E[x·clip(x)] = v(2Φ(a) − 1) and
        E[clip(x)²] = v(2Φ(a) − 1 − 2aφ(a)) + 2B²(1 − Φ(a)).
        """
        v, B = self.variance, self.clip_bound
        a = B / math.sqrt(v)
        phi = math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
        inside = float(2.0 * ndtr(a) - 1.0)
        tail = float(2.0 * ndtr(-a))
        return v * (inside - 2.0 * a * phi) + B * B * tail, v * inside
