"""Issue 32 for ``publish``, ``ledger`` and ``backtest``: the model-free guarantee of the releases actually made (and of
a replay), and the headline rule — a model-based ε only under a model that passed its design-time check on held-out
readings or was given without data, else the model-free (ε, δ).

The model-free numbers are checked against ``dp_accounting``'s PLD accountant called directly on the ledger's releases
and against the pure sum Σ ε in 200-bit mpmath; the verdicts against schedule files of each kind (the bundled homes'
refuted chains, a ``--chain`` design, a file written before models were checked)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sqlite3
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from tests.cli.test_backtest import readings_csv  # noqa: F401  (the 6-home hourly fixture)

from _cli import run_any
from policyopt.cli.main import main
from policyopt.deploy import Ledger
from policyopt.deploy.ledger import LedgerRow, ScheduleSpec, model_free_of_rows
from policyopt.errors import InvalidInputError
from policyopt.formatting import round_up, text_problems
from policyopt.privacy.model_free import PLD_REL_MARGIN, laplace_epsilon_lower_bound, pld_discretization
from policyopt.studies.backtest import design_verdict

CHAIN = "two-state:p=0.3,q=0.3"
DIRECT = ("--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--model", CHAIN)


def cli(*args) -> str:
    """``policyopt ARGS`` in this process; its stdout (exit 0 asserted)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    assert code == 0, err.getvalue()
    return out.getvalue()


