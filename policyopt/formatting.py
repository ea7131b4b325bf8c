"""Formatting of numbers for people: privacy bounds rounded outward, plain values, strict JSON.

Bottom layer: imports nothing from policyopt.  Used by the studies (reports, plots) and the command line.

Two directions of safe rounding
-------------------------------
* A **privacy bound** (ε*, BPL/FPL/TPL, max TPL, …) is reported as :func:`round_up` of the computed
  float: enlarged by a stated margin (relative and/or absolute, chosen by the module that knows the
  computation's error, e.g. :func:`policyopt.privacy.age_dependent.peak_risk_margin`) and then one
  more float step towards +∞ (``math.nextafter``), so the reported number is ≥ the exact value.
* A **lower bound** (the proven bound of a minimisation, e.g. a MIP's dual bound, ``Solution.bound``) is
  reported as :func:`round_down` of the computed float (one float step towards −∞) and printed with
  :func:`fmt_lower` (``ROUND_FLOOR`` to the printed digits), so neither JSON nor text overstates it.  This fixes
  the direction of the report's own rounding; the solver's tolerances (e.g. SCIP's feasibility tolerance)
  are the back end's and are stated by it.
* A **value to deploy** (ε_C, budgets ε_t) is never rounded for display: text output prints it with
  :func:`fmt_exact` (``repr``, the same digits as the JSON), and the value itself is moved in the
  direction that keeps its constraint true in exact arithmetic (see
  :meth:`policyopt.problems.tpl_budget.BudgetAllocationProblem.certify` and
  :meth:`policyopt.utility.penalty.MSEPenalty.min_epsilon_c`).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np

__all__ = ["fmt_value", "fmt_upper", "fmt_lower", "fmt_exact", "fmt_epsilon_c", "fmt_count", "fmt_range", "fmt_span", "fmt_band", "lag_ranges", "text_problems",
           "check_text", "json_clean", "round_up", "round_down", "UNIT_ROUNDOFF"]

#: u = 2⁻⁵³, the unit roundoff of IEEE double precision (half the spacing of floats in [1, 2)).
UNIT_ROUNDOFF = 2.0**-53


def round_up(x, rel: float = 0.0, abs_: float = 0.0):
    """An upper bound on a quantity whose computed value `x` has error ≤ ``rel·|x| + abs_``.

    Returns ``nextafter(x + rel·|x| + abs_, +inf)``: the final step up covers the rounding of the
    addition itself (``rel`` and ``abs_`` are ≪ 1, so the sum rounds once, to within half a float step).
    ``None`` stays ``None``; non-finite values are returned unchanged; exact zeros stay 0 when
    ``abs_`` is 0 (a zero computed in closed form, e.g. Δ = 0, is exact).

    Parameters
    ----------
    x : float or None
    rel, abs_ : float
        Relative and absolute error bounds of the computation of `x` (≥ 0).

    Returns
    -------
    float or None
    """
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x) or (x == 0.0 and abs_ == 0.0):
        return x
    return math.nextafter(x + rel * abs(x) + abs_, math.inf)


def round_down(x, rel: float = 0.0):
    """``nextafter(x − rel·|x|, −inf)``: a value below `x` by at least the relative margin `rel`."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x
    return math.nextafter(x - rel * abs(x), -math.inf)


def fmt_exact(x) -> str:
    """A value to deploy (ε_C, a budget) in full: ``repr`` of the float, the digits the JSON carries."""
    if x is None:
        return "—"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    return repr(float(x))


def fmt_epsilon_c(x) -> str:
    """ε_C (the budget of one release, nats) in a text report: 6 significant digits, rounded *up* (a privacy loss is
    never understated): :func:`fmt_upper` at 6 digits; JSON carries the full float.  ``None`` prints as an em dash.

    The design's ε_C comes from an estimated MSE and is good to far fewer digits than a float's 17; a deployment
    takes it from the schedule file (``publish --schedule``), not from the text.
    """
    return fmt_upper(x, 6)


def fmt_value(x, digits: int = 6) -> str:
    """Format a plain value with `digits` significant digits; ``None`` prints as an em dash."""
    return "—" if x is None else f"{x:.{digits}g}"


