"""The O(I) evaluation of f_MLE (Zhang et al. 2024, eqs. (50)–(51)) against the O(I²) interval algebra over all counts."""

from __future__ import annotations

import numpy as np
import pytest

from _failure_rate_ref import PerCountFailureRate
from policyopt import Population, two_state_chain
from policyopt.errors import InvalidInputError
from policyopt.utility.failure_rate import FailureRatePenalty
from policyopt.studies.schedule import design_schedule


CASES = [(0.1, 0.1, 20), (0.05, 0.3, 7), (0.8, 0.8, 6), (0.3, 0.2, 1), (0.5, 0.5, 2), (0.02, 0.01, 33)]


@pytest.mark.parametrize("p, q, I", CASES)
@pytest.mark.parametrize("rule", ["posterior", "sign"])
def test_recurrence_equals_interval_algebra(p, q, I, rule):
    eps = np.concatenate(([1e-9, 1e-4], np.geomspace(1e-3, 50.0, 40), [200.0, 709.0, 1e4, np.inf]))
    ages = np.array([0, 1, 2, 5, 17, 40, 300])
    for x0 in (None, 0, I // 2, I):
        fast = FailureRatePenalty(p, q, I, rule=rule, x0=x0)
        slow = PerCountFailureRate(p, q, I, rule=rule, x0=x0)
        a = fast.value(ages[:, None], eps[None, :])
        b = slow.value(ages[:, None], eps[None, :])
        assert np.all(np.isfinite(a)) and np.all((a >= 0) & (a <= 1))
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)


def test_min_epsilon_table_unchanged():
    # the grid scan + bisection of the exact solver sees the same feasibility decisions on either path
    for rule, x0 in (("posterior", None), ("sign", 14), ("posterior", 3), ("sign", None)):
        fast = FailureRatePenalty(0.1, 0.1, 20, rule=rule, x0=x0).min_epsilon_c_table(7, 9, 0.35)
        slow = PerCountFailureRate(0.1, 0.1, 20, rule=rule, x0=x0).min_epsilon_c_table(7, 9, 0.35)
        assert np.array_equal(np.isfinite(fast), np.isfinite(slow)) and np.isfinite(fast).any()
        np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-12)


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_box_20_by_20_answer_pinned(method):
    # source: design_schedule on main at 89ab31f (per-count interval algebra, 8 s for the heuristic), p = q = 0.1,
    # I = 20, f̄ = 0.35, A ≤ 20, S̄ ≤ 20; the optimum is A = 0, S̄ = 2 at ε_C = 0.28648448871654103 nats
    pop = Population([two_state_chain(0.1, 0.1)], [20])
    pen = FailureRatePenalty(0.1, 0.1, 20)
    d = design_schedule(pop, max_penalty=0.35, A_max=20, S_max=20, penalty=pen, method=method).to_dict()
    assert (d["A"], d["S_bar"]) == (0, 2)
    assert d["status"] == ("feasible" if method == "heuristic" else "optimal")
    assert d["epsilon_c"] == pytest.approx(0.28648448871654103, rel=1e-12)
    assert d["peak_risk"] == pytest.approx(1.177486626395714, rel=1e-12)
    assert float(np.max(pen.value(np.arange(0, 2), d["epsilon_c"]))) <= 0.35


def test_conditional_value_errors_and_shape():
    pen = FailureRatePenalty(0.1, 0.1, 5)
    assert pen.conditional_value(3, [0.5, 2.0]).shape == (2, 6)
    with pytest.raises(InvalidInputError, match=r"`epsilon_c` must be positive \(nats\), got -1"):
        pen.conditional_value(3, -1.0)
    with pytest.raises(InvalidInputError, match="`t`"):
        pen.conditional_value(-2, 1.0)
