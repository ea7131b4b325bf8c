"""Estimation uncertainty of Δ(t): Dirichlet posterior draws of the pilot's chains, and a tabulated Δ(t) band.

Each row x of a user's estimated matrix (:func:`~policyopt.models.estimation.fit_population`) has a
Dirichlet posterior Dir(n_x· + s) — the observed transition counts out of x plus the smoothing
pseudo-count s, which is the Dirichlet prior the smoothed estimate (n_xy + s)/Σ_y(n_xy + s) is the
posterior mean of.  Drawing every row of every user gives one plausible pilot; its Δ(t) (Zhang,
Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12))
is the maximum over its users.  The draws are *simulation* (a numpy Generator), never released
noise.  What they support is a Bayesian credible statement about Δ(t) under this prior and the
model's assumptions (stationary first-order chains), not a proof.

:class:`TabulatedMaxTV` is a Δ(t) source given by a table (e.g. the simultaneous upper band built by
:func:`simultaneous_upper_band`), usable wherever a population supplies Δ(t) to the schedule problem.
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.models.estimation import FittedModel
from policyopt.models.markov import GeometricEnvelope, MarkovChain, Population, as_slots

__all__ = [
    "posterior_populations",
    "posterior_log_max_tv",
    "simultaneous_upper_band",
    "TabulatedMaxTV",
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


class TabulatedMaxTV:
    """A Δ(t) source given by its table ln Δ(0..H) (e.g. a simultaneous posterior band).

    Supplies ``n_users`` and ``log_max_tv(t)`` (the :class:`~policyopt.problems.MaxTVSource`
    protocol of the schedule problem), plus ``envelope`` and ``spectral_rate`` for reports.

    Parameters
    ----------
    log_table : array_like, shape (H + 1,)
        ln Δ(t) for t = 0..H, non-increasing, ≤ 0.
    n_users : int
        Users of the pilot the table describes.
    rate : float
        A geometric rate ρ in (0, 1] for the envelope (e.g. the largest λ* over the draws).
    beyond_one : bool, keyword-only
        Ages beyond H get Δ(t) = 1 (ln Δ = 0: nothing assumed there, as for a Δ(t) estimated from data up to
        its largest lag) instead of being refused.

    Raises
    ------
    InvalidModelError
        If the table is empty, positive somewhere, or increases.
    InvalidInputError
        If a requested age is beyond H (unless `beyond_one`).
    """

    def __init__(self, log_table, n_users: int, rate: float, *, beyond_one: bool = False):
        tab = np.asarray(log_table, dtype=float).reshape(-1)
        with np.errstate(invalid="ignore"):  # −inf − (−inf) = NaN between two Δ = 0 entries: not an increase
            rises = np.any(np.diff(tab) > 1e-12)
        if tab.size == 0 or np.any(tab > 1e-12) or rises or np.isnan(tab).any():
            raise InvalidModelError("`log_table` must be a non-empty, non-increasing table of ln Δ(t) ≤ 0")
        self._tab = np.minimum(tab, 0.0)
        self._tab.setflags(write=False)
        self.n_users = int(n_users)
        self.spectral_rate = float(min(1.0, max(rate, 1e-300)))
        self.beyond_one = bool(beyond_one)

    @property
    def horizon(self) -> int:
        """Last tabulated age H (slots)."""
        return self._tab.size - 1

    def log_max_tv(self, t):
        """ln Δ(t) from the table; same shape as `t`."""
        ts = as_slots(t, "t")
        if self.beyond_one:
            out = np.where(ts > self.horizon, 0.0, self._tab[np.minimum(ts, self.horizon)])
            return float(out) if out.ndim == 0 else out
        if ts.size and int(ts.max()) > self.horizon:
            raise InvalidInputError(f"`t`={int(ts.max())} is beyond the tabulated horizon {self.horizon} slots")
        out = self._tab[ts]
        return float(out) if out.ndim == 0 else out

    def max_tv(self, t):
        """Δ(t) from the table."""
        out = np.exp(self.log_max_tv(t))
        return float(out) if np.ndim(out) == 0 else out

    def extended(self, horizon: int) -> "TabulatedMaxTV":
        """The table continued to age `horizon` by submultiplicativity: Δ(qH + r) ≤ Δ(H)^q · Δ(r).

        Δ(t) of eq. (12) is the maximum over the users u of the Dobrushin coefficient
        δ(P̂_u^t) = max_{x,x'} ½‖(e_x − e_x')P̂_u^t‖₁ of the reversed chain's t-step matrix, and
        δ(PQ) ≤ δ(P)·δ(Q).  So whenever this table bounds every user's δ(P̂_u^t) for all t ≤ H at
        once (as the simultaneous band of :func:`simultaneous_upper_band` does on its posterior
        event), δ(P̂_u^{qH+r}) ≤ δ(P̂_u^H)^q·δ(P̂_u^r) ≤ b(H)^q·b(r) bounds it beyond H on the same
        event.  Computed in logs: ln b(t) = q·ln b(H) + ln b(r), t = qH + r, 0 ≤ r < H; ages ≤ H
        keep their tabulated value.  The result is non-increasing and ≤ b(H) beyond H.

        Parameters
        ----------
        horizon : int
            Last age (slots) of the new table; at most H returns this table unchanged.

        Returns
        -------
        TabulatedMaxTV
            Same ``n_users`` and ``spectral_rate``; ``horizon`` = max(`horizon`, H).

        Raises
        ------
        InvalidInputError
            If `horizon` is not an integer ≥ 0, or H = 0 (Δ(0) = 1 alone says nothing about later ages).

        References
        ----------
        Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12);
        Dobrushin's ergodic coefficient is submultiplicative: E. Seneta, "Non-negative Matrices and Markov
        Chains", Springer, 2006, Section 4.3.
        """
        (h,) = as_slots([horizon], "horizon")
        H = self.horizon
        if int(h) <= H:
            return self
        if H == 0:
            raise InvalidInputError("a Δ(t) table with only Δ(0) cannot be extended (tabulate at least Δ(0..1))")
        t = np.arange(H + 1, int(h) + 1)
        q, r = np.divmod(t, H)
        # ln(Δ(H)^q · Δ(r)) (q ≥ 1 and both logs ≤ 0, so −inf stays −inf, never NaN)
        ext = np.minimum(q * self._tab[H] + self._tab[r], self._tab[H])
        return TabulatedMaxTV(np.concatenate([self._tab, ext]), self.n_users, self.spectral_rate)

    def envelope(self, horizon: int, rho: float | None = None) -> GeometricEnvelope:
        """Smallest c ≥ 1 with Δ(t) ≤ c·ρ^t for t = 0..min(horizon, H) (eq. 38); ρ defaults to ``spectral_rate``."""
        (h,) = as_slots([horizon], "horizon")
        h = min(int(h), self.horizon)
        rho = self.spectral_rate if rho is None else float(rho)
        ts = np.arange(h + 1)
        log_d = self._tab[: h + 1]
        excess = np.where(np.isfinite(log_d), log_d - ts * math.log(rho), -np.inf)
        log_c = max(0.0, float(np.max(excess)))
        return GeometricEnvelope(c=math.exp(log_c) if log_c < 709 else math.inf, rho=rho, horizon=h)
