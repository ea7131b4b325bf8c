"""The model-free guarantee (basic composition, dp_accounting's PLD, w-event) and the model-free design problem."""

from __future__ import annotations

import json
import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant, privacy_loss_distribution
from hypothesis import given, settings
from hypothesis import strategies as st

import policyopt as po
from policyopt.errors import BackendUnavailableError, InvalidInputError
from policyopt.formatting import fmt_upper
from policyopt.models.markov import Population, two_state_chain
from policyopt.privacy.model_free import (
    ModelFreeGuarantee,
    WEvent,
    default_delta,
    laplace_epsilon,
    laplace_epsilon_lower_bound,
    model_free_guarantee,
    model_free_of_releases,
    pld_discretization,
    releases_in_window,
)
from policyopt.problems import ModelFreeProblem
from policyopt.registry import get_solver
from policyopt.result import Status
from policyopt.solvers.model_free import ModelFreeSolver
from policyopt.utility.penalty import CallablePenalty, MSEPenalty, two_state_mse
from policyopt.utility.readings_penalty import ReadingsMSEPenalty, readings_moments

DELTA = 1e-6


def direct_pld(budgets, counts, delta, d, pessimistic=True):
    """dp_accounting called directly: the PLD accountant (pessimistic) or an optimistic PLD (a lower bound)."""
    if pessimistic:
        acc = PLDAccountant(value_discretization_interval=d)
        events = [dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / e), k)
                  for e, k in zip(budgets, counts)]
        acc.compose(dp_accounting.ComposedDpEvent(events))
        with np.errstate(over="ignore"):  # dp_accounting's get_epsilon overflows between ≈ 709 and 745 nats
            return acc.get_epsilon(delta)
    pld = None
    for e, k in zip(budgets, counts):
        one = privacy_loss_distribution.from_laplace_mechanism(
            1.0 / e, pessimistic_estimate=False, value_discretization_interval=d, use_connect_dots=False
        ).self_compose(k)
        pld = one if pld is None else pld.compose(one)
    return pld.get_epsilon_for_delta(delta)


def single_release_epsilon(epsilon_c, delta):
    """Exact ε(δ) of one Laplace release: δ(ε) = 1 − e^{(ε − ε_C)/2} on [0, ε_C], so ε = ε_C + 2 ln(1 − δ) (mpmath)."""
    mpmath.mp.dps = 50
    return mpmath.mpf(epsilon_c) + 2 * mpmath.log(1 - mpmath.mpf(delta))


# ------------------------------------------------------------------------------------------ pure ε, δ, windows


@pytest.mark.parametrize("eps, k", [(0.00506, 8760), (0.1, 3), (50.0, 10), (0.003557759879656905, 8760), (1e-12, 10**5)])
def test_pure_epsilon_is_k_times_epsilon_c_rounded_up(eps, k):
    # source: basic composition, Dwork & Roth (2014) Thm 3.16; exact product in 60-digit mpmath
    mpmath.mp.dps = 60
    exact = mpmath.mpf(eps) * k
    got = laplace_epsilon(eps, k, 0.0)
    assert mpmath.mpf(got) >= exact
    assert mpmath.mpf(fmt_upper(got, 3)) >= exact  # what a statement prints
    assert got <= float(exact) * (1 + 1e-15)
    g = model_free_guarantee(eps, horizon=k, delta=0.0, S_bar=1)
    assert g.epsilon == g.epsilon_pure == got


def test_pure_epsilon_of_heterogeneous_releases_against_mpmath():
    budgets, counts = [0.1, 0.2, 0.30000000000000004, 0.0], [7, 11, 13, 5]
    mpmath.mp.dps = 60
    exact = sum(mpmath.mpf(e) * k for e, k in zip(budgets, counts))
    got = laplace_epsilon(budgets, counts, 0.0)
    assert exact <= mpmath.mpf(got) <= exact * (1 + mpmath.mpf(1e-15))


def test_default_delta_and_releases_in_window():
    assert default_delta(1) == 1e-6  # 1/(10·1) = 0.1 capped at 1e-6
    assert default_delta(17) == 1e-6
    assert default_delta(10**5) == 1e-6  # 1/(10·10^5) = 1e-6
    assert default_delta(10**6) == pytest.approx(1e-7, rel=1e-15)
    assert releases_in_window(24, 1) == 24 and releases_in_window(24, 5) == 5 and releases_in_window(168, 168) == 1
    assert releases_in_window(1, 24) == 1 and releases_in_window(25, 24) == 2


