"""``sweep --max-tv empirical[:LEVEL]``: every grid point designed against Δ(t) estimated once from the data, exactly as
``schedule --max-tv empirical`` designs it; the source in every row and in the resume metadata; printed risks are
upper bounds on Theorem 3 (Zhang et al. 2024, eqs. (25), (30)) recomputed in 50-digit arithmetic with the table used.

Data: four bundled CityLearn homes, their first 3000 hours, written to CSV (3 states, box 6 × 6: a few seconds a run).
On them Δ̃ falls from 0.87 at lag 1 to 0.63 at lag 5, so the grid below has both kinds of point: for f̄ ≤ 1e-7 no
ε_C meets (31) and f̄ at once (a horizon design), for f̄ ≥ 1e-6 a finite ε* exists.  The homes are not a first-order
chain (the held-out Markov test refutes Theorem 3's premise), so the CLI sweep states the model-free guarantee first,
and the band's ε* and Theorem 3 horizon designs appear only with ``--accept-refuted`` (used here to check their
arithmetic, as ``schedule --accept-refuted`` gives them); without it the horizon designs are model-free (the guide's
numbers, last tests).
"""

from __future__ import annotations

import csv
import json
import math

import mpmath
import pytest

import policyopt as po
from policyopt.formatting import fmt_upper
from policyopt.studies.sweep_store import NONDETERMINISTIC, read_sweep_csv

from tests._cli import refused, run_any, run_cli, strict_json

mpmath.mp.dps = 50
F_GRID = "1e-8,1e-7,1e-6,1e-4"
HOMES, SLOTS = 4, 3000
ACCEPT = ("--accept-refuted", "check the arithmetic of eq. (30)")


def _model_args(data):
    return ["--data", data, "--states", 3, "--value-range", "0:10", "--users", 100000, "--max-age", 6,
            "--max-interval", 6, "--penalty", "chain"]


def _table_delta(report):
    """Δ̃(t) of the table `report`'s design used (``empirical_max_tv.max_tv_used``), 50 digits; 1 beyond its end."""
    table = [mpmath.mpf(v) for v in report["empirical_max_tv"]["max_tv_used"]]
    return lambda t: table[t] if t < len(table) else mpmath.mpf(1)


def _leak(d, e):  # Theorem 1 (eq. (14)): ln(1 + Δ(e^ε − 1))
    return mpmath.log(1 + d * mpmath.expm1(e))


def _assert_horizon_risk_bounds_theorem_3(hd, delta):
    """The horizon design `hd` spans the run and its printed risk is Theorem 3's recursion (eq. (25)) over its N
    releases, peak at the last publication, with Δ = `delta` in 50 digits, rounded up (by less than 1e-9 relative)."""
    ec, prior = mpmath.mpf(hd["epsilon_c"]), mpmath.mpf(0)
    for _ in range(hd["releases"] - 1):
        prior = _leak(delta(hd["S_bar"]), ec + prior)
    exact = _leak(delta(hd["A"]), ec + prior)
    assert hd["releases"] == (SLOTS - hd["A"]) // hd["S_bar"] + 1
    assert hd["horizon_risk"] >= exact and hd["horizon_risk"] - exact < 1e-9 * exact


