"""The `policyopt schedule` command: JSON contract and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from policyopt.cli.main import main

CONTRACT = ["status", "A", "S_bar", "epsilon_c", "peak_risk", "penalty", "max_penalty", "peak_aoi", "method", "wall_time_s", "model", "benchmarks"]


def run_json(capsys, *args):
    assert main(["schedule", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bundled_demo_json_contract(capsys):
    # Changed deliberately with issue 11: the bundled pilot now designs its documented deployment
    # (I = 10^5 homes, public range 0:48 kWh, K = 3, f̄ = 1.5e-5 kWh²) instead of treating the 17 pilot
    # homes as the deployment with f̄ = 0.15 kWh² (which was unbounded at A = A_max = 168).
    out = run_json(capsys)
    for key in CONTRACT + ["warnings", "explanation", "credible"]:
        assert key in out
    m = out["model"]
    assert (m["users"], m["pilot_users"], m["states"]) == (100_000, 17, 3)
    assert m["value_range"] == [0.0, 48.0] and m["value_range_declared"] is True
    assert m["sensitivity"] == pytest.approx(48.0 / 100_000, rel=1e-15)
    assert m["c"] >= 1.0 and 0.0 < m["rho"] < 1.0
    assert out["method"] == "exact"
    # Changed deliberately with issue 24: the MSE is estimated from the readings (worst hour of day) and the
    # default f̄ is the geometric midpoint of the trade-off range (no constant)
    low, high = m["tradeoff_range"]
    assert m["penalty"] == "readings-mse" and m["readings_penalty"]["phase_period"] == 24
    assert out["max_penalty"] == pytest.approx((low * high) ** 0.5, rel=1e-12)
    assert out["max_rmse"] == pytest.approx(out["max_penalty"] ** 0.5, rel=1e-12)
    assert out["max_penalty_source"].startswith("default: geometric midpoint")
    assert low < out["max_penalty"] < high == pytest.approx(m["staleness_limit"])
    assert out["status"] == "optimal" and 0 <= out["A"] < 168 and 1 <= out["S_bar"] < 168
    assert out["penalty"] <= out["max_penalty"]
    assert out["peak_aoi"] == out["A"] + out["S_bar"] - 1
    assert set(out["benchmarks"]) == {"no_aging", "noise_only"}
    na, no = out["benchmarks"]["no_aging"], out["benchmarks"]["noise_only"]
    assert no["risk_after_releases"] == pytest.approx(24 * no["epsilon_c"])
    # no sparse rows at K = 3 (every row of every home observed ≥ 143 times), so no warning about them
    assert m["sparse_states"] == []
    # Changed deliberately with issue 32: the homes refute the chains on held-out time, so no model-based ε* is stated
    # (peak_risk and the no-aging benchmark's are null), the model-free guarantee comes first and the warning says why;
    # no posterior under a refuted model is computed
    assert out["model_check"]["refuted"] is True and out["peak_risk"] is None and na["peak_risk"] is None
    assert na["A"] == 0 and out["guarantee"]["kind"] == "model-free"
    assert len(out["warnings"]) == 1 and "refuted by the readings" in out["warnings"][0]
    assert out["credible"] is None


def test_two_state_chain_schedule(capsys):
    out = run_json(capsys, "--chain", "two-state:p=0.1,q=0.1", "--users", "20", "--max-penalty", "0.08", "--max-age", "50", "--max-interval", "50")
    assert out["status"] == "optimal"
    assert (out["A"], out["S_bar"]) == (0, 5)  # see test_schedule_solver.test_paper_setting_reference_schedule
    assert out["model"]["users"] == 20 and out["model"]["c"] == pytest.approx(1.0)


def test_text_output(capsys):
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.08"]) == 0
    text = capsys.readouterr().out
    assert "schedule    : A = 0 slots, S̄ = 5 slots" in text
    assert "noise only  :" in text and "wall time" in text


def test_matrix_file_with_state_values(tmp_path, capsys):
    P = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.2, 0.8]])
    csv = tmp_path / "m.csv"
    csv.write_text("0,1,4\n" + "\n".join(",".join(map(str, r)) for r in P) + "\n")
    npy = tmp_path / "m.npy"
    np.save(npy, np.vstack([[0, 1, 4], P]))
    a = run_json(capsys, "--matrix", str(csv), "--users", "10", "--max-penalty", "1.0")
    b = run_json(capsys, "--matrix", str(npy), "--users", "10", "--max-penalty", "1.0")
    assert a["epsilon_c"] == b["epsilon_c"] and a["status"] == b["status"]
    assert a["model"]["sensitivity"] == pytest.approx(0.4)


def test_data_csv(tmp_path, capsys):
    rng = np.random.default_rng(5)
    rows = ["user,time,value"] + [f"u{u},{t},{v:.4f}" for u in range(3) for t, v in enumerate(rng.random(300))]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(rows) + "\n")
    out = run_json(capsys, "--data", str(path), "--states", "3", "--max-penalty", "0.5", "--max-age", "24",
                   "--max-interval", "24")
    assert out["model"]["users"] == 3 and out["model"]["states"] == 3 and out["model"]["penalty"] == "readings-mse"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--data", "/nonexistent/readings.csv"], r"--data file not found: '/nonexistent/readings.csv'"),
        (["--data", "{tmp}/bad.csv"], r"line 3: expected 3 fields \(user,time,value\), got 4"),
        (["--data", "{tmp}/nan.csv"], r"line 3: `value` nan is not a finite number \(NaN readings are not allowed\)"),
        (["--matrix", "{tmp}/nonstoch.csv"], r"`P` is not stochastic: row 0 sums to 0.9"),
        (["--matrix", "{tmp}/text.csv"], r"line 2: 'x' is not a number"),
        (["--chain", "three-state:p=0.1"], r"unknown --chain spec 'three-state:p=0.1'; expected two-state:p=P,q=Q"),
        (["--chain", "two-state:p=0.1"], r"bad --chain spec 'two-state:p=0.1'"),
        (["--chain", "two-state:p=2,q=0.1"], r"`p` must be a probability in \[0, 1\], got 2.0"),
        (["--chain", "two-state:p=0.1,q=0.1", "--states", "4"], r"--states applies to --data"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, args, match):
    write(tmp_path, "bad.csv", "user,time,value\na,0,1.0\na,1,2.0,9\n")
    write(tmp_path, "nan.csv", "user,time,value\na,0,1.0\na,1,nan\n")
    write(tmp_path, "nonstoch.csv", "0.5,0.4\n0.5,0.5\n")
    write(tmp_path, "text.csv", "0.5,0.5\nx,0.5\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["schedule", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("policyopt: error: ")
    import re

    assert re.search(match, err), err


@pytest.mark.parametrize(
    "args, match",
    [
        (["--max-penalty", "0"], r"--max-penalty must be a positive finite number, got '0'"),
        (["--max-penalty", "-1"], r"--max-penalty must be a positive finite number, got '-1'"),
        (["--max-penalty", "abc"], r"--max-penalty must be a number, got 'abc'"),
        (["--max-interval", "0"], r"--max-interval must be ≥ 1, got '0'"),
        (["--chain", "two-state:p=0.1,q=0.1", "--matrix", "m.csv"], r"not allowed with argument"),
    ],
)
def test_bad_options_one_line_exit_2(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        main(["schedule", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    import re

    assert re.search(match, err), err


def test_console_script_never_prints_a_traceback(tmp_path):
    exe = Path(sys.executable).with_name("policyopt")
    env = dict(os.environ)
    bad = tmp_path / "nan.csv"
    bad.write_text("user,time,value\na,0,1.0\na,1,nan\n")
    for args in (["schedule", "--data", str(bad)], ["schedule", "--max-penalty", "0"], ["schedule", "--chain", "nope"]):
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
        assert proc.stdout == ""
    ok = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "schedule" in ok.stdout


def test_method_heuristic_relaxed_reports_kkt(capsys):
    out = run_json(capsys, "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.095", "--max-age", "60",
                   "--max-interval", "60", "--method", "heuristic", "--relax")
    assert out["method"] == "heuristic" and out["status"] == "feasible"
    assert out["kkt"]["branch"] == "A=0 (42)" and out["kkt"]["passed"] is True
    # the relaxation with peak AoI A + S̄ − 1 is a lower bound of the integer optimum 1.4927460 (exact solver)
    assert out["peak_risk"] < 1.4927460 and out["peak_risk"] == pytest.approx(1.4913212, rel=1e-6)
    assert "comparison" not in out


def test_method_all_compares_every_back_end(capsys):
    out = run_json(capsys, "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.095", "--max-age", "60",
                   "--max-interval", "60", "--method", "all", "--relax")
    rows = {r["method"].split()[0]: r for r in out["comparison"]}
    assert set(rows) == {"exact", "heuristic", "cvxpy", "pyomo"}
    assert out["method"] == "exact" and rows["exact"]["objective"] == out["peak_risk"]
    relaxed = [rows[m]["objective"] for m in ("heuristic", "cvxpy", "pyomo")]
    assert max(relaxed) == pytest.approx(min(relaxed), rel=1e-6)
    assert rows["pyomo"]["status"] == "optimal"
    assert rows["pyomo"]["bound"] <= rows["pyomo"]["objective"] * (1 + 1e-12)
    assert rows["pyomo"]["bound"] >= rows["cvxpy"]["objective"] * (1 - 1e-6)  # SCIP's bound brackets the optimum


@pytest.mark.parametrize(
    "args, match",
    [
        (["--method", "exact", "--relax"], r"`relax` applies to the \(39\) back ends"),
        (["--method", "cvxpy"], r"method 'cvxpy' solves the continuous relaxation of \(39\) only: add `relax` \(--relax\)"),
    ],
)
def test_method_option_errors(capsys, args, match):
    import re

    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err), err


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False))
def test_printed_privacy_bounds_are_rounded_up(x):
    from policyopt.formatting import fmt_upper as _up

    shown = float(_up(x))
    assert shown >= x
    assert shown <= x * (1 + 1e-5)
