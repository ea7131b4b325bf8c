"""The back ends by name: how a problem's ``solve(method)`` reaches a solver without importing one.

Bottom layer: imports nothing from policyopt but the errors.  A formulation in :mod:`policyopt.problems` names
its back end (``"exact"``, ``"tpl-optimal"``, ...) and :func:`get_solver` imports the back end's module from
:mod:`policyopt.solvers` on first use.  So a problem module compiles, validates and evaluates with numpy
alone, the layer contract (``lint-imports``) holds for the static imports — problems never import solvers —
and a new back end is one line in :data:`BACKENDS`.
"""

from __future__ import annotations

import importlib

from policyopt.errors import InvalidInputError, fmt

__all__ = ["BACKENDS", "get_solver"]

#: family -> method name -> "module:Class" of a back end in policyopt.solvers, imported on first use.
BACKENDS = {
    "schedule": {
        "exact": "policyopt.solvers.exact:ExactScheduleSolver",
        "heuristic": "policyopt.solvers.heuristic:HeuristicSolver",
        "cvxpy": "policyopt.solvers.convex:CvxpySolver",
        "pyomo": "policyopt.solvers.global_scip:PyomoSCIPSolver",
    },
    "tpl": {
        "upper-bound": "policyopt.solvers.tpl_alloc:UpperBoundAllocator",
        "quantification": "policyopt.solvers.tpl_alloc:QuantificationAllocator",
        "optimal": "policyopt.solvers.tpl_optimal:OptimalAllocator",
    },
    "discounted": {
        "cvxpy": "policyopt.solvers.discounted_opt:DiscountedCvxpySolver",
        "dual": "policyopt.solvers.discounted_opt:DiscountedDualSolver",
        "reduced": "policyopt.solvers.discounted_opt:DiscountedReducedSolver",
    },
    "fran": {
        "enumeration": "policyopt.solvers.fran_solvers:EnumerationSolver",
        "cvxpy": "policyopt.solvers.fran_solvers:CvxpyInnerSolver",
        "scip": "policyopt.solvers.fran_solvers:ScipSolver",
    },
    "fran-groups": {
        "groups": "policyopt.solvers.fran_groups:GroupSearchSolver",
    },
    "model-free": {"exact": "policyopt.solvers.model_free:ModelFreeSolver"},
    "horizon": {"exact": "policyopt.solvers.horizon:HorizonEnumeration"},
}


def get_solver(method: str, family: str = "schedule"):
    """Instantiate the back end registered under `method` in `family`.

    Parameters
    ----------
    method : str
        A key of ``BACKENDS[family]``.
    family : {"schedule", "tpl", "discounted", "fran", "fran-groups", "model-free", "horizon"}
        The problem family (default: the age-dependent schedule problems (28)/(39)/(41)).

    Returns
    -------
    object
        A fresh back-end instance with a ``solve(problem, **options)`` method.

    Raises
    ------
    InvalidInputError
        If `family` or `method` is not registered.
    """
    if family not in BACKENDS:
        raise InvalidInputError(f"unknown back-end `family` {fmt(family)}; choose one of {sorted(BACKENDS)}")
    table = BACKENDS[family]
    if method not in table:
        raise InvalidInputError(f"unknown `method` {fmt(method)}; choose one of {sorted(table)}")
    module, cls = table[method].split(":")
    return getattr(importlib.import_module(module), cls)()
