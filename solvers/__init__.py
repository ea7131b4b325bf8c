"""Back ends: one per file (convex = cvxpy, global_scip = Pyomo + SCIP, exact / heuristic = search, tpl_alloc (Algorithms 7-8), tpl_optimal,
discounted_opt, fran_solvers, fran_groups).  May import problems and everything below them, never studies or the CLI.

Each back end declares what it can solve (class constants), imports its library lazily
and returns a :class:`policyopt.result.Solution`.
"""

from __future__ import annotations

from policyopt.errors import InvalidInputError, fmt
from policyopt.registry import BACKENDS
from policyopt.registry import get_solver as registry_get_solver

__all__ = ["get_solver", "SOLVERS"]

#: method name -> "module:Class" of the schedule and TPL back ends (a view of :data:`policyopt.registry.BACKENDS`).
SOLVERS = {**BACKENDS["schedule"], **{f"tpl-{k}": v for k, v in BACKENDS["tpl"].items()}}


def get_solver(method: str):
    """Instantiate the schedule or TPL back end registered under `method` (a key of :data:`SOLVERS`).

    Raises
    ------
    InvalidInputError
        If `method` is not a registered back end.
    """
    if method not in SOLVERS:
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {sorted(SOLVERS)}")
    family, name = ("tpl", method[4:]) if method.startswith("tpl-") else ("schedule", method)
    return registry_get_solver(name, family)
