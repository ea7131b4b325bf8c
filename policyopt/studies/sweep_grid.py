"""The grid of a sweep and the reading of its trade-off (:mod:`policyopt.studies.sweep`).

``parse_grid`` reads ``START:STOP:N`` or ``V1,V2,...``; ``no_tradeoff_flags`` / ``no_tradeoff_ranges`` mark the
steps of f̄ over which the optimal risk does not fall (Zhang et al. 2024, problem (28): ε* is non-increasing in f̄, so a
step where it does not fall is a step without a trade-off).
"""

from __future__ import annotations

import math
from typing import Sequence

from policyopt.errors import InvalidInputError, fmt

__all__ = ["MAX_GRID_POINTS", "DEFAULT_TRADEOFF_RTOL", "parse_grid", "no_tradeoff_flags", "no_tradeoff_ranges"]

#: Relative tolerance below which a step in f̄ that does not lower ε* counts as "no trade-off".
DEFAULT_TRADEOFF_RTOL = 1e-9
_TRADEOFF_ATOL = 1e-12

#: Largest number of values in one grid, and of points in a whole sweep (grid × varied parameters).
MAX_GRID_POINTS = 100_000


def parse_grid(text: str, name: str, *, integer: bool = False, lower: float | None = None,
               upper: float | None = None) -> list:
    """Parse a sweep grid ``START:STOP:N`` (N evenly spaced values, ends included) or ``V1,V2,...``.

    Parameters
    ----------
    text : str
        The grid as typed on the command line.
    name : str
        Option or parameter name for error messages (e.g. ``"--max-penalty"``).
    integer : bool
        Values must be integers (``START:STOP:N`` must then land on integers).
    lower : float, optional
        Every value must be > `lower` (for floats) or ≥ `lower` (for integers).

    Returns
    -------
    list of float or int
        Strictly increasing values.

    Raises
    ------
    InvalidInputError
        If the text is not of either form, N < 1 or N > :data:`MAX_GRID_POINTS` (checked before any
        allocation), a value is not finite, the values are not
        strictly increasing, violate `lower`, or are not integers when `integer` is set.
    """
    import numpy as np

    text = str(text).strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise InvalidInputError(f"{name} must be START:STOP:N or V1,V2,..., got {fmt(text)}")
        try:
            start, stop = float(parts[0]), float(parts[1])
            n = int(parts[2])
        except ValueError:
            raise InvalidInputError(
                f"{name} must be START:STOP:N with numbers START, STOP and an integer N, got {fmt(text)}"
            ) from None
        if n < 1:
            raise InvalidInputError(f"{name}: the number of points N must be ≥ 1, got {fmt(text)}")
        if n > MAX_GRID_POINTS:
            raise InvalidInputError(f"{name}: the number of points N must be ≤ {MAX_GRID_POINTS}, got {fmt(text)}")
        if not (math.isfinite(start) and math.isfinite(stop)):  # before linspace, which warns on inf − inf
            raise InvalidInputError(f"{name} values must be finite, got {fmt(text)}")
        if n == 1 and start != stop:
            raise InvalidInputError(f"{name}: N = 1 needs START = STOP, got {fmt(text)}")
        raw = [float(v) for v in np.linspace(start, stop, n)]
    else:
        if text.count(",") >= MAX_GRID_POINTS:
            raise InvalidInputError(f"{name} lists more than {MAX_GRID_POINTS} values")
        try:
            raw = [float(v) for v in text.split(",")]
        except ValueError:
            raise InvalidInputError(f"{name} must be START:STOP:N or V1,V2,... of numbers, got {fmt(text)}") from None
    if not all(math.isfinite(v) for v in raw):
        raise InvalidInputError(f"{name} values must be finite, got {fmt(text)}")
    if any(b <= a for a, b in zip(raw, raw[1:])):
        raise InvalidInputError(f"{name} values must be strictly increasing, got {fmt(text)}")
    if upper is not None and raw[-1] > upper:
        raise InvalidInputError(f"{name} values must be ≤ {upper:g}, got {fmt(text)}")
    if integer:
        if any(v != round(v) for v in raw):
            raise InvalidInputError(f"{name} values must be integers, got {fmt(text)} (values {fmt(raw)})")
        values = [int(round(v)) for v in raw]
        if lower is not None and values[0] < lower:
            raise InvalidInputError(f"{name} values must be ≥ {lower:g}, got {fmt(text)}")
        return values
    if lower is not None and raw[0] <= lower:
        raise InvalidInputError(f"{name} values must be > {lower:g}, got {fmt(text)}")
    return raw


