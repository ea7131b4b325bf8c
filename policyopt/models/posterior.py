"""Estimation uncertainty of Δ(t): Dirichlet posterior draws of the pilot's chains, and their simultaneous band.

Each row x of a user's estimated matrix (:func:`~policyopt.models.estimation.fit_population`) has a
Dirichlet posterior Dir(n_x· + s) — the observed transition counts out of x plus the smoothing
pseudo-count s, which is the Dirichlet prior the smoothed estimate (n_xy + s)/Σ_y(n_xy + s) is the
posterior mean of.  Drawing every row of every user gives one plausible pilot; its Δ(t) (Zhang,
Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12))
is the maximum over its users.  The draws are *simulation* (a numpy Generator), never released
noise.  What they support is a Bayesian credible statement about Δ(t) under this prior and the
model's assumptions (stationary first-order chains), not a proof.

The band of :func:`simultaneous_upper_band` becomes a Δ(t) source as a
:class:`~policyopt.models.tabulated.TabulatedMaxTV`.
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.models.estimation import FittedModel
from policyopt.models.markov import MarkovChain, Population, as_slots

__all__ = [
    "posterior_populations",
    "posterior_log_max_tv",
    "simultaneous_upper_band",
    "check_level",
    "check_draws",
]


def check_level(level, name: str = "level") -> float:
    """A probability strictly between 0 and 1, or :class:`InvalidInputError` naming `name`."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not (0.0 < float(level) < 1.0):
        raise InvalidInputError(f"`{name}` must be a probability strictly between 0 and 1, got {fmt(level)}")
    return float(level)


def check_draws(draws, name: str = "draws") -> int:
    """An integer number of posterior draws ≥ 2, or :class:`InvalidInputError` naming `name`."""
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise InvalidInputError(f"`{name}` must be an integer ≥ 2, got {fmt(draws)}")
    return int(draws)


def _check_fitted(fitted) -> None:
    if not isinstance(fitted, FittedModel):
        raise InvalidInputError(f"`fitted` must be a FittedModel (from fit_population), got {fmt(fitted)}")
    if not fitted.smoothing > 0:
        raise InvalidInputError(
            "the Dirichlet posterior needs a positive smoothing pseudo-count (its prior); the model was fitted with "
            f"`smoothing`={fitted.smoothing!r}"
        )


def posterior_populations(fitted: FittedModel, draws: int, rng: np.random.Generator):
    """Yield `draws` plausible pilots: every row of every kept user drawn from Dir(counts + s).

    Parameters
    ----------
    fitted : FittedModel
        Fitted with ``smoothing`` s > 0 (the Dirichlet prior).
    draws : int
        Number of pilots M ≥ 2.
    rng : numpy.random.Generator
        Simulation randomness (seeded by the caller), not released noise.

    Yields
    ------
    Population
        One chain per kept user, the pilot's state values.  Drawn probabilities that underflow
        to exactly 0 (possible for pseudo-counts ≪ 1) are raised to the smallest normal float and
        the row renormalised, so every drawn chain is irreducible; this moves no probability
        mass above 1e-300.

    Raises
    ------
    InvalidInputError
        If `fitted` is not a FittedModel with smoothing > 0, `draws` < 2, or `rng` is not a Generator.
    """
    _check_fitted(fitted)
    m = check_draws(draws)
    if not isinstance(rng, np.random.Generator):
        raise InvalidInputError(f"`rng` must be a numpy.random.Generator, got {fmt(rng)}")
    alphas = [fitted.counts[u] + fitted.smoothing for u in fitted.users]
    values = fitted.quantizer.state_values
    tiny = np.finfo(float).tiny
    for _ in range(m):
        chains = []
        for alpha in alphas:
            P = np.stack([rng.dirichlet(row) for row in alpha])  # posterior of each row: Dir(n_x· + s)
            P = np.maximum(P, tiny)
            P /= P.sum(axis=1, keepdims=True)
            chains.append(MarkovChain(P, values))
        yield Population(chains)


