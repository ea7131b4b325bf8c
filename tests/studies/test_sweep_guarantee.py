"""``sweep`` states the guarantee in every row, as ``schedule`` states it for the same point (issue 32).

Every row of a sweep on data goes through the same steps as ``policyopt schedule --json`` for that point: the Markov
model (``--markov-model``) checked on held-out readings once per fitted model, the model-based ε* (Zhang et al.
2024, eq. (30)) stated only under a model that passed, the model-free (ε, δ) over ``--horizon`` in every row, the horizon
design where no finite ε* exists (Theorem 3 under a trusted model, model-free otherwise).  The tests compare each row
with a separate ``schedule --json`` run of the same point, field by field (the JSON numbers kept as the exact text
printed, as ``tests/studies/test_sweep_empirical.py`` does).

Data (written once per module, 3 users × 800 slots, readings 0/1/2 so the three quantile states are the values):

* ``chain.csv``: a first-order chain with P = 0.8 on the diagonal, 0.1 off it — the chain passes its check;
* ``daily.csv``: a daily habit (2 from 7:00 to 19:00, 0 otherwise, 1 in 10 % of the slots at random, i.i.d. given the
  hour) — the first-order chain is refuted (it forgets the hour), the daily phase chain ``phase:24`` passes.

Box 6 × 6, chain penalty of 10⁴ users, f̄ ∈ {1e-7, 1e-4}: at 1e-7 no ε_C meets condition (31) and f̄ at once (a
horizon design), at 1e-4 a finite ε* exists.  Runs are in-process (``policyopt.cli.main.main``) to share the imports.
"""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest

from policyopt.cli.main import main
from policyopt.studies.sweep_store import COLUMNS, GUARANTEE_COLUMNS, NONDETERMINISTIC, meta_path, read_sweep_csv

F_GRID = "1e-7,1e-4"
USERS, SLOTS = 3, 800


def _model_args(data):
    return ["--data", str(data), "--states", "3", "--value-range", "0:2", "--users", "10000", "--max-age", "6",
            "--max-interval", "6", "--penalty", "chain"]


