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

__all__ = ["Status", "Termination", "Solution"]


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
