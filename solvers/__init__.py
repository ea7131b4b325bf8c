"""Back ends; installed as ``policyopt.solvers``.

Each back end declares what it can solve (class constants), imports its library lazily
and returns a :class:`policyopt.result.Solution`.
"""

from __future__ import annotations

from policyopt.errors import InvalidInputError, fmt

__all__ = ["get_solver", "SOLVERS"]

#: method name -> "module:Class", imported on first use
SOLVERS = {
    "exact": "policyopt.solvers.exact:ExactScheduleSolver",
    "heuristic": "policyopt.solvers.heuristic:HeuristicSolver",
    "cvxpy": "policyopt.solvers.convex:CvxpySolver",
    "pyomo": "policyopt.solvers.global_scip:PyomoSCIPSolver",
    "tpl-upper-bound": "policyopt.solvers.tpl_alloc:UpperBoundAllocator",
    "tpl-quantification": "policyopt.solvers.tpl_alloc:QuantificationAllocator",
    "tpl-optimal": "policyopt.solvers.tpl_alloc:OptimalAllocator",
}


def get_solver(method: str):
    """Instantiate the back end registered under `method`.

    Raises
    ------
    InvalidInputError
        If `method` is not a registered back end.
    """
    if method not in SOLVERS:
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {sorted(SOLVERS)}")
    import importlib

    module, cls = SOLVERS[method].split(":")
    return getattr(importlib.import_module(module), cls)()
