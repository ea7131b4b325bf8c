"""MSE penalties of the AR(1) model of Appendix I of Zhang et al. (2024, eqs. (89)–(92)); the model is in
:mod:`policyopt.models.ar1` (see its module docstring for clipping and the two estimators).
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.models.ar1 import AR1Model
from policyopt.models.markov import as_slots
from policyopt.utility.penalty import ROUND_UP, Penalty, check_max_penalty, check_monte_carlo_args, window_max

__all__ = ["AR1MSEPenalty", "simulate_ar1_mse", "ESTIMATORS"]

#: Estimators of :class:`AR1MSEPenalty`.
ESTIMATORS = ("release", "predictor")


class AR1MSEPenalty(Penalty):
    """MSE of an estimate of the current mean of AR(1) users from the clipped, noisy release, exact.

    f(t, ε_C) = (1/I) E[(k_t c − x_t)²] + k_t² · 2(2B/(I ε_C))², with c = clip(x_0),
    E[(k c − x_t)²] = k² E[c²] − 2kρ^t E[x_0 c] + v (users independent, zero mean), and
    k_t = 1 for ``estimator="release"`` (M(X_0) itself, eq. (91)) or k_t = ρ^t for
    ``estimator="predictor"`` (ρ^t M(X_0)).  See the module docstring for the relation to (92).

    Parameters
    ----------
    model : AR1Model
    estimator : {"release", "predictor"}

    Raises
    ------
    InvalidInputError
        If `model` is not an AR1Model or `estimator` is unknown.

    References
    ----------
    Zhang et al. (2024), (82)–(84), (90)–(92).
    """

    unit = "reading²"

    def __init__(self, model: AR1Model, estimator: str = "release"):
        if not isinstance(model, AR1Model):
            raise InvalidInputError(f"`model` must be an AR1Model, got {fmt(model)}")
        if estimator not in ESTIMATORS:
            raise InvalidInputError(f"`estimator` must be one of {list(ESTIMATORS)}, got {fmt(estimator)}")
        self.model = model
        self.estimator = estimator
        self.name = f"ar1-mse-{estimator}"
        self.sensitivity = model.sensitivity

    def _gain(self, ts: np.ndarray) -> np.ndarray:
        return np.ones(ts.shape) if self.estimator == "release" else np.power(self.model.rho, ts.astype(float))

    def staleness(self, t):
        """(1/I) E[(k_t clip(x_0) − x_t)²] for ages `t` (slots): the MSE without noise; shape of `t`."""
        ts = as_slots(t, "t")
        m = self.model
        c2, cx = m.clipped_moments
        k = self._gain(ts)
        out = (k * k * c2 - 2.0 * k * np.power(m.rho, ts.astype(float)) * cx + m.variance) / m.n_users
        out = np.maximum(out, 0.0)
        return float(out) if out.ndim == 0 else out

    def noise_weight(self, t):
        """k_t²: the factor of the Laplace variance 2(2B/(I ε_C))² in the MSE at age t; shape of `t`."""
        ts = as_slots(t, "t")
        out = self._gain(ts) ** 2
        return float(out) if out.ndim == 0 else out

    def noise_variance(self, epsilon_c):
        """2(s/ε_C)², s = 2B/I: variance of the Laplace noise of one ε_C-DP release of the clipped mean."""
        eps = np.asarray(epsilon_c, dtype=float)
        with np.errstate(divide="ignore"):
            return 2.0 * (self.sensitivity / eps) ** 2

    def value(self, t, epsilon_c):
        """f(t, ε_C), broadcast over ages `t` (slots) and budgets `epsilon_c` (nats)."""
        return np.asarray(self.staleness(t)) + np.asarray(self.noise_weight(t)) * self.noise_variance(epsilon_c)

    def noiseless(self, t):
        """The staleness term alone (ε_C → ∞)."""
        return self.staleness(t)

    @property
    def staleness_limit(self) -> float:
        """lim_{t→∞} of the staleness: (E[clip(x)²] + v)/I for "release", v/I for "predictor"."""
        m = self.model
        c2, _ = m.clipped_moments
        return (c2 + m.variance) / m.n_users if self.estimator == "release" else m.variance / m.n_users

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, **_) -> np.ndarray:
        """Closed-form smallest ε_C meeting f̄ for every (A, S̄); shape (A_max + 1, S_max), nats.

        Per age a the bound needs ε_C ≥ s·sqrt(2 k_a² / (f̄ − W_a)) (``inf`` when W_a ≥ f̄); the
        epoch needs the largest of these over a = A..A+S̄−1.  Rounded up by ``ROUND_UP``.
        """
        f_bar = check_max_penalty(max_penalty)
        ages = np.arange(A_max + S_max)
        stale = np.asarray(self.staleness(ages))
        k2 = np.asarray(self.noise_weight(ages))
        slack = f_bar - stale
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(slack > 0, self.sensitivity * np.sqrt(2.0 * k2 / slack) * (1.0 + ROUND_UP), np.inf)
        need = np.where((slack > 0) & (k2 == 0), np.finfo(float).tiny, need)  # ρ^{2t} underflowed
        return window_max(need, A_max, S_max)


def simulate_ar1_mse(penalty: AR1MSEPenalty, t: int, epsilon_c: float, *, n_samples: int, rng) -> tuple[float, float]:
    """Monte Carlo estimate of the AR(1) MSE — a *simulation*, not a private mechanism.

    Draws stationary x_0 ~ N(0, v) for I users, then x_t = ρ^t x_0 + s_t·N(0, 1) (exact t-step
    law (84)), releases mean(clip(x_0)) + Laplace((2B/I)/ε_C) with numpy's Laplace sampler
    (simulation only; released noise in policyopt comes from OpenDP), forms the penalty's
    estimate (M or ρ^t M) and averages its squared error against mean(x_t).

    Parameters
    ----------
    penalty : AR1MSEPenalty
    t : int
        Age (slots).
    epsilon_c : float
        Budget (nats, > 0).
    n_samples : int
        Simulated releases (≥ 2).
    rng : numpy.random.Generator

    Returns
    -------
    (estimate, standard_error) : tuple of float

    Raises
    ------
    InvalidInputError
        If an argument has the wrong type or range.
    """
    if not isinstance(penalty, AR1MSEPenalty):
        raise InvalidInputError(f"`penalty` must be an AR1MSEPenalty, got {fmt(penalty)}")
    check_monte_carlo_args(n_samples, rng, epsilon_c)
    (t,) = as_slots([t], "t")
    m = penalty.model
    I = m.n_users
    x0 = rng.normal(0.0, math.sqrt(m.variance), size=(n_samples, I))
    xt = m.rho ** int(t) * x0 + float(m.conditional_std(int(t))) * rng.normal(size=(n_samples, I))  # (84)
    released = np.clip(x0, -m.clip_bound, m.clip_bound).mean(axis=1) + rng.laplace(  # simulation only, not private
        0.0, penalty.sensitivity / epsilon_c, size=n_samples
    )  # simulation of the release
    estimate = released if penalty.estimator == "release" else m.rho ** int(t) * released
    err2 = (estimate - xt.mean(axis=1)) ** 2
    return float(err2.mean()), float(err2.std(ddof=1) / math.sqrt(n_samples))