def test_releases_in_window_against_brute_force():
    # source: brute force over the input slots A, A + S̄, A + 2S̄, … of a periodic schedule and every window position
    for A in range(3):
        for S in range(1, 8):
            slots = A + S * np.arange(60)
            for w in range(1, 30):
                worst = max(int(np.sum((slots >= s) & (slots < s + w))) for s in range(0, 3 * S + w))
                assert worst == releases_in_window(w, S), (A, S, w)


# ------------------------------------------------------------------------------------------ the PLD accountant


# source: dp_accounting's PLDAccountant at its default grid (1e-4), δ = 1e-6 (measured: 2.121474171,
# 0.2507952385, 0.08547442985, 499.9989781 nats)
@pytest.mark.parametrize(
    "eps, k, reference",
    [(0.00506, 8760, 2.121474171), (0.00506, 168, 0.2507952385), (0.00506, 24, 0.08547442985), (50.0, 10, 499.9989781)],
)
def test_epsilon_is_dp_accountings_own_pld(eps, k, reference):
    got = laplace_epsilon(eps, k, DELTA)
    d = pld_discretization(eps, k, DELTA)
    pessimistic = direct_pld([eps], [k], DELTA, d)
    assert min(pessimistic, eps * k) <= got <= min(pessimistic * (1 + 2e-6), eps * k * (1 + 1e-15))
    assert got == pytest.approx(reference, rel=1e-3)  # within the adaptive grid's looseness of the default grid
    optimistic = direct_pld([eps], [k], DELTA, 1e-2 if eps > 1 else 1e-4, pessimistic=False)  # a lower bound on ε
    assert optimistic <= got


def test_demo_numbers_and_statement():
    # source: the brief's dp_accounting measurement (ε = 2.1215 at the default grid) and the values above
    g = model_free_guarantee(0.00506, horizon=8760, delta=DELTA, S_bar=1, windows=(24, 168))
    assert g.releases == 8760 and g.horizon == 8760 and g.epsilon_c == 0.00506
    assert g.epsilon == pytest.approx(2.1215, rel=1e-3) and g.epsilon < g.epsilon_pure
    assert [w.releases for w in g.w_event] == [24, 168]
    assert g.w_event[0].epsilon == laplace_epsilon(0.00506, 24, DELTA) == pytest.approx(0.0855, rel=1e-3)
    assert g.w_event[1].epsilon == laplace_epsilon(0.00506, 168, DELTA) == pytest.approx(0.2508, rel=1e-3)
    assert g.w_event[0].epsilon_pure == laplace_epsilon(0.00506, 24, 0.0)
    assert g.statement() == (
        "8760 releases of ε_C = 0.00506 over 8760 slots: (2.13 nats, δ = 1e-06) user-level DP for each user's whole "
        "series over the horizon, any correlation (PLD accountant); pure ε = 44.4 nats (basic composition); "
        "w-event: 0.0855 nats over 24 slots, 0.251 over 168 slots"
    )
    d = g.to_dict()
    assert list(d) == ["horizon", "releases", "epsilon_c", "epsilon_pure", "delta", "epsilon", "accountant", "w_event"]
    assert list(d["w_event"][0]) == ["w", "releases", "epsilon_pure", "epsilon"]
    assert d["accountant"] == "PLD (dp_accounting 0.6.0, pessimistic), basic composition for epsilon_pure"
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    pure = model_free_guarantee(0.5, horizon=1, delta=0.0, S_bar=1, windows=(1,))
    assert pure.statement() == (
        "1 release of ε_C = 0.5 over 1 slot: 0.5 nats pure user-level DP for each user's whole series over the "
        "horizon, any correlation (δ = 0, basic composition); w-event: 0.5 nats over 1 slot"
    )
    assert pure.accountant == "basic composition (pure, δ = 0)"


