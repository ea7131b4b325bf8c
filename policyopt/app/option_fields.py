"""Typed, checked options of a command called from Python: :class:`CommandOptions` and its rules.

A command's options class lists its fields (the attributes of the parsed command line, ``max_lag`` for
``--max-lag``, with the command's defaults) and a rule for each in ``RULES``; constructing one checks every value
and names the keyword in the message (``"`level` must be a probability strictly between 0 and 1, got 1.5"``).  The
command line builds the same object from its parsed options (:meth:`CommandOptions.from_namespace`), so the Python
call and the command run the same code on the same values.
"""

from __future__ import annotations

import math
import os
from dataclasses import fields
from numbers import Real

from policyopt.errors import InvalidInputError, check_int, check_value_range, fmt
from policyopt.models.posterior import check_level

__all__ = ["CommandOptions", "check_float"]


def check_float(value, name: str, lower: float, upper: float, *, lower_open: bool = True) -> None:
    """Refuse a `value` (when not None) that is not a finite real number in (`lower`, `upper`] (or [`lower`, `upper`]
    when `lower_open` is false), naming `name`.

    Raises
    ------
    InvalidInputError
        A bool, a non-number, NaN or ±inf, or a number out of range.
    """
    if value is None:
        return
    bad = isinstance(value, bool) or not isinstance(value, Real)
    if not bad:
        v = float(value)
        bad = not math.isfinite(v) or v > upper or (v <= lower if lower_open else v < lower)
    if bad:
        low = f"> {lower:g}" if lower_open else f"≥ {lower:g}"
        high = "" if math.isinf(upper) else f" and ≤ {upper:g}"
        raise InvalidInputError(f"`{name}` must be a finite number {low}{high}, got {fmt(value)}")


def _check_rule(obj, name: str, rule: tuple) -> None:
    """Check attribute `name` of `obj` by `rule` (see :class:`CommandOptions`); normalise a value range."""
    value = getattr(obj, name)
    if value is None:
        return
    kind = rule[0]
    if kind == "int":
        check_int(value, name, rule[1], upper=rule[2])
    elif kind == "level":
        check_level(value, name)
    elif kind == "float":
        check_float(value, name, rule[1], rule[2], lower_open=rule[3])
    elif kind == "range":
        object.__setattr__(obj, name, check_value_range(value, name))
    elif kind == "text":
        if not isinstance(value, (str, os.PathLike)):
            raise InvalidInputError(f"`{name}` must be text (a path or a specification), got {fmt(value)}")
    elif kind == "choice":
        if value not in rule[1]:
            raise InvalidInputError(f"`{name}` must be one of {', '.join(rule[1])}, got {fmt(value)}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise InvalidInputError(f"`{name}` must be True or False, got {fmt(value)}")
    else:  # pragma: no cover - a rule table of this package
        raise AssertionError(f"unknown option rule {rule!r}")


class CommandOptions:
    """Base of a command's frozen options dataclass.

    ``RULES`` maps each field to its rule: ``("int", lower, upper)`` (``upper`` None: no limit), ``("level",)``
    (strictly between 0 and 1), ``("float", lower, upper, lower_open)``, ``("range",)`` (a value range LO < HI),
    ``("text",)`` (a path or a specification), ``("choice", names)`` or ``("bool",)``; ``None`` means the command's
    default, except for the fields in ``VALUED``, whose default is a value.  ``COMMAND`` is the sub-command's name.
    """

    COMMAND: str = ""
    RULES: dict = {}
    #: Fields whose default is a value, not None: None is refused for them (it would not mean the default).
    VALUED: tuple = ()

    def __post_init__(self):
        for name in self.VALUED:
            if getattr(self, name) is None:
                raise InvalidInputError(f"`{name}` has a default ({getattr(type(self), name)!r}); give a value or omit it")
        for name, rule in self.RULES.items():
            _check_rule(self, name, rule)

    @classmethod
    def from_namespace(cls, namespace):
        """The options of a parsed command line (its other attributes, such as ``json``, are the command's own)."""
        return cls(**{f.name: getattr(namespace, f.name) for f in fields(cls) if hasattr(namespace, f.name)})

    @classmethod
    def from_keywords(cls, caller: str, options: dict):
        """The options of the Python call `caller`: `options` by keyword (an unknown keyword is refused, naming it)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InvalidInputError(f"{caller} got unknown keyword{'s' if len(unknown) > 1 else ''} "
                                    f"{', '.join(map(fmt, unknown))}; the keywords are the fields of {cls.__name__}")
        return cls(**options)
