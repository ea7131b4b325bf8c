"""``schedule --backtest F``: design on the first part of the time range, replay on the rest (issue 24's demo line).

``make demo`` is ``policyopt schedule --backtest 0.5``; its ``backtest`` object must be what ``policyopt backtest
--schedule`` reports for the same design file, and the design must come from the first half only.
"""

from __future__ import annotations

import json

import pytest

from _cli import ok_json, refused, run_any, run_cli
from policyopt.formatting import text_problems


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(JSON object, path of the schedule file) of the demo's design."""
    out = ok_json("schedule", "--backtest", "0.5")
    path = tmp_path_factory.mktemp("bt") / "demo.json"
    path.write_text(json.dumps(out))
    return out, path


def test_the_replay_equals_policyopt_backtest_of_the_same_design(demo):
    out, path = demo
    bt = out["backtest"]
    assert out["deployment"]["backtest"] == 0.5 and "--backtest" in out["model"]["source"]
    assert bt["replayed"] == "schedule" and bt["split_slot"] == 4380 and bt["held_out_slots"] == 4380
    assert (bt["schedule"]["A"], bt["schedule"]["S_bar"], bt["schedule"]["epsilon_c"]) == (
        out["A"], out["S_bar"], out["epsilon_c"])
    ref = ok_json("backtest", "--schedule", path)
    for key in ("realized_mse", "realized_mse_lower", "realized_mse_upper", "max_penalty", "holds", "holds_upper",
                "split_slot", "users", "max_tv_comparison", "staleness", "noise"):
        assert bt[key] == ref[key], key
    # the design saw the first half only: its readings penalty is estimated on 4380 slots, not 8760
    assert out["model"]["readings_penalty"]["slots"] == 4380
    # the demo's numbers (README): A = 0, S̄ = 1 meets f̄ with noise only; held-out Δ(1) above the chains' Δ(1)
    assert (out["A"], out["S_bar"]) == (0, 1) and bt["holds"] is True
    c = bt["max_tv_comparison"]
    assert c["lags"] == [1] and c["held_out_lower"][0] > c["design_max_tv"][0] and c["holds"] is False
    assert c["design_max_tv"][0] == pytest.approx(0.871, abs=5e-4) and c["held_out_max_tv"][0] == pytest.approx(0.906, abs=5e-4)


def test_the_text_has_the_backtest_line():
    text = run_cli("schedule", "--backtest", "0.5").stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("backtest    : "))
    assert "designed on slots before 4380 (the first 0.5), replayed on the 4380 held-out slots: realised MSE" in line
    assert "its ε* is no bound for them" in line
    assert text_problems(text) == [], text


def test_a_horizon_design_is_replayed_when_no_finite_peak_risk_exists():
    out = ok_json("schedule", "--backtest", "0.5", "--max-tv", "empirical", "--max-penalty", "0.05",
                  "--max-age", "24", "--max-interval", "24")
    hd, bt = out["horizon_design"], out["backtest"]
    assert out["A"] is None and hd["status"] == "optimal" and bt["replayed"] == "horizon_design"
    assert (bt["schedule"]["A"], bt["schedule"]["S_bar"], bt["schedule"]["epsilon_c"]) == (
        hd["A"], hd["S_bar"], hd["epsilon_c"])
    assert bt["realized_mse"] <= 0.05 * (1 + 1e-9)


def test_refusals(demo, tmp_path):
    refused(run_any("schedule", "--chain", "two-state:p=0.1,q=0.1", "--backtest", "0.5"),
            "--backtest replays the design on held-out readings: it needs --data")
    bad = run_any("schedule", "--backtest", "1.5")  # argparse's own one-line error
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "--backtest must be a probability strictly between 0 and 1, got '1.5'" in bad.stderr
    _, path = demo
    refused(run_any("publish", "--schedule", path, "--ledger", tmp_path / "l.db", "--through", "10"),
            "was designed with --backtest 0.5", "--override REASON")


def test_readme_numbers_of_the_data_driven_design_next_to_the_chains():
    """README item 7: on the whole year at f̄ = 0.00563781 kWh², the chains' ε* and the data's Δ(t) ε*."""
    chain = ok_json("schedule", "--max-penalty", "0.00563781")
    data = ok_json("schedule", "--max-penalty", "0.00563781", "--max-tv", "empirical")
    assert (chain["A"], chain["S_bar"]) == (data["A"], data["S_bar"]) == (0, 1)
    assert chain["peak_risk"] == pytest.approx(0.0859207, rel=2e-6)
    assert data["peak_risk"] == pytest.approx(0.292826, rel=2e-6)
    assert data["empirical_max_tv"]["max_tv_used"][1] == pytest.approx(0.965, abs=5e-4)
