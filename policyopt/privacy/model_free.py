"""The guarantee that needs no model: composition of the Laplace releases that use one user's readings.

A schedule (A, S̄, ε_C) releases, every S̄ slots, the mean of I users' readings taken A slots earlier plus Laplace
noise of scale Δf/ε_C (Δf = (HI − LO)/I).  Each release is ε_C-DP with respect to the one reading of each user it
reads (Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024,
Proposition 1), hence with respect to that user's whole series: changing the series changes the release's input by at
most Δf.  Over a horizon of H slots the releases that read one user's series are k mechanisms of ε_C each, whatever the
correlation between that user's readings (no Markov model, no Δ(t)):

* **pure** ε = Σ_j ε_C,j (= k·ε_C), δ = 0, by basic composition (C. Dwork, A. Roth, "The Algorithmic Foundations of
  Differential Privacy", Found. Trends Theor. Comput. Sci. 9(3–4), 2014, Theorem 3.16; Zhang et al. 2024,
  Proposition 2); it is exact for Laplace releases (the loss k·ε_C has probability 2⁻ᵏ > 0);
* **(ε, δ)** by the privacy-loss-distribution (PLD) accountant of Google's ``dp_accounting``
  (``PLDAccountant``, ``LaplaceDpEvent(noise_multiplier=1/ε_C)`` composed ``count=k``, ``get_epsilon(δ)``), its
  pessimistic (upper-bound) estimate, never above the pure value (the minimum of the two is reported);
* **w-event** privacy (G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias, "Differentially Private Event Sequences
  over Infinite Streams", PVLDB 7(12), 2014): the same for the releases whose inputs fall in any w consecutive slots,
  at most ⌈w/S̄⌉ of them for a periodic schedule.

The neighbouring pair of one release is (Lap(0, b), Lap(Δf, b)), b = Δf/ε_C, i.e. the sensitivity-1 pair of
``LaplaceDpEvent(1/ε_C)``; ``dp_accounting`` accounts it under its default relation (add or remove one), whose PLD for
the Laplace mechanism is that one pair, so the numbers hold for replacing one user's series too.

The PLD grid.  ``dp_accounting``'s default ``value_discretization_interval`` (1e-4 nats) costs seconds to minutes when
ε_C·k is large (ε_C = 1, k = 8760: about 20 s).  :func:`pld_discretization` chooses a coarser grid from the budgets.  A
coarser grid is still an upper bound: ``from_laplace_mechanism`` discretises with the pessimistic "connect the dots"
algorithm, whose PLD dominates the mechanism's for *any* discrete support (V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar,
P. Manurangsi, "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions", PETS 2022,
Algorithm 1; ``dp_accounting.pld.pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap``: "overestimates the
hockey-stick divergence (i.e., δ) for any value of ε"), dominating pairs stay dominating under composition, and the
pessimistic FFT composition moves the truncated right tail to the infinite loss (``pld_pmf._truncate_tails``,
``DensePLDPmf.self_compose``).  The grid only trades tightness for time; the looseness against the default grid
is measured in :func:`laplace_epsilon`'s notes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from numbers import Integral, Real

import numpy as np

from policyopt.errors import InvalidInputError, check_int, fmt
from policyopt.formatting import check_text, fmt_count, fmt_epsilon_c, fmt_upper, fmt_value, json_clean, round_up
from policyopt.result import result_repr
from policyopt.io.result_cache import cached

__all__ = [
    "default_delta",
    "releases_in_window",
    "pld_discretization",
    "laplace_epsilon",
    "laplace_epsilon_lower_bound",
    "WEvent",
    "ModelFreeGuarantee",
    "model_free_guarantee",
    "model_free_of_releases",
    "accountant_name",
    "dp_accounting_version",
    "check_delta",
    "check_windows",
    "DEFAULT_DISCRETIZATION",
    "PLD_REL_MARGIN",
    "MAX_BUDGET_GROUPS",
]

#: ``dp_accounting``'s default ``value_discretization_interval`` (nats): the finest grid :func:`pld_discretization` uses.
DEFAULT_DISCRETIZATION = 1e-4
#: Grid per budget: the interval is at most (k·ε_C-weighted mean ε_C) / GRID_PER_BUDGET.
GRID_PER_BUDGET = 10.0
#: Largest interval (nats): resolves the continuous part of one release's privacy loss (width ≈ 2 nats for ε_C ≥ 2).
GRID_MAX = 0.1
#: Grid per ε: the interval is at most (advanced-composition estimate of ε(δ)) / GRID_PER_EPSILON.
GRID_PER_EPSILON = 4000.0
#: Cap on the composed PLD's support (points): beyond it the interval grows (tightness traded for time and memory).
MAX_GRID_POINTS = 2**21
#: Cap on one release's PLD support (points), for absurd ε_C.
MAX_SINGLE_POINTS = 2**18
#: Relative margin added to the PLD's ε before it is reported (covers the floating-point error of the FFT composition
#: and of ``get_epsilon``'s sums; the discretisation itself is already pessimistic).
PLD_REL_MARGIN = 1e-6
#: More distinct budgets than this are rounded *up* onto a geometric grid of this many values (a larger ε_C is a
#: less noisy Laplace release, whose PLD dominates: still an upper bound) so the accountant composes few groups.
MAX_BUDGET_GROUPS = 64
#: Budgets below this (nats) are accounted by basic composition only (1/ε_C would overflow the noise multiplier).
_TINY_BUDGET = 1e-300
#: Safety margin of :func:`laplace_epsilon_lower_bound` (absolute nats, relative): far above the floating-point error
#: of its O(k) log-sum-exp (≈ 1e-9 nats at k = 10⁵).
_LB_ABS_MARGIN, _LB_REL_MARGIN = 1e-7, 1e-9


# ----------------------------------------------------------------------------------------------- validation


def check_delta(delta) -> float:
    """δ of (ε, δ)-DP as a float.

    Raises
    ------
    InvalidInputError
        Unless `delta` is a real number (not bool) with 0 ≤ δ < 1.
    """
    if isinstance(delta, bool) or not isinstance(delta, Real) or not (0.0 <= float(delta) < 1.0):
        raise InvalidInputError(f"`delta` (the δ of (ε, δ)-DP) must be a number with 0 ≤ δ < 1, got {fmt(delta)}")
    return float(delta)


def _check_budget(value, name: str = "epsilon_c") -> float:
    """One ε_C: a finite real number ≥ 0 (nats)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not (math.isfinite(float(value)) and value >= 0):
        raise InvalidInputError(f"`{name}` must be a finite number ≥ 0 (nats per release), got {fmt(value)}")
    return float(value)