def _fmt_rounded(x, digits: int, rounding: str) -> str:
    """`x` (exactly, as a Decimal) quantized to `digits` significant digits in the direction `rounding`."""
    if x is None:
        return "—"
    d = Decimal(repr(float(x)))
    if d == 0 or not d.is_finite():
        return f"{x:.{digits}g}"
    step = Decimal(1).scaleb(d.adjusted() - (digits - 1))
    return f"{float(d.quantize(step, rounding=rounding)):.{digits}g}"


def fmt_upper(x, digits: int = 6) -> str:
    """Format a privacy bound rounded *up* to `digits` significant digits (never understated).

    The float is converted exactly (``repr`` round-trips) to a :class:`decimal.Decimal` and quantized with
    ``ROUND_CEILING``, so the printed number is ≥ the computed bound.  ``None`` prints as an em dash;
    zero and non-finite values print unchanged.
    """
    return _fmt_rounded(x, digits, ROUND_CEILING)


def fmt_lower(x, digits: int = 6) -> str:
    """Format a lower bound rounded *down* to `digits` significant digits (never overstated).

    The mirror of :func:`fmt_upper` (``ROUND_FLOOR``).  ``None`` prints as an em dash; zero and non-finite
    values print unchanged.
    """
    return _fmt_rounded(x, digits, ROUND_FLOOR)


def fmt_count(n, unit: str, plural: str | None = None) -> str:
    """A count with its unit in the right number: ``fmt_count(1, "slot")`` is ``"1 slot"``, ``fmt_count(3, "slot")``
    ``"3 slots"`` (`plural` overrides the default ``unit + "s"``, e.g. ``fmt_count(2, "entry", "entries")``).

    Raises
    ------
    ValueError
        If `n` is not a whole number (a count).
    """
    if isinstance(n, bool) or not float(n).is_integer():
        raise ValueError(f"fmt_count: a count must be a whole number, got {n!r}")
    k = int(n)
    return f"{k} {unit if k == 1 else (plural or unit + 's')}"


def lag_ranges(lags) -> str:
    """Lags (slots) as runs: ``[1, 2, 3, 7, 9, 10]`` → ``"1–3, 7, 9–10"`` (sorted first; empty → ``"none"``)."""
    lags = sorted(int(t) for t in lags)
    if not lags:
        return "none"
    parts, start, prev = [], lags[0], lags[0]
    for t in lags[1:] + [None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        if t is not None:
            start = prev = t
    return ", ".join(parts)


def fmt_range(low, high, *, fmt=fmt_value, unit: str = "", low_note: str = "", high_note: str = "",
              digits: int = 4) -> str | None:
    """``"between LOW and HIGH"`` for a non-empty interval low < high, or ``None`` when there is none.

    The caller must then say in words why no range exists: a range is never printed backwards or empty.  Both ends
    are printed with `digits` significant digits, raised (up to 17) until the printed ends differ, so close ends do
    not print as equal.  `unit` follows each end, then its note (e.g. ``" (staleness limit)"``).

    Parameters
    ----------
    low, high : float or None
        Interval ends; ``None``, NaN or ±inf at either end, or ``low >= high``, give ``None``.
    fmt : callable
        ``fmt(x, digits) -> str`` (default :func:`fmt_value`; :func:`fmt_lower` / :func:`fmt_upper` for bounds).

    Returns
    -------
    str or None
    """
    if low is None or high is None:
        return None
    lo, hi = float(low), float(high)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    d = _distinct_digits(lo, hi, fmt, digits)
    return f"between {fmt(lo, d)}{unit}{low_note} and {fmt(hi, d)}{unit}{high_note}"


def _distinct_digits(lo: float, hi: float, fmt, digits: int) -> int:
    """The fewest significant digits ≥ `digits` (at most 17) at which ``fmt`` prints lo < hi as two different numbers
    (the one rule of :func:`fmt_range` and :func:`fmt_span`)."""
    d = int(digits)
    while d < 17 and float(fmt(lo, d)) >= float(fmt(hi, d)):
        d += 1
    return d


def fmt_span(low, high, *, fmt=fmt_value, digits: int = 4, scale: float = 1.0) -> str | None:
    """``"LOW–HIGH"`` for an interval or band low < high, its ends never printed equal; ``None`` when low = high.

    Both ends are printed with `digits` significant digits, raised (up to 17) until the printed ends differ, as
    :func:`fmt_range`.  An interval whose ends are equal (e.g. the bootstrap interval of an MSE that has no sampling
    spread) has no range to print: ``None``, and the caller says in words why the value is exact.

    Parameters
    ----------
    low, high : float
        Interval ends, finite, low ≤ high.
    fmt : callable
        ``fmt(x, digits) -> str`` (default :func:`fmt_value`; :func:`fmt_lower` / :func:`fmt_upper` for bounds).
    scale : float
        Factor applied to both ends before printing (100 for a fraction printed in percent).

    Returns
    -------
    str or None

    Raises
    ------
    ValueError
        An end that is not finite, or low > high (a bug of the caller: a band is never printed backwards).
    """
    lo, hi = float(low) * scale, float(high) * scale
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"fmt_span: an interval needs finite ends low <= high, got {low!r}, {high!r}")
    if lo == hi:
        return None
    d = _distinct_digits(lo, hi, fmt, digits)
    return f"{fmt(lo, d)}–{fmt(hi, d)}"