def no_tradeoff_flags(max_penalties: Sequence[float], peak_risks: Sequence, *, rtol: float = DEFAULT_TRADEOFF_RTOL) -> list:
    """Where raising f̄ to the next grid value does not lower the optimal peak risk (Corollary 3).

    Parameters
    ----------
    max_penalties : sequence of float, shape (n,)
        Strictly increasing f̄ values of one model.
    peak_risks : sequence of float or None, shape (n,)
        Optimal ε* at each f̄ (nats); ``None`` where no schedule was found (infeasible).
    rtol : float
        ε*_{i+1} ≥ ε*_i − (rtol·ε*_i + 1e-12) counts as "not lower".

    Returns
    -------
    list of bool or None, shape (n,)
        Entry i describes the interval [f̄_i, f̄_{i+1}]: ``True`` if ε* does not decrease there,
        ``False`` if it does (including infeasible → feasible), ``None`` for the last point,
        when both ends have no schedule, or when only the larger f̄ has none (a back end
        without a guarantee failed).

    Raises
    ------
    InvalidInputError
        If the lengths differ, `rtol` is negative, or `max_penalties` is not strictly increasing.

    References
    ----------
    Zhang et al. (2024), Corollary 3 and Appendix H: under its condition an increase
    of f̄ does not decrease the minimal objective of (39); this function checks the property
    itself on the computed optima rather than the sufficient condition.
    """
    fs = [float(f) for f in max_penalties]
    risks = list(peak_risks)
    if len(fs) != len(risks):
        raise InvalidInputError(f"`max_penalties` ({len(fs)}) and `peak_risks` ({len(risks)}) must have the same length")
    if not (rtol >= 0):
        raise InvalidInputError(f"`rtol` must be ≥ 0, got {fmt(rtol)}")
    if any(b <= a for a, b in zip(fs, fs[1:])):
        raise InvalidInputError(f"`max_penalties` must be strictly increasing, got {fmt(fs)}")
    flags: list = []
    for a, b in zip(risks, risks[1:]):
        if b is None:
            flags.append(None)
        elif a is None:
            flags.append(False)  # infeasible → feasible: raising f̄ lowered the risk
        else:
            flags.append(bool(b >= a - (rtol * abs(a) + _TRADEOFF_ATOL)))
    return flags + [None] if fs else []


def no_tradeoff_ranges(max_penalties: Sequence[float], flags: Sequence) -> list:
    """Merge consecutive no-trade-off intervals into f̄ ranges.

    Parameters
    ----------
    max_penalties : sequence of float, shape (n,)
        Increasing f̄ grid of one model.
    flags : sequence of bool or None, shape (n,)
        From :func:`no_tradeoff_flags`.

    Returns
    -------
    list of (float, float)
        Ranges [f̄_lo, f̄_hi] on which raising f̄ does not lower ε*; empty if there is none.

    Raises
    ------
    InvalidInputError
        If the lengths differ.
    """
    if len(max_penalties) != len(flags):
        raise InvalidInputError(f"`max_penalties` ({len(max_penalties)}) and `flags` ({len(flags)}) must have the same length")
    ranges: list = []
    start = None
    for i, flag in enumerate(flags):
        if flag is True:
            if start is None:
                start = i
        elif start is not None:
            ranges.append((float(max_penalties[start]), float(max_penalties[i])))
            start = None
    if start is not None:  # cannot happen (the last flag is None), kept for safety
        ranges.append((float(max_penalties[start]), float(max_penalties[-1])))
    return ranges
