"""Exceptions raised by policyopt.

Every message names the offending argument in backticks, shows the value that
was received and, where there is one, suggests the fix.  The command-line
interface prints the message of any :class:`PolicyOptError` on one line and
exits with code 2.
"""

from __future__ import annotations

import os

__all__ = [
    "PolicyOptError",
    "InvalidInputError",
    "InvalidModelError",
    "InfeasibleProblemError",
    "BackendUnavailableError",
    "SolverFailedError",
]


class PolicyOptError(Exception):
    """Base class of every error policyopt raises on purpose."""


class InvalidInputError(PolicyOptError, ValueError):
    """An argument, a file or a command-line option has a bad value."""


class InvalidModelError(InvalidInputError):
    """A Markov model (transition matrix, state values, data) is not valid."""


class InfeasibleProblemError(PolicyOptError):
    """A problem has no feasible point; the message gives the smallest achievable penalty."""


class BackendUnavailableError(PolicyOptError, ImportError):
    """A solver back end cannot be used here (missing library or licence)."""


class SolverFailedError(PolicyOptError):
    """A back end failed numerically on an otherwise valid problem; the message names it and an alternative."""


def fmt(value) -> str:
    """Short repr of a user-supplied value for an error message.

    Text and paths are shown whole up to 500 characters (a file name the user gave must be recognisable: temporary
    and data-set paths are often longer than a line); other values up to 80.
    """
    text = repr(str(value) if isinstance(value, os.PathLike) else value)
    limit = 500 if isinstance(value, (str, os.PathLike)) else 80
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_int(value, name: str, lower: int, what: str | None = None, *, upper: int | None = None) -> int:
    """`value` as an int ≥ `lower` and, when given, ≤ `upper` (Python or NumPy integer, not a bool).

    Parameters
    ----------
    what : str, optional
        What the integer counts (e.g. ``"slots"``), shown in parentheses in the message.
    upper : int, optional
        Largest value allowed.

    Raises
    ------
    InvalidInputError
        Otherwise, naming `name` and showing the value.
    """
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lower or (
            upper is not None and value > upper):
        unit = "" if what is None else f" ({what})"
        span = f"≥ {lower}" if upper is None else f"from {lower} to {upper}"
        raise InvalidInputError(f"`{name}` must be an integer {span}{unit}, got {fmt(value)}")
    return int(value)


def check_positive(value, name: str, unit: str) -> float:
    """A finite real number > 0 as float, or :class:`InvalidInputError` naming `name`.

    Parameters
    ----------
    value : int or float
        What the user gave (``bool`` is refused).
    name : str
        Argument name shown in the message.
    unit : str
        Unit shown in the message (e.g. ``"nats"``).

    Returns
    -------
    float

    Raises
    ------
    InvalidInputError
        If `value` is not a real number, or is not finite and > 0.
    """
    import math
    from numbers import Real

    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidInputError(f"`{name}` must be a positive number ({unit}), got {fmt(value)}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise InvalidInputError(f"`{name}` must be finite and > 0 ({unit}), got {fmt(value)}")
    return v


def check_value_range(value_range, name: str = "value_range") -> tuple[float, float]:
    """Validate a public value range (LO, HI): two finite numbers with LO < HI.

    Raises
    ------
    InvalidInputError
        If `value_range` is not a pair of finite numbers with LO < HI (the message names `name`).
    """
    import math

    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise InvalidInputError(f"`{name}` must be a pair (LO, HI) of numbers, got {fmt(value_range)}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidInputError(f"`{name}` must be finite numbers with LO < HI, got {fmt(value_range)}")
    return lo, hi