def _write(path, states) -> None:
    lines = ["user,time,value"] + [f"u{u},{t},{int(x)}" for u, row in enumerate(states) for t, x in enumerate(row)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep_guarantee")
    rng = np.random.default_rng(1)  # simulation only
    P = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    chain = np.zeros((USERS, SLOTS), dtype=int)
    for u in range(USERS):
        for t in range(1, SLOTS):
            chain[u, t] = rng.choice(3, p=P[chain[u, t - 1]])
    hour = np.arange(SLOTS) % 24
    habit = np.where((hour >= 7) & (hour < 19), 2, 0)
    daily = np.where(rng.random((USERS, SLOTS)) < 0.9, habit[None, :], 1)
    out = {"chain": tmp / "chain.csv", "daily": tmp / "daily.csv", "dir": tmp}
    _write(out["chain"], chain)
    _write(out["daily"], daily)
    return out


def _run(capsys, *args, code: int = 0) -> str:
    assert main([str(a) for a in args]) == code, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out if code == 0 else captured.err


def _sweep(capsys, out, *args) -> dict:
    return json.loads(_run(capsys, "sweep", *args, "--out", out, "--json"))


def _raw(path) -> list:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _cell(v) -> str:
    return "" if v is None else str(v)


def _records(path) -> list:
    return [json.loads(line, parse_float=str) for line in path.with_suffix(".jsonl").read_text().splitlines()]


def _compare_with_schedule(capsys, data_path, out, extra=()) -> list:
    """Each CSV row (and its JSON line) against ``schedule --json`` of the same point; the schedule objects."""
    refs = []
    for row, rec in zip(_raw(out), _records(out)):
        ref = json.loads(_run(capsys, "schedule", *_model_args(data_path), *extra, "--max-penalty", row["max_penalty"],
                              "--json"), parse_float=str)
        refs.append(ref)
        for key in ("status", "A", "S_bar", "epsilon_c", "peak_risk", "penalty", "min_penalty"):
            assert row[key] == _cell(ref[key]), key
        g, mf = ref["guarantee"], ref["model_free"]
        assert [row["guarantee_kind"], row["guarantee_epsilon"], row["guarantee_delta"]] == \
            [g["kind"], _cell(g["epsilon"]), _cell(g["delta"])]
        assert [row[c] for c in ("model_free_epsilon", "model_free_epsilon_pure", "model_free_delta",
                                 "model_free_releases", "model_free_horizon")] == \
            [_cell(mf[k]) for k in ("epsilon", "epsilon_pure", "delta", "releases", "horizon")]
        assert row["model_verdict"] == ("passed" if ref["model_check"]["passed"] else "refuted")
        assert row["no_aging_peak_risk"] == _cell(ref["benchmarks"]["no_aging"]["peak_risk"])
        hd = ref.get("horizon_design")
        if hd is None:
            assert row["horizon_status"] == row["horizon_accounting"] == row["horizon_risk"] == ""
        else:
            assert [row[c] for c in ("horizon_status", "horizon_accounting", "horizon_A", "horizon_S_bar",
                                     "horizon_epsilon_c", "horizon_risk", "horizon_releases")] == \
                [_cell(hd[k]) for k in ("status", "accounting", "A", "S_bar", "epsilon_c", "horizon_risk", "releases")]
        # the JSON line carries the schedule's guarantee objects whole
        rep = rec["report"]
        for key in ("guarantee", "model_free", "accepted_refuted", "guarantee_settings", "privacy"):
            assert rep[key] == ref[key], key
        # every warning of the row is schedule's (schedule adds its own, e.g. of its posterior check)
        assert rep["warnings"] and set(rep["warnings"]) <= set(ref["warnings"]) if rep["guarantee"]["kind"] == \
            "model-free" else set(rep["warnings"]) <= set(ref["warnings"])
        assert rep.get("horizon_design") == hd
    return refs


def test_refuted_chain_rows_state_the_model_free_guarantee(data, capsys):
    out = data["dir"] / "daily_chain.csv"
    summary = _sweep(capsys, out, *_model_args(data["daily"]), "--max-penalty", F_GRID)
    refs = _compare_with_schedule(capsys, data["daily"], out)
    rows = read_sweep_csv(out)
    # f̄ = 1e-7: no finite ε*, no trusted model → the model-free horizon design; f̄ = 1e-4: ε* withheld
    assert [r["status"] for r in rows] == ["infeasible", "optimal"]
    assert [(r["risk_kind"], r["horizon_accounting"]) for r in rows] == [("horizon", "model-free"), ("peak", None)]
    assert [r["guarantee_kind"] for r in rows] == ["model-free"] * 2 and [r["peak_risk"] for r in rows] == [None] * 2
    assert [(r["markov_model"], r["model_verdict"]) for r in rows] == [("chain", "refuted")] * 2
    for r in rows:
        # the model-free numbers: releases = ⌈H/S̄⌉, pure ε = releases × ε_C (basic composition), PLD ε ≤ pure ε
        S = r["S_bar"] if r["S_bar"] is not None else r["horizon_S_bar"]
        eps_c = r["epsilon_c"] if r["epsilon_c"] is not None else r["horizon_epsilon_c"]
        assert r["model_free_horizon"] == SLOTS and r["model_free_releases"] == math.ceil(SLOTS / S)
        assert r["model_free_epsilon_pure"] == pytest.approx(r["model_free_releases"] * eps_c, rel=1e-12)
        assert r["model_free_epsilon"] <= r["model_free_epsilon_pure"]
        assert r["guarantee_epsilon"] == r["model_free_epsilon"] and r["guarantee_delta"] == 1e-6
    assert rows[0]["horizon_risk"] == rows[0]["model_free_epsilon_pure"]  # the model-free design's pure ε
    # the summary: counts, ranges, every warning, the check as schedule's
    assert summary["guarantee_kind_counts"] == {"model-free": 2} and summary["peak_risk_withheld"] == 1
    assert (summary["peak_risk_min"], summary["peak_risk_max"]) == (None, None)
    assert summary["model_free_epsilon_min"] == rows[1]["model_free_epsilon"]
    assert summary["model_free_epsilon_max"] == rows[0]["model_free_epsilon"]
    assert summary["warnings"] == refs[1]["warnings"] and len(summary["warnings"]) == 1
    (mc,) = summary["model_check"]
    assert mc["states"] == 3 and mc["refuted"] is True
    for key in ("requested", "chosen", "passed", "markov_test", "max_tv_check"):
        assert json.loads(json.dumps(mc[key]), parse_float=str) == refs[1]["model_check"][key], key
    assert json.loads(json.dumps(summary["guarantee_settings"]), parse_float=str) == [refs[1]["guarantee_settings"]]
    assert summary["horizon"] == SLOTS and summary["no_tradeoff"] == []
    # the text (a resume: nothing recomputed) states the model-free range first and why no ε* range
    text = _run(capsys, "sweep", *_model_args(data["daily"]), "--max-penalty", F_GRID, "--out", out)
    lines = text.splitlines()
    lo, hi = rows[1]["model_free_epsilon"], rows[0]["model_free_epsilon"]
    from policyopt.formatting import fmt_upper

    assert lines[1].startswith(
        f"guarantee    : model-free at every point: (ε, δ)-DP for each user's whole series over {SLOTS} slots with ε "
        f"from {fmt_upper(lo, 4)} to {fmt_upper(hi, 4)} nats at δ = 1e-06, whatever the correlation (PLD accountant; "
        "pure ε from ")
    assert ", stated because the Markov model chain is refuted by the readings (held-out Markov test p = " in lines[1]
    peak = next(ln for ln in lines if ln.startswith("peak risk ε*"))
    assert peak == ("peak risk ε* : not stated at 1 point — the Markov model chain is refuted by the readings (see "
                    "model check), so no model-based ε* is a bound for the readings (the model-free guarantee above is); "
                    "--accept-refuted REASON prints the refuted model's")
    assert lines.index(peak) > 1  # the model-free range comes first
    assert "no trade-off : not assessed — no ε* is stated (see peak risk ε*)" in lines
    assert any(ln.startswith("warning      : the Markov model chain is refuted by the readings") for ln in lines)
    assert any(ln.startswith("model check  : K = 3: fitted on the first 50% of each series") and "chain REFUTED" in ln
               for ln in lines)
    assert not any(ln.startswith("model free   :") for ln in lines)  # the headline is the model-free line already


def test_passed_chain_rows_state_the_model_based_guarantee(data, capsys):
    out = data["dir"] / "chain_sweep.csv"
    summary = _sweep(capsys, out, *_model_args(data["chain"]), "--max-penalty", F_GRID)
    _compare_with_schedule(capsys, data["chain"], out)
    rows = read_sweep_csv(out)
    assert [(r["risk_kind"], r["horizon_accounting"], r["guarantee_kind"]) for r in rows] == \
        [("horizon", "theorem-3", "model-based"), ("peak", None, "model-based")]
    assert [(r["markov_model"], r["model_verdict"]) for r in rows] == [("chain", "passed")] * 2
    assert rows[0]["guarantee_epsilon"] == rows[0]["horizon_risk"] and rows[1]["guarantee_epsilon"] == rows[1]["peak_risk"]
    assert [r["guarantee_delta"] for r in rows] == [0.0, 0.0]  # pure bounds
    assert all(r["model_free_epsilon"] is not None for r in rows)  # and the model-free guarantee in every row
    assert summary["guarantee_kind_counts"] == {"model-based": 2} and summary["warnings"] == []
    text = _run(capsys, "sweep", *_model_args(data["chain"]), "--max-penalty", F_GRID, "--out", out)
    lines = text.splitlines()
    from policyopt.formatting import fmt_upper

    assert lines[1].startswith(
        f"guarantee    : model-based at every point: ε* = {fmt_upper(rows[1]['peak_risk'])} nats (Zhang et al. 2024, "
        f"Theorem 3, eq. (30)) at 1 point; the largest risk over {SLOTS} slots = {fmt_upper(rows[0]['horizon_risk'])} "
        "nats (Theorem 3) at 1 point without a finite ε*; if the readings follow the Markov model chain — it passed its "
        "checks on held-out readings (held-out Markov test p = ")
    assert f"peak risk ε* : {fmt_upper(rows[1]['peak_risk'])} nats (at every point with a schedule)" in lines
    assert next(ln for ln in lines if ln.startswith("model free   : ")).startswith(
        f"model free   : (ε, δ)-DP for each user's whole series over {SLOTS} slots with ε from ")


def test_phase_model_passes_where_the_chain_is_refuted(data, capsys):
    """--markov-model phase:24 on the daily habit: the phase chain passes, is fitted once and designs every point
    (its Δ_Z), as schedule --markov-model phase:24; on two Dask workers the rows are the serial ones."""
    out = data["dir"] / "daily_phase.csv"
    summary = _sweep(capsys, out, *_model_args(data["daily"]), "--markov-model", "phase:24", "--max-penalty", F_GRID)
    refs = _compare_with_schedule(capsys, data["daily"], out, ("--markov-model", "phase:24"))
    rows = read_sweep_csv(out)
    assert [(r["markov_model"], r["model_verdict"], r["guarantee_kind"]) for r in rows] == \
        [("phase:24", "passed", "model-based")] * 2
    assert [r["risk_kind"] for r in rows] == ["horizon", "peak"] and rows[1]["peak_risk"] is not None
    assert refs[1]["guarantee"]["model"] == "phase:24" and summary["model_check"][0]["chosen"] == "phase:24"
    meta = json.loads(meta_path(out).read_text())
    assert meta["guarantee"] == [{"markov_model": "phase:24", "privacy": "model-based", "delta": None, "horizon": SLOTS,
                                  "accept_refuted": None}]
    # the fitted phase chain travels to Dask workers by pickling, as the chains do: the same rows from the copy
    import pickle

    from policyopt.cli.main import build_parser
    from policyopt.app.sweep import build_models
    from policyopt.studies.sweep import SweepSettings, solve_point

    args = build_parser().parse_args(["sweep", *_model_args(data["daily"]), "--markov-model", "phase:24",
                                      "--max-penalty", F_GRID, "--out", str(out)])
    (model,) = build_models(args, {})
    assert model.markov is not None and model.markov.name == "phase:24" and model.verdict.verdict == "passed"
    copy = pickle.loads(pickle.dumps(model))
    settings = SweepSettings(max_age=6, max_interval=6, releases=24)
    for row, f in zip(rows, (1e-7, 1e-4)):
        got = solve_point(copy, f, settings)["row"]
        assert {k: got[k] for k in got if k not in NONDETERMINISTIC} == \
            {k: row[k] for k in got if k not in NONDETERMINISTIC}


def test_accept_refuted_and_model_free_design(data, capsys):
    """--accept-refuted prints the refuted chains' ε* (recorded in the rows and the metadata), never as the headline;
    --privacy model-free designs every point for the model-free (ε, δ) over --horizon."""
    extra = ("--accept-refuted", "compare with the paper", "--privacy", "model-free", "--horizon", "400")
    out = data["dir"] / "daily_mf.csv"
    summary = _sweep(capsys, out, *_model_args(data["daily"]), *extra, "--max-penalty", F_GRID)
    refs = _compare_with_schedule(capsys, data["daily"], out, extra)
    rows = read_sweep_csv(out)
    assert [r["guarantee_kind"] for r in rows] == ["model-free"] * 2 and [r["status"] for r in rows] == ["optimal"] * 2
    assert all(r["model_free_horizon"] == 400 for r in rows)
    assert [ref["privacy"] for ref in refs] == ["model-free"] * 2
    stated = [r for r in rows if r["peak_risk"] is not None]
    assert stated and all(ref["accepted_refuted"] == {"model": "chain", "reason": "compare with the paper"}
                          for ref in refs)
    assert summary["accepted_refuted"] == [{"model": "chain", "reason": "compare with the paper"}]
    meta = json.loads(meta_path(out).read_text())
    assert meta["guarantee"] == [{"markov_model": "chain", "privacy": "model-free", "delta": None, "horizon": 400,
                                  "accept_refuted": "compare with the paper"}]
    text = _run(capsys, "sweep", *_model_args(data["daily"]), *extra, "--max-penalty", F_GRID, "--out", out)
    lines = text.splitlines()
    assert lines[1].startswith("guarantee    : model-free at every point:")
    from policyopt.formatting import fmt_upper

    peak = next(ln for ln in lines if ln.startswith("peak risk ε*"))
    assert peak.startswith(f"peak risk ε* : {fmt_upper(stated[0]['peak_risk'])} nats at 1 point under the REFUTED model "
                           "chain, printed on request (--accept-refuted: compare with the paper); not a bound")


@pytest.mark.parametrize(
    "first, second, said",
    [
        ((), ("--privacy", "model-free"), "designed with --privacy model-based, this run uses --privacy model-free"),
        ((), ("--delta", "1e-7"), "designed with the default δ = min(1e-6, 1/(10·I)), this run uses --delta 1e-07"),
        (("--delta", "1e-6"), (), "designed with --delta 1e-06, this run uses the default δ = min(1e-6, 1/(10·I))"),
        ((), ("--horizon", "200"), "designed with --horizon 100, this run uses --horizon 200"),
        ((), ("--accept-refuted", "why not"),
         "designed with no --accept-refuted, this run uses --accept-refuted 'why not'"),
    ],
)
def test_resume_with_other_guarantee_settings_is_refused(tmp_path, capsys, first, second, said):
    """The settings are in FILE.meta.json; a rerun with others is refused before a row is touched (the last
    --horizon given wins)."""
    args = ["--chain", "two-state:p=0.2,q=0.3", "--max-age", "4", "--max-interval", "4", "--max-penalty", "0.2",
            "--horizon", "100"]
    out = tmp_path / "g.csv"
    _sweep(capsys, out, *args, *first)
    assert _sweep(capsys, out, *args, *first)["resumed"] == 1  # the same settings resume
    before = out.read_bytes()
    err = _run(capsys, "sweep", *args, *second, "--out", out, code=2)
    assert err.count("\n") == 1 and err.startswith(f"policyopt: error: cannot resume --out {out}: its rows were ")
    assert said in err, err
    assert out.read_bytes() == before


def test_a_markov_model_change_is_refused_on_data(data, capsys):
    out = data["dir"] / "daily_refuse.csv"
    _sweep(capsys, out, *_model_args(data["daily"]), "--max-penalty", "1e-4")
    err = _run(capsys, "sweep", *_model_args(data["daily"]), "--markov-model", "phase:24", "--max-penalty", "1e-4",
               "--out", out, code=2)
    assert "its rows were designed with --markov-model chain, this run uses --markov-model phase:24" in err


def test_sweep_files_from_before_the_guarantee_columns_are_refused(tmp_path, capsys):
    old_columns = [c for c in COLUMNS if c not in GUARANTEE_COLUMNS and c != "horizon_accounting"]
    out = tmp_path / "old.csv"
    out.write_text(",".join(old_columns) + "\n")
    args = ["sweep", "--chain", "two-state:p=0.2,q=0.3", "--max-age", "4", "--max-interval", "4", "--max-penalty",
            "0.2", "--out", out]
    err = _run(capsys, *args, code=2)
    from policyopt.errors import fmt  # the value as error messages show it (long paths shortened)

    assert err == (f"policyopt: error: --out {fmt(str(out))} was written by an older policyopt sweep: its header has no guarantee "
                   "columns (guarantee_kind, guarantee_epsilon, guarantee_delta, …), so its rows state ε* without the "
                   "model check and the model-free guarantee every row now has; it cannot be resumed: delete it (and its "
                   ".jsonl and .meta.json) or give another --out\n")
    from policyopt.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"was written by an older policyopt sweep: its header has no guarantee"):
        read_sweep_csv(out)
    # a current header with a metadata file of the old format (no guarantee settings): refused too
    new = tmp_path / "new.csv"
    _sweep(capsys, new, *args[1:-2])
    meta = json.loads(meta_path(new).read_text())
    meta["format"] = 1
    del meta["guarantee"]
    meta_path(new).write_text(json.dumps(meta))
    err = _run(capsys, *args[:-1], new, code=2)
    assert re.search(r"cannot resume --out .*new\.csv: its rows were written by an older policyopt sweep \(metadata "
                     r"format 1, without the guarantee settings\)", err), err