def test_w_event_counts_cap_at_the_releases():
    g = model_free_guarantee(0.01, horizon=100, delta=DELTA, S_bar=5, windows=(24, 168, 1))
    assert g.releases == 20  # ⌈100/5⌉
    assert [(w.w, w.releases) for w in g.w_event] == [(24, 5), (168, 20), (1, 1)]
    assert g.w_event[1].epsilon == g.epsilon and g.w_event[1].epsilon_pure == g.epsilon_pure
    given_k = model_free_guarantee(0.01, horizon=100, delta=DELTA, S_bar=5, releases=3, windows=(24,))
    assert given_k.releases == 3 and given_k.w_event[0].releases == 3


def test_single_release_against_the_exact_laplace_profile():
    # source: δ(ε) = 1 − e^{(ε − ε_C)/2} for one Laplace release (hockey-stick divergence of Lap(0, b), Lap(1, b))
    for eps in (0.01, 1.0, 50.0):
        exact = single_release_epsilon(eps, DELTA)
        got = laplace_epsilon(eps, 1, DELTA)
        assert exact <= mpmath.mpf(got) <= exact + mpmath.mpf(1e-5) * eps
        lower = laplace_epsilon_lower_bound(eps, 1, DELTA)
        assert exact - mpmath.mpf(1e-6) <= mpmath.mpf(lower) <= exact


def test_epsilon_c_50_many_releases_and_zero_budgets():
    assert laplace_epsilon(50.0, 10**5, DELTA) == pytest.approx(4.9026e6, rel=1e-3)  # < pure 5e6
    assert laplace_epsilon(50.0, 10**5, DELTA) < 50.0 * 10**5
    assert laplace_epsilon(0.0, 100, DELTA) == 0.0
    assert laplace_epsilon([0.0, 0.1], [5, 0], DELTA) == 0.0
    assert laplace_epsilon(0.1, 0, DELTA) == 0.0
    assert model_free_guarantee(0.0, horizon=10, delta=DELTA, S_bar=1).epsilon == 0.0


def test_tiny_budgets_do_not_hang_and_stay_below_the_pure_sum():
    assert 0.0 <= laplace_epsilon(1e-12, 10**5, DELTA) <= 1e-7 * (1 + 1e-12)
    mpmath.mp.dps = 40
    got = laplace_epsilon(1e-310, 3, DELTA)  # 1/ε_C overflows: basic composition
    assert mpmath.mpf(got) >= 3 * mpmath.mpf(1e-310)
    assert laplace_epsilon([1e-310, 0.1], [3, 10], DELTA) >= laplace_epsilon(0.1, 10, DELTA)


def test_heterogeneous_releases_are_one_composed_event():
    budgets, counts = [0.01, 0.05, 0.2], [100, 20, 3]
    got = laplace_epsilon(budgets, counts, DELTA)
    d = pld_discretization(budgets, counts, DELTA)
    direct = direct_pld(budgets, counts, DELTA, d)
    assert direct <= got <= direct * (1 + 2e-6)
    assert direct_pld(budgets, counts, DELTA, 1e-3, pessimistic=False) <= got
    assert got == laplace_epsilon(budgets[::-1], counts[::-1], DELTA)  # order does not matter
    assert max(laplace_epsilon(e, k, DELTA) for e, k in zip(budgets, counts)) <= got <= laplace_epsilon(budgets, counts, 0)
    assert laplace_epsilon([0.05, 0.05], [3, 4], DELTA) == laplace_epsilon(0.05, 7, DELTA)  # equal budgets grouped
    assert laplace_epsilon([0.05, 0.1], 4, DELTA) == laplace_epsilon([0.05, 0.1], [4, 4], DELTA)  # scalar broadcast


def test_many_distinct_budgets_are_rounded_up():
    budgets = np.linspace(0.001, 0.01, 100)  # more than 64 distinct: rounded up onto 64 values
    got = laplace_epsilon(budgets, np.ones(100, dtype=int), DELTA)
    assert laplace_epsilon(0.001, 100, DELTA) <= got <= laplace_epsilon(0.01, 100, DELTA)
    assert got <= laplace_epsilon(budgets, np.ones(100, dtype=int), 0.0)


