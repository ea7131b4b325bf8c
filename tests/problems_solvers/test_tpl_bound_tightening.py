"""Budget-only bound tightening with monotone propagation (solvers/tpl_optimal.py) against the all-column path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policyopt.problems.tpl_budget import BudgetAllocationProblem
from policyopt.result import Status
from policyopt.solvers.tpl_bounds import propagate_bounds, tighten_budget_bounds
from policyopt.solvers.tpl_optimal import OptimalAllocator, variable_bounds
from policyopt.privacy.temporal import leakage

P_B = [[0.8, 0.2], [0.2, 0.8]]  # source: Cao et al. (2019), Section 6.3, Fig. 8
P_F = [[0.8, 0.2], [0.1, 0.9]]
P3_B = [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]]
P3_F = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]]


class AllColumnsAllocator(OptimalAllocator):
    """The previous default: every column tightened by LP, then SCIP (the named baseline)."""

    TIGHTEN = "all"


@pytest.mark.parametrize("PB, PF, T", [(P_B, P_F, 12), (P3_B, P3_F, 10),
                                       ([P_B, [[0.9, 0.1], [0.3, 0.7]]], [P_F, [[0.6, 0.4], [0.5, 0.5]]], 8)])
def test_same_optimum_as_the_all_column_path(PB, PF, T):
    prob = BudgetAllocationProblem(PB, PF, 1.0, T)
    fast = OptimalAllocator().solve(prob, time_limit=60.0)
    slow = AllColumnsAllocator().solve(prob, time_limit=60.0)
    assert fast.status is Status.OPTIMAL and slow.status is Status.OPTIMAL
    assert fast.values["proof"] in ("relaxation", "scip") and fast.values["gap"] <= 1e-6
    assert fast.objective == pytest.approx(slow.objective, rel=2e-6)
    assert fast.bound <= slow.objective * (1 + 1e-9) and slow.bound <= fast.objective * (1 + 1e-9)
    eps = np.array(fast.decision["budgets"])
    assert leakage(PB, PF, eps).tpl_level <= 1.0  # TPL ≤ α, checked by the independent recursion


def test_propagated_box_contains_the_true_recursion():
    prob = BudgetAllocationProblem(P3_B, P3_F, 1.0, 10)
    v8 = prob.solve("quantification").objective
    box = propagate_bounds(prob, variable_bounds(prob, v8))
    rng = np.random.default_rng(5)
    e_lo, e_hi = box[0], box[1]
    for _ in range(50):  # any budgets in the ε box: their BPL/FPL lie in the propagated box
        eps = rng.uniform(e_lo, e_hi)
        lk = leakage(P3_B, P3_F, eps)
        if lk.tpl_level > 1.0:
            continue
        assert np.all(box[2][0] <= lk.bpl + 1e-12) and np.all(lk.bpl <= box[3][0] + 1e-12)
        assert np.all(box[4][0] <= lk.fpl + 1e-12) and np.all(lk.fpl <= box[5][0] + 1e-12)


def test_budget_tightening_keeps_the_optimum():
    prob = BudgetAllocationProblem(P_B, P_F, 1.0, 8)
    sol = AllColumnsAllocator().solve(prob)
    v = sol.objective * (1 + 1e-6)  # cutoff above the optimum: the optimum must stay in the box
    box, lower, rounds = tighten_budget_bounds(prob, variable_bounds(prob, v), v, deadline=math.inf)
    eps = np.array(sol.decision["budgets"])
    lk = leakage(P_B, P_F, eps)
    assert rounds >= 1 and lower <= sol.objective * (1 + 1e-12)
    assert np.all(box[0] <= eps + 1e-12) and np.all(eps <= box[1] + 1e-12)
    assert np.all(box[2][0] <= lk.bpl + 1e-12) and np.all(lk.bpl <= box[3][0] + 1e-12)
    assert np.all(box[4][0] <= lk.fpl + 1e-12) and np.all(lk.fpl <= box[5][0] + 1e-12)