@pytest.mark.parametrize(
    "args, message",
    [
        (("--chain", "two-state:p=0.1,q=0.2", "--markov-model", "phase:24"),
         "--markov-model phase:24 is fitted to readings: give --data (or use the bundled data), not --chain/--matrix"),
        (("--markov-model", "order:2", "--max-tv", "empirical"),
         "--max-tv empirical applies to the first-order chains; omit it with --markov-model order:2"),
        (("--markov-model", "hmm:2", "--method", "heuristic"),
         "--markov-model hmm:2 designs with the exact Δ(t) table: use --method exact without --relax"),
        (("--chain", "two-state:p=0.1,q=0.2", "--privacy", "model-free", "--method", "heuristic"),
         "--privacy model-free designs by exact enumeration over --horizon: use --method exact without --relax"),
        (("--markov-model", "order:9"),
         "--markov-model order:9: the order k must be an integer in 1..4 (e.g. order:2)"),
        (("--markov-model", "markov"), "--markov-model 'markov' is not a model; give chain, phase[:P]"),
        (("--data", "x.csv", "--markov-model", "phase"), "--markov-model 'phase' needs a period: give phase:P"),
    ],
)
def test_bad_guarantee_options_are_one_line_errors(tmp_path, capsys, args, message):
    err = _run(capsys, "sweep", *args, "--max-age", "4", "--max-interval", "4", "--max-penalty", "0.1", "--out",
               tmp_path / "x.csv", code=2)
    assert err.count("\n") == 1 and err.startswith("policyopt: error: ") and message in err, err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("value, said", [("0", "--delta must be strictly between 0 and 1 (e.g. 1e-6), got '0'"),
                                         ("x", "--delta must be a number, got 'x'")])
def test_bad_delta_is_refused_by_the_parser(tmp_path, capsys, value, said):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--chain", "two-state:p=0.1,q=0.2", "--delta", value, "--max-penalty", "0.1", "--out",
              str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and said in err, err