def check_windows(windows) -> tuple[int, ...]:
    """w-event windows as a tuple of ints (slots).

    Raises
    ------
    InvalidInputError
        Unless `windows` is a sequence (not a string) of integers ≥ 1.
    """
    if isinstance(windows, (str, bytes)) or not hasattr(windows, "__iter__"):
        raise InvalidInputError(f"`windows` must be a sequence of integers ≥ 1 (slots), e.g. (24, 168), got {fmt(windows)}")
    out = []
    for w in windows:
        if isinstance(w, bool) or not isinstance(w, Integral) or w < 1:
            raise InvalidInputError(f"`windows` must hold integers ≥ 1 (slots), got {fmt(w)} in {fmt(windows)}")
        out.append(int(w))
    return tuple(out)


def _budget_arrays(epsilon_c, releases) -> tuple[np.ndarray, np.ndarray]:
    """Validated (ε_C, k) as float and int64 arrays of equal length (scalars broadcast against a sequence)."""
    eps_seq = np.ndim(epsilon_c) > 0
    rel_seq = np.ndim(releases) > 0
    if eps_seq:
        eps = np.asarray(epsilon_c)
        if eps.ndim != 1 or eps.dtype == bool or not (np.issubdtype(eps.dtype, np.floating) or np.issubdtype(eps.dtype, np.integer)):
            raise InvalidInputError(f"`epsilon_c` must be a number or a 1-D sequence of numbers ≥ 0 (nats), got {fmt(epsilon_c)}")
        eps = eps.astype(float)
        if not np.all(np.isfinite(eps) & (eps >= 0)):
            bad = eps[~(np.isfinite(eps) & (eps >= 0))][0]
            raise InvalidInputError(f"`epsilon_c` must hold finite numbers ≥ 0 (nats per release), got {fmt(float(bad))} in it")
    else:
        eps = np.array([_check_budget(epsilon_c)])
    if rel_seq:
        k = np.asarray(releases)
        if k.ndim != 1 or k.dtype == bool or not np.issubdtype(k.dtype, np.integer):
            raise InvalidInputError(f"`releases` must be an integer or a 1-D sequence of integers ≥ 0, got {fmt(releases)}")
        if np.any(k < 0):
            raise InvalidInputError(f"`releases` must hold integers ≥ 0, got {fmt(int(k[k < 0][0]))} in it")
        k = k.astype(np.int64)
    else:
        k = np.array([check_int(releases, "releases", 0, "number of releases")], dtype=np.int64)
    if eps_seq and rel_seq and eps.size != k.size:
        raise InvalidInputError(
            f"`epsilon_c` and `releases` must have equal lengths (one count per budget), got {eps.size} and {k.size}"
        )
    if eps.size != k.size:
        eps, k = np.broadcast_arrays(eps, k)
    return np.array(eps, dtype=float), np.array(k, dtype=np.int64)


def _coarsen(eps: np.ndarray) -> np.ndarray:
    """Positive budgets as the accountant takes them: unchanged when at most :data:`MAX_BUDGET_GROUPS` are distinct,
    else each rounded *up* onto a geometric grid of that many values from the smallest to the largest (an upper bound:
    a larger ε_C is a less noisy Laplace release, whose PLD dominates)."""
    values = np.unique(eps)
    if values.size <= MAX_BUDGET_GROUPS:
        return eps
    top, bottom = float(values[-1]), float(values[0])
    log_ratio = math.log(top / bottom) / (MAX_BUDGET_GROUPS - 1)
    steps = np.floor(np.log(top / eps) / log_ratio)  # ε ≤ top·r^{−step}: rounded up onto the grid
    grid = top * np.exp(-steps * log_ratio)
    return np.where(grid < eps, eps, grid)  # never below the budget it stands for (float safety)


def _stand_in_budgets(eps: np.ndarray) -> np.ndarray:
    """Per release, the budget the accountant uses for it: 0 for ε_C = 0 and for tiny budgets (accounted by basic
    composition), :func:`_coarsen` of the others."""
    out = np.where(eps >= _TINY_BUDGET, eps, 0.0)
    pos = out > 0
    if pos.any():
        out[pos] = _coarsen(out[pos])
    return out


