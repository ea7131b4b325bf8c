"""Formulations as modelling objects; installed as ``policyopt.problems``.

A problem validates its inputs once, evaluates a candidate with numpy alone, says what it
is (variables, integrality, ``is_convex``) and never depends on a solver.
"""

from .age_dependent import Schedule, ScheduleEvaluation, ScheduleProblem
from .geometric import (
    GeometricEvaluation,
    GeometricScheduleProblem,
    KKTBranchProblem,
    NoAgingProblem,
    PeakRiskProblem,
)
from .tpl_budget import BudgetAllocationProblem, BudgetEvaluation

__all__ = [
    "ScheduleProblem",
    "Schedule",
    "ScheduleEvaluation",
    "GeometricScheduleProblem",
    "PeakRiskProblem",
    "KKTBranchProblem",
    "NoAgingProblem",
    "GeometricEvaluation",
    "BudgetAllocationProblem",
    "BudgetEvaluation",
]