def _raw(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep_emp")
    df = po.load_citylearn()
    homes = sorted(df["user"].unique(), key=lambda u: int(u.split("_")[1]))[:HOMES]
    data = tmp / "homes.csv"
    df[df["user"].isin(homes) & (df["time"] < SLOTS)].to_csv(data, index=False)
    out = tmp / "emp.csv"
    summary = strict_json(run_cli("sweep", *_model_args(data), "--max-tv", "empirical", *ACCEPT, "--max-penalty", F_GRID,
                                  "--out", out, "--json").stdout)
    return data, out, summary


def test_every_row_is_the_schedule_commands_design(serial):
    data, out, summary = serial
    assert summary["max_tv_source"] == "empirical:0.95" and summary["horizon"] == SLOTS
    assert summary["risk_kind_counts"] == {"horizon": 2, "peak": 2}
    assert summary["model_check"][0]["refuted"] is True  # the first-order Markov premise of Theorem 3 is refuted
    assert summary["guarantee_kind_counts"] == {"model-free": 4}
    rows = _raw(out)
    records = [json.loads(line, parse_float=str) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert [float(r["max_penalty"]) for r in rows] == [1e-8, 1e-7, 1e-6, 1e-4]
    for row, rec in list(zip(rows, records))[1::2]:  # a horizon point and a peak point (each run repeats the check)
        # the schedule's JSON numbers as the exact text printed (parse_float=str): each sweep cell is that string
        ref = json.loads(run_cli("schedule", *_model_args(data), "--max-tv", "empirical", *ACCEPT, "--max-penalty",
                                 row["max_penalty"], "--json").stdout, parse_float=str)
        assert row["max_tv_source"] == ref["deployment"]["model"]["max_tv_source"] == "empirical:0.95"
        assert row["horizon"] == str(SLOTS) and rec["inputs"]["horizon"] == SLOTS
        assert row["status"] == ref["status"]
        for key in ("A", "S_bar", "epsilon_c", "peak_risk", "penalty", "min_penalty"):
            assert row[key] == ("" if ref[key] is None else str(ref[key])), key
        assert (row["guarantee_kind"], row["guarantee_epsilon"], row["model_free_epsilon"]) == \
            (ref["guarantee"]["kind"], str(ref["guarantee"]["epsilon"]), str(ref["model_free"]["epsilon"]))
        hd = ref["horizon_design"]
        if row["risk_kind"] == "peak":  # the band's ε*, printed on request: the premise is refuted
            assert hd is None and row["horizon_risk"] == "" and row["peak_risk"] != ""
            assert ref["accepted_refuted"]["reason"] == ACCEPT[1]
        else:  # no finite ε*: the band's Theorem 3 horizon design, kept on request (--accept-refuted) as schedule's
            assert row["risk_kind"] == "horizon" and hd["status"] == row["horizon_status"] == "optimal"
            assert hd["accounting"] == row["horizon_accounting"] == "theorem-3"
            cells = [row[c] for c in ("horizon_A", "horizon_S_bar", "horizon_epsilon_c", "horizon_risk", "horizon_releases")]
            assert cells == [str(hd[k]) for k in ("A", "S_bar", "epsilon_c", "horizon_risk", "releases")]
        # the JSON line carries the schedule's report: the same Δ̃ table, band, horizon design and guarantee
        assert rec["report"]["empirical_max_tv"] == ref["empirical_max_tv"]
        assert rec["report"]["horizon_design"] == hd
        assert rec["report"]["model"]["max_tv_source"] == ref["model"]["max_tv_source"]
        for key in ("guarantee", "model_free", "accepted_refuted"):
            assert rec["report"][key] == ref[key], key
    # both kinds occur, as the module docstring says
    assert [r["risk_kind"] for r in rows] == ["horizon"] * 2 + ["peak"] * 2
    # the model check of the schedule runs is the sweep's (same fit, same lags, same verdict)
    mc = json.loads(json.dumps(summary["model_check"][0]), parse_float=str)
    assert mc["markov_test"] == ref["model_check"]["markov_test"] and mc["passed"] == ref["model_check"]["passed"]


def test_printed_risks_are_upper_bounds_of_theorem_3(serial):
    """ε* and the horizon designs' risk, printed on request under the refuted premise, are eq. (30) and Theorem 3's
    recursion under the table used (50 digits), rounded up; the model-free guarantee is stated first all the same."""
    _, out, summary = serial
    records = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    delta = _table_delta(records[0]["report"])
    horizon_risks = []
    for rec in records:
        rep = rec["report"]
        assert rep["guarantee"]["kind"] == "model-free"
        if rep["peak_risk"] is not None:  # eq. (30) with Δ̃(A), Δ̃(S̄)
            ec = mpmath.mpf(rep["epsilon_c"])
            exact = mpmath.log(1 + delta(rep["A"]) * mpmath.expm1(ec) / (1 - delta(rep["S_bar"]) * mpmath.exp(ec)))
            assert rep["peak_risk"] >= exact and rep["peak_risk"] - exact < 1e-9 * exact
            continue
        hd = rep["horizon_design"]
        _assert_horizon_risk_bounds_theorem_3(hd, delta)
        # the model-free guarantee of the horizon design's releases: ⌈H/S̄⌉ of ε_C, pure ε by basic composition
        mf = rep["model_free"]
        assert mf["releases"] == math.ceil(SLOTS / hd["S_bar"]) and mf["epsilon"] <= mf["epsilon_pure"]
        assert mf["epsilon_pure"] == pytest.approx(mf["releases"] * hd["epsilon_c"], rel=1e-12)
        horizon_risks.append(hd["horizon_risk"])
    assert (summary["horizon_risk_min"], summary["horizon_risk_max"]) == (min(horizon_risks), max(horizon_risks))
    # the text (a resumed run: nothing recomputed) prints them rounded up, the model-free guarantee first
    data = serial[0]
    text = run_cli("sweep", *_model_args(data), "--max-tv", "empirical", *ACCEPT, "--max-penalty", F_GRID,
                   "--out", out).stdout
    lines = {ln.split(":", 1)[0].strip(): ln for ln in text.splitlines()}
    assert text.splitlines()[1].startswith("guarantee    : model-free at every point: (ε, δ)-DP for each user's whole "
                                           f"series over {SLOTS} slots with ε from ")
    assert "0 computed, 4 resumed" in lines["points"]
    risks = [r["report"]["peak_risk"] for r in records if r["report"]["peak_risk"] is not None]
    premise = "chain (the first-order Markov premise of Theorem 3; Δ(t) from the data's band)"
    assert lines["peak risk ε*"] == (
        f"peak risk ε* : from {fmt_upper(min(risks))} to {fmt_upper(max(risks))} nats at 2 points under the REFUTED "
        f"model {premise}, printed on request (--accept-refuted: {ACCEPT[1]}); not a bound for these data")
    assert lines["Δ(t)"].startswith("Δ(t)         : empirical:0.95: the upper edge of the data's simultaneous band")
    assert lines["horizon"] == (
        f"horizon      : 2 points without a finite ε* (condition (31) fails): designed for the largest risk over {SLOTS} "
        f"slots (Theorem 3), from {fmt_upper(min(horizon_risks))} to {fmt_upper(max(horizon_risks))} nats (risk_kind "
        f"horizon, columns horizon_*) — under the REFUTED model {premise}, printed on request (--accept-refuted); not a "
        "bound for these data")
    assert mpmath.mpf(lines["horizon"].split(" to ")[1].split(" nats")[0]) >= max(horizon_risks)
    assert lines["model check"].startswith("model check  : K = 3: fitted on the first 50% of each series")
    assert lines["model check"].endswith("; these designs use the data's Δ̃(t) (empirical:0.95), not the chains: only "
                                         "the first-order Markov premise of Theorem 3 is taken from this check")


def test_dask_workers_write_the_serial_rows(serial, tmp_path):
    data, out, _ = serial
    dask = tmp_path / "dask.csv"
    run_cli("sweep", *_model_args(data), "--max-tv", "empirical", *ACCEPT, "--max-penalty", F_GRID, "--out", dask,
            "--workers", 2, "--json")
    strip = [{k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in _raw(out)]
    assert [{k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in _raw(dask)] == strip
    serial_recs = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    dask_recs = [json.loads(line) for line in dask.with_suffix(".jsonl").read_text().splitlines()]
    for a, b in zip(serial_recs, dask_recs):
        assert a["report"]["horizon_design"] == b["report"]["horizon_design"]
        assert a["report"]["empirical_max_tv"] == b["report"]["empirical_max_tv"]


@pytest.mark.parametrize(
    "source, said",
    [
        ((), "this run uses the chains' Δ(t)"),
        (("--max-tv", "empirical:0.9"), "this run uses --max-tv empirical:0.9 (horizon 3000 slots)"),
        (("--max-tv", "empirical", "--horizon", 2000), "this run uses --max-tv empirical:0.95 (horizon 2000 slots)"),
    ],
)
def test_resume_with_another_source_is_refused(serial, source, said):
    data, out, _ = serial
    before = out.read_bytes()
    res = run_any("sweep", *_model_args(data), *source, "--max-penalty", F_GRID, "--out", out)
    refused(res, f"cannot resume --out {out}: its rows were designed with --max-tv empirical:0.95 (horizon 3000 slots)",
            said)
    assert out.read_bytes() == before
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["max_tv"] == [{"source": "empirical:0.95", "level": 0.95, "horizon": SLOTS}]


@pytest.mark.parametrize(
    "args, message",
    [
        (("--chain", "two-state:p=0.1,q=0.2", "--max-tv", "empirical"), "estimates Δ(t) from readings: give --data"),
        (("--max-tv", "empirical", "--method", "heuristic"), "designs with the exact solver"),
        (("--max-tv", "empirical:2"), "needs a LEVEL strictly between 0 and 1, got 'empirical:2'"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    res = run_any("sweep", *args, "--max-age", 4, "--max-interval", 4, "--max-penalty", "0.1", "--out",
                  tmp_path / "x.csv")
    refused(res, message)
    assert not (tmp_path / "x.csv").exists()


def test_python_run_sweep_with_an_empirical_design(serial, tmp_path):
    """The Python route: fit, estimate once (po.empirical_design), SweepModel(empirical=...), run_sweep.

    With the first-order premise taken as given (``verdict`` ``assumed``) the points without a finite ε* get Theorem
    3's horizon design, whose risk is recomputed here in 50-digit arithmetic; without a verdict the model counts as
    unchecked and only the model-free guarantee is stated."""
    import pandas as pd

    from policyopt.studies.guarantee import GuaranteeSettings
    from policyopt.studies.sweep import ModelVerdict, SweepModel, SweepSettings, run_sweep

    data, out, _ = serial
    df = pd.read_csv(data)
    fit = po.fit_population(df, 3, value_range=(0.0, 10.0))
    design = po.empirical_design(fit, df, 6, 6, 0.95)
    assert isinstance(design, po.EmpiricalDesign) and design.horizon == SLOTS and design.spec == "empirical:0.95"
    pen = po.MSEPenalty(fit.population, users=100000, value_range=(0.0, 10.0))
    inputs = {"users": 100000, "max_tv_source": design.spec, "horizon": design.horizon}
    given = ModelVerdict("the first-order premise (taken as given in this test)", "assumed", "no check", "chain")
    model = SweepModel(fit.population, pen, {"source": "python"}, inputs, empirical=design,
                       guarantee=GuaranteeSettings.resolve(users=100000, horizon=SLOTS), verdict=given)
    fs = [float(f) for f in F_GRID.split(",")]
    res = run_sweep([model], fs, SweepSettings(6, 6, 24), tmp_path / "py.csv")
    cli_rows = read_sweep_csv(out)
    for got, ref in zip(res.rows, cli_rows):
        # the same bits as the CLI: the same estimate, table, penalty and solver (the CLI's ε* printed on request)
        for key in ("status", "risk_kind", "A", "S_bar", "epsilon_c", "peak_risk", "model_free_epsilon", "horizon_A",
                    "horizon_S_bar", "horizon_epsilon_c", "horizon_risk", "horizon_releases", "horizon_accounting"):
            assert got[key] == ref[key], key
        assert got["guarantee_kind"] == "model-based" and got["model_verdict"] == "assumed"
    delta = _table_delta(res.records[0]["report"])
    for row, rec in zip(res.rows, res.records):
        if row["risk_kind"] != "horizon":
            continue
        hd = rec["report"]["horizon_design"]
        assert hd.get("accounting", "theorem-3") == row["horizon_accounting"] == "theorem-3"
        _assert_horizon_risk_bounds_theorem_3(hd, delta)
        assert row["guarantee_epsilon"] == hd["horizon_risk"]
    # without a verdict: unchecked, so ε* is not stated and the guarantee is the model-free one
    plain = SweepModel(fit.population, pen, {"source": "python"}, inputs, empirical=design)
    res = run_sweep([plain], fs[2:], SweepSettings(6, 6, 24), tmp_path / "plain.csv")
    assert [(r["peak_risk"], r["guarantee_kind"], r["model_verdict"]) for r in res.rows] == \
        [(None, "model-free", "unchecked")] * 2
    with pytest.raises(po.InvalidInputError, match="uses the exact solver"):
        run_sweep([model], fs, SweepSettings(6, 6, 24, method="heuristic"), tmp_path / "bad.csv")


@pytest.mark.slow
def test_the_guides_numbers_on_the_bundled_homes(tmp_path):
    """docs/guide/sweep.md: the chain penalty's sweep on the bundled data (no model option), box 6 × 6."""
    out = tmp_path / "g.csv"
    summary = strict_json(run_cli("sweep", "--max-tv", "empirical", "--penalty", "chain", "--max-age", 6,
                                  "--max-interval", 6, "--max-penalty", "1.4e-5,1.5e-5", "--out", out, "--json").stdout)
    assert summary["max_tv_source"] == "empirical:0.95" and summary["horizon"] == 8760
    assert summary["empirical_max_lag"] == 876 and summary["risk_kind_counts"] == {"horizon": 1, "peak": 1}
    assert summary["model_check"][0]["refuted"] is True and summary["guarantee_kind_counts"] == {"model-free": 2}
    hz, peak = read_sweep_csv(out)
    # the premise is refuted: a model-free horizon design (⌈8760 / 2⌉ releases) and no stated ε*
    assert (hz["risk_kind"], hz["status"], hz["horizon_accounting"], hz["horizon_A"], hz["horizon_S_bar"],
            hz["horizon_releases"]) == ("horizon", "infeasible", "model-free", 0, 2, 4380)
    assert f"{hz['horizon_epsilon_c']:.3g}" == "0.235" and fmt_upper(hz["horizon_risk"]) == "1027.61"
    assert fmt_upper(hz["guarantee_epsilon"], 4) == "181.4" and hz["guarantee_delta"] == 1e-6
    assert (peak["risk_kind"], peak["status"], peak["A"], peak["S_bar"], peak["peak_risk"]) == ("peak", "optimal", 0, 2, None)
    assert fmt_upper(peak["guarantee_epsilon"], 4) == "166.2"
    # the first command of the guide (the readings' MSE): A = 0, S̄ = 1 at every f̄, Δ̃ over lags 1..11 only
    first = tmp_path / "f.csv"
    strict_json(run_cli("sweep", "--max-tv", "empirical", "--max-age", 6, "--max-interval", 6, "--max-penalty",
                        "0.005,0.018,0.05", "--out", first, "--json").stdout)
    rows = read_sweep_csv(first)
    assert [(r["A"], r["S_bar"], r["risk_kind"], r["peak_risk"]) for r in rows] == [(0, 1, "peak", None)] * 3
    assert [fmt_upper(r["model_free_epsilon"], 3) for r in rows] == ["4.32", "2.13", "1.22"]


def test_delta_is_estimated_once_per_fit(serial, tmp_path, capsys, monkeypatch):
    """--vary states=3,4 × users: two fits, so two estimates of Δ(t), each shared by both deployment sizes."""
    import policyopt.studies.empirical_design as ed
    from policyopt.cli.main import main

    calls = []
    real = ed.estimate_up_to

    def counting(fitted, *args, **kwargs):
        calls.append(fitted.quantizer.n_states)
        return real(fitted, *args, **kwargs)

    monkeypatch.setattr(ed, "estimate_up_to", counting)
    data = serial[0]
    assert main(["sweep", "--data", str(data), "--value-range", "0:10", "--vary", "states=3,4", "--vary",
                 "users=1000,100000", "--max-tv", "empirical:0.9", "--horizon", "1000", "--max-age", "6",
                 "--max-interval", "6", "--penalty", "chain", "--max-penalty", "1e-7,1e-4", "--out",
                 str(tmp_path / "v.csv"), "--json"]) == 0
    summary = strict_json(capsys.readouterr().out)
    assert calls == [3, 4]
    assert (summary["points"], summary["models"], summary["horizon"]) == (8, 4, 1000)
    assert [c["states"] for c in summary["model_check"]] == [3, 4]
    rows = read_sweep_csv(tmp_path / "v.csv")
    assert {(r["max_tv_source"], r["horizon"]) for r in rows} == {("empirical:0.9", 1000)}
    # a larger deployment never has a larger risk of the same kind at the same f̄ and K
    for k in (3, 4):
        for f in (1e-7, 1e-4):
            small, large = (next(r for r in rows if (r["states"], r["users"], r["max_penalty"]) == (k, i, f))
                            for i in (1000, 100000))
            if small["risk_kind"] == large["risk_kind"] == "horizon":
                assert large["horizon_risk"] <= small["horizon_risk"]
            else:
                assert large["risk_kind"] == "peak"
