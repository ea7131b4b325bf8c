"""``schedule --max-tv empirical``: design against Δ(t) estimated from the data; the model check of every data run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import policyopt as po
from policyopt.models.tabulated import TabulatedMaxTV
from policyopt.studies.empirical_design import design_over_horizon, parse_max_tv_source
from tests._cli import run_cli, strict_json
import _warm_cli  # noqa: E402

BOX = ("--max-age", "24", "--max-interval", "24")


def test_bundled_design_uses_a_bound_above_the_direct_estimate_and_falls_back_to_the_horizon():
    # the homes refute the first-order premise (issue 32): the Theorem 3 horizon design is made on request only
    out = strict_json(run_cli("schedule", "--max-tv", "empirical", *BOX, "--horizon", "2000", "--penalty", "chain", "--max-penalty",
                                 "1.5e-5", "--accept-refuted", "test of the Theorem 3 horizon design", "--json").stdout)
    emp = out["empirical_max_tv"]
    used, est, upper = emp["max_tv_used"], emp["estimate"], emp["upper"]
    assert used[0] == 1.0 and len(used) == 24 + 24  # ages 0..A_max + S_max − 1
    for t in range(1, len(used)):
        assert used[t] >= est[t - 1] and used[t] >= upper[t - 1]
    assert all(a >= b for a, b in zip(used, used[1:]))  # non-increasing
    # Δ̃ near 0.96 at every lag: no ε_C meets (31) and f̄ at once, so no infinite-horizon ε* exists
    assert out["status"] == "infeasible" and out["A"] is None
    hd = out["horizon_design"]
    assert hd["status"] == "optimal" and hd["horizon"] == 2000 and hd["enumerated"] == 25 * 24
    assert hd["horizon_risk"] >= hd["composition_check"] > 0
    # independent check: Theorem 3's recursion (compose) with the table actually used, at the chosen schedule
    times = hd["A"] + hd["S_bar"] * np.arange(hd["releases"])
    comp = po.compose(times, hd["A"], hd["epsilon_c"], np.array(used + [1.0] * 2000), horizon=2000)
    assert hd["horizon_risk"] >= float(comp.risk.max())
    assert hd["releases"] == (2000 - hd["A"]) // hd["S_bar"] + 1 and hd["accounting"] == "theorem-3"
    assert out["model_check"]["refuted"] is True and out["model_check"]["markov_test"]["refuted"] is True
    assert out["guarantee"]["kind"] == "model-free" and out["accepted_refuted"]["reason"] == "test of the Theorem 3 horizon design"
    # without the request the horizon design is the model-free optimum over the horizon: its horizon_risk is the pure ε
    free = strict_json(run_cli("schedule", "--max-tv", "empirical", *BOX, "--horizon", "2000", "--penalty", "chain",
                               "--max-penalty", "1.5e-5", "--json").stdout)["horizon_design"]
    assert free["accounting"] == "model-free" and free["A"] == 0 and free["horizon"] == 2000
    assert free["releases"] == -(-2000 // free["S_bar"])  # ⌈H/S̄⌉ releases read a user's series over the horizon
    assert free["horizon_risk"] >= free["releases"] * free["epsilon_c"] and free["epsilon"] <= free["horizon_risk"]


def test_horizon_design_with_no_decorrelation_is_basic_composition():
    # Δ ≡ 1: Theorem 3 reduces to summing ε_C over the releases (Proposition 2), N·ε_C at the last publication
    source = TabulatedMaxTV(np.zeros(30), 1, 1.0)
    pop = po.Population([po.two_state_chain(0.1, 0.2)], [50])
    pen = po.MSEPenalty(pop, users=50, value_range=(-1.0, 1.0))
    hd = design_over_horizon(source, pen, 0.05, 5, 10, 100)
    eps = np.asarray(pen.min_epsilon_c_table(5, 10, 0.05))
    N = (100 - np.arange(6)[:, None]) // np.arange(1, 11)[None, :] + 1
    ref = np.where(np.isfinite(eps), N * eps, np.inf)
    assert hd["horizon_risk"] == pytest.approx(float(ref.min()), rel=1e-12)
    assert hd["horizon_risk"] >= float(ref.min())
    a, s = np.unravel_index(np.argmin(ref), ref.shape)
    assert (hd["A"], hd["S_bar"]) == (int(a), int(s) + 1)


def test_fast_mixing_data_get_a_finite_peak_risk_under_the_empirical_bound(tmp_path):
    rng = np.random.default_rng(21)
    T, users = 3000, 4
    df = pd.DataFrame({"user": np.repeat([f"u{i}" for i in range(users)], T), "time": np.tile(np.arange(T), users),
                       "value": rng.integers(0, 3, users * T).astype(float)})  # i.i.d.: Δ(t) = 0 for t ≥ 1
    csv = tmp_path / "iid.csv"
    df.to_csv(csv, index=False)
    out = strict_json(run_cli("schedule", "--data", csv, "--states", 3, "--value-range", "0:2", "--max-tv",
                              "empirical:0.9", "--max-age", 12, "--max-interval", 12, "--users", 1000,
                              "--max-penalty", 0.02, "--json").stdout)
    assert out["status"] == "optimal" and out["horizon_design"] is None
    used = out["empirical_max_tv"]["max_tv_used"]
    assert out["empirical_max_tv"]["level"] == 0.9 and max(used[1:]) < 0.3
    # ε* reported ≥ eq. (30) with the Δ̃ values the design used
    ref = po.peak_risk(used[out["A"]], used[out["S_bar"]], out["epsilon_c"]).value
    assert out["peak_risk"] >= ref
    assert out["model_check"]["refuted"] in (True, False)
    text = run_cli("schedule", "--data", csv, "--states", 3, "--value-range", "0:2", "--max-tv", "empirical:0.9",
                   "--max-age", 12, "--max-interval", 12, "--users", 1000, "--max-penalty", 0.02).stdout
    assert "under Δ(t) ≤ the band estimated from the data" in text and "posterior band" not in text


def test_schedule_text_shows_the_model_check_line():
    text = run_cli("schedule", *BOX).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("model check : "))
    assert "chain REFUTED (held-out Markov test p = " in line and "worst lag" in line and "Δ(t) check p = " in line


@pytest.mark.parametrize(
    "args, message",
    [
        (("--max-tv", "foo"), "--max-tv must be model, empirical or empirical:LEVEL, got 'foo'"),
        (("--max-tv", "empirical:1.5"), "needs a LEVEL strictly between 0 and 1, got 'empirical:1.5'"),
        (("--chain", "two-state:p=0.1,q=0.2", "--max-tv", "empirical"), "estimates Δ(t) from readings"),
        (("--max-tv", "empirical", "--method", "heuristic"), "designs with the exact solver"),
    ],
)
def test_bad_max_tv_options_one_line_exit_2(args, message):
    proc = _warm_cli.run(["schedule", *args], timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


def test_horizon_sets_the_model_free_guarantee_without_the_data_band():
    out = strict_json(run_cli("schedule", *BOX, "--horizon", "168", "--json").stdout)
    mf = out["model_free"]
    assert mf["horizon"] == 168 and mf["releases"] == -(-168 // out["S_bar"])
    assert out["guarantee_settings"]["horizon_source"] == "given"


def test_parse_max_tv_source():
    assert parse_max_tv_source("model") == ("model", None)
    assert parse_max_tv_source("empirical") == ("empirical", 0.95)
    assert parse_max_tv_source("empirical:0.8") == ("empirical", 0.8)
    assert math.isclose(parse_max_tv_source("empirical:0.99")[1], 0.99)


def test_sweep_on_data_reports_the_model_check(tmp_path):
    out = strict_json(run_cli("sweep", "--max-penalty", "1.5e-5,3e-5", "--vary", "states=3,4", *BOX, "--out",
                              tmp_path / "s.csv", "--json").stdout)
    checks = out["model_check"]
    assert [c["states"] for c in checks] == [3, 4]
    # the held-out check of each K (issue 32): the G² Markov test at lags up to a week of hourly slots refutes both
    assert all(c["refuted"] and not c["passed"] and c["requested"] == "chain" for c in checks)
    assert all(c["markov_test"]["lags"] == list(range(1, 169)) and c["markov_test"]["refuted"] for c in checks)
    assert all(c["markov_test"]["p_value"] <= 0.05 for c in checks)
    chain = strict_json(run_cli("sweep", "--chain", "two-state:p=0.5,q=0.5", "--max-penalty", "0.1", "--max-age", 4,
                                "--max-interval", 4, "--out", tmp_path / "c.csv", "--json").stdout)
    assert chain["model_check"] is None


def test_python_design_against_the_empirical_source():
    from policyopt.studies.check_model import data_states
    from policyopt.studies.empirical_design import empirical_source

    df = po.load_citylearn()
    fit = po.fit_population(df, 3, value_range=(0.0, 48.0))
    states, _ = data_states(df, fit)
    est = po.estimate_max_tv(states, 3, 100, n_boot=20)
    source = empirical_source(est, 12, 12)
    pen = po.MSEPenalty(fit.population, users=100_000, value_range=(0.0, 48.0))
    rep = po.design_schedule(source, max_penalty=1.5e-5, A_max=12, S_max=12, penalty=pen)
    assert rep.status == "infeasible"  # (31) cannot hold with Δ̃ ≈ 0.96: the horizon design is the way out
    np.testing.assert_array_equal(np.exp(source.log_max_tv(np.arange(24))) >= np.r_[1.0, est.estimate[:23]], True)


def test_the_table_runs_its_maximum_over_the_ages_the_box_uses_only():
    """Δ̃(t) = max_{t ≤ s ≤ M} U(s): a band of 1 beyond M (a home with no claim at a long lag) leaves Δ̃ below 1."""
    from types import SimpleNamespace

    from policyopt.studies.empirical_design import empirical_max_tv_table, empirical_source

    L = 100
    upper = np.concatenate([0.9 - 0.004 * np.arange(1, 48), np.ones(L - 47)])  # 1 from lag 48 on
    upper[23] = 0.95  # a daily peak at lag 24: earlier lags must be raised to it
    est = SimpleNamespace(max_lag=L, upper=upper, n_users=3)
    table = empirical_max_tv_table(est, 40)
    ref = [1.0] + [max(upper[t - 1:40]) for t in range(1, 41)]  # plain loop
    assert table.tolist() == ref and len(table) == 41
    assert table[1] == table[24] == 0.95 and table[25] == upper[24] and table[40] == upper[39] < 1
    assert np.all(np.diff(table) <= 0) and np.all(table[1:] >= upper[:40])
    # the box's M = A_max + S_max − 1 = 47: still below 1; one more age reaches the band's 1
    src = empirical_source(est, 24, 24)
    assert src.horizon == 47 and float(np.exp(src.log_max_tv(np.array([1]))[0])) == pytest.approx(0.95, rel=1e-15)
    assert empirical_max_tv_table(est, 48)[1] == 1.0
    with pytest.raises(po.InvalidInputError, match="estimated for t ≤ L = 100 only"):
        empirical_max_tv_table(est, 101)