def test_adaptive_grid_within_its_stated_looseness_of_the_default_grid():
    # source: dp_accounting at its default grid 1e-4 (the docstring of laplace_epsilon states ≤ 0.07 %)
    for eps, k in [(0.05, 168), (0.3, 168), (1.0, 24), (0.00506, 8760)]:
        default = min(direct_pld([eps], [k], DELTA, 1e-4), eps * k)
        got = laplace_epsilon(eps, k, DELTA)
        assert got <= default * (1 + 1e-3), (eps, k, got, default)
        assert pld_discretization(eps, k, DELTA) >= 1e-4


def test_overflow_zone_of_dp_accounting_falls_back_to_a_split():
    # dp_accounting's get_epsilon answers inf here (ε(δ) ≈ 730 nats: a subnormal Σ p·e^{−loss})
    eps, k = 3.508676076551594, 244
    assert direct_pld([eps], [k], DELTA, pld_discretization(eps, k, DELTA)) == math.inf
    got = laplace_epsilon(eps, k, DELTA)
    assert laplace_epsilon_lower_bound(eps, k, DELTA) <= got < 0.95 * eps * k  # finite, well below pure


# ------------------------------------------------------------------------------------------ the ledger


def test_ledger_of_a_periodic_schedule_matches_the_schedule():
    led = model_free_of_releases(0.00506, np.arange(8760), delta=DELTA, windows=(24, 168))
    per = model_free_guarantee(0.00506, horizon=8760, delta=DELTA, S_bar=1, windows=(24, 168))
    assert led.horizon == 8760 and led.releases == 8760 and led.epsilon == per.epsilon
    assert led.epsilon_pure == pytest.approx(per.epsilon_pure, rel=1e-14)
    assert [(w.w, w.releases, w.epsilon) for w in led.w_event] == [(w.w, w.releases, w.epsilon) for w in per.w_event]


def test_ledger_windows_against_brute_force():
    # source: brute force over every position of a window of w consecutive slots
    slots = np.array([31, 3, 5, 6, 7, 30, 30])
    eps = np.array([0.05, 0.1, 0.2, 0.3, 0.1, 0.5, 0.02])
    led = model_free_of_releases(eps, slots, delta=DELTA, windows=(3, 10, 100))
    assert led.horizon == 29 and led.releases == 7 and led.epsilon_c == 0.5
    assert led.epsilon_pure == pytest.approx(float(np.sum(eps)), rel=1e-15)
    assert "ε_C from 0.02 to 0.5" in led.statement()
    for w_ev in led.w_event:
        inside = [(slots >= s) & (slots < s + w_ev.w) for s in range(slots.min() - w_ev.w, slots.max() + 1)]
        assert w_ev.releases == max(int(m.sum()) for m in inside)
        worst_sum = max(math.fsum(eps[m]) for m in inside)
        assert worst_sum <= w_ev.epsilon_pure <= worst_sum * (1 + 1e-12)
        members = {tuple(np.flatnonzero(m)) for m in inside if m.any()}  # each distinct set of releases once
        worst_pld = max(laplace_epsilon(eps[list(i)], np.ones(len(i), dtype=int), DELTA) for i in members)
        assert worst_pld <= w_ev.epsilon <= w_ev.epsilon_pure
    assert led.w_event[2].epsilon == led.epsilon  # one window holds every release


# ------------------------------------------------------------------------------------------ the lower bound


def _binary_brute(p1, q1, k, delta):
    """ε(δ) of k copies of the binary pair (p1, 1 − p1) vs (q1, 1 − q1) by enumerating all 2^k outcomes (mpmath)."""
    import itertools

    outcomes = []
    for bits in itertools.product((0, 1), repeat=k):
        j = sum(bits)
        outcomes.append((p1**j * (1 - p1) ** (k - j), q1**j * (1 - q1) ** (k - j)))

    def hockey(e):
        return sum(max(P - mpmath.e**e * Q, 0) for P, Q in outcomes)

    if hockey(0) <= delta:
        return mpmath.mpf(0)
    lo, hi = mpmath.mpf(0), mpmath.mpf(200)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("eps, k, delta", [(0.3, 3, 1e-3), (2.0, 4, 1e-2), (0.05, 5, 0.01), (5.0, 2, 1e-6)])
