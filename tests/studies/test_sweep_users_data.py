"""`policyopt sweep --vary users=...` on data (issue 11 follow-up): the pilot is fitted once, one design per (f̄, I),
rows equal to separate `policyopt schedule --users I` runs; value range and pilot size in the rows; errors."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from policyopt.cli.main import main
from policyopt.studies.sweep_store import COLUMNS, NONDETERMINISTIC, read_sweep_csv
import _warm_cli  # noqa: E402

EXE = Path(sys.executable).with_name("policyopt")
# f̄ grid chosen around the trade-off ranges of the bundled pilot (source: `policyopt schedule --users I --json`,
# model.tradeoff_range on this branch): I = 1000: [1.564e-3, 1.557e-3] (empty, no trade-off); I = 50500:
# [2.668e-5, 3.084e-5]; I = 100000: [1.131e-5, 1.557e-5].  So every status occurs.
F_GRID = "1.5e-5,3e-5,0.0016"
USERS = [1000, 50500, 100000]  # 1000:100000:3


def _no_constants(name):
    raise ValueError(f"non-finite constant {name} in JSON")


def cli(*args, expect=0) -> subprocess.CompletedProcess:
    proc = _warm_cli.run(args, timeout=300)
    assert proc.returncode == expect, proc.stderr
    return proc


def raw_csv(path) -> list:
    """CSV rows as the exact text of each cell (no float parsing)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def strip_time(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in NONDETERMINISTIC}


@pytest.mark.slow
def test_vary_users_on_bundled_data_equals_separate_schedule_runs(tmp_path):
    out = tmp_path / "users.csv"
    summary = json.loads(cli("sweep", "--vary", "users=1000:100000:3", "--max-penalty", F_GRID, "--out", str(out),
                             "--penalty", "chain", "--json").stdout, parse_constant=_no_constants)
    assert summary["varied"] == {"users": USERS} and summary["points"] == 9 and summary["models"] == 3
    assert summary["status_counts"] == {"infeasible": 3, "optimal": 2, "unbounded": 4}
    rows = raw_csv(out)
    assert [(int(r["users"]), float(r["max_penalty"])) for r in rows] == [(i, f) for i in USERS for f in (1.5e-5, 3e-5, 0.0016)]
    for r in rows[::4]:  # one point per I (each schedule run repeats the model check on the bundled year)
        # the schedule's JSON numbers kept as the exact text printed (parse_float=str): the sweep cell must be the same string
        ref = json.loads(cli("schedule", "--users", r["users"], "--max-penalty", r["max_penalty"], "--penalty", "chain",
                             "--json").stdout,
                         parse_float=str, parse_constant=_no_constants)
        assert r["status"] == ref["status"], r
        for key in ("A", "S_bar", "epsilon_c", "peak_risk", "penalty", "peak_aoi", "min_penalty"):
            assert r[key] == ("" if ref[key] is None else str(ref[key])), (key, r["users"], r["max_penalty"])
        m = ref["model"]
        assert (r["users"], r["pilot_users"], r["states"]) == (str(m["users"]), str(m["pilot_users"]), str(m["states"]))
        assert [r["value_range_lo"], r["value_range_hi"]] == m["value_range"] == ["0.0", "48.0"]
        assert r["no_aging_peak_risk"] == ("" if ref["benchmarks"]["no_aging"]["peak_risk"] is None
                                           else str(ref["benchmarks"]["no_aging"]["peak_risk"]))
        assert r["source"] == m["source"] and r["pilot_users"] == "17"
        # the guarantee as schedule states it: the bundled homes refute the chains, so the model-free one, ε* withheld
        g, mf = ref["guarantee"], ref["model_free"]
        assert (r["guarantee_kind"], r["guarantee_epsilon"], r["guarantee_delta"]) == \
            (g["kind"], str(g["epsilon"]), str(g["delta"])) and g["kind"] == "model-free"
        assert (r["model_free_epsilon"], r["model_free_epsilon_pure"], r["model_free_releases"]) == \
            (str(mf["epsilon"]), str(mf["epsilon_pure"]), str(mf["releases"]))
        hd = ref.get("horizon_design")
        assert r["horizon_risk"] == ("" if hd is None else str(hd["horizon_risk"]))
    # the statuses follow the trade-off ranges in the header comment
    status = {(int(r["users"]), float(r["max_penalty"])): r["status"] for r in rows}
    assert status[(100000, 1.5e-5)] == status[(50500, 3e-5)] == "optimal"
    assert status[(50500, 1.5e-5)] == status[(1000, 3e-5)] == "infeasible"
    # resume: a rerun computes nothing and the JSON lines carry users / pilot_users in their inputs
    again = json.loads(cli("sweep", "--vary", "users=1000:100000:3", "--max-penalty", F_GRID, "--out", str(out),
                           "--penalty", "chain", "--json").stdout, parse_constant=_no_constants)
    # the MSE model is part of a point's identity: the readings penalty does not resume the chain penalty's rows
    mixed = cli("sweep", "--vary", "users=1000:100000:3", "--max-penalty", F_GRID, "--out", str(out), expect=2)
    assert "not on this sweep's grid" in mixed.stderr and "MSE from the readings" not in mixed.stderr
    assert (again["computed"], again["resumed"]) == (0, 9)
    recs = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert [(r["inputs"]["users"], r["inputs"]["pilot_users"]) for r in recs] == [(i, 17) for i in USERS for _ in range(3)]
    assert all(r["report"]["model"]["users"] == r["inputs"]["users"] for r in recs)


