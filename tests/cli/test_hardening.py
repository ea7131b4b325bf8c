"""Regression tests of issue 12 (sections 2 and 3): each failing case of the issue, run through the installed
``policyopt`` entry point as a subprocess, now gives a clean result or exactly one error line with exit code 2."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import _warm_cli

PROGRAM = Path(sys.executable).with_name("policyopt")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def run(*argv, cwd=None, timeout=300):
    """The installed entry point in a bare environment (no locale, no HOME), forked from a warm interpreter started
    in that same environment (``tests/_warm_cli.py``)."""
    proc = _warm_cli.run(argv, cwd=cwd, timeout=timeout, env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
                         text=False)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def run_json(*argv, **kw):
    code, out, err = run(*argv, "--json", **kw)
    assert code == 0, err
    assert err == "", err
    return json.loads(out, parse_constant=_reject_constant)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "binary.csv").write_bytes(b"\x89PNG\x00\x01\xff")
    (d / "latin1.csv").write_bytes("user,time,value\nb\xe9,0,1\n".encode("latin-1"))
    (d / "header.csv").write_text("user,time,value\n")
    (d / "binary.json").write_bytes(b"\xff\x00{")
    (d / "nested.json").write_text("[" * 100000 + "]" * 100000)
    (d / "huge_seq.json").write_text(json.dumps({"transitions": [[0.7, 0.3], [0.3, 0.7]], "coupling": [[1.0]],
                                                 "n_sequences": 10**30}))
    np.save(d / "complex.npy", np.array([[0.5 + 1j, 0.5], [0.5, 0.5]]))
    (d / "binary_out.csv").write_bytes(b"\xff\xfe\x00garbage\n")
    (d / "binary_out.jsonl").write_bytes(b"\xff\x00\n")
    # integer times ≥ 2^53: consecutive, distinct as integers, equal after a float conversion
    rows = "".join(f"u{u},{2**53 + t},{(t * (u + 1)) % 5 * 0.3:.1f}\n" for u in range(2) for t in range(60))
    (d / "bigtimes.csv").write_text("user,time,value\n" + rows)
    return d


# ------------------------------------------------------------------ section 2: one clean line, exit 2
BAD = [
    (["schedule", "--data", "{d}/binary.csv"], r"--data '.*binary.csv' is a binary file"),
    (["schedule", "--data", "{d}/latin1.csv"], r"--data '.*latin1.csv' is not UTF-8 text \(byte 0xe9"),
    (["schedule", "--matrix", "{d}/binary.csv"], r"--matrix '.*binary.csv' is a binary file"),
    (["tpl", "--pb", "{d}/binary.csv", "--epsilon", "1", "--horizon", "3"], r"--pb '.*' is a binary file"),
    (["tpl", "--budgets", "{d}/latin1.csv"], r"--budgets '.*' is not UTF-8 text"),
    (["fran", "--model", "{d}/binary.json", "--max-mse", "0.5"], r"--model '.*' is a binary file"),
    (["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.1,0.2", "--out", "{d}/binary_out.csv"],
     r"--out: the existing '.*' is not UTF-8 text"),
    (["schedule", "--data", "{d}/header.csv"], r"has a header but no readings"),
    (["tpl", "--epsilon", "1", "--horizon", "100000000000000000000"], r"--horizon must be ≤ 1000000"),
    (["tpl-budget", "--alpha", "1", "--horizon", "1000000000000"], r"--horizon must be ≤ 100000"),
    (["schedule", "--max-age", "1" + "0" * 30], r"--max-age must be ≤ 100000"),
    (["schedule", "--max-age", "10000000"], r"--max-age must be ≤ 100000"),
    (["schedule", "--max-age", "5000", "--max-interval", "5000"], r"at most 10000000 are enumerated"),
    (["schedule", "--releases", "1e400"], r"--releases must be an integer"),
    (["discounted", "--notion", "dp", "--epsilon", "1", "--horizon", "1000000000000"], r"--horizon must be ≤ 1000000"),
    (["fran", "--model", "{d}/huge_seq.json", "--max-mse", "1"], r"n_sequences must be an integer from 1 to 64"),
    (["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.1:0.2:1000000000", "--out", "{d}/s.csv"],
     r"N must be ≤ 100000"),
    (["fran", "--homes", "Building_1,Building_2", "--states", "50", "--max-mse", "0.5"], r"50\^2 joint snapshots"),
    (["schedule", "--plot", "{d}/p.svg", "--plot-epochs", "1000000"], r"--plot-epochs must be ≤ 100"),
    (["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.1:0.2:3", "--vary", "users=1:1000000:1000000",
      "--out", "{d}/s.csv"], r"--vary users: the number of points N must be ≤ 100000"),
    (["tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--alpha", "1e308", "--horizon", "5"], r"--alpha must be ≤ 1000"),
    (["tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--alpha", "1e-300", "--horizon", "5", "--method", "optimal"],
     r"--alpha must be ≥ 1e-06"),
    (["discounted", "--notion", "exponential", "--alpha", "0.9", "--schedule", "optimal", "--epsilon", "1e308",
      "--horizon", "5"], r"--epsilon must be ≤ 1000"),
    (["discounted", "--notion", "exponential", "--alpha", "0.9", "--schedule", "optimal", "--epsilon", "1e-300",
      "--horizon", "5"], r"--epsilon must be ≥ 1e-06"),
    (["discounted", "--notion", "dp", "--epsilon", "1", "--horizon", "5", "--clip", "1e308"], r"--clip must be ≤ 1e\+100"),
    (["fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "5e-324"], r"`max_mse` = 4.94066e-324 is too small"),
    (["fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "1e-300", "--method", "cvxpy"],
     r"method 'cvxpy': Clarabel (failed|could not solve).*use method 'enumeration'"),
    (["fran", "--model", "{d}/nested.json", "--max-mse", "0.5"], r"JSON nested 100000 levels deep; at most 32"),
    (["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.1", "--scheduler", "not a url", "--out",
      "{d}/s.csv"], r"--scheduler 'not a url' is not a Dask scheduler address"),
    (["schedule", "--matrix", "{d}/complex.npy"], r"holds complex numbers"),
    (["tpl", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.6,0.3,0.1;0.2,0.6,0.2;0.1,0.3,0.6", "--epsilon", "1", "--horizon", "3"],
     r"--pb is 2×2 but --pf is 3×3"),
    (["schedule", "--chain", "two-state:p=0.1,q=0.1", "--plot-epochs", "3"], r"--plot-epochs 3 applies to --plot only"),
    (["schedule", "--chain", "two-state:p=0.1,q=0.1", "--method", "cvxpy"], r"use 'exact' or 'heuristic'"),
    (["schedule", "--data", str(EXAMPLES / "readings.csv"), "--states", "3", "--method", "pyomo", "--max-age", "40",
      "--max-interval", "40"],
     r"^policyopt: error: the pyomo back end needs a penalty with an algebraic form .* use method 'exact' or 'heuristic'"),
]


@pytest.mark.parametrize("argv, match", BAD, ids=[" ".join(a[:3]) + f" #{i}" for i, (a, _) in enumerate(BAD)])
def test_bad_input_gives_one_line_and_exit_2(argv, match, files):
    code, out, err = run(*[a.replace("{d}", str(files)) for a in argv], cwd=files)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    assert re.search(match, err), err
    assert "Traceback" not in err and "Warning" not in err
    assert "TwoStateMSE" not in err and "pyomo'" not in err


def test_no_sub_command_prints_one_line_on_stderr_and_exits_2():
    code, out, err = run()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err  # one line, like every other error
    assert err.startswith("policyopt: error: a COMMAND is required, one of schedule, tpl, tpl-budget, ")
    assert "publish, ledger, backtest, check-model, check-data (policyopt --help lists them)" in err


def test_version():
    from importlib.metadata import version

    code, out, err = run("--version")
    assert (code, out, err) == (0, f"policyopt {version('policyopt')}\n", "")


def test_unexpected_exception_is_one_internal_error_line_exit_1(monkeypatch, capsys):
    from policyopt.cli import main as cli_main
    from policyopt.cli import tpl

    def boom(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(tpl, "_cmd_tpl", boom)
    assert cli_main.main(["tpl", "--epsilon", "1", "--horizon", "2"]) == 1
    err = capsys.readouterr().err
    assert err == "policyopt: internal error: ZeroDivisionError: float division by zero (please report)\n"


def test_numpy_warning_on_success_is_one_line_asking_for_a_report(monkeypatch, capsys):
    import warnings

    from policyopt.cli import main as cli_main
    from policyopt.cli import tpl

    def warns(args):
        warnings.warn("overflow encountered in exp", RuntimeWarning)
        return 0

    monkeypatch.setattr(tpl, "_cmd_tpl", warns)
    assert cli_main.main(["tpl", "--epsilon", "1", "--horizon", "2"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["policyopt: warning: unexpected numerical warning (overflow encountered in exp); the result may be "
                   "inaccurate (please report)"]


def test_integer_times_beyond_2_to_53_are_read_as_integers(files):
    out = run_json("schedule", "--data", files / "bigtimes.csv", "--states", "2", "--max-age", "5", "--max-interval", "5")
    assert out["model"]["users"] == 2 and out["status"] in ("optimal", "unbounded", "infeasible")


def test_inline_matrix_longer_than_255_characters():
    row = ",".join(["0.05"] * 20)
    text = ";".join([row] * 20)
    assert len(text) > 255
    out = run_json("tpl", "--pb", text, "--epsilon", "1", "--horizon", "3")
    assert len(out["tpl"]) == 3


# ------------------------------------------------------------------ section 3: documented paths
def test_tpl_budget_optimal_stdout_is_only_json_with_the_documented_fields():
    code, out, err = run("tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--alpha", "1",
                         "--horizon", "10", "--method", "optimal", "--json")
    assert code == 0, err
    assert not out.startswith("Running HiGHS") and "HiGHS" not in out.split("{", 1)[0]
    doc = json.loads(out, parse_constant=_reject_constant)  # strict: the whole of stdout is the JSON document
    for field in ("gap", "proof", "dual_bound", "lp_bound", "obbt_rounds", "eps_lo", "eps_hi", "time_local_s",
                  "time_obbt_s", "time_scip_s", "warm_start_accepted", "scip_status", "nodes",
                  "savings_vs_upper_bound", "savings_vs_quantification"):
        assert field in doc, field
    assert doc["status"] == "optimal" and doc["proof"] in ("scip", "relaxation")
    assert doc["max_tpl"] <= 1.0 and doc["alpha"] == 1.0


def test_tpl_budget_text_shows_the_range_of_varying_middle_budgets():
    code, out, err = run("tpl-budget", "--pb", "0.8,0.2;0.2,0.8", "--pf", "0.8,0.2;0.1,0.9", "--alpha", "1",
                         "--horizon", "10", "--method", "optimal")
    assert code == 0, err
    # source: the optimal allocation is 0.20387 (Algorithm 7's constant) inside, 0.322 ... 0.332 at the ends (README)
    assert re.search(r"ε_2\.\.ε_\{T−1\} from 0\.2038\d+ to 0\.29\d+ \(varying", out), out
    assert re.search(r"proof      : relative gap .* \((scip|relaxation);", out), out


@pytest.mark.parametrize("argv", [
    ["fran", "--homes", "Building_1,Building_2", "--states", "3", "--max-mse", "0.5"],
    ["fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.2"],
])
def test_fran_tight_mse_bound_reports_the_baselines_that_cannot_meet_it(argv):
    out = run_json(*argv)
    assert out["status"] in ("optimal", "unbounded", "feasible")
    for name in ("dp", "ddp", "adp", "csdp"):
        for kind in ("sound", "paper"):
            row = out["baselines"][name][kind]
            assert row["epsilon_s"] is None or row["epsilon_s"] > 0
            assert row["epsilon_s"] is not None or row.get("note")


def test_fran_at_the_age_limit_is_unbounded_like_schedule():
    out = run_json("fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.8", "--max-age", "3")
    assert out["aoi"] == [3, 3]
    assert out["status"] == "unbounded" and "--max-age 4 lowers ε_S" in out["message"]
    inner = run_json("fran", "--two-binary", "p=0.3,q=0.3,lambda=0.5", "--max-mse", "0.2", "--max-age", "3")
    assert inner["status"] == "optimal" and max(inner["aoi"]) < 3


def test_tpl_text_table_marks_the_rows_not_shown():
    code, out, err = run("tpl", "--pb", "0.8,0.2;0.2,0.8", "--epsilon", "1", "--horizon", "20")
    assert code == 0, err
    assert "   … (12 steps not shown; all T in --json)" in out.splitlines()
    short = run("tpl", "--pb", "0.8,0.2;0.2,0.8", "--epsilon", "1", "--horizon", "8")[1]
    assert "…" not in short


def test_heuristic_peak_aoi_is_an_integer():
    out = run_json("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.095", "--max-age", "60",
                   "--max-interval", "60", "--method", "heuristic")
    assert isinstance(out["peak_aoi"], int) and out["peak_aoi"] == out["A"] + out["S_bar"] - 1


def test_relaxed_answer_is_labelled_and_paired_with_a_deployable_schedule():
    argv = ["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.095", "--max-age", "60",
            "--max-interval", "60", "--method", "heuristic", "--relax"]
    out = run_json(*argv)
    assert out["relaxed"] is True and out["message"].startswith("continuous relaxation of (39)")
    assert not float(out["S_bar"]).is_integer()
    dep = out["deployable"]
    assert isinstance(dep["A"], int) and isinstance(dep["S_bar"], int)
    assert dep["A"] in (int(np.floor(out["A"])), int(np.ceil(out["A"])))
    assert dep["S_bar"] in (int(np.floor(out["S_bar"])), int(np.ceil(out["S_bar"])))
    # source: the exact integer optimum of this problem is 1.4927460 at A = 0, S̄ = 6 (tests/cli/test_schedule.py)
    assert dep["peak_risk"] == pytest.approx(1.4927460, rel=1e-6)
    assert dep["penalty"] <= 0.095
    exact = run_json("schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.095", "--max-age", "60",
                     "--max-interval", "60")
    assert dep["peak_risk"] >= exact["peak_risk"] * (1 - 1e-12)  # no integer schedule beats the exact optimum
    code, text, err = run(*argv)
    assert "NOT a deployable schedule" in text and re.search(r"deployable  : A = 0 slots, S̄ = 6 slots", text), text