def test_lower_bound_is_the_exact_epsilon_of_the_binary_garblings(eps, k, delta):
    # source: enumeration in 50-digit mpmath of the two garblings {x ≥ 1/2} and {x ≤ 0} of Lap(0, b) vs Lap(1, b)
    mpmath.mp.dps = 50
    e = mpmath.mpf(eps)
    sym = _binary_brute(1 - mpmath.e ** (-e / 2) / 2, mpmath.e ** (-e / 2) / 2, k, delta)
    one_sided = _binary_brute(mpmath.mpf(1) / 2, mpmath.e ** (-e) / 2, k, delta)
    exact = max(sym, one_sided)
    got = laplace_epsilon_lower_bound(eps, k, delta)
    assert exact - mpmath.mpf(2e-7) <= got <= exact
    assert got <= laplace_epsilon(eps, k, delta)


def test_lower_bound_is_below_the_accountant_and_tight_for_small_budgets():
    for eps, k in [(0.00506, 8760), (0.05, 8760), (0.3, 168), (1.0, 24), (3.0, 100), (50.0, 10), (0.01, 1)]:
        lower, upper = laplace_epsilon_lower_bound(eps, k, DELTA), laplace_epsilon(eps, k, DELTA)
        assert lower <= upper
    assert laplace_epsilon_lower_bound(0.00506, 8760, DELTA) >= 0.999 * laplace_epsilon(0.00506, 8760, DELTA)
    assert laplace_epsilon_lower_bound(50.0, 10, DELTA) >= 0.999 * 500.0
    mpmath.mp.dps = 60
    exact = mpmath.mpf(0.1) * 10  # source: pure ε of 10 Laplace releases is exactly 10·ε_C (float 0.1, 60 digits)
    assert laplace_epsilon_lower_bound(0.1, 10, 0.0) <= exact <= laplace_epsilon(0.1, 10, 0.0)
    assert laplace_epsilon_lower_bound(0.1, 10, 0.0) == pytest.approx(1.0, rel=1e-15)
    assert laplace_epsilon_lower_bound(0.0, 10, DELTA) == 0.0 == laplace_epsilon_lower_bound(0.1, 0, DELTA)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.floats(0.001, 2.0), st.integers(1, 300), st.floats(0.01, 0.5), st.integers(1, 50))
def test_epsilon_non_decreasing_in_budget_and_releases(eps, k, rise, more):
    # ε(δ) of Laplace releases is non-decreasing in ε_C (garbling) and in k (composition)
    base = laplace_epsilon(eps, k, DELTA)
    assert laplace_epsilon(eps * (1 + rise), k, DELTA) >= base
    assert laplace_epsilon(eps, k + more, DELTA) >= base
    low = laplace_epsilon_lower_bound(eps, k, DELTA)
    assert laplace_epsilon_lower_bound(eps * (1 + rise), k, DELTA) >= low - 1e-9
    assert laplace_epsilon_lower_bound(eps, k + more, DELTA) >= low - 1e-9


# ------------------------------------------------------------------------------------------ the design problem


P, Q, USERS = 0.1, 0.1, 1000


@pytest.fixture(scope="module")
def chain_penalty():
    return MSEPenalty(Population([two_state_chain(P, Q)], [100]), users=USERS)


def brute_force(max_penalty, horizon, delta, A_max, S_max):
    """Plain loop over (A, S̄): closed-form two-state MSE (Zhang et al. 2024, eq. (49)) and the accountant."""
    best, feasible_S = None, set()
    for A in range(A_max + 1):
        for S in range(1, S_max + 1):
            stale = max(float(two_state_mse(a, np.inf, P, Q, USERS)) for a in range(A, A + S))
            if not stale < max_penalty:
                continue
            feasible_S.add(S)
            eps = math.sqrt(8.0 / (USERS**2 * (max_penalty - stale)))  # 8/(ε² I²) + stale = f̄
            value = laplace_epsilon(eps, math.ceil(horizon / S), delta)
            key = (value, S, A)
            if best is None or key < best[0]:
                best = (key, eps)
    return best, len(feasible_S)


