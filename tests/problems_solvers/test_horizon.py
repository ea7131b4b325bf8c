"""The horizon design problem (H1)–(H2) and its enumeration solver: the optimum against every cell evaluated by
composition, Theorem 3's recursion in high precision, infeasibility, bad input and the registry."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import policyopt as po
from policyopt.errors import InvalidInputError
from policyopt.models.tabulated import TabulatedMaxTV
from policyopt.problems import HorizonDesignProblem


def _problem(p=0.02, q=0.03, users=50, f_bar=0.05, A_max=10, S_max=10, horizon=500):
    pop = po.Population([po.two_state_chain(p, q)], [users])
    src = TabulatedMaxTV(pop.log_max_tv(np.arange(max(A_max, S_max) + 2)), users, 1.0)
    return HorizonDesignProblem(src, po.MSEPenalty(pop, users=users), f_bar, A_max=A_max, S_max=S_max,
                                horizon=horizon), pop


def _mp_risk(p, q, A, S, eps, H):
    """Theorem 3 over the publications A + kS̄ ≤ H for the two-state chain (Δ(t) = |1 − p − q|^t), 60 digits."""
    mp.mp.dps = 60
    lam = abs(1 - mp.mpf(p) - mp.mpf(q))
    n = (H - A) // S + 1
    prior = mp.mpf(0)
    for _ in range(2, n + 1):
        prior = mp.log(1 + lam**S * (mp.exp(mp.mpf(eps) + prior) - 1))
    return mp.log(1 + lam**A * (mp.exp(mp.mpf(eps) + prior) - 1))


@pytest.mark.parametrize("kw", [dict(), dict(p=0.1, q=0.1, users=100, f_bar=0.0195, A_max=12, S_max=12, horizon=2000),
                                dict(p=0.01, q=0.01, users=10, f_bar=0.3, A_max=12, S_max=10, horizon=800)])
def test_the_optimum_is_the_smallest_risk_of_every_cell(kw):
    prob, _ = _problem(**kw)
    sol = prob.solve()
    assert sol.status.value == "optimal" and sol.bound <= sol.objective
    d = sol.decision
    at = prob.evaluate(d["A"], d["S_bar"], d["epsilon_c"])
    assert at.feasible and at.releases == sol.values["releases"] and at.penalty <= prob.max_penalty
    margin = 32 * (at.releases + 2) * 2.0**-53  # twice the solver's error bound of the recursion
    assert sol.bound <= at.horizon_risk * (1 + margin) and at.horizon_risk <= sol.objective * (1 + margin)
    assert sol.objective <= at.horizon_risk * (1 + margin)
    table = prob.penalty.min_epsilon_c_table(prob.A_max, prob.S_max, prob.max_penalty)
    for a in range(prob.A_max + 1):
        for s in range(1, prob.S_max + 1):
            e = table[a, s - 1]
            if np.isfinite(e) and prob.releases(a, s) >= 1:
                assert prob.evaluate(a, s, float(e)).horizon_risk >= sol.bound, (a, s)


def test_the_stated_risk_bounds_theorem_3_in_high_precision():
    p, q, users, H = 0.1, 0.1, 100, 8760
    prob, _ = _problem(p=p, q=q, users=users, f_bar=0.0195, A_max=24, S_max=24, horizon=H)
    sol = prob.solve()
    d = sol.decision
    exact = _mp_risk(p, q, d["A"], d["S_bar"], d["epsilon_c"], H)
    assert mp.mpf(sol.bound) <= exact <= mp.mpf(sol.objective)
    assert float(exact) == pytest.approx(sol.objective, rel=32 * (sol.values["releases"] + 2) * 2.0**-53)  # within its margin


def test_no_schedule_meets_the_bound():
    """A penalty with a floor of 1 (even noiseless data miss f̄ = 0.5): every cell infeasible."""
    prob, pop = _problem()
    floor = po.CallablePenalty(lambda t, e: 1.0 + 0.0 * t + 1.0 / e, lambda t: 1.0 + 0.0 * t, name="floor")
    sol = HorizonDesignProblem(prob.max_tv, floor, 0.5, A_max=3, S_max=4, horizon=50).solve()
    assert sol.status.value == "infeasible" and sol.decision is None and sol.objective is None
    assert sol.values["feasible_cells"] == 0 and sol.values["enumerated"] == 4 * 4 and sol.values["releases"] is None


@pytest.mark.parametrize("kw, phrase", [
    (dict(horizon=0), "`horizon` must be an integer ≥ 1 (slots), got 0"),
    (dict(A_max=-1), "`A_max` must be an integer ≥ 0 (slots), got -1"),
    (dict(S_max=0), "`S_max` must be an integer ≥ 1 (slots), got 0"),
])
def test_bad_input_names_the_argument(kw, phrase):
    with pytest.raises(InvalidInputError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        _problem(**kw)


def test_other_arguments_and_methods_are_refused():
    prob, pop = _problem()
    with pytest.raises(InvalidInputError, match="`max_tv` must supply log_max_tv"):
        HorizonDesignProblem(3, prob.penalty, 0.05, A_max=1, S_max=1, horizon=5)
    with pytest.raises(InvalidInputError, match="`penalty` must be a Penalty"):
        HorizonDesignProblem(prob.max_tv, "mse", 0.05, A_max=1, S_max=1, horizon=5)
    with pytest.raises(InvalidInputError, match="publishes nothing within the horizon"):
        prob.evaluate(501, 1, 0.1)
    with pytest.raises(InvalidInputError):
        prob.solve("cvxpy")
    assert math.isfinite(prob.evaluate(0, 1, 0.1).horizon_risk)
