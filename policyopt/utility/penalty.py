"""Utility penalties f(t, ε_C): the accuracy lost by publishing data that is t slots old
with a per-release budget ε_C.

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, eqs. (27), (48)–(49).

Every penalty here is non-increasing in ε_C (more budget, less noise).  It need not be
monotone in t (a chain with a negative eigenvalue oscillates), so the penalty of a
schedule is the maximum over the ages A..A+S̄−1 that an epoch goes through
(:meth:`Penalty.epoch_table`), which equals the value at the discrete peak AoI
A + S̄ − 1 when f is increasing in t.  The continuous penalties of the formulations (39)–(42), for real ages, are
:mod:`policyopt.utility.continuous_penalty`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from policyopt.errors import InvalidInputError, InvalidModelError, check_int, check_value_range, fmt
from policyopt.models.markov import Population, as_slots
from policyopt.result import result_repr

__all__ = [
    "Penalty",
    "MSEPenalty",
    "CallablePenalty",
    "two_state_mse",
    "ROUND_UP",
    "MonotonicityReport",
    "EPSILON_GRID",
]

#: Relative amount by which inverse budgets are rounded up (towards feasibility).
ROUND_UP = 1e-12

#: Budgets (nats) scanned by :meth:`Penalty.min_epsilon_c_table` for penalties that are not
#: proven non-increasing in ε_C: 400 log-spaced points from 1e-3 to 200.
EPSILON_GRID = np.geomspace(1e-3, 200.0, 400)


@dataclass(frozen=True)
class MonotonicityReport:
    """Result of :meth:`Penalty.check_monotonicity` on a grid of ages and budgets.

    Attributes
    ----------
    increasing_in_t : bool
        f(t+1, ε) ≥ f(t, ε) − tol at every grid point (ages consecutive in the grid).
    decreasing_in_epsilon : bool
        f(t, ε') ≤ f(t, ε) + tol for every pair of consecutive grid budgets ε < ε'.
    worst_t : tuple or None
        (t, epsilon_c, drop) of the largest decrease of f from age t to the next grid age, or
        ``None`` when f is non-decreasing in t on the grid.
    worst_epsilon : tuple or None
        (t, epsilon_c, rise) of the largest increase of f from budget ε_C to the next grid
        budget, or ``None`` when f is non-increasing in ε_C on the grid.
    tol : float
        Absolute tolerance used (penalty units).
    """

    increasing_in_t: bool
    decreasing_in_epsilon: bool
    worst_t: tuple | None
    worst_epsilon: tuple | None
    tol: float

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def check_max_penalty(max_penalty) -> float:
    """Return the utility bound f̄ as a float; raise InvalidInputError unless it is a positive finite number."""
    if not isinstance(max_penalty, (int, float, np.floating, np.integer)) or not (
        math.isfinite(float(max_penalty)) and float(max_penalty) > 0
    ):
        raise InvalidInputError(f"`max_penalty` (f̄) must be a positive finite number, got {fmt(max_penalty)}")
    return float(max_penalty)


def check_epsilon_c(epsilon_c) -> float:
    """A budget per release ε_C as float: a real number (not a bool), finite and > 0 (nats).

    Raises
    ------
    InvalidInputError
        Otherwise, showing the value.
    """
    from numbers import Real

    if isinstance(epsilon_c, bool) or not isinstance(epsilon_c, Real) or not (
            math.isfinite(float(epsilon_c)) and float(epsilon_c) > 0):
        raise InvalidInputError(f"`epsilon_c` must be a positive finite number (nats), got {fmt(epsilon_c)}")
    return float(epsilon_c)


def check_monte_carlo_args(n_samples, rng, epsilon_c) -> None:
    """Validate the arguments shared by the Monte Carlo (simulation-only) penalty estimators."""
    check_int(n_samples, "n_samples", 2)
    if not isinstance(rng, np.random.Generator):
        raise InvalidInputError(f"`rng` must be a numpy.random.Generator, got {fmt(rng)}")
    check_epsilon_c(epsilon_c)


class Penalty(ABC):
    """A noise-aware age penalty f(t, ε_C), eq. (27).

    Subclasses implement :meth:`value` and :meth:`noiseless` (the limit ε_C → ∞); the
    inverse in ε_C is found by bracketing and Brent's method unless a subclass has a
    closed form.
    """

    #: short name printed in reports
    name = "penalty"
    #: unit of the penalty value
    unit = ""
    #: True when f(t, ·) is *proven* non-increasing in ε_C, so that the smallest feasible
    #: budget of a schedule is found by root finding and the exact solver's answer is optimal.
    #: A penalty that sets it False is inverted by a grid scan (:data:`EPSILON_GRID`) and the
    #: exact solver reports ``feasible``, not ``optimal``.  User penalties
    #: (:class:`CallablePenalty`) are declared non-increasing by their author.
    monotone_in_epsilon = True
    #: True when f is smooth and convex enough for the cvxpy back end (through a
    #: :class:`ContinuousPenalty`); the failure rate is neither.
    smooth = True

    def check_monotonicity(self, ages, epsilons, *, tol: float = 1e-12) -> MonotonicityReport:
        """Check numerically whether f is non-decreasing in t and non-increasing in ε_C on a grid.

        Nothing is assumed: f is evaluated at every (age, budget) pair of the grid and
        consecutive values are compared.  The check says nothing about points between grid
        values.

        Parameters
        ----------
        ages : array_like of int, shape (n_t,)
            Increasing ages (slots).
        epsilons : array_like of float, shape (n_eps,)
            Increasing budgets (nats, > 0; ``inf`` allowed for the noiseless limit).
        tol : float
            Absolute tolerance (penalty units) below which changes are ignored.

        Returns
        -------
        MonotonicityReport

        Raises
        ------
        InvalidInputError
            If `ages` or `epsilons` is empty, not one-dimensional or not increasing, or a
            budget is not positive.
        """
        t = as_slots(ages, "ages")
        e = np.asarray(epsilons, dtype=float)
        if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0):
            raise InvalidInputError(f"`ages` must be a non-empty increasing 1-D array of slots, got {fmt(ages)}")
        if e.ndim != 1 or e.size == 0 or np.any(np.diff(e) <= 0) or not np.all(e > 0):
            raise InvalidInputError(f"`epsilons` must be a non-empty increasing 1-D array of positive budgets, got {fmt(epsilons)}")
        vals = np.empty((t.size, e.size))
        for j, eps in enumerate(e):
            vals[:, j] = self.noiseless(t) if np.isinf(eps) else self.value(t, eps)
        worst_t = worst_e = None
        if t.size > 1:
            drop = vals[:-1, :] - vals[1:, :]
            i, j = np.unravel_index(int(np.argmax(drop)), drop.shape)
            if drop[i, j] > tol:
                worst_t = (int(t[i]), float(e[j]), float(drop[i, j]))
        if e.size > 1:
            rise = vals[:, 1:] - vals[:, :-1]
            i, j = np.unravel_index(int(np.argmax(rise)), rise.shape)
            if rise[i, j] > tol:
                worst_e = (int(t[i]), float(e[j]), float(rise[i, j]))
        return MonotonicityReport(worst_t is None, worst_e is None, worst_t, worst_e, float(tol))

    @abstractmethod
    def value(self, t, epsilon_c):
        """f(t, ε_C) for ages `t` (slots) and budgets `epsilon_c` (nats), broadcast."""

    @abstractmethod
    def noiseless(self, t):
        """lim_{ε_C → ∞} f(t, ε_C) for ages `t` (slots)."""

    def epoch_table(self, A_max: int, S_max: int, epsilon_c) -> np.ndarray:
        """Penalty of every schedule (A, S̄): max of f over the ages A..A+S̄−1.

        Returns shape (A_max + 1, S_max) with entry [A, S̄ − 1].
        """
        ages = np.arange(A_max + S_max)
        vals = np.asarray(self.value(ages, epsilon_c), dtype=float)
        return window_max(vals, A_max, S_max)

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, *, xtol: float = 1e-12) -> np.ndarray:
        """Smallest ε_C with epoch penalty ≤ f̄ for every (A, S̄); ``inf`` where none exists.

        Generic version: per schedule, bracket the root of max_a f(a, ε) − f̄ by doubling,
        then refine with Brent's method; the upper end of the final bracket is returned,
        so the returned ε_C always satisfies the bound.

        When :attr:`monotone_in_epsilon` is False, the bracket is not trusted: the epoch penalty
        is evaluated on :data:`EPSILON_GRID` and, per schedule, the first feasible grid budget is
        refined by bisection against the grid point below it (see :meth:`_grid_min_epsilon_c_table`).

        Returns shape (A_max + 1, S_max) with entry [A, S̄ − 1] (nats).
        """
        from scipy.optimize import brentq

        f_bar = check_max_penalty(max_penalty)
        if not self.monotone_in_epsilon:
            return self._grid_min_epsilon_c_table(A_max, S_max, f_bar)
        ages = np.arange(A_max + S_max)
        floor = window_max(np.asarray(self.noiseless(ages), dtype=float), A_max, S_max)
        out = np.full(floor.shape, np.inf)
        for a in range(A_max + 1):
            for s in range(1, S_max + 1):
                if not floor[a, s - 1] < f_bar:
                    continue
                window = np.arange(a, a + s)

                def excess(eps, window=window):
                    """max over the epoch of f(a, ε) − f̄; the root is the smallest feasible ε."""
                    return float(np.max(self.value(window, eps))) - f_bar

                hi = 1.0
                while excess(hi) > 0:
                    hi *= 2.0
                    if hi > 1e6:
                        break
                if excess(hi) > 0:
                    continue
                lo = hi / 2.0
                while excess(lo) <= 0 and lo > 1e-300:
                    hi, lo = lo, lo / 2.0
                if excess(lo) <= 0:
                    out[a, s - 1] = lo
                    continue
                root = brentq(excess, lo, hi, xtol=xtol * hi, rtol=4 * np.finfo(float).eps)
                root = min(hi, root * (1.0 + ROUND_UP))
                if excess(root) > 0:  # land on the feasible side of the bracket
                    root = hi
                out[a, s - 1] = root
        return out

    def min_epsilon_c_lower_table(self, A_max: int, S_max: int, max_penalty: float) -> np.ndarray:
        """A lower bound on the exact smallest ε_C meeting f̄ for every (A, S̄), for a solver's proven bound.

        :meth:`min_epsilon_c_table` moves each budget *up* so that the bound holds at the value deployed; a
        lower bound on the optimum must start from the other side.  Generic version: the table divided by
        (1 + 4·``ROUND_UP``), which undoes the upward move of the root; the root finder's own error is
        Brent's (``xtol``).  Subclasses with a closed form (:class:`MSEPenalty`) bound it exactly.

        Returns shape (A_max + 1, S_max), nats (``inf`` where no budget is found).
        """
        return np.asarray(self.min_epsilon_c_table(A_max, S_max, max_penalty), dtype=float) / (1.0 + 4.0 * ROUND_UP)

    def _grid_min_epsilon_c_table(self, A_max: int, S_max: int, f_bar: float, grid=None, *, xtol: float = 1e-10) -> np.ndarray:
        """Smallest feasible budget on a grid, for penalties not proven monotone in ε_C.

        For every schedule (A, S̄) the epoch penalty is evaluated at each budget of `grid`
        (default :data:`EPSILON_GRID`); the first feasible grid budget is then refined by
        bisection on the interval down to the previous (infeasible) grid budget, keeping the
        feasible end.  Every returned ε_C meets f̄; a smaller feasible ε_C lying strictly
        between two infeasible grid budgets would be missed, which is why the exact solver
        reports such solutions as ``feasible``.  The noiseless limit counts as infeasible
        (``inf``) unless a finite grid budget meets f̄.

        Returns shape (A_max + 1, S_max) with entry [A, S̄ − 1] (nats).
        """
        grid = EPSILON_GRID if grid is None else np.asarray(grid, dtype=float)
        ages = np.arange(A_max + S_max)
        vals = np.asarray(self.value(ages[:, None], grid[None, :]), dtype=float)  # (ages, n_grid)
        tables = np.stack([window_max(vals[:, j], A_max, S_max) for j in range(grid.size)], axis=-1)
        ok = tables <= f_bar
        out = np.full((A_max + 1, S_max), np.inf)
        first = np.argmax(ok, axis=-1)
        a_idx, j_idx = np.nonzero(ok.any(axis=-1))
        k = first[a_idx, j_idx]
        hi = grid[k].astype(float)
        lo = np.where(k > 0, grid[np.maximum(k - 1, 0)], hi)
        # vectorised bisection over all schedules at once, keeping the feasible end
        mask = (ages[:, None] >= a_idx[None, :]) & (ages[:, None] <= (a_idx + j_idx)[None, :])  # epoch ages
        active = hi - lo > xtol * hi
        while active.any():
            mid = 0.5 * (lo[active] + hi[active])
            v = np.asarray(self.value(ages[:, None], mid[None, :]), dtype=float)
            feas = np.where(mask[:, active], v, -np.inf).max(axis=0) <= f_bar
            idx = np.nonzero(active)[0]
            hi[idx[feas]] = mid[feas]
            lo[idx[~feas]] = mid[~feas]
            active = hi - lo > xtol * hi
        out[a_idx, j_idx] = hi
        return out

def window_max(vals: np.ndarray, A_max: int, S_max: int) -> np.ndarray:
    """table[A, S̄−1] = max(vals[A : A + S̄]) for A ≤ A_max, S̄ ≤ S_max."""
    windows = sliding_window_view(vals, S_max)[: A_max + 1]  # (A_max+1, S_max): vals[A + j]
    return np.maximum.accumulate(windows, axis=1)


class MSEPenalty(Penalty):
    """Mean-square error of the released mean of a deployment of I users' current values.

    The users' behaviour is modelled by the population's chains (e.g. chains estimated from a
    *pilot* of n homes); the deployment has I users, independent, each following one of those
    chains, in the population's shares w_i = counts_i / n (equal shares for an estimated pilot):

    f(t, ε_C) = E[(M(X_{−t}) − (1/I)Σ_u x_{u,0})²]
              = (1/I)·Σ_i w_i E_i[(x_{−t} − x_0)²]  +  2·(Δf/ε_C)²,

    where M adds Laplace(Δf/ε_C) noise to the mean of the t-slot-old values and
    Δf = (HI − LO)/I is the sensitivity of a mean of I values in the public range [LO, HI],
    so that every release is ε_C-DP (Proposition 1).  The staleness term is exact when I·w_i
    users follow chain i (and is the expectation over a random assignment otherwise): for
    each chain, E[(x_{−t} − x_0)²] = Σ_{x,y} π(x) P_t(x, y) (v_x − v_y)² (stationary chain,
    users independent, so cross terms vanish).  Without `users` the deployment is the
    population itself (I = n, w_i = counts_i / n), which gives (1/I²) Σ_u E_u[(x_{−t} − x_0)²].

    Parameters
    ----------
    population : Population
        Users' chains with numeric state values (units of the values, e.g. kWh; the
        penalty is in those units squared).
    unit : str, optional
        Unit of the penalty, e.g. ``"kWh^2"``.  Default: the square of the population's
        ``value_unit`` (``"kWh^2"`` for a population fitted to the bundled data by
        :func:`~policyopt.models.estimation.fit_population`), or ``""`` when that is unknown.
    users : int, optional
        Deployment size I ≥ 1 (default ``population.n_users``).
    value_range : (float, float), optional
        Public range (LO, HI) of one user's value, LO < HI, containing every state value (the
        readings must have been clipped into it before estimation).  Default: the range of the
        state values, which is derived from the data and therefore *not* differentially private
        (``value_range_declared`` is then False).

    Raises
    ------
    InvalidModelError
        If all state values are equal and no `value_range` is given (the mean then carries no
        information and its sensitivity is 0).
    InvalidInputError
        If `unit` is not a string, `users` is not an integer ≥ 1, or `value_range` is not (LO, HI)
        with finite LO < HI containing every state value.

    Notes
    -----
    Eq. (48) as printed adds Laplace(1/(ε_C I)) noise to the mean of ±1 values; that mean's
    sensitivity is 2/I, so the printed mechanism is only 2ε_C-DP and its noise variance
    2/(ε_C² I²) (the "noise only" curve of Fig. 4) is a quarter of the correct 8/(ε_C² I²).
    This class uses the correct sensitivity.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory,
    2024, eqs. (48)–(49); Proposition 1.
    """

    name = "mse"

    def __init__(self, population: Population, unit: str | None = None, *, users: int | None = None, value_range=None):
        if not isinstance(population, Population):
            raise InvalidModelError(f"`population` must be a Population, got {fmt(population)}")
        if unit is None:
            value_unit = getattr(population, "value_unit", "")
            unit = f"{value_unit}^2" if value_unit else ""
        if not isinstance(unit, str):
            raise InvalidInputError(f"`unit` must be a string such as 'kWh^2', got {fmt(unit)}")
        if users is None:
            n_users = population.n_users
        elif isinstance(users, bool) or not isinstance(users, (int, np.integer)) or users < 1:
            raise InvalidInputError(f"`users` (deployment size I) must be an integer ≥ 1, got {fmt(users)}")
        else:
            n_users = int(users)
        lo, hi = population.value_range
        if value_range is None:
            if not hi > lo:
                raise InvalidModelError(
                    f"all state values equal {lo!r}: the mean has sensitivity 0 and the MSE penalty is degenerate"
                )
            declared = False
        else:
            lo, hi = check_value_range(value_range)
            v_lo, v_hi = population.value_range
            if v_lo < lo or v_hi > hi:
                raise InvalidInputError(
                    f"`value_range` ({lo!r}, {hi!r}) does not contain the state values [{v_lo!r}, {v_hi!r}]: "
                    "clip the readings into the range before estimating the chains"
                )
            declared = True
        self.population = population
        self.unit = unit
        self.users = n_users
        self.value_range = (float(lo), float(hi))
        self.value_range_declared = declared
        self.shares = np.asarray(population.counts, dtype=float) / population.n_users
        self.sensitivity = (hi - lo) / n_users
        self._table = np.zeros(0)
        self._sums = [np.zeros(0)]  # Σ_i w_i E_i[(x_{−t} − x_0)²] by age, shared with with_users() copies
        self._windows = {}  # (A_max, S_max) → window maxima of the staleness (see epoch_table)

    def with_users(self, users: int) -> "MSEPenalty":
        """The same penalty for another deployment size I (same chains, shares, range and unit).

        The staleness sums Σ_i w_i E_i[(x_{−t} − x_0)²], which do not depend on I, are shared with
        this object (computed once for a sweep over I); the values equal those of a new
        ``MSEPenalty(population, unit, users=users, value_range=...)`` bit for bit.

        Raises
        ------
        InvalidInputError
            If `users` is not an integer ≥ 1 (the constructor's check).
        """
        other = MSEPenalty(self.population, self.unit, users=users,
                           value_range=self.value_range if self.value_range_declared else None)
        other._sums = self._sums
        return other

    def staleness(self, t):
        """Exact staleness term (1/I)·Σ_i w_i E_i[(x_{−t} − x_0)²] for ages `t` (slots), no noise."""
        ts = as_slots(t, "t")
        n = int(ts.max()) + 1 if ts.size else 1
        if self._table.size < n:
            self._table = self._staleness_table(max(n, 2 * self._table.size))
        out = self._table[ts]
        return float(out) if out.ndim == 0 else out

    def _staleness_table(self, n: int) -> np.ndarray:
        """The staleness term at ages 0..n − 1: the shared sums (extended when too short) divided by I."""
        if self._sums[0].size < n:
            total = np.zeros(n)
            for chain, share in zip(self.population.chains, self.shares):
                P = chain.P
                v = chain.state_values
                W = (v[:, None] - v[None, :]) ** 2
                pi = chain.stationary
                Pt = np.eye(chain.n_states)
                for t in range(n):
                    total[t] += share * float(pi @ (Pt * W).sum(axis=1))
                    Pt = Pt @ P
            self._sums[0] = total  # each age's sum is formed the same way whatever n: prefixes agree
        return self._sums[0][:n] / self.users

    def _stale_windows(self, A_max: int, S_max: int) -> np.ndarray:
        """max of the staleness over ages A..A + S̄ − 1 for every (A, S̄), shape (A_max + 1, S_max), cached."""
        key = (int(A_max), int(S_max))
        if key not in self._windows:
            self._windows[key] = window_max(np.asarray(self.staleness(np.arange(A_max + S_max))), A_max, S_max)
        return self._windows[key]

    @property
    def staleness_limit(self) -> float:
        """lim_{t→∞} of the staleness term: (1/I)·Σ_i w_i·2 Var_{π_i}(x).

        For a periodic chain the staleness oscillates and has no limit; this is then its
        Cesàro average, not a bound.
        """
        acc = 0.0
        for chain, share in zip(self.population.chains, self.shares):
            pi, v = chain.stationary, chain.state_values
            mean = float(pi @ v)
            acc += share * 2.0 * float(pi @ (v - mean) ** 2)
        return acc / self.users

    def noise_variance(self, epsilon_c):
        """Variance 2(s/ε_C)² of the Laplace noise of one ε_C-DP release of the mean."""
        eps = np.asarray(epsilon_c, dtype=float)
        with np.errstate(divide="ignore"):
            return 2.0 * (self.sensitivity / eps) ** 2

    def value(self, t, epsilon_c):
        """f(t, ε_C) = staleness(t) + 2(s/ε_C)², broadcast over `t` (slots) and `epsilon_c` (nats)."""
        return np.asarray(self.staleness(t)) + self.noise_variance(epsilon_c)

    def noiseless(self, t):
        """The staleness term alone (ε_C → ∞)."""
        return self.staleness(t)

    @property
    def staleness_rel_error(self) -> float:
        """Relative error bound of the computed staleness table, 4·(K·(n + 1) + K² + 8)·u.

        n is the largest age tabulated so far, K the largest number of states and u = 2⁻⁵³.  Every
        term of the staleness sum is a product of non-negative numbers (π(x), entries of P^t formed by
        t products of non-negative matrices, squared value differences), so no cancellation occurs and
        the classical bound γ_m = m·u/(1 − m·u) on m chained roundings applies with
        m ≤ K(t + 1) + K² + 8; the factor 4 also covers the stationary distribution (GTH, accurate
        componentwise) and the row normalisation.
        """
        K = max(c.n_states for c in self.population.chains)
        n = max(int(self._table.size), 1)
        return 4.0 * (K * (n + 1) + K * K + 8) * 2.0**-53

    def min_epsilon_c(self, staleness_bound, max_penalty):
        """Closed-form inverse: smallest ε_C with staleness + 2(s/ε_C)² ≤ f̄, i.e. s·sqrt(2/(f̄ − W)).

        The bound must hold in exact arithmetic at the returned ε_C (a value to deploy), so the
        slack f̄ − W is first reduced by the error bound of the computed W
        (:attr:`staleness_rel_error` · W) and of the subtraction (4u·f̄), and the result is then rounded
        up by a relative 1e-12 (``ROUND_UP``), which covers the square root, the division and the
        sensitivity s.  Returns ``inf`` where the reduced slack is ≤ 0: no budget is certified to meet
        the bound (f̄ ≤ W, or f̄ exceeds W by less than W's rounding error).
        """
        f_bar = check_max_penalty(max_penalty)
        W = np.asarray(staleness_bound, dtype=float)
        slack = f_bar - W - self.staleness_rel_error * np.abs(W) - 4.0 * 2.0**-53 * f_bar
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.where(slack > 0, self.sensitivity * np.sqrt(2.0 / slack) * (1.0 + ROUND_UP), np.inf)
        return eps

    def epoch_table(self, A_max: int, S_max: int, epsilon_c) -> np.ndarray:
        """Penalty of every schedule (A, S̄), shape (A_max + 1, S_max)."""
        return self._stale_windows(A_max, S_max) + self.noise_variance(epsilon_c)

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, **_) -> np.ndarray:
        """Smallest ε_C meeting f̄ for every (A, S̄), closed form; shape (A_max + 1, S_max)."""
        return self.min_epsilon_c(self._stale_windows(A_max, S_max), max_penalty)

    def min_epsilon_c_lower(self, staleness_bound, max_penalty):
        """A lower bound on the exact s·sqrt(2/(f̄ − W)): the mirror of :meth:`min_epsilon_c`.

        The slack is *enlarged* by W's error bound (:attr:`staleness_rel_error` · W) and the subtraction's
        (4u·f̄), and the result moved down by a relative ``ROUND_UP``, so it is ≤ the smallest budget that
        meets f̄ in exact arithmetic.  ``inf`` where even the enlarged slack is ≤ 0 (no budget can meet f̄).
        """
        f_bar = check_max_penalty(max_penalty)
        W = np.asarray(staleness_bound, dtype=float)
        slack = f_bar - W + self.staleness_rel_error * np.abs(W) + 4.0 * 2.0**-53 * f_bar
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(slack > 0, self.sensitivity * np.sqrt(2.0 / slack) * (1.0 - ROUND_UP), np.inf)

    def min_epsilon_c_lower_table(self, A_max: int, S_max: int, max_penalty: float) -> np.ndarray:
        """:meth:`min_epsilon_c_lower` for every (A, S̄); shape (A_max + 1, S_max), nats."""
        return self.min_epsilon_c_lower(self._stale_windows(A_max, S_max), max_penalty)


class CallablePenalty(Penalty):
    """A user-supplied penalty f(t, ε_C), inverted in ε_C by bracketing and Brent's method.

    Parameters
    ----------
    func : callable
        ``func(t, epsilon_c)`` → array, vectorised over integer ages `t` (slots); must be
        non-increasing in ε_C.
    noiseless : callable
        ``noiseless(t)`` → lim_{ε_C→∞} func(t, ε_C).
    name : str
        Name used in reports.
    """

    def __init__(self, func, noiseless, name: str = "custom", unit: str = ""):
        if not callable(func) or not callable(noiseless):
            raise InvalidInputError(f"`func` and `noiseless` must be callables, got {fmt(func)}, {fmt(noiseless)}")
        self._func = func
        self._noiseless = noiseless
        self.name = name
        self.unit = unit

    def value(self, t, epsilon_c):
        """f(t, ε_C) from the user's function."""
        return np.asarray(self._func(np.asarray(t), epsilon_c), dtype=float)

    def noiseless(self, t):
        """lim_{ε_C→∞} f(t, ε_C) from the user's function."""
        return np.asarray(self._noiseless(np.asarray(t)), dtype=float)


def two_state_mse(t, epsilon_c, p: float, q: float, n_users: int):
    """Closed form of the MSE penalty (49) for the two-state chain (43) with values ±1.

    f(t, ε_C) = 8pq(1 − (1 − p − q)^t) / (I (p + q)²) + 8 / (ε_C² I²).

    The first term is (1/I)·4·Pr(x_{−t} ≠ x_0) with Pr(x_{−t} ≠ x_0) = 2pq(1 − (1−p−q)^t)/(p+q)²
    from (44); the second is the variance of Laplace noise calibrated to the mean's
    sensitivity 2/I (the paper's (48) uses 1/I, see :class:`MSEPenalty`).

    Parameters
    ----------
    t : int or array_like of int
        Ages (slots).
    epsilon_c : float or array_like
        Budgets (nats).
    p, q : float
        Transition probabilities of (43), p + q > 0.
    n_users : int
        I.

    Returns
    -------
    float or numpy.ndarray
    """
    t = as_slots(t)
    lam = 1.0 - p - q
    stale = 8.0 * p * q * (1.0 - np.power(lam, t)) / (n_users * (p + q) ** 2)
    return stale + 8.0 / (np.asarray(epsilon_c, dtype=float) ** 2 * n_users**2)
