"""`policyopt backtest` and the readings-penalty options of `policyopt schedule` (issue 24) through the installed
entry point: strict JSON, text, the plot, and one-line errors with exit 2."""

from __future__ import annotations

import re

import numpy as np
import pytest

from policyopt.formatting import fmt_count, text_problems
from tests._cli import run_cli, strict_json
import _warm_cli  # noqa: E402


def run(*args, expect=0):
    proc = _warm_cli.run(args, timeout=300)
    assert proc.returncode == expect, proc.stderr
    return proc


@pytest.fixture(scope="module")
def readings_csv(tmp_path_factory):
    """20 days of hourly readings of 6 homes that share a daily cycle and a common slow factor."""
    rng = np.random.default_rng(11)
    T, n = 24 * 20, 6
    common = np.cumsum(rng.normal(0, 0.05, T))
    rows = ["user,time,value"]
    for u in range(n):
        x = 1.0 + 0.5 * np.sin(2 * np.pi * np.arange(T) / 24) + common + rng.normal(0, 0.3, T)
        rows += [f"h{u},{t},{v:.4f}" for t, v in enumerate(np.clip(x, 0, None))]
    path = tmp_path_factory.mktemp("bt") / "readings.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_backtest_json_designing_on_the_first_part(readings_csv):
    out = strict_json(run_cli("backtest", "--data", readings_csv, "--value-range", "0:5", "--users", "1000",
                              "--max-age", "24", "--max-interval", "24", "--phase-period", "24", "--json").stdout)
    for key in ("realized_mse", "realized_mse_lower", "realized_mse_upper", "max_penalty", "holds", "train_fraction", "users"):
        assert key in out
    assert out["realized_mse_lower"] <= out["realized_mse"] <= out["realized_mse_upper"]
    assert out["holds"] == (out["realized_mse"] <= out["max_penalty"]) and out["users"] == 1000
    assert out["train_fraction"] == 0.5 and out["split_slot"] == 240 and out["schedule"]["designed_here"] is True
    assert out["sensitivity"] == pytest.approx(5 / 1000) and "series" not in out


@pytest.mark.slow
def test_backtest_of_a_schedule_file_and_plot(readings_csv, tmp_path):
    sched = tmp_path / "s.json"
    sched.write_text(run_cli("schedule", "--data", readings_csv, "--value-range", "0:5", "--users", "1000", "--states", "3",
                             "--max-age", "24", "--max-interval", "24", "--max-rmse", "0.4", "--json").stdout)
    s = strict_json(sched.read_text())
    assert s["max_penalty"] == pytest.approx(0.16) and s["max_rmse"] == pytest.approx(0.4)
    assert s["max_penalty_source"].startswith("--max-rmse 0.4")
    png = tmp_path / "bt.png"
    text = run_cli("backtest", "--schedule", sched, "--data", readings_csv, "--train-fraction", "0.6", "--plot", png).stdout
    assert f"A = {fmt_count(s['A'], 'slot')}, S̄ = {fmt_count(s['S_bar'], 'slot')}" in text and "from --schedule" in text
    assert text_problems(text) == [], text
    assert "realised MSE:" in text and "verdict     :" in text and png.stat().st_size > 10_000
    out = strict_json(run_cli("backtest", "--schedule", sched, "--data", readings_csv, "--train-fraction", "0.6",
                              "--json").stdout)
    assert out["max_penalty"] == s["max_penalty"] and out["users"] == 1000 and out["promised_mse"] == s["penalty"]


def test_schedule_reports_the_readings_against_the_chain(readings_csv):
    out = strict_json(run_cli("schedule", "--data", readings_csv, "--value-range", "0:5", "--users", "1000", "--states", "3",
                              "--max-age", "24", "--max-interval", "24", "--max-penalty", "0.3", "--json").stdout)
    m = out["model"]
    assert m["penalty"] == "readings-mse" and m["penalty_unit"] == ""
    rp = m["readings_penalty"]
    assert rp["phase_period"] == 1 and rp["readings_users"] == 6 and rp["bootstrap"]["periods"] == 480
    pc = out["penalty_comparison"]
    if out["peak_aoi"] > 0:
        assert pc["readings_staleness"] > pc["chain_staleness"] and pc["ratio"] > 1
    chain = strict_json(run_cli("schedule", "--data", readings_csv, "--value-range", "0:5", "--users", "1000", "--states",
                                "3", "--max-age", "24", "--max-interval", "24", "--max-penalty", "0.3", "--penalty", "chain",
                                "--json").stdout)
    assert chain["model"]["penalty"] == "mse" and "penalty_comparison" not in chain