def _groups(eps: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(distinct budgets ascending, their counts, Σ k·ε_C of the tiny budgets rounded up) ready for the accountant.

    Zero budgets and zero counts are dropped (a release with ε_C = 0 is independent of the data).  Budgets below
    ``_TINY_BUDGET`` are returned as a basic-composition remainder; the rest go through :func:`_coarsen`.
    """
    keep = (eps > 0) & (k > 0)
    eps, k = eps[keep], k[keep]
    tiny = eps < _TINY_BUDGET
    tiny_sum = _pure_epsilon(eps[tiny], k[tiny])
    eps, k = eps[~tiny], k[~tiny]
    if eps.size == 0:
        return eps, k, tiny_sum
    values, inverse = np.unique(_coarsen(eps), return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=k.astype(float), minlength=values.size).astype(np.int64)
    return values, counts, tiny_sum


# ----------------------------------------------------------------------------------------------- small helpers


def default_delta(users: int) -> float:
    """The default δ for a deployment of I users: min(1e-6, 1/(10·I)).

    A δ of order 1/I would allow a mechanism that publishes one whole user's series in the clear with probability
    1/I (every user's, one at a time) and still call it (ε, δ)-DP; a δ an order of magnitude below 1/I rules that out.
    Capped at 1e-6 so small deployments get the customary δ.

    Parameters
    ----------
    users : int
        Deployment size I ≥ 1 (users).

    Returns
    -------
    float
        δ, dimensionless.

    Raises
    ------
    InvalidInputError
        If `users` is not an integer ≥ 1.
    """
    n = check_int(users, "users", 1, "deployment size I")
    return min(1e-6, 1.0 / (10.0 * n))


def releases_in_window(window: int, S_bar: int) -> int:
    """Most releases of a periodic schedule whose input slots lie in any `window` consecutive slots: ⌈w/S̄⌉.

    The releases read the slots A, A + S̄, A + 2S̄, … (the aging A shifts them but not their spacing), so any
    w consecutive slots hold ⌈w/S̄⌉ of them at most (and that many for some placement of the window).

    Parameters
    ----------
    window : int
        w ≥ 1 (slots).
    S_bar : int
        Inter-publish time S̄ ≥ 1 (slots).

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        If either is not an integer ≥ 1.

    References
    ----------
    Kellaris, Papadopoulos, Xiao, Papadias, "Differentially Private Event Sequences over Infinite Streams",
    PVLDB 7(12), 2014 (w-event privacy).
    """
    w = check_int(window, "window", 1, "slots")
    s = check_int(S_bar, "S_bar", 1, "slots")
    return -(-w // s)  # ⌈w/S̄⌉


@lru_cache(maxsize=1)
def dp_accounting_version() -> str:
    """The installed ``dp_accounting`` version (from the package metadata; the library itself is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dp-accounting")
    except PackageNotFoundError:  # pragma: no cover - the library is a dependency
        return "unknown"


def accountant_name(delta: float) -> str:
    """The short string naming the accounting method, as the JSON's ``accountant`` field carries it.

    Parameters
    ----------
    delta : float
        δ of the guarantee; 0 means pure ε-DP (basic composition only).

    Returns
    -------
    str
    """
    if check_delta(delta) == 0.0:
        return "basic composition (pure, δ = 0)"
    return f"PLD (dp_accounting {dp_accounting_version()}, pessimistic), basic composition for epsilon_pure"


# ----------------------------------------------------------------------------------------------- the accounting


def _float_up(x: Fraction) -> float:
    """The smallest float ≥ the exact rational `x` (``x`` itself when it is a float)."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _pure_epsilon(eps: np.ndarray, k: np.ndarray) -> float:
    """Σ k·ε_C of basic composition (Dwork & Roth 2014, Theorem 3.16) in exact rational arithmetic, rounded up to the
    next float (exact when the sum is a float, e.g. 1 × 0.5)."""
    keep = (eps > 0) & (k > 0)
    if not keep.any():
        return 0.0
    values, inverse = np.unique(eps[keep], return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=k[keep].astype(float), minlength=values.size)
    return _float_up(sum((Fraction(float(v)) * int(c) for v, c in zip(values, counts)), Fraction(0)))


def _max_window_sum(slots: np.ndarray, eps: np.ndarray, w: int) -> float:
    """Largest Σ ε_C over the releases whose (sorted) input slots lie in w consecutive slots, exact, rounded up.

    The budgets are scaled to integers over their common power-of-two denominator, so the prefix sums are exact."""
    ratios = [float(e).as_integer_ratio() for e in eps]
    denom = max(d for _, d in ratios)
    prefix = [0, *itertools.accumulate(n * (denom // d) for n, d in ratios)]
    end = np.searchsorted(slots, slots + w, side="left")  # releases i..end−1 read slots in [slot_i, slot_i + w)
    best = max(prefix[int(j)] - prefix[i] for i, j in enumerate(end))
    return _float_up(Fraction(best, denom))


def pld_discretization(epsilon_c, releases, delta: float) -> float:
    """The ``value_discretization_interval`` (nats) :func:`laplace_epsilon` gives ``dp_accounting``'s PLD accountant.

    d₀ = max(min(ε̄/10, 0.1, ε̂/4000), 1e-4, W/2²¹, 2·max ε_C/2¹⁸), then aligned: d = ε*/n with ε* the budget of
    largest k·ε_C² and n = ⌈ε*/d₀⌉ (lowered if that falls below the floor max(1e-4, W/2²¹, 2·max ε_C/2¹⁸); d₀ itself
    when ε* is below the floor), where

    * ε̄ = Σk·ε_C² / Σk·ε_C is the k·ε_C-weighted mean budget: the grid resolves one release's loss, which lies in
      [−ε_C, ε_C];
    * 0.1 nats resolves the continuous part of one release's loss when ε_C is large (it spreads over ≈ 2 nats);
    * ε̂ = min(Σk·ε_C, ½Σk·ε_C(e^{ε_C} − 1) + √(2 ln(1/δ)·Σk·ε_C²)) is the advanced-composition estimate of the
      answer (C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy", FOCS 2010; Dwork & Roth 2014,
      Theorem 3.20), so the grid stays a small fraction of ε(δ);
    * W = min(2Σk·ε_C, Σk·min(ε_C, 2)²/(2 max ε_C) + 4 ln(2·10¹⁵)·max ε_C) estimates the width of the composed PLD
      that ``dp_accounting`` keeps after its Chernoff truncation (tail mass 1e-15), and 2·max ε_C that of one release:
      the two caps bound time and memory;
    * never finer than the library's default 1e-4;
    * alignment puts the loss atoms ±ε* of those releases on grid points; measured, it is what makes a coarse grid
      tight (a year of hourly releases at ε_C = 0.00506: 2.12137 nats on ε_C/10 against 2.12302 on 4e-4 ≈ ε_C/12.65).

    Any d gives an upper bound (pessimistic discretisation, see the module docstring); d only sets the tightness.

    Parameters
    ----------
    epsilon_c : float or sequence of float
        Budget per release ε_C ≥ 0 (nats), or one per group of releases.
    releases : int or sequence of int
        Number of releases k ≥ 0 (per group).
    delta : float
        0 < δ < 1 (for δ = 0 no PLD is used; the default 1e-4 is returned).

    Returns
    -------
    float
        Interval in nats, ≥ 1e-4.

    Raises
    ------
    InvalidInputError
        As :func:`laplace_epsilon`.
    """
    eps, k = _budget_arrays(epsilon_c, releases)
    delta = check_delta(delta)
    values, counts, _ = _groups(eps, k)
    return _grid(values, counts, delta)


def _grid(values: np.ndarray, counts: np.ndarray, delta: float) -> float:
    if values.size == 0 or delta == 0.0:
        return DEFAULT_DISCRETIZATION
    kf = counts.astype(float)
    s1 = float(np.sum(kf * values))  # Σ k ε_C: the pure bound, basic composition (Dwork & Roth Thm 3.16)
    s2 = float(np.sum(kf * values**2))  # Σ k ε_C²
    with np.errstate(over="ignore"):
        # advanced composition (Dwork & Roth Thm 3.20): √(2 ln(1/δ) Σkε²) + ½ Σ k ε (e^ε − 1)
        drift = 0.5 * float(np.sum(kf * values * np.expm1(values)))
    estimate = min(s1, drift + math.sqrt(2.0 * math.log(1.0 / delta) * s2))
    top = float(values[-1])
    # Support of the composed PLD: dp_accounting truncates it by a Chernoff bound (tail mass 1e-15) whose smallest
    # order is 1/(2 max ε_C) per nat; one release's loss has variance ≤ min(ε_C², 4).
    width = min(2.0 * s1, float(np.sum(kf * np.minimum(values, 2.0) ** 2)) / (2.0 * top) + 4.0 * math.log(2e15) * top)
    floor = max(DEFAULT_DISCRETIZATION, width / MAX_GRID_POINTS, 2.0 * top / MAX_SINGLE_POINTS)
    d = max(min(s2 / s1 / GRID_PER_BUDGET, GRID_MAX, estimate / GRID_PER_EPSILON), floor)
    # Align the grid with the budget that weighs most (largest k·ε_C²): its loss atoms ±ε_C fall on grid points,
    # which keeps the pessimistic discretisation tight (ε_C/n, n a whole number; finer, never below the floor).
    anchor = float(values[int(np.argmax(kf * values**2))])
    n = max(1, math.ceil(anchor / d - 1e-9))
    if anchor / n < floor:
        n = math.floor(anchor / floor + 1e-9)
    return anchor / n if n >= 1 else d


@cached("pld-epsilon")
def _pld_epsilon(values: np.ndarray, counts: np.ndarray, delta: float, d: float) -> float:
    """ε at δ of the composition by ``dp_accounting``'s PLD accountant (``inf`` when it gives no finite ε).

    A budget far beyond any meaningful privacy (ε_C ≈ 1e147 from ``--max-rmse 1e-150``) makes the accountant's own
    discretisation overflow (``math.expm1`` of the grid step raises ``OverflowError``): that is also ``inf``, and the
    caller then reports the pure Σ k·ε_C.
    """
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(value_discretization_interval=d)
    events = [
        dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / float(e)), int(c))
        for e, c in zip(values, counts)
    ]
    try:
        accountant.compose(events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events))
        with np.errstate(over="ignore", divide="ignore", under="ignore"):  # see _pld_epsilon_split
            return float(accountant.get_epsilon(delta))
    except OverflowError:
        return math.inf


def _pld_epsilon_split(values: np.ndarray, counts: np.ndarray, delta: float) -> float:
    """:func:`_pld_epsilon` on the adaptive grid, with a fallback where ``dp_accounting`` overflows.

    ``get_epsilon`` forms (mass − δ)/Σ p·e^{−loss} in linear scale; when ε(δ) lies between about 709 and 745 nats the
    denominator is subnormal, the ratio overflows and the accountant answers ``inf`` (observed: ε_C = 3.51, k = 244).
    Then the releases are split into m = 2, 4, 8 near-equal parts, each accounted at δ/m, and the parts' ε are added:
    basic composition of (ε_j, δ_j) guarantees gives (Σ ε_j, Σ δ_j) (Dwork & Roth 2014, Theorem 3.16).  If no split
    gives a finite value (δ at the accountant's truncation floor), ``inf`` is returned and the pure bound is used.
    """
    value = _pld_epsilon(values, counts, delta, _grid(values, counts, delta))
    m = 2
    while not math.isfinite(value) and m <= 8 and delta / m > 1e-12 and int(counts.sum()) >= m:
        parts = [counts // m + (j < counts % m) for j in range(m)]  # group counts of part j (they add up to counts)
        total = 0.0
        for part in parts:
            keep = part > 0
            if not keep.any():
                continue
            v, c = values[keep], part[keep].astype(np.int64)
            total += _pld_epsilon(v, c, delta / m, _grid(v, c, delta / m))  # (ε_j, δ/m) per part: Thm 3.16
        value, m = total, 2 * m
    return value


def _epsilon_of(eps: np.ndarray, k: np.ndarray, delta: float) -> tuple[float, float]:
    """(ε reported, ε_pure reported), both upper bounds, for validated budgets and counts."""
    pure = _pure_epsilon(eps, k)  # Σ k ε_C: Dwork & Roth (2014) Thm 3.16, exact, rounded up
    values, counts, tiny_sum = _groups(eps, k)
    if delta == 0.0 or values.size == 0:
        return pure, pure
    pld = _pld_epsilon_split(values, counts, delta)
    # basic composition of the tiny releases with the PLD's (ε, δ) guarantee (Dwork & Roth Thm 3.16)
    pld_up = round_up(pld + tiny_sum, rel=PLD_REL_MARGIN) if math.isfinite(pld) else math.inf
    return min(pld_up, pure), pure


def laplace_epsilon(epsilon_c, releases, delta: float) -> float:
    """ε at δ of the composition of Laplace releases of ε_C each: min(PLD pessimistic ε, Σ k·ε_C), rounded up.

    Parameters
    ----------
    epsilon_c : float or sequence of float
        Budget per release ε_C ≥ 0 (nats); a sequence gives heterogeneous releases, one budget per group.
    releases : int or sequence of int
        Number of releases k ≥ 0 (per group; a sequence has the length of `epsilon_c`, a scalar is broadcast).
    delta : float
        0 ≤ δ < 1.  δ = 0 gives the pure ε = Σ k·ε_C of basic composition (exact for Laplace releases).

    Returns
    -------
    float
        ε in nats, an upper bound: ``dp_accounting``'s PLD accountant (``PLDAccountant`` with
        ``ComposedDpEvent`` of ``SelfComposedDpEvent(LaplaceDpEvent(1/ε_C), k)``, pessimistic, grid of
        :func:`pld_discretization`) raised by the relative margin :data:`PLD_REL_MARGIN`, and never more than the
        pure Σ k·ε_C (raised by 2u).  ε_C = 0 releases count as nothing (ε = 0 if all are 0).

    Raises
    ------
    InvalidInputError
        If a budget is negative or not finite, a count is not an integer ≥ 0, the two sequences differ in length,
        or δ is not in [0, 1).

    Notes
    -----
    Looseness of the adaptive grid (:func:`pld_discretization`) against ``dp_accounting``'s default grid (1e-4), both
    pessimistic, at δ = 1e-6: at most +0.07 % over ε_C ∈ {0.00506, 0.05, 0.3, 1, 3, 50} × k ∈ {1, 24, 168, 8760}
    (where the default grid finishes: not 3 × 8760, 50 × 168, 50 × 8760) and (0.001, 8760), (0.01, 8760), (0.1, 1000),
    (2, 1000), (50, 10); worst ε_C = 1, k = 8760: 3583.40 vs 3580.93 nats; the year of hourly releases at
    ε_C = 0.00506 comes out 0.005 % *tighter* (2.12137 vs 2.12147 nats).  ``tests/benchmarks/bench_model_free.py``
    repeats the measurement.  Time on one core: that year ≈ 0.05–0.1 s (default grid 0.2–0.4 s); any ε_C ≤ 50 with
    k ≤ 10⁵ ≤ 0.7 s (default grid: ε_C = 1, k = 8760 takes 20–30 s).

    ``dp_accounting``'s ``get_epsilon`` overflows when ε(δ) lies between about 709 and 745 nats (a subnormal
    Σ p·e^{−loss}) and answers ``inf``; the releases are then split in 2, 4 or 8 parts accounted at δ/m each and added
    (basic composition), a few per cent looser — at privacy levels that protect nothing anyway.  More than
    :data:`MAX_BUDGET_GROUPS` distinct budgets are rounded up onto a geometric grid (still an upper bound).

    References
    ----------
    Dwork & Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Theorem 3.16 (basic composition);
    Zhang et al. (2024), Proposition 2; Doroshenko et al., "Connect the Dots", PETS 2022 (pessimistic PLD);
    ``dp_accounting`` (Google), ``dp_accounting.pld.PLDAccountant``.

    Examples
    --------
    A year of hourly releases:

    >>> round(laplace_epsilon(0.00506, 8760, 1e-6), 3)
    2.121
    >>> laplace_epsilon(0.00506, 8760, 0.0)  # pure: 8760 × 0.00506, rounded up
    44.325600000000016
    """
    eps, k = _budget_arrays(epsilon_c, releases)
    delta = check_delta(delta)
    return _epsilon_of(eps, k, delta)[0]


def _binary_composition_epsilon(log_p1: float, log_p0: float, log_q1: float, log_q0: float, k: int, delta: float) -> float:
    """Exact ε at δ of k independent copies of the binary pair P = (p1, p0), Q = (q1, q0), p1/q1 ≥ p0/q0.

    With j the number of outcomes "1", the loss is monotone in j, the optimal set of the hockey-stick divergence is
    {j ≥ m}, and δ(ε) = max_m [P(j ≥ m) − e^ε Q(j ≥ m)]_+, so ε(δ) = max(0, max_m ln((P(j ≥ m) − δ)/Q(j ≥ m))).
    Only m with P(j ≥ m) ≥ 1.1·δ are used (each m gives a valid lower bound; this keeps the subtraction well
    conditioned).  Log space throughout.
    """
    from scipy.special import gammaln

    j = np.arange(k, -1, -1, dtype=float)  # j = k, k−1, …, 0: decreasing loss
    log_binom = gammaln(k + 1.0) - gammaln(j + 1.0) - gammaln(k - j + 1.0)
    log_P = log_binom + j * log_p1 + (k - j) * log_p0  # binomial pmf under P
    log_Q = log_binom + j * log_q1 + (k - j) * log_q0  # binomial pmf under Q
    log_A = np.logaddexp.accumulate(log_P)  # ln P(j ≥ m)
    log_B = np.logaddexp.accumulate(log_Q)  # ln Q(j ≥ m)
    ok = log_A >= math.log(1.1 * delta)
    if not ok.any():
        return 0.0
    la, lb = log_A[ok], log_B[ok]
    cand = la + np.log1p(-np.exp(math.log(delta) - la)) - lb  # ln((A − δ)/B)
    return max(0.0, float(np.max(cand)))


def laplace_epsilon_lower_bound(epsilon_c: float, releases: int, delta: float) -> float:
    """A proven lower bound on the exact ε at δ of k Laplace releases of ε_C each (for pruning a search).

    Post-processing cannot increase privacy loss, so ε(δ) of the k-fold Laplace pair (Lap(0, b), Lap(1, b)),
    b = 1/ε_C, is at least that of any garbling of it.  Two binary garblings, each composed exactly
    (:func:`_binary_composition_epsilon`, binomial counts in log space):

    * the threshold x ≥ ½: P = (1 − e^{−ε_C/2}/2, e^{−ε_C/2}/2) against its mirror — randomized response with
      e^{ε'} = 2e^{ε_C/2} − 1; tight for small ε_C (within 0.05 % of the PLD at ε_C = 0.00506, k = 8760);
    * the event x ≤ 0: P = (½, ½) against Q = (e^{−ε_C}/2, 1 − e^{−ε_C}/2); tight for large ε_C and small k.

    The larger of the two is lowered by 1e-7 nats and a relative 1e-9 (far above its floating-point error).  For
    δ = 0 the exact pure value k·ε_C (exact rational, rounded down to a float) is returned.  Because the PLD accountant's estimate is
    pessimistic, ``laplace_epsilon_lower_bound(...) ≤ laplace_epsilon(...)`` always.

    Parameters
    ----------
    epsilon_c : float
        ε_C ≥ 0 (nats).
    releases : int
        k ≥ 0.
    delta : float
        0 ≤ δ < 1.

    Returns
    -------
    float
        Nats, ≥ 0.

    Raises
    ------
    InvalidInputError
        If an argument is out of range (as :func:`laplace_epsilon`; scalars only).
    """
    e = _check_budget(epsilon_c)
    k = check_int(releases, "releases", 0, "number of releases")
    delta = check_delta(delta)
    if e == 0.0 or k == 0:
        return 0.0
    if delta == 0.0:
        exact = Fraction(e) * k  # the loss k·ε_C has probability 2⁻ᵏ > 0: pure ε is exactly k·ε_C
        f = float(exact)
        return math.nextafter(f, -math.inf) if Fraction(f) > exact else f
    half = -0.5 * e
    log_small = math.log(0.5) + half  # ln(e^{−ε_C/2}/2)
    log_large = math.log1p(-0.5 * math.exp(half))  # ln(1 − e^{−ε_C/2}/2)
    symmetric = _binary_composition_epsilon(log_large, log_small, log_small, log_large, k, delta)
    log_q1 = math.log(0.5) - e  # ln(e^{−ε_C}/2)
    one_sided = _binary_composition_epsilon(math.log(0.5), math.log(0.5), log_q1, math.log1p(-0.5 * math.exp(-e)), k, delta)
    best = max(symmetric, one_sided)
    return max(0.0, best * (1.0 - _LB_REL_MARGIN) - _LB_ABS_MARGIN)


# ----------------------------------------------------------------------------------------------- the guarantee


@dataclass(frozen=True)
class WEvent:
    """The w-event guarantee for one window (Kellaris et al., PVLDB 2014).

    Attributes
    ----------
    w : int
        Window length (slots).
    releases : int
        Most releases whose input slots lie in any w consecutive slots.
    epsilon_pure : float
        Pure ε of those releases (nats, rounded up), δ = 0.
    epsilon : float
        ε at the guarantee's δ (nats, rounded up; ≤ `epsilon_pure`).
    """

    w: int
    releases: int
    epsilon_pure: float
    epsilon: float

    def to_dict(self) -> dict:
        """``{"w", "releases", "epsilon_pure", "epsilon"}``."""
        return json_clean({"w": self.w, "releases": self.releases, "epsilon_pure": self.epsilon_pure,
                           "epsilon": self.epsilon})


@dataclass(frozen=True)
class ModelFreeGuarantee:
    """User-level DP of each user's whole series over a horizon, any correlation, no model.

    Attributes
    ----------
    horizon : int
        H, slots covered (for a ledger: the span of the input slots).
    releases : int
        k, releases that read the series.
    epsilon_c : float
        Budget per release (nats); for heterogeneous releases the largest.
    epsilon_pure : float
        Σ ε_C by basic composition (nats, rounded up); δ = 0.
    delta : float
        δ of (ε, δ)-DP.
    epsilon : float
        ε at δ (nats, rounded up): min(PLD, `epsilon_pure`); equals `epsilon_pure` when δ = 0.
    accountant : str
        The method, e.g. ``"PLD (dp_accounting 0.6.0, pessimistic), basic composition for epsilon_pure"``.
    w_event : tuple of WEvent
        One per window asked for.
    epsilon_c_min : float
        Smallest per-release budget (nats; equals `epsilon_c` for a periodic schedule).  Not in :meth:`to_dict`.
    """

    horizon: int
    releases: int
    epsilon_c: float
    epsilon_pure: float
    delta: float
    epsilon: float
    accountant: str
    w_event: tuple[WEvent, ...] = ()
    epsilon_c_min: float | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        """A short multi-line summary."""
        return result_repr(self)

    def to_dict(self) -> dict:
        """The JSON object ``{"horizon", "releases", "epsilon_c", "epsilon_pure", "delta", "epsilon", "accountant",
        "w_event": [{"w", "releases", "epsilon_pure", "epsilon"}, …]}``."""
        return json_clean({
            "horizon": self.horizon,
            "releases": self.releases,
            "epsilon_c": self.epsilon_c,
            "epsilon_pure": self.epsilon_pure,
            "delta": self.delta,
            "epsilon": self.epsilon,
            "accountant": self.accountant,
            "w_event": [w.to_dict() for w in self.w_event],
        })

    def statement(self, digits: int = 3) -> str:
        """One line of text stating the guarantee; privacy numbers rounded up to `digits` significant digits.

        Example: "8760 releases of ε_C = 0.00506 over 8760 slots: (2.13 nats, δ = 1e-06) user-level DP for each
        user's whole series over the horizon, any correlation (PLD accountant); pure ε = 44.4 nats (basic
        composition); w-event: 0.0855 nats over 24 slots, 0.251 over 168 slots".
        """
        lo = self.epsilon_c if self.epsilon_c_min is None else self.epsilon_c_min
        budget = (f"ε_C = {fmt_epsilon_c(self.epsilon_c)}" if lo == self.epsilon_c
                  else f"ε_C from {fmt_value(lo, 3)} to {fmt_value(self.epsilon_c, 3)}")
        head = f"{fmt_count(self.releases, 'release')} of {budget} over {fmt_count(self.horizon, 'slot')}: "
        scope = "user-level DP for each user's whole series over the horizon, any correlation"
        if self.delta == 0.0:
            text = (f"{head}{fmt_upper(self.epsilon, digits)} nats pure {scope} (δ = 0, basic composition)")
        else:
            how = "PLD accountant" if self.epsilon < self.epsilon_pure else "basic composition; the PLD is no smaller"
            text = (f"{head}({fmt_upper(self.epsilon, digits)} nats, δ = {self.delta:g}) {scope} ({how}); "
                    f"pure ε = {fmt_upper(self.epsilon_pure, digits)} nats (basic composition)")
        if self.w_event:
            parts = [f"{fmt_upper(w.epsilon, digits)}{' nats' if i == 0 else ''} over {fmt_count(w.w, 'slot')}"
                     for i, w in enumerate(self.w_event)]
            text += "; w-event: " + ", ".join(parts)
        return check_text(text)


def model_free_guarantee(epsilon_c: float, *, horizon: int, delta: float, S_bar: int | None = None,
                         releases: int | None = None, windows=()) -> ModelFreeGuarantee:
    """The model-free guarantee of a periodic schedule: k releases of ε_C each over H slots.

    Parameters
    ----------
    epsilon_c : float
        ε_C ≥ 0 (nats per release).
    horizon : int
        H ≥ 1 (slots).
    delta : float
        0 ≤ δ < 1.
    S_bar : int, optional
        Inter-publish time S̄ ≥ 1 (slots); k = ⌈H/S̄⌉ unless `releases` is given.  Needed for `windows`.
    releases : int, optional
        k ≥ 0, overriding ⌈H/S̄⌉ (e.g. the releases actually made so far).
    windows : sequence of int
        w-event windows w ≥ 1 (slots), e.g. (24, 168) for a day and a week of hourly slots; each gets
        min(⌈w/S̄⌉, k) releases (:func:`releases_in_window`).

    Returns
    -------
    ModelFreeGuarantee

    Raises
    ------
    InvalidInputError
        If an argument is out of range, neither `S_bar` nor `releases` is given, or `windows` is given without `S_bar`.

    References
    ----------
    Dwork & Roth (2014), Theorem 3.16; Zhang et al. (2024), Proposition 2; Kellaris et al. (2014), w-event privacy.
    """
    e = _check_budget(epsilon_c)
    H = check_int(horizon, "horizon", 1, "slots")
    delta = check_delta(delta)
    ws = check_windows(windows)
    s = None if S_bar is None else check_int(S_bar, "S_bar", 1, "slots")
    if releases is None:
        if s is None:
            raise InvalidInputError("give `S_bar` (releases = ⌈horizon/S̄⌉) or `releases`; got neither")
        k = -(-H // s)  # ⌈H/S̄⌉
    else:
        k = check_int(releases, "releases", 0, "number of releases")
    if ws and s is None:
        raise InvalidInputError(f"`windows` {fmt(windows)} need `S_bar` (releases in a window = ⌈w/S̄⌉); got S_bar=None")
    eps, pure = _epsilon_of(np.array([e]), np.array([k], dtype=np.int64), delta)
    events = []
    for w in ws:
        kw = min(releases_in_window(w, s), k)
        ew, pw = _epsilon_of(np.array([e]), np.array([kw], dtype=np.int64), delta)
        events.append(WEvent(w, kw, pw, ew))
    return ModelFreeGuarantee(H, k, e, pure, delta, eps, accountant_name(delta), tuple(events), e)


def model_free_of_releases(epsilon_c, input_slots, *, delta: float, windows=()) -> ModelFreeGuarantee:
    """The model-free guarantee of releases actually made (a ledger): one budget and one input slot per release.

    Parameters
    ----------
    epsilon_c : float or array_like of float, shape (n,)
        ε_C ≥ 0 of each release (nats); a scalar applies to every release.
    input_slots : array_like of int, shape (n,)
        The slot each release read (its input slot), n ≥ 1; repeats allowed (two releases of one slot).
    delta : float
        0 ≤ δ < 1.
    windows : sequence of int
        w-event windows w ≥ 1 (slots).

    Returns
    -------
    ModelFreeGuarantee
        ``horizon`` = max − min + 1 of the input slots; ``epsilon_c`` the largest budget.  For each window: the pure ε
        is the largest sum of ε_C over the releases whose input slots lie in w consecutive slots; the (ε, δ) value
        composes, with the PLD, the envelope of all windows — for every threshold v, as many releases of budget ≥ v
        as the most any window holds — an upper bound for every window, exact when one window holds the most
        releases at every budget level (e.g. a single ε_C); never above that window's pure ε.

    Raises
    ------
    InvalidInputError
        If `input_slots` is empty, not 1-D integers, of another length than a sequence `epsilon_c`, a budget is
        negative or not finite, `delta` is not in [0, 1), or a window is not an integer ≥ 1.
    """
    slots = np.asarray(input_slots)
    if slots.ndim != 1 or slots.size == 0 or slots.dtype == bool or not np.issubdtype(slots.dtype, np.integer):
        raise InvalidInputError(f"`input_slots` must be a non-empty 1-D sequence of integers (slots), got {fmt(input_slots)}")
    if np.ndim(epsilon_c) > 0 and np.size(epsilon_c) != slots.size:
        raise InvalidInputError(
            f"`epsilon_c` must be a number or hold one budget per release ({slots.size}), got {np.size(epsilon_c)} budgets"
        )
    eps, _ = _budget_arrays(epsilon_c, np.ones(slots.size, dtype=np.int64))
    delta = check_delta(delta)
    ws = check_windows(windows)
    order = np.argsort(slots, kind="stable")
    slots, eps = slots[order].astype(np.int64), eps[order]
    n = int(slots.size)
    horizon = int(slots[-1] - slots[0]) + 1
    ones = np.ones(n, dtype=np.int64)
    eps_all, pure_all = _epsilon_of(eps, ones, delta)
    # The budgets the accountant sees (zeros dropped, many distinct values rounded up), per release, for the envelope.
    stand_in = _stand_in_budgets(eps)
    tiny = (eps > 0) & (stand_in == 0)  # tiny budgets: basic composition, all of them
    tiny_sum = _pure_epsilon(eps[tiny], ones[tiny])
    events = []
    for w in ws:
        end = np.searchsorted(slots, slots + w, side="left")  # releases i..end−1 read slots in [slot_i, slot_i + w)
        pure_w = _max_window_sum(slots, eps, w)  # the worst window's Σ ε_C (basic composition), exact, rounded up
        levels, counts = _window_envelope(slots, stand_in, w)
        if delta == 0.0 or levels.size == 0:
            eps_w = pure_w
        else:
            pld = _pld_epsilon_split(levels, counts, delta) + tiny_sum
            eps_w = min(round_up(pld, rel=PLD_REL_MARGIN) if math.isfinite(pld) else math.inf, pure_w)
        events.append(WEvent(w, int(np.max(end - np.arange(n))), pure_w, eps_w))
    positive = eps[eps > 0]
    return ModelFreeGuarantee(horizon, n, float(eps.max()), pure_all, delta, eps_all, accountant_name(delta),
                              tuple(events), float(positive.min()) if positive.size else 0.0)


def _window_envelope(slots: np.ndarray, budgets: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """(levels ascending, counts) dominating the releases of every window of w consecutive slots.

    For each distinct positive budget v (descending), N(v) = max over windows of #{releases with budget ≥ v}; the
    envelope has N(v_1) releases at v_1 and N(v_g) − N(v_{g−1}) at v_g: its g-th largest budget is ≥ the g-th largest
    of every window, so its composition dominates every window's (larger budgets and more releases never lower ε).
    """
    levels = np.unique(budgets[budgets > 0])[::-1]  # descending
    best = []
    for v in levels:
        s = slots[budgets >= v]
        end = np.searchsorted(s, s + w, side="left")
        best.append(int(np.max(end - np.arange(s.size))))  # N(v)
    counts = np.diff(np.concatenate(([0], np.asarray(best, dtype=np.int64))))
    keep = counts > 0
    return levels[keep][::-1].astype(float), counts[keep][::-1]  # ascending, as the accountant's groups