@pytest.mark.parametrize("max_penalty, delta", [(0.0021, DELTA), (0.0015, DELTA), (0.003, 0.0)])
def test_optimum_equals_brute_force(chain_penalty, max_penalty, delta):
    prob = ModelFreeProblem(chain_penalty, max_penalty, horizon=500, delta=delta, A_max=3, S_max=12, windows=(24,))
    sol = prob.solve()
    ((value, S, A), eps), n_feasible = brute_force(max_penalty, 500, delta, 3, 12)
    assert sol.status is Status.OPTIMAL and sol.bound == sol.objective
    assert (sol.decision["A"], sol.decision["S_bar"]) == (A, S)
    assert sol.decision["A"] == 0  # the staleness increases in the age: aging only costs
    assert sol.decision["epsilon_c"] == pytest.approx(eps, rel=1e-9)
    assert sol.objective == pytest.approx(value, rel=1e-6)
    v = sol.values
    assert v["releases"] == math.ceil(500 / S) and v["horizon"] == 500 and v["delta"] == delta
    assert v["guarantee"]["epsilon"] == sol.objective and v["guarantee"]["w_event"][0]["w"] == 24
    assert v["epsilon_pure"] == pytest.approx(v["releases"] * sol.decision["epsilon_c"], rel=1e-14)
    assert v["penalty"] <= max_penalty and v["peak_aoi"] == S - 1 and v["max_penalty"] == max_penalty
    assert v["accounted"] + v["pruned"] == n_feasible and v["accounted"] >= 1
    assert "globally optimal over S̄ ∈ {1..12} by exhaustive enumeration; ε_C smallest meeting f̄; ε(δ) " \
           "non-decreasing in ε_C (Laplace garbling)" in sol.message
    assert sol.backend == "dp_accounting"


def test_evaluate_with_numpy_and_the_accountant(chain_penalty):
    prob = ModelFreeProblem(chain_penalty, 0.0021, horizon=500, delta=DELTA, S_max=12)
    ev = prob.evaluate(0, 4, 0.2)
    assert ev.feasible and ev.violations == () and ev.peak_aoi == 3
    assert ev.epsilon == ev.guarantee.epsilon == laplace_epsilon(0.2, 125, DELTA)
    assert ev.penalty == pytest.approx(float(two_state_mse(3, 0.2, P, Q, USERS)), rel=1e-12)
    bad = prob.evaluate(2, 20, 0.01)
    assert not bad.feasible and bad.violations[0].startswith("(M2) fails: penalty")
    assert "outside the box" in bad.violations[1]
    assert prob.releases(np.array([1, 3, 500, 501])).tolist() == [500, 167, 1, 1]
    assert prob.bounds == {"A": (0, 0), "S_bar": (1, 12), "epsilon_c": (0.0, math.inf)}
    assert not prob.is_convex and prob.variables == ("A", "S_bar", "epsilon_c")


def test_infeasible_reports_the_smallest_achievable_penalty():
    pen = CallablePenalty(lambda t, e: 0.5 + 0.01 * t + 1.0 / np.asarray(e) ** 2, lambda t: 0.5 + 0.01 * t, name="floor")
    sol = ModelFreeProblem(pen, 0.4, horizon=100, delta=DELTA, A_max=2, S_max=5).solve()
    assert sol.status is Status.INFEASIBLE and sol.decision is None and sol.objective is None
    assert sol.values["min_penalty"] == pytest.approx(0.5, rel=1e-12)  # A = 0, S̄ = 1, ε_C → ∞
    assert "smallest achievable penalty is 0.5 (A = 0, S̄ = 1" in sol.message


def test_readings_penalty_on_the_bundled_data():
    data = po.load_citylearn()
    pen = ReadingsMSEPenalty(readings_moments(data, 30, value_range=(0, 48), phase_period=24), users=10**5, unit="kWh^2")
    delta = default_delta(10**5)
    sol = ModelFreeProblem(pen, 0.8, horizon=8760, delta=delta, S_max=24).solve()
    # plain loop over S̄ with the closed-form inverse of the readings MSE
    best = None
    for S in range(1, 25):
        eps = float(pen.min_epsilon_c(float(np.max(pen.staleness(np.arange(S)))), 0.8))
        if math.isfinite(eps):
            best = min(best or (math.inf,), (laplace_epsilon(eps, math.ceil(8760 / S), delta), S, eps))
    assert sol.status is Status.OPTIMAL
    assert sol.decision["S_bar"] == best[1] and sol.decision["A"] == 0
    assert sol.decision["epsilon_c"] == pytest.approx(best[2], rel=1e-12)
    assert sol.objective == pytest.approx(best[0], rel=1e-12)


