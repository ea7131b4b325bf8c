"""The one result type every policyopt back end returns.

Following pyomo.contrib.solver, *why the solver stopped* (:class:`Termination`) is kept
apart from *what was found* (:class:`Status`); the incumbent objective and the proven
bound are both reported.  A local answer to a nonconvex problem is ``feasible``, never
``optimal``, unless a bound proves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

__all__ = ["Status", "Termination", "Solution", "summarize", "result_repr", "no_incumbent"]


def summarize(v, width: int = 72) -> str:
    """A value in a few characters for a repr: numbers exactly (``repr``: nothing is rounded), enums by value, arrays and long
    sequences as ``array(shape, min … max)`` / ``[a, b, … (n items)]``, mappings by their keys when long, long strings
    cut with ``…``."""
    if isinstance(v, Enum):
        return str(v.value)
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, str):
        return repr(v) if len(v) <= width else repr(v[: width - 1] + "…")
    if isinstance(v, np.ndarray) or (isinstance(v, (list, tuple)) and len(v) > 6):
        arr = np.asarray(v, dtype=object if not isinstance(v, np.ndarray) else None)
        try:
            num = np.asarray(v, dtype=float)
            fin = num[np.isfinite(num)]
            rng = f", {float(fin.min())!r} … {float(fin.max())!r}" if fin.size else ""
            return f"array(shape={num.shape}{rng})"
        except (TypeError, ValueError):
            return f"[{', '.join(summarize(x, 20) for x in list(arr.ravel())[:3])}, … ({arr.size} items)]"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(summarize(x, 20) for x in v)
        return f"[{inner}]" if len(inner) <= width else f"[{summarize(v[0], 20)}, … ({len(v)} items)]"
    if hasattr(v, "keys") and hasattr(v, "items"):
        items = ", ".join(f"{k!s}: {summarize(x, 24)}" for k, x in v.items())
        if len(items) <= width:
            return "{" + items + "}"
        keys = list(v.keys())
        return "{" + ", ".join(map(str, keys[:6])) + (f", … ({len(keys)} keys)" if len(keys) > 6 else "") + "}"
    if hasattr(v, "status") and hasattr(v, "objective"):  # a Solution inside a report: its outcome
        status = getattr(v.status, "value", v.status)
        return f"{type(v).__name__}({status}, objective {summarize(v.objective)})"
    text = type(v).__name__ + "(…)" if hasattr(v, "__dataclass_fields__") else repr(v)
    return text if len(text) <= width else text[: width - 1] + "…"


def result_repr(obj, first=(), head: str | None = None) -> str:
    """A short multi-line repr of a result dataclass: one ``field=value`` per line, each value summarised by
    :func:`summarize` (no 3 KB dumps of arrays); the fields named in `first` lead.  Fields whose name starts with
    ``_`` are left out; `head`, if given, is a one-line summary put on the first line."""
    from dataclasses import fields

    names = [f.name for f in fields(obj) if not f.name.startswith("_") and f.repr]
    names = [n for n in first if n in names] + [n for n in names if n not in first]
    body = ",\n".join(f"    {n}={summarize(getattr(obj, n))}" for n in names)
    lead = f"  # {head}" if head else ""
    return f"{type(obj).__name__}({lead}\n{body},\n)"



class Status(str, Enum):
    """What was found."""

    OPTIMAL = "optimal"  #: proven optimal over the problem's stated domain
    FEASIBLE = "feasible"  #: feasible, optimality not proven
    INFEASIBLE = "infeasible"  #: proven that no point satisfies the constraints
    UNBOUNDED = "unbounded"  #: the objective keeps improving past a bound of the search box
    DIVERGENT = "divergent"  #: the privacy risk of the candidate is infinite
    UNKNOWN = "unknown"  #: nothing usable was found


class Termination(str, Enum):
    """Why the solver stopped."""

    COMPLETED = "completed"  #: the search / algorithm ran to its end
    INFEASIBLE = "infeasible"  #: stopped on a proof of infeasibility
    ITERATION_LIMIT = "iteration_limit"
    TIME_LIMIT = "time_limit"
    ERROR = "error"


@dataclass(frozen=True)
class Solution:
    """Result of solving a policyopt problem.

    Attributes
    ----------
    status : Status
        What was found.
    termination : Termination
        Why the solver stopped.
    decision : Mapping[str, Any] or None
        The decision variables by name (e.g. ``A``, ``S_bar``, ``epsilon_c``); ``None``
        when nothing feasible was found.
    objective : float or None
        Objective of the incumbent (e.g. peak risk ε*, nats); ``None`` without incumbent.
    bound : float or None
        Proven lower bound on the optimal objective; ``None`` when the back end proves none.
    method : str
        Solution method (e.g. ``"exact"``).
    backend : str
        Library that did the work.
    backend_version : str
    wall_time_s : float
        Wall-clock seconds spent in the solver.
    message : str
        Human-readable account of the outcome.
    values : Mapping[str, Any]
        Problem-specific derived quantities (penalty value, peak AoI, smallest achievable
        penalty when infeasible, ...).
    kkt : Mapping[str, float] or None
        KKT residuals where KKT conditions apply; ``None`` otherwise.
    objective_name : str or None
        What `objective` is, by its field name: ``"peak_risk"`` for the schedule problems (28), (39),
        (41), (42) of Zhang et al. (2024), whose objective is the peak age-dependent risk ε* of
        eq. (30) (nats); ``None`` when the back end does not say.  Decides :attr:`peak_risk`.
    """

    status: Status
    termination: Termination
    decision: Mapping[str, Any] | None
    objective: float | None
    bound: float | None
    method: str
    backend: str
    backend_version: str
    wall_time_s: float
    message: str
    values: Mapping[str, Any] = field(default_factory=dict)
    kkt: Mapping[str, float] | None = None
    objective_name: str | None = None

    def __repr__(self) -> str:
        """Status, objective (named), bound, decision and message first; the problem's values by their keys."""
        head = f"Solution({self.status.value}, {self.objective_name or 'objective'} = {summarize(self.objective)}"
        if self.bound is not None:
            head += f", bound {summarize(self.bound)}"
        lines = [head + ",",
                 f"    decision={summarize(self.decision, 100)},",
                 f"    method={self.method!r} ({self.backend} {self.backend_version}), termination={self.termination.value}, "
                 f"wall_time_s={self.wall_time_s:.3g},",
                 f"    message={summarize(self.message, 100)},",
                 f"    values={summarize(self.values, 100)},"]
        if self.kkt:
            lines.append(f"    kkt={summarize(self.kkt, 100)},")
        return "\n".join(lines) + "\n)"

    def __post_init__(self):
        if self.decision is not None:
            object.__setattr__(self, "decision", MappingProxyType(dict(self.decision)))
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    @property
    def peak_risk(self) -> float | None:
        """The peak age-dependent risk ε* (nats) of the incumbent: `objective` of a schedule problem.

        ``None`` when the problem has no incumbent (e.g. infeasible).  For the (39) back ends it is
        (39a) with the envelope Δ(t) ≤ cρ^t, an upper bound on the exact ε* of the same schedule.

        Raises
        ------
        AttributeError
            If the objective of this solution is not a peak risk (``objective_name`` is not
            ``"peak_risk"``, e.g. the leakage of problem P1 or the noise variance of a budget
            allocation): use `objective`.
        """
        if self.objective_name != "peak_risk":
            raise AttributeError(
                f"this solution's objective is {self.objective_name or 'not named'!s}, not a peak risk "
                f"(method {self.method!r}); use `objective`"
            )
        return self.objective

    @property
    def gap(self) -> float | None:
        """Absolute gap objective − bound (nats), or ``None`` when either is missing."""
        if self.objective is None or self.bound is None:
            return None
        return max(0.0, self.objective - self.bound)

    @property
    def relative_gap(self) -> float | None:
        """gap / ``|objective|`` (``0.0`` when both are 0), or ``None`` when either is missing."""
        gap = self.gap
        if gap is None:
            return None
        return 0.0 if gap == 0.0 else gap / abs(self.objective)

    def to_dict(self) -> dict:
        """JSON-ready dictionary (enums as strings, infinities as ``None``)."""

        def clean(v):
            """Convert enums, numpy scalars and non-finite floats to JSON-ready values."""
            if isinstance(v, Enum):
                return v.value
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, Mapping):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            if hasattr(v, "item") and not isinstance(v, (str, bytes)):
                return clean(v.item())
            return v

        return {
            "status": clean(self.status),
            "termination": clean(self.termination),
            "decision": clean(self.decision) if self.decision is not None else None,
            "objective": clean(self.objective),
            "bound": clean(self.bound),
            "gap": clean(self.gap),
            "relative_gap": clean(self.relative_gap),
            "method": self.method,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "wall_time_s": self.wall_time_s,
            "message": self.message,
            "values": clean(self.values),
            "kkt": clean(self.kkt) if self.kkt is not None else None,
        }

    def _repr_html_(self) -> str:
        """A small HTML table for notebooks: status, decision, objective, bound, gap, back end, message.

        Numbers are shown in full (``repr`` of the float), so no privacy bound is rounded down.
        """
        from html import escape

        def num(v):
            """A value for the HTML table: floats in full (repr), None as an em dash."""
            if v is None:
                return "—"
            if isinstance(v, (list, tuple)):
                return ", ".join(num(x) for x in v)
            if hasattr(v, "item") and not isinstance(v, (str, bytes)):
                v = v.item()
            return repr(v) if isinstance(v, float) else str(v)

        rows = [("status", self.status.value), ("termination", self.termination.value)]
        if self.decision is not None:
            rows += [(k, num(v)) for k, v in self.decision.items()]
        rows += [
            (self.objective_name or "objective", num(self.objective)),
            ("bound", num(self.bound)),
            ("gap", num(self.gap)),
            ("back end", f"{self.method} ({self.backend} {self.backend_version})"),
            ("wall time", f"{self.wall_time_s:.3f} s"),
            ("message", self.message),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table class='policyopt-solution'>{body}</table>"


def no_incumbent(proven: bool, *, method: str, backend: str, backend_version: str, wall_time_s: float, message: str,
                 values: Mapping[str, Any], objective_name: str | None = None,
                 termination: Termination | None = None) -> Solution:
    """A :class:`Solution` without incumbent: ``decision``, ``objective`` and ``bound`` are ``None``.

    Parameters
    ----------
    proven : bool
        Whether the back end proved that no point satisfies the constraints: status ``infeasible``
        (termination ``infeasible`` by default), else status ``unknown`` (termination ``completed`` by default).
    method, backend, backend_version, wall_time_s, message, values, objective_name
        As the fields of :class:`Solution`.
    termination : Termination, optional
        Overrides the default termination above.

    Returns
    -------
    Solution
    """
    if termination is None:
        termination = Termination.INFEASIBLE if proven else Termination.COMPLETED
    status = Status.INFEASIBLE if proven else Status.UNKNOWN
    return Solution(status=status, termination=termination, decision=None, objective=None, bound=None, method=method,
                    backend=backend, backend_version=backend_version, wall_time_s=wall_time_s, message=message,
                    values=values, objective_name=objective_name)
