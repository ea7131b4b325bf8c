"""Utility penalties f(t, ε_C): the accuracy lost by publishing data that is t slots old
with a per-release budget ε_C.

Source: ``../shared/papers/000_2a085da7b331351a.txt``, eqs. (27), (48)–(49).

Every penalty here is non-increasing in ε_C (more budget, less noise).  It need not be
monotone in t (a chain with a negative eigenvalue oscillates), so the penalty of a
schedule is the maximum over the ages A..A+S̄−1 that an epoch goes through
(:meth:`Penalty.epoch_table`), which equals the value at the discrete peak AoI
A + S̄ − 1 when f is increasing in t.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .errors import InvalidInputError, InvalidModelError, fmt
from .markov import Population, as_slots

__all__ = ["Penalty", "MSEPenalty", "CallablePenalty", "two_state_mse", "ROUND_UP"]

#: Relative amount by which inverse budgets are rounded up (towards feasibility).
ROUND_UP = 1e-12


def _check_max_penalty(max_penalty) -> float:
    if not isinstance(max_penalty, (int, float, np.floating, np.integer)) or not (
        math.isfinite(float(max_penalty)) and float(max_penalty) > 0
    ):
        raise InvalidInputError(f"`max_penalty` (f̄) must be a positive finite number, got {fmt(max_penalty)}")
    return float(max_penalty)


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
        return _window_max(vals, A_max, S_max)

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, *, xtol: float = 1e-12) -> np.ndarray:
        """Smallest ε_C with epoch penalty ≤ f̄ for every (A, S̄); ``inf`` where none exists.

        Generic version: per schedule, bracket the root of max_a f(a, ε) − f̄ by doubling,
        then refine with Brent's method; the upper end of the final bracket is returned,
        so the returned ε_C always satisfies the bound.

        Returns shape (A_max + 1, S_max) with entry [A, S̄ − 1] (nats).
        """
        from scipy.optimize import brentq

        f_bar = _check_max_penalty(max_penalty)
        ages = np.arange(A_max + S_max)
        floor = _window_max(np.asarray(self.noiseless(ages), dtype=float), A_max, S_max)
        out = np.full(floor.shape, np.inf)
        for a in range(A_max + 1):
            for s in range(1, S_max + 1):
                if not floor[a, s - 1] < f_bar:
                    continue
                window = np.arange(a, a + s)

                def excess(eps, window=window):
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


def _window_max(vals: np.ndarray, A_max: int, S_max: int) -> np.ndarray:
    """table[A, S̄−1] = max(vals[A : A + S̄]) for A ≤ A_max, S̄ ≤ S_max."""
    windows = sliding_window_view(vals, S_max)[: A_max + 1]  # (A_max+1, S_max): vals[A + j]
    return np.maximum.accumulate(windows, axis=1)


class MSEPenalty(Penalty):
    """Mean-square error of the released mean of I users' current values.

    f(t, ε_C) = E[(M(X_{−t}) − (1/I)Σ_i x_{i,0})²]
              = (1/I²) Σ_i E[(x_{i,−t} − x_{i,0})²]  +  2·(s/ε_C)²,

    where M adds Laplace(s/ε_C) noise to the mean of the t-slot-old values and
    s = (max state value − min state value)/I is the sensitivity of that mean, so that
    every release is ε_C-DP (Proposition 1).  The staleness term is exact: for each
    user, E[(x_{−t} − x_0)²] = Σ_{x,y} π(x) P_t(x, y) (v_x − v_y)² (stationary chain, users
    independent, so cross terms vanish).

    Parameters
    ----------
    population : Population
        Users' chains with numeric state values (units of the values, e.g. kWh; the
        penalty is in those units squared).

    Raises
    ------
    InvalidModelError
        If all state values are equal (the mean then carries no information and its
        sensitivity is 0).

    Notes
    -----
    Eq. (48) as printed adds Laplace(1/(ε_C I)) noise to the mean of ±1 values; that mean's
    sensitivity is 2/I, so the printed mechanism is only 2ε_C-DP and its noise variance
    2/(ε_C² I²) (the "noise only" curve of Fig. 4) is a quarter of the correct 8/(ε_C² I²).
    This class uses the correct sensitivity.

    References
    ----------
    ``000_2a085da7b331351a.txt``, eqs. (48)–(49); Proposition 1.
    """

    name = "mse"

    def __init__(self, population: Population, unit: str = ""):
        if not isinstance(population, Population):
            raise InvalidModelError(f"`population` must be a Population, got {fmt(population)}")
        lo, hi = population.value_range
        if not hi > lo:
            raise InvalidModelError(
                f"all state values equal {lo!r}: the mean has sensitivity 0 and the MSE penalty is degenerate"
            )
        self.population = population
        self.unit = unit
        self.sensitivity = (hi - lo) / population.n_users
        self._table = np.zeros(0)

    def staleness(self, t):
        """Exact staleness term (1/I²) Σ_i E[(x_{i,−t} − x_{i,0})²] for ages `t` (slots), no noise."""
        ts = as_slots(t, "t")
        n = int(ts.max()) + 1 if ts.size else 1
        if self._table.size < n:
            self._table = self._staleness_table(max(n, 2 * self._table.size))
        out = self._table[ts]
        return float(out) if out.ndim == 0 else out

    def _staleness_table(self, n: int) -> np.ndarray:
        pop = self.population
        total = np.zeros(n)
        for chain, count in zip(pop.chains, pop.counts):
            P = chain.P
            v = chain.state_values
            W = (v[:, None] - v[None, :]) ** 2
            pi = chain.stationary
            Pt = np.eye(chain.n_states)
            for t in range(n):
                total[t] += count * float(pi @ (Pt * W).sum(axis=1))
                Pt = Pt @ P
        return total / pop.n_users**2

    @property
    def staleness_limit(self) -> float:
        """lim_{t→∞} of the staleness term: (1/I²) Σ_i 2 Var_{π_i}(x_i)."""
        pop = self.population
        acc = 0.0
        for chain, count in zip(pop.chains, pop.counts):
            pi, v = chain.stationary, chain.state_values
            mean = float(pi @ v)
            acc += count * 2.0 * float(pi @ (v - mean) ** 2)
        return acc / pop.n_users**2

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

    def min_epsilon_c(self, staleness_bound, max_penalty):
        """Closed-form inverse: smallest ε_C with staleness + 2(s/ε_C)² ≤ f̄, i.e. s·sqrt(2/(f̄ − W)).

        The result is rounded up by a relative 1e-12 (``ROUND_UP``), so that the bound still
        holds when the penalty is re-evaluated with a different order of floating-point
        operations.  Returns ``inf`` where f̄ ≤ W: no budget can meet the bound.
        """
        f_bar = _check_max_penalty(max_penalty)
        slack = f_bar - np.asarray(staleness_bound, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.where(slack > 0, self.sensitivity * np.sqrt(2.0 / slack) * (1.0 + ROUND_UP), np.inf)
        return eps

    def epoch_table(self, A_max: int, S_max: int, epsilon_c) -> np.ndarray:
        """Penalty of every schedule (A, S̄), shape (A_max + 1, S_max)."""
        stale = _window_max(np.asarray(self.staleness(np.arange(A_max + S_max))), A_max, S_max)
        return stale + self.noise_variance(epsilon_c)

    def min_epsilon_c_table(self, A_max: int, S_max: int, max_penalty: float, **_) -> np.ndarray:
        """Smallest ε_C meeting f̄ for every (A, S̄), closed form; shape (A_max + 1, S_max)."""
        stale = _window_max(np.asarray(self.staleness(np.arange(A_max + S_max))), A_max, S_max)
        return self.min_epsilon_c(stale, max_penalty)


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