def test_registry_and_availability(monkeypatch):
    assert isinstance(get_solver("exact", "model-free"), ModelFreeSolver)
    assert ModelFreeSolver.available() == (True, "")
    assert ModelFreeSolver.REQUIRED_MODULES == ("dp_accounting",) and ModelFreeSolver.SUPPORTED_PROBLEMS == (ModelFreeProblem,)
    import policyopt.solvers.model_free as module

    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    ok, why = ModelFreeSolver.available()
    assert not ok and "pip install dp-accounting" in why
    pen = MSEPenalty(Population([two_state_chain(P, Q)], [100]), users=USERS)
    with pytest.raises(BackendUnavailableError, match="the model-free solver needs 'dp_accounting'"):
        ModelFreeSolver().solve(ModelFreeProblem(pen, 0.003, horizon=10, delta=DELTA, S_max=3))


# ------------------------------------------------------------------------------------------ errors


def test_error_messages(chain_penalty):
    cases = [
        (lambda: default_delta(0), r"`users` must be an integer ≥ 1 \(deployment size I\), got 0"),
        (lambda: default_delta(True), r"`users` must be an integer ≥ 1 \(deployment size I\), got True"),
        (lambda: releases_in_window(0, 1), r"`window` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: releases_in_window(24, 0), r"`S_bar` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: laplace_epsilon(-0.1, 5, DELTA), r"`epsilon_c` must be a finite number ≥ 0 \(nats per release\), got -0.1"),
        (lambda: laplace_epsilon(math.inf, 5, DELTA), r"`epsilon_c` must be a finite number ≥ 0 \(nats per release\), got inf"),
        (lambda: laplace_epsilon([0.1, -1.0], [1, 2], DELTA), r"`epsilon_c` must hold finite numbers ≥ 0 \(nats per release\), got -1.0"),
        (lambda: laplace_epsilon([[0.1]], 1, DELTA), r"`epsilon_c` must be a number or a 1-D sequence of numbers ≥ 0"),
        (lambda: laplace_epsilon(0.1, 2.5, DELTA), r"`releases` must be an integer ≥ 0 \(number of releases\), got 2.5"),
        (lambda: laplace_epsilon(0.1, -1, DELTA), r"`releases` must be an integer ≥ 0 \(number of releases\), got -1"),
        (lambda: laplace_epsilon(0.1, [1, -2], DELTA), r"`releases` must hold integers ≥ 0, got -2"),
        (lambda: laplace_epsilon(0.1, [1.5], DELTA), r"`releases` must be an integer or a 1-D sequence of integers ≥ 0"),
        (lambda: laplace_epsilon([0.1, 0.2], [1, 2, 3], DELTA),
         r"`epsilon_c` and `releases` must have equal lengths \(one count per budget\), got 2 and 3"),
        (lambda: laplace_epsilon(0.1, 1, 1.0), r"`delta` \(the δ of \(ε, δ\)-DP\) must be a number with 0 ≤ δ < 1, got 1.0"),
        (lambda: laplace_epsilon(0.1, 1, -1e-9), r"`delta` .* got -1e-09"),
        (lambda: laplace_epsilon(0.1, 1, "0.1"), r"`delta` .* got '0.1'"),
        (lambda: pld_discretization(0.1, 1, 2.0), r"`delta` .* got 2.0"),
        (lambda: laplace_epsilon_lower_bound([0.1], 1, DELTA), r"`epsilon_c` must be a finite number ≥ 0"),
        (lambda: model_free_guarantee(0.1, horizon=0, delta=DELTA, S_bar=1), r"`horizon` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: model_free_guarantee(0.1, horizon=10, delta=DELTA),
         r"give `S_bar` \(releases = ⌈horizon/S̄⌉\) or `releases`; got neither"),
        (lambda: model_free_guarantee(0.1, horizon=10, delta=DELTA, S_bar=0), r"`S_bar` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: model_free_guarantee(0.1, horizon=10, delta=DELTA, releases=3, windows=(24,)),
         r"`windows` \(24,\) need `S_bar` \(releases in a window = ⌈w/S̄⌉\); got S_bar=None"),
        (lambda: model_free_guarantee(0.1, horizon=10, delta=DELTA, S_bar=1, windows=24),
         r"`windows` must be a sequence of integers ≥ 1 \(slots\), e.g. \(24, 168\), got 24"),
        (lambda: model_free_guarantee(0.1, horizon=10, delta=DELTA, S_bar=1, windows=(24, 0)),
         r"`windows` must hold integers ≥ 1 \(slots\), got 0 in \(24, 0\)"),
        (lambda: model_free_of_releases(0.1, [], delta=DELTA),
         r"`input_slots` must be a non-empty 1-D sequence of integers \(slots\), got \[\]"),
        (lambda: model_free_of_releases(0.1, [1.5], delta=DELTA), r"`input_slots` must be a non-empty 1-D sequence"),
        (lambda: model_free_of_releases([0.1, 0.2], [1, 2, 3], delta=DELTA),
         r"`epsilon_c` must be a number or hold one budget per release \(3\), got 2 budgets"),
        (lambda: model_free_of_releases([0.1, -0.2], [1, 2], delta=DELTA), r"`epsilon_c` must hold finite numbers ≥ 0"),
        (lambda: ModelFreeProblem("mse", 0.1, horizon=10, delta=DELTA), r"`penalty` must be a Penalty \(e.g. MSEPenalty\), got 'mse'"),
        (lambda: ModelFreeProblem(chain_penalty, -1, horizon=10, delta=DELTA),
         r"`max_penalty` \(f̄\) must be a positive finite number, got -1"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=0, delta=DELTA), r"`horizon` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=1), r"`delta` .* must be a number with 0 ≤ δ < 1, got 1"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA, A_max=-1),
         r"`A_max` must be an integer ≥ 0 \(slots\), got -1"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA, S_max=0),
         r"`S_max` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA).evaluate(-1, 1, 0.1),
         r"`A` must be an integer ≥ 0 \(slots\), got -1"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA).evaluate(0, 0, 0.1),
         r"`S_bar` must be an integer ≥ 1 \(slots\), got 0"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA).evaluate(0, 1, 0.0),
         r"`epsilon_c` must be a positive finite number \(nats\), got 0.0"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA).releases(0),
         r"`S_bar` must be integers ≥ 1 \(slots\), got 0"),
        (lambda: ModelFreeProblem(chain_penalty, 0.1, horizon=10, delta=DELTA).solve("nope"),
         r"unknown `method` 'nope'; choose one of \['exact'\]"),
        (lambda: ModelFreeSolver().solve(object()), r"the model-free solver handles ModelFreeProblem, got <object object"),
    ]
    for call, pattern in cases:
        with pytest.raises(InvalidInputError, match=pattern):
            call()


