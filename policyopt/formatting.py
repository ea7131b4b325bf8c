"""Formatting of numbers for people: privacy bounds rounded outward, plain values, strict JSON.

Bottom layer: imports nothing from policyopt.  Used by the studies (reports, plots) and the command line.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal

import numpy as np

__all__ = ["fmt_value", "fmt_upper", "json_clean"]


def fmt_value(x, digits: int = 6) -> str:
    """Format a plain value with `digits` significant digits; ``None`` prints as an em dash."""
    return "—" if x is None else f"{x:.{digits}g}"


def fmt_upper(x, digits: int = 6) -> str:
    """Format a privacy bound rounded *up* to `digits` significant digits (never understated).

    The float is converted exactly (``repr`` round-trips) to a :class:`decimal.Decimal` and quantized with
    ``ROUND_CEILING``, so the printed number is ≥ the computed bound.  ``None`` prints as an em dash;
    zero and non-finite values print unchanged.
    """
    if x is None:
        return "—"
    d = Decimal(repr(float(x)))
    if d == 0 or not d.is_finite():
        return f"{x:.{digits}g}"
    step = Decimal(1).scaleb(d.adjusted() - (digits - 1))
    return f"{float(d.quantize(step, rounding=ROUND_CEILING)):.{digits}g}"


def json_clean(v):
    """Return `v` with numpy scalars made Python numbers and non-finite floats made ``None`` (recursively).

    Dicts, lists and tuples are walked; tuples become lists.  The result serialises with
    ``json.dumps(..., allow_nan=False)``.
    """
    if isinstance(v, dict):
        return {k: json_clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_clean(x) for x in v]
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
