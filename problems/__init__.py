"""Formulations as modelling objects, one family per file: the age-dependent schedule problems (28)/(39)/(41)
(Zhang et al. 2024), TPL budget allocation (Cao et al. 2019), the discounted-DP schedule (Farokhi 2020), problem P1 (Luo et al. 2025).

A problem validates its inputs once, evaluates a candidate with numpy alone, says what it is (variables,
integrality, ``is_convex``) and never imports a solver: ``solve(method)`` reaches a back end by name through
:mod:`policyopt.registry`.  May import privacy, utility, io, models and the base modules.
"""

from .age_dependent import Schedule, ScheduleEvaluation, ScheduleProblem
from .geometric import (
    GeometricEvaluation,
    GeometricScheduleProblem,
    KKTBranchProblem,
    NoAgingProblem,
    PeakRiskProblem,
)
from .discounted import DiscountedScheduleProblem
from .discounted import ScheduleEvaluation as DiscountedScheduleEvaluation
from .fran import FRANEvaluation, FRANProblem
from .fran_groups import GroupedFRANProblem
from .tpl_budget import BudgetAllocationProblem, BudgetEvaluation
from .model_free import ModelFreeProblem
from .horizon import HorizonDesignProblem

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
    "DiscountedScheduleProblem",
    "DiscountedScheduleEvaluation",
    "FRANProblem",
    "FRANEvaluation",
    "GroupedFRANProblem",
    "ModelFreeProblem",
    "HorizonDesignProblem",
]