def test_result_types_are_frozen():
    g = model_free_guarantee(0.1, horizon=10, delta=DELTA, S_bar=2, windows=(4,))
    assert isinstance(g, ModelFreeGuarantee) and isinstance(g.w_event[0], WEvent)
    with pytest.raises(AttributeError):
        g.epsilon = 0.0  # type: ignore[misc]
    assert "ModelFreeGuarantee(" in repr(g)


def test_absurd_budgets_fall_back_to_the_pure_bound_not_a_crash():
    # ε_C ≈ 1e147 (what `--max-rmse 1e-150` asks for): dp_accounting's discretisation overflows (math.expm1 of the
    # grid step); the (ε, δ) reported is then the pure Σ k·ε_C of basic composition, rounded up.
    from policyopt.studies.guarantee import model_free_sentence

    eps = laplace_epsilon(1e147, 8760, 1e-6)
    assert eps == laplace_epsilon(1e147, 8760, 0.0) and mpmath.mpf(eps) >= 8760 * mpmath.mpf(1e147)
    mf = {"epsilon": eps, "epsilon_pure": eps, "delta": 1e-6, "horizon": 8760, "releases": 8760, "epsilon_c": 1e147}
    assert "composed by basic composition: the PLD accountant gives no smaller ε" in model_free_sentence(mf)
    mf["epsilon"] = 2.0
    assert "composed by the PLD accountant (pure ε" in model_free_sentence(mf)