def test_pilot_is_fitted_once_per_states(tmp_path, capsys, monkeypatch):
    """users × states on data: one fit per K, shared by every I (the chains of a K are the same object)."""
    import policyopt.models.estimation as estimation

    calls = []
    real = estimation.fit_population

    def counting(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("states"))
        return real(*args, **kwargs)

    monkeypatch.setattr(estimation, "fit_population", counting)
    out = tmp_path / "us.csv"
    assert main(["sweep", "--vary", "states=3,4", "--vary", "users=20000,100000", "--max-penalty", "1.5e-5,3e-5",
                 "--max-age", "24", "--max-interval", "24", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert calls == [3, 4]
    assert summary["models"] == 4 and summary["points"] == 8
    rows = read_sweep_csv(out)
    assert [(r["states"], r["users"]) for r in rows[::2]] == [(3, 20000), (3, 100000), (4, 20000), (4, 100000)]
    assert all(r["pilot_users"] == 17 for r in rows)
    # same K, other I: the same Δ(t) (the fit is shared), a different penalty
    by = {(r["states"], r["users"], r["max_penalty"]): r for r in rows}
    for k in (3, 4):
        assert by[(k, 20000, 1.5e-5)]["c"] == by[(k, 100000, 1.5e-5)]["c"]
        assert by[(k, 20000, 1.5e-5)]["rho"] == by[(k, 100000, 1.5e-5)]["rho"]


@pytest.mark.slow
def test_value_range_is_part_of_a_points_identity(tmp_path):
    """A rerun with another --value-range recomputes (it changes the sensitivity), it never resumes the old rows."""
    out = tmp_path / "vr.csv"
    common = ("sweep", "--vary", "users=50000,100000", "--max-penalty", "1.5e-5", "--max-age", "24", "--max-interval", "24",
              "--penalty", "chain", "--out", str(out), "--json")
    first = json.loads(cli(*common).stdout)
    assert (first["computed"], first["resumed"]) == (2, 0)
    proc = cli(*common, "--value-range", "0:10", expect=2)
    assert proc.stderr.count("\n") == 1
    assert re.search(r"^policyopt: error: --out '.*vr.csv' holds 2 point\(s\) that are not on this sweep's grid \(first: "
                     r"max_penalty=1.5e-05, users=50000, pilot_users=17, states=3, smoothing=0.01, value_range_lo=0.0, "
                     r"value_range_hi=48.0, ", proc.stderr), proc.stderr
    other = tmp_path / "vr10.csv"
    second = json.loads(cli(*common[:-3], "--out", str(other), "--value-range", "0:10", "--json").stdout)
    assert second["computed"] == 2
    rows = read_sweep_csv(other)
    assert [(r["value_range_lo"], r["value_range_hi"]) for r in rows] == [(0.0, 10.0)] * 2
    # a 4.8× narrower range at the same I is a 4.8× smaller sensitivity: at I = 50000 f̄ becomes reachable, at
    # I = 100000 the optimum is less risky (the chains are refuted on the bundled homes: by the model-free guarantee
    # stated, and by the chains' ε* the JSON lines would print with --accept-refuted: both need a smaller ε_C)
    old = read_sweep_csv(out)
    assert [r["status"] for r in old] == ["infeasible", "optimal"]
    assert rows[0]["status"] in ("optimal", "unbounded") and rows[1]["epsilon_c"] < old[1]["epsilon_c"]
    assert rows[1]["guarantee_epsilon"] < old[1]["guarantee_epsilon"] and rows[1]["guarantee_kind"] == "model-free"


def test_dask_workers_carry_the_deployment_size(tmp_path, capsys):
    """--workers 2 on data with --vary users: the same rows as the serial sweep (timing aside)."""
    args = ["--vary", "users=20000,50000,100000", "--max-penalty", "1.5e-5,3e-5", "--max-age", "24", "--max-interval", "24"]
    assert main(["sweep", *args, "--out", str(tmp_path / "serial.csv")]) == 0
    assert main(["sweep", *args, "--out", str(tmp_path / "dask.csv"), "--workers", "2"]) == 0
    capsys.readouterr()
    serial, dask = read_sweep_csv(tmp_path / "serial.csv"), read_sweep_csv(tmp_path / "dask.csv")
    assert [strip_time(r) for r in dask] == [strip_time(r) for r in serial]
    assert [r["users"] for r in serial] == [20000, 20000, 50000, 50000, 100000, 100000]


def test_csv_header_has_the_deployment_columns(tmp_path, capsys):
    out = tmp_path / "h.csv"
    assert main(["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.2", "--max-age", "5", "--max-interval", "5",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    with open(out, newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == COLUMNS
    assert header[:11] == ["point", "max_penalty", "p", "q", "users", "pilot_users", "states", "smoothing",
                           "value_range_lo", "value_range_hi", "source"]
    (row,) = read_sweep_csv(out)
    # a --chain model: one chain standing for I = 20 users (the default), states valued -1/+1 (eq. (43))
    assert (row["users"], row["pilot_users"], row["value_range_lo"], row["value_range_hi"]) == (20, 20, -1.0, 1.0)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--users", "5000", "--vary", "users=1000,2000"], r"give either --users or --vary users=\.\.\., not both"),
        (["--vary", "users=0,5000"], r"--vary users values must be ≥ 1, got '0,5000'"),
        (["--vary", "users=1000:2000:4"], r"--vary users values must be integers, got '1000:2000:4' \(values "),
        (["--vary", "users=1000,1000"], r"--vary users values must be strictly increasing, got '1000,1000'"),
        (["--vary", "users=1000", "--vary", "users=2000"], r"--vary users given twice"),
        (["--vary", "users=1000,x"], r"--vary users must be START:STOP:N or V1,V2,\.\.\. of numbers, got '1000,x'"),
    ],
)
def test_vary_users_on_data_errors_are_one_line(tmp_path, args, match):
    proc = cli("sweep", "--max-penalty", "1.5e-5", *args, "--out", str(tmp_path / "e.csv"), expect=2)
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and proc.stderr.startswith("policyopt: error: ")
    assert re.search(match, proc.stderr), proc.stderr
    assert not (tmp_path / "e.csv").exists()
