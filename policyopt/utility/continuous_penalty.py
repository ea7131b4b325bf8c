"""Continuous penalties f(T, ε_C) for real peak ages T ≥ 0: the penalties of the continuous formulations (39)–(42).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024, eqs. (27), (39c), (49).

Each is non-decreasing in T and non-increasing in ε_C, so the constraint f(T, ε_C) ≤ f̄ is equivalent to
T ≤ max_age(ε_C) and to ε_C ≥ min_epsilon(T).  :class:`TwoStateMSE` and :class:`LinearPenalty` are closed forms;
:class:`TableMSE` and :class:`StepPenalty` carry a discrete :class:`~policyopt.utility.penalty.Penalty` (a chain
population's MSE, any penalty) to real ages.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.models.markov import as_slots
from policyopt.utility.penalty import ROUND_UP, MSEPenalty, Penalty, check_max_penalty

__all__ = ["ContinuousPenalty", "TwoStateMSE", "LinearPenalty", "TableMSE", "StepPenalty"]


class ContinuousPenalty(ABC):
    """A penalty f(T, ε_C) defined for real peak ages T ≥ 0, for the continuous formulations (39)–(42).

    f must be non-decreasing in T and non-increasing in ε_C, so that the constraint
    f(T, ε_C) ≤ f̄ is equivalent to T ≤ :meth:`max_age` (ε_C) and to ε_C ≥ :meth:`min_epsilon` (T).

    References
    ----------
    Zhang et al. (2024), eq. (27), (39c).
    """

    name = "continuous"
    unit = ""
    #: True if f is jointly convex in (T, ε_C) on T ≥ 0, ε_C > 0
    jointly_convex = False

    @abstractmethod
    def value(self, T, epsilon_c):
        """f(T, ε_C), broadcast over real ages `T` (slots) and budgets `epsilon_c` (nats)."""

    @abstractmethod
    def max_age(self, epsilon_c, max_penalty):
        """Largest T ≥ 0 with f(T, ε_C) ≤ f̄: ``inf`` if every T qualifies, ``-inf`` if none does."""

    @abstractmethod
    def min_epsilon(self, T, max_penalty):
        """Smallest ε_C > 0 with f(T, ε_C) ≤ f̄; ``inf`` if none."""

    @abstractmethod
    def noise_floor_age(self, max_penalty):
        """sup over ε_C of :meth:`max_age`: the largest peak age any budget allows (``inf`` if unbounded)."""

    def pyomo_expression(self, T, epsilon_c):
        """f(T, ε_C) as a Pyomo expression of Pyomo variables, for global solvers.

        Raises
        ------
        NotImplementedError
            If the penalty has no closed algebraic form.
        """
        raise NotImplementedError(f"penalty {self.name!r} has no algebraic form for Pyomo")


class TwoStateMSE(ContinuousPenalty):
    """MSE (49) of the two-state example at real ages: K₀(1 − λ^T) + 8/(ε_C² I²), λ = 1 − p − q.

    K₀ = 8pq/(I(p+q)²) is the staleness limit; the noise term uses the mean's sensitivity 2/I
    (see :class:`~policyopt.utility.penalty.MSEPenalty` on the paper's factor).  Concave and increasing in T.

    Parameters
    ----------
    p, q : float
        Transition probabilities of (43); 0 < 1 − p − q < 1 is required so that λ^T is
        defined and decreasing for real T.
    n_users : int
        I ≥ 1.

    Raises
    ------
    InvalidInputError
        If 1 − p − q is not in (0, 1) or `n_users` < 1.
    """

    name = "two-state-mse"

    def __init__(self, p: float, q: float, n_users: int):
        lam = 1.0 - float(p) - float(q)
        if not (0.0 < lam < 1.0 and 0 <= p <= 1 and 0 <= q <= 1):
            raise InvalidInputError(
                f"the continuous two-state MSE needs 0 < 1 − p − q < 1 (real ages), got p={p!r}, q={q!r}"
            )
        check_int(n_users, "n_users", 1)
        self.p, self.q, self.n_users, self.lam = float(p), float(q), int(n_users), lam
        self.limit = 8.0 * p * q / (n_users * (p + q) ** 2)
        self.noise_const = 8.0 / n_users**2  # 2 (2/I)²

    def value(self, T, epsilon_c):
        """K₀(1 − λ^T) + 8/(ε_C² I²)."""
        T = np.asarray(T, dtype=float)
        eps = np.asarray(epsilon_c, dtype=float)
        with np.errstate(divide="ignore"):
            return -self.limit * np.expm1(T * math.log(self.lam)) + self.noise_const / eps**2

    def max_age(self, epsilon_c, max_penalty):
        """T ≤ ln(1 − (f̄ − noise)/K₀) / ln λ."""
        f_bar = check_max_penalty(max_penalty)
        eps = np.asarray(epsilon_c, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (f_bar - self.noise_const / eps**2) / self.limit
            out = np.where(r >= 1.0, np.inf, np.log1p(-np.minimum(r, 1.0)) / math.log(self.lam))
        return np.where(r < 0, -np.inf, out)

    def min_epsilon(self, T, max_penalty):
        """ε_C = sqrt(8 / (I² (f̄ − K₀(1 − λ^T))))."""
        f_bar = check_max_penalty(max_penalty)
        slack = f_bar - (self.value(T, np.inf))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(slack > 0, np.sqrt(self.noise_const / slack) * (1.0 + ROUND_UP), np.inf)

    def noise_floor_age(self, max_penalty):
        """Largest T with K₀(1 − λ^T) < f̄ (noise → 0)."""
        f_bar = check_max_penalty(max_penalty)
        return math.inf if f_bar >= self.limit else math.log1p(-f_bar / self.limit) / math.log(self.lam)

    def pyomo_expression(self, T, epsilon_c):
        """K₀(1 − exp(T ln λ)) + 8/(I² ε_C²) in Pyomo."""
        import pyomo.environ as pyo

        return self.limit * (1 - pyo.exp(T * math.log(self.lam))) + self.noise_const / epsilon_c**2


class LinearPenalty(ContinuousPenalty):
    """f(T, ε_C) = a·T + b/ε_C (a, b > 0): jointly convex, used as a test case of (39)–(42).

    Raises
    ------
    InvalidInputError
        If `a` or `b` is not a positive finite number.
    """

    name = "linear"
    jointly_convex = True

    def __init__(self, a: float, b: float):
        for nm, v in (("a", a), ("b", b)):
            if not isinstance(v, (int, float, np.floating)) or not (math.isfinite(v) and v > 0):
                raise InvalidInputError(f"`{nm}` must be a positive finite number, got {fmt(v)}")
        self.a, self.b = float(a), float(b)

    def value(self, T, epsilon_c):
        """a·T + b/ε_C."""
        with np.errstate(divide="ignore"):
            return self.a * np.asarray(T, dtype=float) + self.b / np.asarray(epsilon_c, dtype=float)

    def max_age(self, epsilon_c, max_penalty):
        """(f̄ − b/ε_C)/a, −inf when negative."""
        f_bar = check_max_penalty(max_penalty)
        with np.errstate(divide="ignore"):
            t = (f_bar - self.b / np.asarray(epsilon_c, dtype=float)) / self.a
        return np.where(t < 0, -np.inf, t)

    def min_epsilon(self, T, max_penalty):
        """b/(f̄ − a·T)."""
        f_bar = check_max_penalty(max_penalty)
        slack = f_bar - self.a * np.asarray(T, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(slack > 0, self.b / slack * (1.0 + ROUND_UP), np.inf)

    def noise_floor_age(self, max_penalty):
        """f̄ / a."""
        return check_max_penalty(max_penalty) / self.a

    def pyomo_expression(self, T, epsilon_c):
        """a·T + b/ε_C in Pyomo."""
        return self.a * T + self.b / epsilon_c


class TableMSE(ContinuousPenalty):
    """A chain population's MSE at real ages, by linear interpolation of its running maximum.

    value(T, ε_C) = interp(T; t, max_{s ≤ t} staleness(s)) + 2(s/ε_C)².  At integer T this is
    ≥ the epoch penalty of any schedule with peak AoI T (equal when the staleness increases),
    so schedules meeting it also meet the exact constraint.

    Parameters
    ----------
    mse : MSEPenalty
    horizon : int
        Largest age tabulated (slots); beyond it the penalty is treated as its value there
        raised to the staleness limit.
    """

    name = "mse-table"

    def __init__(self, mse: MSEPenalty, horizon: int):
        if not isinstance(mse, MSEPenalty):
            raise InvalidInputError(f"`mse` must be an MSEPenalty, got {fmt(mse)}")
        (h,) = as_slots([horizon], "horizon")
        self.mse = mse
        self.unit = mse.unit
        self.ages = np.arange(int(h) + 1, dtype=float)
        self.table = np.maximum.accumulate(np.asarray(mse.staleness(np.arange(int(h) + 1)), dtype=float))
        self.table[-1] = max(self.table[-1], mse.staleness_limit)

    def _stale(self, T):
        return np.interp(np.asarray(T, dtype=float), self.ages, self.table)

    def value(self, T, epsilon_c):
        """Interpolated running-max staleness plus Laplace noise variance."""
        return self._stale(T) + self.mse.noise_variance(epsilon_c)

    def max_age(self, epsilon_c, max_penalty):
        """Largest T with interpolated staleness ≤ f̄ − noise (inverse of a non-decreasing interpolant)."""
        f_bar = check_max_penalty(max_penalty)
        room = f_bar - np.asarray(self.mse.noise_variance(epsilon_c), dtype=float)
        j = np.searchsorted(self.table, room, side="right") - 1  # last age with staleness ≤ room
        last = self.table.size - 1
        jj = np.clip(j, 0, last - 1)
        lo, hi = self.table[jj], self.table[jj + 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(hi > lo, (room - lo) / (hi - lo), 0.0)
        out = self.ages[jj] + np.clip(frac, 0.0, 1.0)
        out = np.where(j >= last, np.inf, out)
        return np.where(j < 0, -np.inf, out)

    def min_epsilon(self, T, max_penalty):
        """Closed form of :meth:`~policyopt.utility.penalty.MSEPenalty.min_epsilon_c` with the interpolated staleness."""
        return self.mse.min_epsilon_c(self._stale(T), max_penalty)

    def noise_floor_age(self, max_penalty):
        """Largest T whose staleness is below f̄."""
        f_bar = check_max_penalty(max_penalty)
        return math.inf if f_bar > self.table[-1] else float(np.interp(f_bar, self.table, self.ages))


class StepPenalty(ContinuousPenalty):
    """A discrete :class:`~policyopt.utility.penalty.Penalty` made usable by the (39) back ends: the running maximum
    over ages.

    value(T, ε_C) = max_{a = 0..⌈T⌉} f(a, ε_C) for 0 ≤ T ≤ `horizon` (``inf`` beyond, ``f(0, ε_C)``
    below 0).  It is non-decreasing in T by construction, whether or not f is, and at an
    integer peak age it is ≥ the epoch penalty max_{a=A..A+S̄−1} f(a, ε_C) of any schedule with
    that peak age, so a schedule that meets it also meets the exact constraint (28b).  It is a
    step function of T: nonconvex and non-smooth (``smooth`` is False), so the cvxpy back end
    refuses it; the corrected heuristics (Algorithms 1–2) and the exact integer solver of (39)
    use only evaluations and the monotone inverses :meth:`max_age` and :meth:`min_epsilon`.

    Parameters
    ----------
    penalty : Penalty
        The discrete penalty; must have ``monotone_in_epsilon`` True (the inverses in ε_C rely on it).
    horizon : int
        Largest age tabulated (slots); use at least A_max + S_max.

    Raises
    ------
    InvalidInputError
        If `penalty` is not a Penalty, is not proven non-increasing in ε_C, or `horizon` < 0.

    References
    ----------
    Zhang et al. (2024), (39c), Algorithms 1–2.
    """

    jointly_convex = False
    smooth = False

    def __init__(self, penalty: Penalty, horizon: int):
        if not isinstance(penalty, Penalty):
            raise InvalidInputError(f"`penalty` must be a Penalty, got {fmt(penalty)}")
        if not penalty.monotone_in_epsilon:
            raise InvalidInputError(
                f"penalty {penalty.name!r} is not proven non-increasing in ε_C (`monotone_in_epsilon` is False), "
                "so the (39) back ends cannot invert it; use the exact solver on problem (28) (method='exact')"
            )
        (h,) = as_slots([horizon], "horizon")
        self.penalty = penalty
        self.horizon = int(h)
        self.name = f"{penalty.name}-step"
        self.unit = penalty.unit
        self._ages = np.arange(self.horizon + 1)
        self._cache: dict[float, np.ndarray] = {}
        self._inverse: dict[float, np.ndarray] = {}

    def _running_max(self, eps: np.ndarray) -> np.ndarray:
        """Running max over ages 0..horizon for each budget; shape (len(eps), horizon + 1)."""
        eps = np.asarray(eps, dtype=float).reshape(-1)
        missing = np.unique(eps[[float(e) not in self._cache for e in eps]])
        if missing.size:
            if len(self._cache) > 50_000:
                self._cache.clear()
            fin = missing[np.isfinite(missing)]
            if fin.size:
                vals = np.asarray(self.penalty.value(self._ages[:, None], fin[None, :]), dtype=float)
                for j, e in enumerate(fin):
                    self._cache[float(e)] = np.maximum.accumulate(vals[:, j])
            if np.isinf(missing).any():
                self._cache[math.inf] = np.maximum.accumulate(np.asarray(self.penalty.noiseless(self._ages), dtype=float))
        return np.stack([self._cache[float(e)] for e in eps]) if eps.size else np.zeros((0, self.horizon + 1))

    def value(self, T, epsilon_c):
        """max_{a ≤ ⌈T⌉} f(a, ε_C), broadcast over real ages `T` (slots) and budgets (nats)."""
        T, eps = np.broadcast_arrays(np.asarray(T, dtype=float), np.asarray(epsilon_c, dtype=float))
        rm = self._running_max(eps.reshape(-1))
        k = np.ceil(np.clip(T.reshape(-1), 0.0, None) - 1e-12)
        inside = k <= self.horizon
        idx = np.where(inside, k, 0).astype(int)
        out = np.where(inside, rm[np.arange(idx.size), idx] if idx.size else idx, np.inf)
        return float(out[0]) if T.ndim == 0 else out.reshape(T.shape)

    def max_age(self, epsilon_c, max_penalty):
        """Largest integer T ≤ horizon with value(T, ε_C) ≤ f̄; ``-inf`` if none."""
        f_bar = check_max_penalty(max_penalty)
        eps = np.asarray(epsilon_c, dtype=float)
        rm = self._running_max(eps.reshape(-1))
        n_ok = (rm <= f_bar).sum(axis=1)  # running max is non-decreasing: feasible ages are a prefix
        out = np.where(n_ok > 0, n_ok - 1.0, -np.inf).reshape(eps.shape)
        return float(out) if eps.ndim == 0 else out

    def min_epsilon(self, T, max_penalty):
        """Smallest ε_C with value(T, ε_C) ≤ f̄ (root finding on the discrete penalty); ``inf`` if none."""
        f_bar = check_max_penalty(max_penalty)
        if f_bar not in self._inverse:
            self._inverse[f_bar] = np.asarray(self.penalty.min_epsilon_c_table(0, self.horizon + 1, f_bar), dtype=float)[0]
        row = self._inverse[f_bar]
        T = np.asarray(T, dtype=float)
        k = np.ceil(np.clip(T, 0.0, None) - 1e-12)
        out = np.where(k <= self.horizon, row[np.minimum(k, self.horizon).astype(int)], np.inf)
        return float(out) if T.ndim == 0 else out

    def noise_floor_age(self, max_penalty):
        """Largest T ≤ horizon whose noiseless running max is below f̄ (``-inf`` if none)."""
        f_bar = check_max_penalty(max_penalty)
        rm = self._running_max(np.array([math.inf]))[0]
        n_ok = int((rm < f_bar).sum())
        return n_ok - 1.0 if n_ok else -math.inf