def fmt_band(low, high, *, digits: int = 4) -> str:
    """A bootstrap band's ends as text: :func:`fmt_span` (``"LOW–HIGH"``), or ``"X in every replicate"`` when they
    are equal (a band of no width is said in words, never printed ``X–X``).

    Parameters
    ----------
    low, high : float
        The band's ends, finite, low ≤ high.
    digits : int
        Significant digits (raised until the ends differ).

    Raises
    ------
    ValueError
        As :func:`fmt_span`.
    """
    return fmt_span(low, high, digits=digits) or f"{fmt_value(low, digits)} in every replicate"


_NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
#: Count nouns that must agree with the number 1 (``after 1 slots`` is a formatting bug).
_COUNT_NOUNS = ("slots", "releases", "users", "states", "homes", "draws", "pilots", "days", "epochs", "rows", "files",
                "workers", "transitions", "readings", "sequences", "vectors", "points", "models", "budgets", "phases")
_PROBLEMS = (
    (re.compile(r"(?:=|:)\s*—(?=\s|$|[,;)])|—\s+(?:nats|slots|kWh)\b", re.M),
     "a number printed as '—' (say in words why there is none)"),
    (re.compile(r"(?<![\w.])[-+]?(?:inf|nan|Infinity|NaN)(?![\w])"),
     "a number printed as inf/nan (say in words why it is not finite)"),
    (re.compile(rf"(?<![\w.,+-])1 (?:{'|'.join(_COUNT_NOUNS)})\b"), "a count of 1 with a plural noun (use fmt_count)"),
)
_BETWEEN = re.compile(rf"\bbetween\s+({_NUM})(?:(?!\bbetween\b)[^\n]){{0,120}}?\sand\s+({_NUM})")
#: A range printed as ``X–Y`` (an en dash between two numbers); X ≥ Y is an empty or backwards interval.
_SPAN = re.compile(rf"(?<![\w.–])({_NUM})\s?–\s?({_NUM})(?![\w.–])")


def text_problems(text: str) -> list[str]:
    """Contradictions and placeholders in text printed for people; ``[]`` when there are none.

    Checked: a range printed backwards or empty (``between X … and Y`` or ``X–Y`` with X ≥ Y), a number printed as ``—`` after
    ``=``/``:`` or before a unit, ``inf``/``nan`` as a number, and a count of 1 with a plural noun (``after 1 slots``).
    Each problem is one string quoting the offending text.
    """
    out = []
    for m in _BETWEEN.finditer(text):
        if float(m.group(1)) >= float(m.group(2)):
            out.append(f"backwards range: {m.group(0)!r}")
    for m in _SPAN.finditer(text):
        if float(m.group(1)) >= float(m.group(2)):
            out.append(f"an interval printed with equal or backwards ends: {m.group(0)!r}")
    for rx, why in _PROBLEMS:
        for m in rx.finditer(text):
            end = text.find("\n", m.end())
            line = text[text.rfind("\n", 0, m.start()) + 1: len(text) if end < 0 else end]
            out.append(f"{why}: {line.strip()[:160]!r}")
    return out


def check_text(text: str) -> str:
    """`text` unchanged when :func:`text_problems` finds nothing; else ``ValueError`` listing the problems.

    The reports call it on the text they print, so a contradiction is a bug that fails loudly (exit code 1) rather
    than a sentence a user has to puzzle over."""
    problems = text_problems(text)
    if problems:
        raise ValueError("report text contradicts itself: " + "; ".join(problems))
    return text


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