def cli_json(*args) -> dict:
    def bad(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(cli(*args, "--json"), parse_constant=bad)


def write_stream(path, users: int, slots: int, skip=()):
    rng = np.random.default_rng(0)
    lines = ["user,time,value"]
    for t in range(slots):
        if t not in skip:
            lines += [f"u{u},{t},{rng.uniform(0, 2):.6f}" for u in range(users)]
    Path(path).write_text("\n".join(lines) + "\n")


def exact_sum(values) -> mp.mpf:
    """Σ of floats in 200-bit arithmetic (exact for these few terms)."""
    with mp.workprec(200):
        return mp.fsum(mp.mpf(float(v)) for v in values)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A ledger written by two publish runs (through slot 20, then 50) of A = 1, S̄ = 2, ε_C = 0.5 on 3 users; input
    slot 10 has no reading (a skipped row).  Returns (ledger path, first run's JSON, second run's JSON)."""
    d = tmp_path_factory.mktemp("pub")
    stream, ledger = d / "s.csv", d / "l.db"
    write_stream(stream, 3, 60, skip=(10,))
    first = cli_json("publish", *DIRECT, "--data", stream, "--ledger", ledger, "--through", 20)
    second = cli_json("publish", *DIRECT, "--data", stream, "--ledger", ledger, "--through", 50)
    return ledger, first, second


def test_model_free_of_the_releases_made_is_the_pld_of_dp_accounting_and_the_pure_sum(two_runs):
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    ledger, _, _ = two_runs
    audit = cli_json("ledger", "--ledger", ledger)
    with Ledger(ledger) as led:
        rows = led.rows()
    made = [r for r in rows if r.status == "released"]
    assert any(r.status == "skipped" for r in rows) and len(made) == audit["released"] == 24
    spent = np.array([r.epsilon_spent for r in made])
    inputs = np.array([r.input_time for r in made])
    mf, delta = audit["model_free"], audit["guarantee_settings"]["delta"]
    # δ: no schedule file, so min(1e-6, 1/(10·I)) with I = the most users of a release (3)
    assert delta == 1e-6 and audit["guarantee_settings"]["dp_delta_source"].endswith("(the most users of a release made)")
    assert mf["releases"] == 24 and mf["delta"] == delta and mf["horizon"] == int(inputs.max() - inputs.min()) + 1
    assert mf["epsilon_c"] == spent.max()
    # pure ε: Σ ε spent exactly, rounded up to the next float (Dwork & Roth 2014, Theorem 3.16)
    # source: basic composition, 200-bit mpmath
    exact = exact_sum(spent)
    assert mp.mpf(mf["epsilon_pure"]) >= exact and mp.mpf(math.nextafter(mf["epsilon_pure"], -math.inf)) < exact
    # (ε, δ): dp_accounting's PLD accountant called directly on the same releases, on the grid policyopt chose ...
    values, counts = np.unique(spent, return_counts=True)
    events = [dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / float(v)), int(c))
              for v, c in zip(values, counts)]
    event = events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events)
    direct = PLDAccountant(value_discretization_interval=pld_discretization(values, counts, delta))
    direct.compose(event)
    assert mf["epsilon"] == min(round_up(direct.get_epsilon(delta), rel=PLD_REL_MARGIN), mf["epsilon_pure"])
    # ... within 0.1 % of its default grid, and above a proven lower bound on the exact ε (post-processing)
    default = PLDAccountant()
    default.compose(event)
    assert mf["epsilon"] == pytest.approx(default.get_epsilon(delta), rel=1e-3)
    assert laplace_epsilon_lower_bound(float(values[0]), 24, delta) <= mf["epsilon"] < mf["epsilon_pure"]
    # w-event: the most releases whose input slots lie in 24 consecutive slots (brute force over window starts)
    w24 = next(w for w in mf["w_event"] if w["w"] == 24)
    best = max(int(np.sum((inputs >= s) & (inputs < s + 24))) for s in range(int(inputs.min()), int(inputs.max()) + 1))
    assert w24["releases"] == best == 12  # e.g. input slots 12, 14, …, 34 (after the skipped 10)
    assert mp.mpf(w24["epsilon_pure"]) >= exact_sum(spent[5:17])
    assert w24["epsilon"] <= w24["epsilon_pure"] and [w["w"] for w in mf["w_event"]] == [24, 168]


def test_a_ledger_after_a_second_run_accounts_the_union(two_runs):
    ledger, first, second = two_runs
    assert first["model_free"]["releases"] == first["released_total"] == 9  # input slots 0, 2, …, 18 without 10
    assert second["released"] == 15 and second["model_free"]["releases"] == second["released_total"] == 24
    with Ledger(ledger) as led:
        union = model_free_of_rows(led.rows(), delta=1e-6, windows=(24, 168)).to_dict()
    assert second["model_free"] == union == cli_json("ledger", "--ledger", ledger)["model_free"]
    assert second["model_free"]["epsilon_pure"] > first["model_free"]["epsilon_pure"]
    # the given two-state chain is an assumption nobody checked: its ε(t) is the headline, the model-free one follows
    g = second["guarantee"]
    assert g["kind"] == "model-based" and g["epsilon"] == second["peak_risk"] and g["delta"] == 0.0
    assert second["model_verdict"] == {"model": f"the given chain {CHAIN}", "verdict": "assumed", "bound": True,
                                       "why": "a model given without data: nobody checked it against readings",
                                       "source": "the schedule given by --A/--S-bar/--epsilon-c"}
    assert second["warnings"] == []
    # at a slot before the first release nothing is spent
    early = cli_json("ledger", "--ledger", ledger, "--at", 0)
    assert early["model_free"]["releases"] == 0 and early["model_free"]["epsilon"] == 0.0


def test_a_ledger_created_before_the_design_check_was_recorded_is_unchecked(two_runs, tmp_path):
    ledger, _, _ = two_runs
    old = tmp_path / "old.db"
    old.write_bytes(Path(ledger).read_bytes())
    con = sqlite3.connect(old)
    prov = json.loads(con.execute("SELECT value FROM meta WHERE key = 'provenance'").fetchone()[0])
    for key in ("design_check", "design_users", "design_delta"):
        prov.pop(key)
    con.execute("UPDATE meta SET value = ? WHERE key = 'provenance'", (json.dumps(prov),))
    con.commit()
    con.close()
    out = cli_json("ledger", "--ledger", old)
    assert out["model_verdict"]["verdict"] == "unchecked" and out["guarantee"]["kind"] == "model-free"
    assert out["guarantee"]["epsilon"] == out["model_free"]["epsilon"] and len(out["warnings"]) == 1
    text = cli("ledger", "--ledger", old)
    assert text.splitlines()[1].startswith("guarantee   : (") and text_problems(text) == [], text
    line = next(x for x in text.splitlines() if x.startswith("design check: "))
    assert "created before policyopt recorded its design's model check" in line
    assert "max ε(S_n) = " in text and "under the UNCHECKED model" in text


@pytest.fixture(scope="module")
def bundled_design(tmp_path_factory):
    """``policyopt schedule --json`` on the bundled homes (its first-order chains are refuted on held-out readings)."""
    path = tmp_path_factory.mktemp("bundled") / "schedule.json"
    path.write_text(cli("schedule", "--json"))
    return path


def test_a_refuted_design_gives_a_model_free_headline(bundled_design, tmp_path):
    sched = json.loads(bundled_design.read_text())
    assert sched["model_check"]["refuted"] and sched["peak_risk"] is None
    ledger = tmp_path / "l.db"
    out = cli_json("publish", "--trial", "a pilot stream", "--schedule", bundled_design, "--ledger", ledger, "--through", 30)
    mv, g, mf = out["model_verdict"], out["guarantee"], out["model_free"]
    assert mv["model"] == "chain" and mv["verdict"] == "refuted" and mv["bound"] is False
    assert mv["source"] == f"--schedule {bundled_design}, at design time"
    assert g["kind"] == "model-free" and g["model"] is None and g["epsilon"] == mf["epsilon"] and g["horizon"] == 31
    assert mf["releases"] == out["released_total"] == 31 and mf["delta"] == sched["guarantee_settings"]["delta"]
    assert out["guarantee_settings"]["dp_delta_source"] == "the schedule's guarantee_settings.delta"
    assert [w["w"] for w in mf["w_event"]] == [24, 168]  # a day and a week of the bundled data's 1 h slots
    assert out["peak_risk"] > 0 and len(out["warnings"]) == 1 and "is refuted by the readings" in out["warnings"][0]
    text = cli("publish", "--trial", "a pilot stream", "--schedule", bundled_design, "--ledger", ledger, "--through", 30)
    lines = text.splitlines()
    assert lines[1].startswith("guarantee   : (") and "stated because the Markov model chain is refuted" in lines[1]
    assert "model free  :" not in text and text_problems(text) == [], text
    peak = next(x for x in lines if x.startswith("peak risk   :"))
    assert peak.endswith("under the REFUTED model chain: not a bound for these data")
    audit = cli("ledger", "--ledger", ledger)
    assert audit.splitlines()[1] == lines[1] and "design check: chain REFUTED — held-out Markov test" in audit
    assert text_problems(audit) == [], audit


@pytest.fixture(scope="module")
def chain_design(tmp_path_factory):
    """A ``--chain`` design (no data: its model is an assumption) and a stream of 2 users to publish it on."""
    d = tmp_path_factory.mktemp("chain")
    path, stream = d / "chain.json", d / "s.csv"
    path.write_text(cli("schedule", "--chain", "two-state:p=0.1,q=0.1", "--users", 100, "--max-penalty", 0.0195, "--json"))
    write_stream(stream, 2, 40)
    return path, stream


def test_a_chain_design_keeps_its_model_based_headline(chain_design, tmp_path):
    path, stream = chain_design
    sched = json.loads(path.read_text())
    args = ("publish", "--trial", "a pilot stream", "--schedule", path, "--data", stream, "--value-range=-1:1", "--ledger", tmp_path / "c.db",
            "--through", 38)
    out = cli_json(*args)
    assert out["model_verdict"]["verdict"] == "assumed" and out["model_verdict"]["model"] == "the given chain"
    g = out["guarantee"]
    assert g["kind"] == "model-based" and g["epsilon"] == out["peak_risk"] and g["model"] == "the given chain"
    assert g["horizon"] == out["last_slot"] + 1 and out["warnings"] == []
    assert out["model_free"]["releases"] == out["released_total"] > 0
    assert out["guarantee_settings"]["delta"] == sched["guarantee_settings"]["delta"]
    text = cli(*args)
    assert text.splitlines()[1].startswith("guarantee   : largest age-dependent risk ≤ ")
    assert "if the readings follow the given chain — an assumption nobody checked against data" in text
    assert text.splitlines()[2].startswith("model free  : (") and "not a bound" not in text
    assert text_problems(text) == [], text
    audit = cli_json("ledger", "--ledger", tmp_path / "c.db")
    assert audit["guarantee"]["kind"] == "model-based"
    assert audit["guarantee"]["epsilon"] == max(audit["peak_risk"], *audit["trajectory"]["risk"])


def test_an_old_format_schedule_is_accepted_as_unchecked(chain_design, tmp_path):
    path, stream = chain_design
    old = {k: v for k, v in json.loads(path.read_text()).items()
           if k not in ("guarantee", "model_free", "guarantee_settings", "accepted_refuted", "privacy")}
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old))
    args = ("publish", "--trial", "a pilot stream", "--schedule", old_path, "--data", stream, "--value-range=-1:1", "--ledger", tmp_path / "o.db",
            "--through", 20)
    out = cli_json(*args)
    assert out["model_verdict"]["verdict"] == "unchecked" and out["guarantee"]["kind"] == "model-free"
    assert out["guarantee_settings"]["dp_delta_source"] == ("default min(1e-6, 1/(10·I)) with I = 100 (the schedule's "
                                                         "deployment size)")
    text = cli(*args)
    line = next(x for x in text.splitlines() if x.startswith("design check: "))
    assert line.startswith("design check: the given chain UNCHECKED — the schedule has no `guarantee`: written before "
                           "policyopt checked Markov models")
    assert text.splitlines()[1].startswith("guarantee   : (") and text_problems(text) == [], text


def test_model_free_of_rows_and_the_spending_check(two_runs, tmp_path):
    sch = ScheduleSpec(0, 1, 0.5, (0.0, 1.0), origin=0)

    def row(n, slot, status="released", eps=0.5):
        return LedgerRow(n=n, slot=slot, input_time=slot, status=status, users=2, clipped=0,
                         epsilon_c=eps if status == "released" else 0.0, epsilon_spent=eps if status == "released" else 0.0,
                         sensitivity=None, noise_scale=None, value=0.0, prior_risk=None, risk_at_release=None, reason=None,
                         input_sha256="", schedule_id=sch.id, package_version="t", sampler="t", committed_at="t")

    rows = [row(1, 0, "skipped"), row(2, 1), row(3, 2, eps=0.25), row(4, 30)]
    assert model_free_of_rows(rows[:1], delta=1e-6) is None
    g = model_free_of_rows(rows, delta=0.0, windows=(24,), at=29)
    assert (g.releases, g.horizon, g.epsilon_pure, g.epsilon, g.epsilon_c) == (2, 2, 0.75, 0.75, 0.5)
    assert g.w_event[0].releases == 2 and g.w_event[0].epsilon_pure == 0.75
    with pytest.raises(InvalidInputError, match=r"`delta` \(the δ of \(ε, δ\)-DP\) must be a number with 0 ≤ δ < 1, got 1.5"):
        model_free_of_rows(rows, delta=1.5)
    # a row whose recorded spending is not what its ε_C gives is refused as corrupted, the file left as it was
    ledger, _, _ = two_runs
    bad = tmp_path / "bad.db"
    bad.write_bytes(Path(ledger).read_bytes())
    con = sqlite3.connect(bad)
    con.execute("UPDATE releases SET epsilon_spent = 0.9 WHERE n = 1")
    con.commit()
    con.close()
    before = bad.read_bytes()
    with pytest.raises(InvalidInputError, match=r"is corrupted: release n=1 \(status 'released'\) records ε spent = 0.9 "
                                                r"nats for ε_C = 0.5"):
        Ledger(bad)
    assert bad.read_bytes() == before


def test_bad_delta_one_line_exit_2(two_runs):
    ledger, _, _ = two_runs
    for cmd, value in ((("ledger", "--ledger", ledger), "0"), (("publish", *DIRECT, "--ledger", ledger), "1.5")):
        res = run_any(*cmd, "--delta", value)
        assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr == (f"policyopt {cmd[0]}: error: argument --delta: --delta must be strictly between 0 and 1 "
                              f"(e.g. 1e-6), got '{value}'\n")


def _verdict_obj(**kw):
    base = {"status": "optimal", "A": 0, "S_bar": 1, "epsilon_c": 0.1, "peak_risk": None, "guarantee": {"kind": "model-free"},
            "deployment": {"model": {"spec": "bundled", "max_tv_source": "chain"}, "data": {"sha256": "x"}}}
    base.update(kw)
    return base


def _check(model, passed, p=0.5):
    test = {"p_value": p, "level": 0.95, "refuted": not passed, "worst_lag": 3}
    return {"model": model, "passed": passed, "verdict": "passed" if passed else "refuted", "markov_test": test,
            "max_tv_check": dict(test)}


def test_design_verdict_of_schedule_objects():
    old = design_verdict({"status": "optimal", "A": 0, "S_bar": 1, "epsilon_c": 0.1})
    assert old["verdict"] == "unchecked" and "written before policyopt checked Markov models" in old["why"]
    refuted = _verdict_obj(model_check={"requested": "chain", "chosen": "chain", "passed": False,
                                        "models": [_check("chain", False, 0.025)]})
    for accounting in ("design", "chain"):
        v = design_verdict(refuted, accounting=accounting)
        assert (v["model"], v["verdict"]) == ("chain", "refuted")
        assert v["why"] == "held-out Markov test p = 0.025 (worst lag 3), Δ(t) check p = 0.025 (worst lag 3), level 0.95"
    # a phase model passed: the design's ε* rests on it, but the ledger's first-order chains were never checked
    phase = _verdict_obj(model_check={"requested": "phase:24", "chosen": "phase:24", "passed": True,
                                      "models": [_check("phase:24", True)]})
    assert design_verdict(phase)["verdict"] == "passed" and design_verdict(phase)["model"] == "phase:24"
    assert design_verdict(phase, accounting="chain")["verdict"] == "unchecked"
    # publish and the ledger account with the model the design recorded: its own verdict
    assert design_verdict(phase, accounting="phase:24")["verdict"] == "passed"
    assert design_verdict(phase, accounting="order:2")["verdict"] == "unchecked"
    # auto, nothing passed: every model tried is named
    auto = _verdict_obj(model_check={"requested": "auto", "chosen": None, "passed": False,
                                     "models": [_check("chain", False), _check("order:2", False)]})
    assert design_verdict(auto)["model"] == "chain/order:2" and design_verdict(auto)["verdict"] == "refuted"
    # an empirical design rests on the Markov premise only (the held-out G² test), not on the chains' Δ(t)
    premise = _check("chain", False)
    premise["markov_test"]["refuted"] = False
    emp = _verdict_obj(model_check={"requested": "chain", "chosen": "chain", "passed": False, "models": [premise]},
                       deployment={"model": {"spec": "bundled", "max_tv_source": "empirical:0.95"}, "data": {}})
    assert design_verdict(emp, accounting="chain")["verdict"] == "passed"
    given = _verdict_obj(guarantee={"kind": "model-based", "model": "the given chain"},
                         deployment={"model": {"spec": "two-state:p=0.1,q=0.1"}, "data": None})
    assert design_verdict(given) == {"model": "the given chain", "verdict": "assumed", "source": "the schedule file",
                                     "why": "a model the designer gave without data: nobody checked it against readings"}
    dask = _verdict_obj(model_check={"refuted": True, "max_lag": 4})
    assert design_verdict(dask)["verdict"] == "unchecked"
    for bad in ("x", "auto", 3):
        with pytest.raises(InvalidInputError, match=r"`accounting` must be 'design' or a model name such as 'chain'"):
            design_verdict(given, accounting=bad)
    with pytest.raises(InvalidInputError, match=r"`obj` must be the JSON object of `policyopt schedule --json`, got 3"):
        design_verdict(3)


def test_backtest_states_the_model_free_guarantee_of_the_replay(readings_csv):
    from policyopt.privacy.model_free import laplace_epsilon

    args = ("backtest", "--data", readings_csv, "--value-range", "0:5", "--users", 1000, "--max-age", 24,
            "--max-interval", 24, "--phase-period", 24, "--delta", 1e-7)
    out = cli_json(*args)
    S, eps = out["schedule"]["S_bar"], out["schedule"]["epsilon_c"]
    mf, gs = out["model_free"], out["guarantee_settings"]
    span = 480 - out["split_slot"]  # the held-out slots 240..479
    assert gs["horizon"] == mf["horizon"] == span and gs["delta"] == mf["delta"] == 1e-7 and gs["dp_delta_source"] == "given"
    assert mf["releases"] == -(-span // S) and mf["epsilon"] == laplace_epsilon(eps, mf["releases"], 1e-7)
    # source: basic composition, ⌈H/S̄⌉·ε_C in 200-bit mpmath, rounded up
    exact = exact_sum([eps] * mf["releases"])
    assert mp.mpf(mf["epsilon_pure"]) >= exact and mp.mpf(math.nextafter(mf["epsilon_pure"], -math.inf)) < exact
    mv = out["model_verdict"]
    assert mv["source"] == "design-time check on the training part" and mv["model"] == "chain"
    assert mv["verdict"] in ("passed", "refuted") and mv["why"].startswith("held-out Markov test p = ")
    assert out["guarantee"]["kind"] == ("model-based" if mv["bound"] else "model-free")
    text = cli(*args)
    assert text.splitlines()[1] == f"guarantee   : {out['guarantee']['statement']}"
    assert f"model check : chain {'passed' if mv['bound'] else 'REFUTED'} — held-out Markov test" in text
    assert text_problems(text) == [], text


def test_backtest_of_a_chain_design_keeps_its_epsilon_star(chain_design, readings_csv):
    path, _ = chain_design
    sched = json.loads(path.read_text())
    out = cli_json("backtest", "--schedule", path, "--data", readings_csv, "--value-range", "0:5")
    g = out["guarantee"]
    assert out["model_verdict"]["verdict"] == "assumed" and g["kind"] == "model-based"
    assert g["epsilon"] == sched["peak_risk"] and g["horizon"] is None and out["warnings"] == []
    assert out["model_free"]["releases"] == -(-(480 - out["split_slot"]) // sched["S_bar"])
    assert out["guarantee_settings"]["delta"] == sched["guarantee_settings"]["delta"]


def test_a_theorem3_horizon_design_is_repeated_under_its_given_chain(chain_design, tmp_path):
    """No finite ε* under a given chain: the horizon design is Theorem 3's (the model is assumed, not refuted), and the
    ledger repeats its largest risk over H; the headline is the risk of the releases made under that chain."""
    _, stream = chain_design
    path = tmp_path / "h.json"
    path.write_text(cli("schedule", "--chain", "two-state:p=0.2,q=0.2", "--max-penalty", 1e-6, "--max-age", 4,
                        "--max-interval", 4, "--horizon", 200, "--json"))
    hd = json.loads(path.read_text())["horizon_design"]
    assert hd["status"] == "optimal" and hd["accounting"] == "theorem-3"
    ledger = tmp_path / "h.db"
    cli("publish", "--trial", "a pilot stream", "--schedule", path, "--data", stream, "--value-range=-1:1", "--ledger", ledger, "--through", 20)
    led = cli_json("ledger", "--ledger", ledger)
    assert led["designed_horizon_accounting"] == "theorem-3" and led["designed_horizon"] == hd["horizon"]
    assert led["designed_horizon_risk"] == pytest.approx(hd["horizon_risk"], rel=1e-9)
    assert led["guarantee"]["kind"] == "model-based" and led["model_verdict"]["verdict"] == "assumed"
    assert led["model_free"]["releases"] == led["released"] == 21 and led["model_free"]["epsilon_c"] >= hd["epsilon_c"]