def posterior_log_max_tv(fitted: FittedModel, ages, draws: int, rng: np.random.Generator) -> np.ndarray:
    """ln Δ(t) of eq. (12) at `ages` for `draws` posterior pilots.

    Parameters
    ----------
    fitted : FittedModel
    ages : array_like of int, shape (n,)
        Ages (slots).
    draws : int
        M ≥ 2.
    rng : numpy.random.Generator
        Simulation randomness (seeded), not released noise.

    Returns
    -------
    numpy.ndarray, shape (M, n)
        Row d: ln Δ_d(ages) of draw d (max over its users).

    Raises
    ------
    InvalidInputError
        As :func:`posterior_populations`, or bad `ages`.
    """
    ts = as_slots(ages, "ages").reshape(-1)
    return np.stack([np.asarray(pop.log_max_tv(ts), dtype=float).reshape(-1) for pop in posterior_populations(fitted, draws, rng)])


def simultaneous_upper_band(log_draws, level: float, log_point=None) -> tuple[np.ndarray, dict]:
    """A non-increasing upper band of ln Δ(t), t = 0..H, holding *simultaneously* for a fraction ≥ `level` of the draws.

    Construction (stated so it can be checked): q(t) is the pointwise `level` quantile of the
    draws' ln Δ_d(t); the band is q(t) + δ with the smallest inflation δ ≥ 0 such that at least
    ⌈level·M⌉ of the M draws lie entirely below it (δ is the ⌈level·M⌉-th smallest of
    max_t (ln Δ_d(t) − q(t))⁺).  The band is then raised to the point estimate where that is
    higher, made non-increasing by a running maximum from the right (Theorem 4 needs Δ(t)
    non-increasing; the draws are, so none leaves the band), and capped at ln 1 = 0.

    Parameters
    ----------
    log_draws : array_like, shape (M, H + 1)
        ln Δ_d(t) for t = 0..H (from :func:`posterior_log_max_tv` with ages ``arange(H + 1)``).
    level : float
        Posterior probability in (0, 1).
    log_point : array_like, shape (H + 1,), optional
        ln Δ̂(t) of the point estimate.

    Returns
    -------
    (band, info) : numpy.ndarray of shape (H + 1,), dict
        ``band`` is ln of the band; ``info`` holds ``level``, ``draws``, ``inflation`` (δ, nats of
        ln Δ), ``coverage`` (fraction of draws entirely below the band, ≥ level) and
        ``max_ratio`` (max over t of band / Δ̂ when `log_point` is given).

    Raises
    ------
    InvalidInputError
        If `log_draws` is not two-dimensional with ≥ 2 draws, or `log_point` has the wrong shape.
    """
    lv = check_level(level)
    x = np.asarray(log_draws, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise InvalidInputError(f"`log_draws` must have shape (M ≥ 2, H + 1), got shape {x.shape}")
    m = x.shape[0]
    k = math.ceil(lv * m)
    xs = np.where(np.isneginf(x), -1e300, x)
    q = np.sort(xs, axis=0)[k - 1]  # pointwise: ⌈level·M⌉-th smallest of each column
    excess = np.max(xs - q[None, :], axis=1)
    delta = max(0.0, float(np.sort(excess)[k - 1]))
    band = q + delta
    if log_point is not None:
        lp = np.asarray(log_point, dtype=float)
        if lp.shape != band.shape:
            raise InvalidInputError(f"`log_point` must have shape {band.shape}, got {lp.shape}")
        band = np.maximum(band, lp)
    band = np.maximum.accumulate(band[::-1])[::-1]  # non-increasing, still ≥ every draw below it
    band = np.minimum(band, 0.0)
    coverage = float(np.mean(np.all(x <= band[None, :] + 1e-12, axis=1)))
    info = {"level": lv, "draws": m, "inflation": delta, "coverage": coverage}
    if log_point is not None:
        with np.errstate(invalid="ignore"):
            diff = band - np.asarray(log_point, dtype=float)
        info["max_ratio"] = float(np.exp(np.nanmax(np.where(np.isfinite(diff), diff, np.nan)))) if np.isfinite(diff).any() else None
    return band, info

