"""Every printed privacy number is an upper bound, every printed budget meets its constraint — checked
against independent 60-digit mpmath evaluations (tests/_mp_refs.py) of the papers' formulas:

* ε* of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024,
  eq. (30), with Δ(t) of eq. (12) recomputed in mpmath from the chain (not taken from policyopt);
* BPL/FPL/TPL of Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data
  Release under Temporal Correlations", IEEE TKDE, 2019, eqs. (10)–(15) with L(α) of eqs. (18)–(21)
  by enumerating every vertex of the linear-fractional program;
* the MSE utility bound (eqs. (48)–(49) with the mean's sensitivity) at the returned ε_C.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import _mp_refs as R
from policyopt.formatting import fmt_exact, round_down, round_up
from policyopt.models.markov import MarkovChain, Population
from policyopt.privacy.age_dependent import max_tv_rel_error, peak_risk_margin, peak_risk_upper, peak_risk_values_log
from policyopt.privacy.temporal import leakage, leakage_upper, supremum_upper
from policyopt.problems.tpl_budget import BudgetAllocationProblem
from policyopt.studies.schedule import design_schedule
from policyopt.utility.penalty import MSEPenalty

from _cli import run_cli, strict_json  # noqa: E402
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cli(*args):
    """stdout of the installed ``policyopt`` (exit 0 asserted)."""
    return run_cli(*args).stdout


def random_chain(rng, K, sticky=False):
    P = rng.dirichlet(np.ones(K) * rng.uniform(0.3, 3.0), size=K)
    if sticky:
        P = 0.8 * np.eye(K) + 0.2 * P
    return MarkovChain(P, np.sort(rng.normal(size=K)) + np.arange(K))


# ---------------------------------------------------------------------------------------------
# formatting helpers
# ---------------------------------------------------------------------------------------------


def test_round_up_and_down():
    assert round_up(None) is None and round_down(None) is None
    assert round_up(0.0) == 0.0 and round_up(0.0, abs_=1e-20) > 0
    assert round_up(math.inf) == math.inf
    assert round_up(1.0) == math.nextafter(1.0, 2.0)
    x = 0.1
    assert mp.mpf(round_up(x, rel=1e-12)) >= mp.mpf(x) * (1 + mp.mpf(1e-12))
    assert mp.mpf(round_down(x, rel=1e-12)) <= mp.mpf(x) * (1 - mp.mpf(1e-12))
    assert fmt_exact(0.6287549084175019) == "0.6287549084175019" and fmt_exact(7) == "7" and fmt_exact(None) == "—"


# ---------------------------------------------------------------------------------------------
# eq. (30): the reported peak risk is ≥ the exact value
# ---------------------------------------------------------------------------------------------


@SLOW
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(2, 4), sticky=st.booleans(),
       eps=st.sampled_from([1e-3, 0.3, 1.0, 5.0, 50.0, 700.0]), A=st.integers(0, 60), S=st.integers(1, 60))
# Found by Hypothesis: rows 0.5223…/0.5232… nearly agree (Δ(1) = 8.5e-4), and P̂ − 1π formed as a difference had
# lost 9 bits: the printed ε* 7.204840022260355e-10 was below the exact 7.20484002226062e-10.
@example(seed=455, K=2, sticky=False, eps=1e-3, A=2, S=1)
def test_peak_risk_upper_dominates_eq30(seed, K, sticky, eps, A, S):
    chain = random_chain(np.random.default_rng(seed), K, sticky)
    la, ls = chain.log_max_tv([A, S])
    value = float(peak_risk_values_log(la, ls, eps))
    dA, dS = R.max_tv(chain.P, A), R.max_tv(chain.P, S)
    exact = R.peak_risk(dA, dS, eps)
    if math.isnan(value):  # condition (31) fails in floating point: it must (nearly) fail exactly too
        assert dS * mp.e ** mp.mpf(eps) >= 1 - mp.mpf(1e-12)
        return
    if exact == mp.inf:
        pytest.fail(f"float ε* {value} finite where the exact condition (31) fails")
    up = peak_risk_upper(value, la, ls, eps, A, S)
    assert mp.mpf(up) >= exact, (up, exact)
    # and the margin is a rounding margin, not a loose bound
    assert up <= float(exact) * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("log10_gap", [-2, -4, -6])
def test_max_tv_keeps_relative_accuracy_when_rows_nearly_agree(K, log10_gap):
    """Δ(t) of a chain whose rows differ by ~10^log10_gap is within max_tv_rel_error(t) of a 60-digit evaluation.

    Such a chain has Δ(1) ~ 10^log10_gap; forming P̂ − 1π by subtraction cost a relative error of about u/Δ(1)
    (up to 1.6·10⁵·(t + 1)·u measured), far beyond the margin the printed ε* carries.
    """
    rng = np.random.default_rng(K * 100 - log10_gap)
    worst = 0.0
    for _ in range(4):
        P = np.abs(rng.dirichlet(np.ones(K)) + rng.normal(scale=10.0**log10_gap, size=(K, K)))
        chain = MarkovChain(P / P.sum(axis=1, keepdims=True), np.arange(K, dtype=float))
        ts = [1, 2, 10, 60]
        for t, got in zip(ts, chain.log_max_tv(ts)):
            exact = R.max_tv(chain.P, t)
            rel = abs(mp.e ** mp.mpf(got) / exact - 1)
            assert rel <= max_tv_rel_error(t), (t, float(exact), float(rel))
            worst = max(worst, float(rel) / ((t + 1) * 2.0**-53))
    assert worst > 0  # a float evaluation, not the reference itself


@SLOW
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(2, 4), users=st.integers(1, 40),
       rel_bound=st.floats(0.05, 3.0), sticky=st.booleans())
def test_schedule_report_bounds_hold_in_mpmath(seed, K, users, rel_bound, sticky):
    """design_schedule's JSON: peak_risk ≥ exact eq. (30) at (A, S̄, ε_C) (also for the no-aging benchmark),
    the utility bound holds exactly at ε_C, and the noise-only risk is ≥ N·ε_C."""
    chain = random_chain(np.random.default_rng(seed), K, sticky)
    pop = Population([chain], [users])
    f_bar = rel_bound * 2 * float(np.var(chain.state_values)) / users
    rep = design_schedule(pop, max_penalty=f_bar, A_max=16, S_max=16).to_dict()
    for fields in (rep, rep["benchmarks"]["no_aging"]):
        if fields["A"] is None:
            continue
        A, S, e = fields["A"], fields["S_bar"], fields["epsilon_c"]
        exact = R.peak_risk(R.max_tv(chain.P, A), R.max_tv(chain.P, S), e)
        assert mp.mpf(fields["peak_risk"]) >= exact
        assert fields["peak_risk_margin"] < 1e-10
        pen = R.schedule_penalty([chain.P], [users], [chain.state_values], A, S, e)
        assert pen <= mp.mpf(f_bar), (A, S, e, pen, f_bar)
    no = rep["benchmarks"]["noise_only"]
    if no["epsilon_c"] is not None:
        assert mp.mpf(no["risk_after_releases"]) >= no["releases"] * mp.mpf(no["epsilon_c"])


@pytest.mark.parametrize("delta", [1e-13, 1e-10, 1e-7, 1e-3, 1.0])
def test_min_epsilon_c_meets_the_bound_in_mpmath_when_nearly_tight(delta):
    """f̄ just above the staleness W: the returned ε_C still meets the bound exactly (or is ∞)."""
    rng = np.random.default_rng(20261124)
    for _ in range(12):
        chain = random_chain(rng, int(rng.integers(2, 7)), sticky=bool(rng.integers(2)))
        users = int(rng.integers(1, 30))
        pen = MSEPenalty(Population([chain], [users]))
        A, S = int(rng.integers(0, 40)), int(rng.integers(1, 10))
        W = max(R.staleness([chain.P], [users], [chain.state_values], a) for a in range(A, A + S))
        f_bar = float(W * (1 + mp.mpf(delta)))
        eps = float(pen.min_epsilon_c_table(A, S, f_bar)[A, S - 1])
        if math.isinf(eps):
            assert delta < 1e-10  # only refused when f̄ is within W's rounding error of W
            continue
        exact = R.schedule_penalty([chain.P], [users], [chain.state_values], A, S, eps)
        assert exact <= mp.mpf(f_bar), (delta, eps, exact - f_bar)


@pytest.mark.parametrize("p, q, f_bar", [(0.1, 0.2, 0.15), (0.05, 0.3, 0.06), (0.3, 0.1, 0.5), (0.02, 0.02, 0.1)])
def test_cli_schedule_json_and_text(p, q, f_bar):
    """The installed CLI: strict JSON whose peak_risk ≥ exact eq. (30) and whose ε_C meets f̄ exactly;
    the text shows ε_C digit for digit as the JSON does."""
    args = ["schedule", "--chain", f"two-state:p={p},q={q}", "--users", "20", "--max-age", "24",
            "--max-interval", "24", "--max-penalty", repr(f_bar)]
    out = strict_json(cli(*args, "--json"))
    P = [[1 - p, p], [q, 1 - q]]
    A, S, e = out["A"], out["S_bar"], out["epsilon_c"]
    assert A is not None
    exact = R.peak_risk(R.max_tv(P, A), R.max_tv(P, S), e)
    assert mp.mpf(out["peak_risk"]) >= exact
    assert R.schedule_penalty([P], [20], [[-1.0, 1.0]], A, S, e) <= mp.mpf(f_bar)
    text = cli(*args)
    shown = re.search(r"ε_C = (\S+) nats per release", text).group(1)
    assert _six_digits_up(shown, e)
    na = out["benchmarks"]["no_aging"]
    assert _six_digits_up(re.search(r"no aging    : S̄ = \d+, ε_C = (\S+), ε\*", text).group(1), na["epsilon_c"])


def _six_digits_up(shown: str, value: float) -> bool:
    """`shown` is `value` (a float, taken exactly) rounded up to 6 significant digits: not below it, less than one
    unit of the 6th digit above it, and at most 6 significant digits (issue 33: ε_C to 6 digits in text)."""
    d, v = Decimal(shown), Decimal(repr(value))
    unit = Decimal(1).scaleb(v.adjusted() - 5)
    return d >= v and d - v < unit and len(d.normalize().as_tuple().digits) <= 6


# ---------------------------------------------------------------------------------------------
# Cao et al.: BPL/FPL/TPL bounds and certified budgets
# ---------------------------------------------------------------------------------------------


def random_matrix(rng, n):
    return rng.dirichlet(np.ones(n) * rng.uniform(0.2, 3.0), size=n)


@SLOW
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3), T=st.integers(1, 15), scale=st.floats(-4, 1.5))
def test_leakage_upper_dominates_mpmath(seed, n, T, scale):
    rng = np.random.default_rng(seed)
    PB, PF = random_matrix(rng, n), random_matrix(rng, n)
    b = rng.uniform(0.1, 1.0, size=T) * 10**scale
    up = leakage_upper(PB, PF, b)
    lo = leakage(PB, PF, b)
    bpl, fpl, tpl = R.leakage(PB, PF, b)
    for t in range(T):
        assert mp.mpf(up.bpl[t]) >= bpl[t] and mp.mpf(up.fpl[t]) >= fpl[t] and mp.mpf(up.tpl[t]) >= tpl[t]
        assert up.tpl[t] - lo.tpl[t] <= 1e-10 * max(1.0, lo.tpl[t])  # a rounding margin, not a loose bound


@SLOW
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3), alpha=st.floats(1e-3, 20.0),
       T=st.integers(1, 12), method=st.sampled_from(["upper-bound", "quantification"]))
def test_budgets_meet_alpha_in_mpmath(seed, n, alpha, T, method):
    rng = np.random.default_rng(seed)
    PB, PF = random_matrix(rng, n), random_matrix(rng, n)
    sol = BudgetAllocationProblem(PB, PF, alpha, T).solve(method)
    if sol.decision is None:
        return
    budgets = sol.decision["budgets"]
    bpl, fpl, tpl = R.leakage(PB, PF, budgets)
    assert max(tpl) <= mp.mpf(alpha)
    assert mp.mpf(sol.values["max_tpl"]) >= max(tpl) and sol.values["max_tpl"] <= alpha
    assert 0 <= sol.values["budget_shrink"] <= 1e-9


@pytest.mark.parametrize("T", [2, 4])
def test_optimal_budgets_meet_alpha_in_mpmath(T):
    # source: Cao et al. (2019), Section 6.3, Fig. 8 matrices, goal 1-DP_T
    PB, PF = np.array([[0.8, 0.2], [0.2, 0.8]]), np.array([[0.8, 0.2], [0.1, 0.9]])
    sol = BudgetAllocationProblem(PB, PF, 1.0, T).solve("optimal", time_limit=30)
    _, _, tpl = R.leakage(PB, PF, sol.decision["budgets"])
    assert max(tpl) <= 1 and mp.mpf(sol.values["max_tpl"]) >= max(tpl) and sol.values["max_tpl"] <= 1.0


@pytest.mark.parametrize("alpha", ["1", "1000"])
@pytest.mark.parametrize("method", ["quantification", "upper-bound"])
def test_cli_tpl_budget_meets_alpha(alpha, method):
    """The issue's cases: quantification printed max_tpl = 1.0000000000000002 for α = 1 and
    1000.0000000000001 for α = 1000.  Now the JSON max_tpl is ≤ α and ≥ the exact TPL of the budgets."""
    PB, PF = [[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]]
    args = ["tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--alpha", alpha,
            "--horizon", "8", "--method", method]
    out = strict_json(cli(*args, "--json"))
    a = float(alpha)
    _, _, tpl = R.leakage(np.array(PB), np.array(PF), out["budgets"])
    assert max(tpl) <= a
    assert mp.mpf(out["max_tpl"]) >= max(tpl) and out["max_tpl"] <= a
    assert all(mp.mpf(x) >= y for x, y in zip(out["tpl"], tpl))
    text = cli(*args)
    b = out["budgets"]
    assert f"ε_1 = {b[0]!r}," in text and f"ε_T = {b[-1]!r} nats" in text


def test_cli_tpl_values_and_suprema_are_upper_bounds():
    # P_B and P_F describe the same three states (the CLI refuses matrices of different sizes)
    PB = np.array([[0.8, 0.15, 0.05], [0.2, 0.7, 0.1], [0.1, 0.3, 0.6]])
    PF = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]])
    out = strict_json(cli("tpl", "--pb", "0.8,0.15,0.05;0.2,0.7,0.1;0.1,0.3,0.6", "--pf", "0.7,0.2,0.1;0.1,0.8,0.1;0.25,0.25,0.5",
                          "--epsilon", "0.3", "--horizon", "12", "--json"))
    bpl, fpl, tpl = R.leakage(PB, PF, [0.3] * 12)
    for key, ref in (("bpl", bpl), ("fpl", fpl), ("tpl", tpl)):
        assert all(mp.mpf(x) >= y for x, y in zip(out[key], ref)), key
    assert mp.mpf(out["max_tpl"]) >= max(tpl)
    sb, sf = R.supremum(PB, 0.3), R.supremum(PF, 0.3)
    sup = out["supremum"]
    assert mp.mpf(sup["bpl"]) >= sb and mp.mpf(sup["fpl"]) >= sf and mp.mpf(sup["tpl"]) >= sb + sf - mp.mpf(0.3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3), eps=st.floats(1e-3, 3.0))
def test_supremum_upper_dominates_mpmath(seed, n, eps):
    P = random_matrix(np.random.default_rng(seed), n)
    up = supremum_upper(P, eps)
    exact = R.supremum(P, eps)
    if up is None:
        assert exact == mp.inf
        return
    assert mp.mpf(up) >= exact
    assert up <= float(exact) * (1 + 1e-9)


def test_peak_risk_margin_grows_near_divergence():
    # condition (31) nearly tight: Δ(S̄)e^{ε_C} = 1 − 1e-9 gives a margin ≈ 1e9 times the well-conditioned one
    far = peak_risk_margin(math.log(0.5), math.log(0.1), 1.0, 5, 5)
    near = peak_risk_margin(math.log(0.5), math.log1p(-1e-9) - 1.0, 1.0, 5, 5)
    assert near > 1e8 * far and far < 1e-12
    assert peak_risk_margin(0.0, 0.0, 1.0, 0, 1) == math.inf  # condition (31) fails: no finite bound


def test_cli_fran_sound_leakage_is_rounded_outward():
    """ε_S = ln(1 + Δ_k(e^{d(k)ε_C} − 1)) (Luo et al. 2025, FRAN, eq. (45)) in 60-digit mpmath at the reported
    Δ_k and ε_C is ≤ the printed value (the main answer and the sound baselines)."""
    out = strict_json(cli("fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.8", "--json"))
    d_k = mp.mpf(out["d_k"])
    exact = mp.log1p(mp.mpf(out["distance"]) * mp.expm1(d_k * mp.mpf(out["epsilon_c"])))
    assert mp.mpf(out["epsilon_s"]) >= exact
    dp = out["baselines"]["dp"]["sound"]  # Δ = 1, d = 1: ε_S = ε_C exactly
    assert mp.mpf(dp["epsilon_s"]) >= mp.mpf(dp["epsilon_c"])


def test_discounted_upper_is_rounded_up():
    from policyopt.privacy.discounted import DiscountedLoss

    loss = DiscountedLoss("dp", None, np.array([0.1, 0.0]), np.array([1e-17, 0.0]), "cumsum")
    assert mp.mpf(loss.upper[0]) >= mp.mpf(0.1) + mp.mpf(1e-17) and loss.upper[1] == 0.0


@pytest.mark.parametrize("method", ["heuristic", "pyomo"])
def test_cli_schedule_envelope_backends_meet_the_utility_bound(method):
    """The (39) back ends: the integer schedule's ε_C meets f̄ in mpmath (SCIP's point passed the float
    check of (39c) while exceeding f̄ by 4e-18 in exact arithmetic before its ε_C was held to the
    certified inverse), and (39a) is ≥ the exact eq. (30)."""
    p, q, f_bar = 0.1, 0.2, 0.15
    out = strict_json(cli("schedule", "--chain", f"two-state:p={p},q={q}", "--max-age", "10", "--max-interval", "10",
                          "--max-penalty", repr(f_bar), "--method", method, "--json"))
    P = [[1 - p, p], [q, 1 - q]]
    A, S, e = int(out["A"]), int(out["S_bar"]), out["epsilon_c"]
    assert R.schedule_penalty([P], [20], [[-1.0, 1.0]], A, S, e) <= mp.mpf(f_bar)
    assert mp.mpf(out["peak_risk"]) >= R.peak_risk(R.max_tv(P, A), R.max_tv(P, S), e)