@pytest.mark.parametrize(
    "args, match",
    [
        (["backtest", "--train-fraction", "1.5"], r"--train-fraction must be a probability strictly between 0 and 1"),
        (["backtest", "--schedule", "/nonexistent.json"], r"--schedule file not found: '/nonexistent.json'"),
        (["backtest", "--schedule", "{bad}"], r"is not a JSON file of `policyopt schedule --json`"),
        (["backtest", "--schedule", "{empty}"], r"--schedule has no integer schedule to replay"),
        (["backtest", "--schedule", "{empty}", "--max-penalty", "0.1"], r"--max-penalty applies to a design made here"),
        (["backtest", "--max-penalty", "0.1", "--max-rmse", "0.2"], r"argument --max-rmse: not allowed with argument --max-penalty"),
        (["schedule", "--max-penalty", "0.1", "--max-rmse", "0.2"], r"argument --max-rmse: not allowed with argument --max-penalty"),
        (["schedule", "--max-rmse", "-1"], r"--max-rmse must be a positive finite number, got '-1'"),
        (["schedule", "--chain", "two-state:p=0.1,q=0.1", "--penalty", "readings"], r"--penalty readings needs readings"),
        (["schedule", "--chain", "two-state:p=0.1,q=0.1", "--phase-period", "24"], r"--phase-period applies to the readings penalty"),
        (["schedule", "--penalty", "chain", "--penalty-level", "0.9"], r"--penalty-level applies to --penalty readings\|readings-upper\|readings-auto only"),
        (["schedule", "--penalty", "nope"], r"argument --penalty: invalid choice: 'nope'"),
    ],
)
def test_bad_input_one_line_exit_2(args, match, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    empty = tmp_path / "empty.json"
    empty.write_text('{"status": "infeasible", "A": null}')
    args = [a.format(bad=bad, empty=empty) for a in args]
    proc = run(*args, expect=2)
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert re.search(match, proc.stderr), proc.stderr


@pytest.mark.slow
def test_sweep_with_the_readings_penalty_on_dask_matches_serial(tmp_path):
    """The readings penalty (bundled data) shipped to 2 Dask workers gives the serial sweep's rows and JSON lines."""
    import json

    from policyopt.studies.sweep_store import NONDETERMINISTIC, read_sweep_csv

    args = ["sweep", "--vary", "users=1000,100000", "--max-penalty", "0.05,0.2", "--max-age", "24", "--max-interval", "24"]
    serial = strict_json(run_cli(*args, "--out", tmp_path / "serial.csv", "--json").stdout)
    dask = strict_json(run_cli(*args, "--out", tmp_path / "dask.csv", "--workers", "2", "--json").stdout)
    assert serial["computed"] == dask["computed"] == 4 and dask["workers"] == 2

    def rows(name):
        return [{k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in read_sweep_csv(tmp_path / name)]

    def lines(name):
        out = []
        for line in (tmp_path / name).read_text().splitlines():
            rec = json.loads(line)
            rec["report"].pop("wall_time_s", None)
            rec.get("row", {}).pop("wall_time_s", None)
            out.append(rec)
        return out

    assert rows("dask.csv") == rows("serial.csv")
    assert all("MSE from the readings" in r["source"] for r in rows("serial.csv"))
    assert lines("dask.jsonl") == lines("serial.jsonl")


@pytest.mark.slow
def test_backtest_compares_the_designs_max_tv_with_the_held_out_readings():
    """On the bundled year (train on the first half): Δ at the design's lags A and S̄, the chains fitted on the first half
    against a direct count on the second half; the aged design's Δ(A) lies far below the held-out band."""
    import policyopt as po
    from policyopt.studies.check_model import data_states

    out = strict_json(run("backtest", "--max-penalty", "0.2", "--json").stdout)
    A, S = out["schedule"]["A"], out["schedule"]["S_bar"]
    c = out["max_tv_comparison"]
    assert c["lags"] == sorted({A, S} - {0}) and A > 24
    df = po.load_citylearn()
    split = out["split_slot"]
    fitted = po.fit_population(df[df.time < split], 3, value_range=(0, 48))
    assert c["design_max_tv"] == pytest.approx([float(fitted.population.max_tv(t)) for t in c["lags"]], rel=1e-12)
    states, _ = data_states(df[df.time >= split], fitted)
    for t, got in zip(c["lags"], c["held_out_max_tv"]):  # an independent lagged-pair count (plain loops)
        best = 0.0
        for x in states:
            counts = np.zeros((3, 3))
            for s in range(t, x.size):
                if x[s] >= 0 and x[s - t] >= 0:
                    counts[x[s], x[s - t]] += 1
            rows = counts.sum(1)
            for a in range(3):
                for b in range(a + 1, 3):
                    if rows[a] >= 100 and rows[b] >= 100:
                        best = max(best, 0.5 * np.abs(counts[a] / rows[a] - counts[b] / rows[b]).sum())
        assert got == pytest.approx(best, abs=1e-12)
    assert all(lo <= e <= hi for lo, e, hi in zip(c["held_out_lower"], c["held_out_max_tv"], c["held_out_upper"]))
    i = c["lags"].index(A)
    assert c["exceeds"][i] and c["held_out_lower"][i] > 0.5 > 1e-2 > c["design_max_tv"][i] and c["holds"] is False
    # decided by the Monte Carlo test against the training chains: Δ̂(A) above all 39 simulated data sets
    assert c["rule"] == "monte-carlo" and c["draws"] == 39 and c["p_value"] == pytest.approx(1 / 40)
    assert c["held_out_max_tv"][i] > c["critical"][i] > c["design_max_tv"][i]
    text = run("backtest", "--max-penalty", "0.2").stdout
    assert "its ε* is no bound for them" in next(x for x in text.splitlines() if x.startswith("Δ(t)"))
