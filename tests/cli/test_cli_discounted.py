"""`policyopt discounted`: JSON contract, warnings for the printed Corollary 16, one-line errors."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from policyopt.cli.main import main

FIELDS = ("schedule", "sensitivity", "worst_discounted_loss", "epsilon", "notion", "total_variance")


def run(capsys, *args):
    assert main(["discounted", *args, "--json"]) == 0
    cap = capsys.readouterr()
    return json.loads(cap.out), cap.err


@pytest.mark.parametrize("notion, par", [("dp", []), ("exponential", ["--alpha", "0.9"]), ("hyperbolic", ["--beta", "0.1"])])
def test_corollary_json_contract(capsys, notion, par):
    out, err = run(capsys, "--notion", notion, "--epsilon", "1", *par, "--horizon", "365")
    for key in FIELDS:
        assert key in out
    b = np.array(out["schedule"])
    assert b.shape == (365,) and out["notion"] == notion and out["epsilon"] == 1.0
    assert out["sensitivity"] == pytest.approx(100 / 17)  # clip 100 kWh / 17 homes
    assert out["worst_discounted_loss"] <= 1.0 and out["holds"] and err == ""
    assert out["total_variance"] == pytest.approx(float(np.sum(2 * b**2)), rel=1e-12)
    ere = out["expected_relative_error"]
    assert ere["days"] == 365 and ere["average"] == pytest.approx(np.mean(ere["per_day"]))
    assert out["accounting_method"] == {"dp": "cumsum", "exponential": "recursion", "hyperbolic": "direct"}[notion]
    if notion == "exponential":  # source: Farokhi (2020), eq. (11): b = Δf/(ε(1 − α))
        assert b[0] == pytest.approx(100 / 17 / 0.1, rel=1e-12)
    if notion == "dp":  # source: Farokhi (2020), eq. (8)
        assert b[9] == pytest.approx(100 / 17 * math.pi**2 * 100 / 6, rel=1e-12)


def test_paper_corollary16_warns_and_fails(capsys):
    # source: Farokhi (2020), eq. (14) at β = 4: loss at t = 1 is ε/0.94009 > ε
    out, err = run(capsys, "--notion", "hyperbolic", "--epsilon", "1", "--beta", "4", "--horizon", "20", "--schedule", "paper")
    assert out["worst_discounted_loss"] == pytest.approx(1 / 0.9400941495489, rel=1e-9)
    assert not out["holds"] and out["holds_until"] == 0 and out["worst_t"] == 1
    assert "invalid" in err and err.count("\n") == 1 and out["warnings"]
    out, err = run(capsys, "--notion", "hyperbolic", "--epsilon", "1", "--beta", "4", "--horizon", "20")
    assert out["holds"] and out["worst_discounted_loss"] <= 1.0 and err == ""


def test_optimal_json(capsys):
    out, _ = run(capsys, "--notion", "exponential", "--epsilon", "0.5", "--alpha", "0.8", "--horizon", "100", "--schedule", "optimal")
    assert out["status"] == "optimal" and out["kkt"]["passed"]
    assert out["worst_discounted_loss"] <= 0.5
    assert 0 < out["savings_vs_corollary"] < 1
    assert out["total_variance"] < out["corollary_total_variance"]


def test_optimal_hyperbolic_dual_solver(capsys):
    out, _ = run(capsys, "--notion", "hyperbolic", "--epsilon", "1", "--beta", "0.5", "--horizon", "1500", "--schedule", "optimal")
    assert out["solver"] == "dual" and out["status"] == "optimal" and out["worst_discounted_loss"] <= 1.0
    assert out["savings_vs_corollary"] > 0


def test_text_output_and_long_horizon(capsys):
    assert main(["discounted", "--notion", "dp", "--epsilon", "50", "--horizon", "400"]) == 0
    cap = capsys.readouterr()
    assert "worst loss" in cap.out and "holds at every slot" in cap.out
    assert "365 days of data" in cap.err  # the slots beyond the data are said, not dropped


@pytest.mark.parametrize("args, match", [
    (["--notion", "dp", "--epsilon", "1", "--alpha", "0.5", "--horizon", "3"], r"--notion dp takes neither --alpha nor --beta"),
    (["--notion", "exponential", "--epsilon", "1", "--horizon", "3"], r"needs --alpha A"),
    (["--notion", "exponential", "--epsilon", "1", "--alpha", "1.5", "--horizon", "3"], r"--alpha must be < 1"),
    (["--notion", "hyperbolic", "--epsilon", "1", "--horizon", "3"], r"needs --beta B"),
    (["--notion", "hyperbolic", "--epsilon", "1", "--alpha", "0.5", "--horizon", "3"], r"takes --beta, not --alpha"),
    (["--notion", "hyperbolic", "--epsilon", "1", "--alpha", "0.5", "--beta", "1", "--horizon", "3"], r"not allowed with argument"),
    (["--notion", "dp", "--epsilon", "-1", "--horizon", "3"], r"--epsilon must be a positive finite number, got '-1'"),
    (["--notion", "dp", "--epsilon", "1", "--horizon", "0"], r"--horizon must be ≥ 1, got '0'"),
    (["--notion", "hyperbolic", "--epsilon", "1", "--beta", "1", "--horizon", "5000", "--schedule", "optimal",
      "--solver", "cvxpy"], r"--horizon 5000 is too large for --solver cvxpy with --notion hyperbolic"),
    (["--notion", "dp", "--epsilon", "1", "--horizon", "60000", "--schedule", "optimal"],
     r"--horizon 60000 is too large for --schedule optimal \(at most 50000\)"),
    (["--notion", "hyperbolic", "--epsilon", "1", "--beta", "0.1", "--horizon", "50001"],
     r"--horizon 50001 is too large for --notion hyperbolic \(at most 50000\): the printed loss must be certified"),
    (["--notion", "dp", "--epsilon", "1", "--horizon", "3", "--solver", "dual"], r"--solver dual applies to --schedule optimal only"),
    (["--notion", "dp", "--epsilon", "1", "--horizon", "3", "--data", "/nonexistent.csv"], r"nonexistent"),
])
def test_errors_one_line_exit_2(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        rc = main(["discounted", *args])
        raise SystemExit(rc)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err), err
