"""The design's model checked on a production stream's own readings (issue 33 item 4), on processes whose truth is known.

A schedule is designed on a pilot of binary readings from a first-order chain (p = q = 0.1: Δ(t) = 0.8^t, eq. (47)
of Zhang et al. 2024).  ``publish`` then receives other users' streams:
- the same chain: the check passes, and the model-based risk is the headline (the chain's true Δ(t) is below the
  design's at every lag the schedule uses, so that risk is a bound for these users);
- a stickier chain (p = q = 0.02, Δ(1) = 0.96 > the design's 0.83): the stream's Δ̂(t) band refutes the design's Δ(t);
- an order-2 chain: refuted (its held-out Markov test or its band).
Each check is recorded in the ledger, reused while the stream has not grown, and re-run when it has.
"""

from __future__ import annotations

import json

import pytest
from _cli import ok_json, run_cli

import numpy as np
import _processes as P

USERS, SLOTS = 20, 1500
DESIGN = ("--value-range", "0:1", "--states", "2", "--max-age", "12", "--max-interval", "12", "--users", str(USERS),
          "--max-rmse", "0.16")


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    """The pilot CSV, its schedule file and JSON, and the three streams (other users, each simulated once)."""
    d = tmp_path_factory.mktemp("stream_check")
    P.first_order_chain(0.1, 0.1).simulate(USERS, SLOTS, np.random.default_rng(1)).to_csv(d / "pilot.csv", index=False)
    streams = {"same": (P.first_order_chain(0.1, 0.1), 2), "sticky": (P.first_order_chain(0.02, 0.02), 3),
               "order2": (P.order2_chain(), 4)}
    paths = {}
    for name, (proc, seed) in streams.items():
        df = proc.simulate(USERS, SLOTS, np.random.default_rng(seed))
        df["user"] = df["user"].astype(str) + f"_{name}"
        df.to_csv(d / f"{name}.csv", index=False)
        paths[name] = d / f"{name}.csv"
    res = run_cli("schedule", "--data", d / "pilot.csv", *DESIGN, "--json")
    sched = d / "s.json"
    sched.write_text(res.stdout)
    return {"dir": d, "schedule": sched, "design": json.loads(res.stdout), "streams": paths}


def publish(pilot, name, ledger, *extra):
    """``publish`` of stream `name` under the pilot's schedule into `ledger` (strict JSON, exit 0)."""
    return ok_json("publish", "--schedule", pilot["schedule"], "--data", pilot["streams"][name], "--ledger", ledger,
                   *extra)


def test_the_design_is_model_based_on_its_pilot(pilot):
    d = pilot["design"]
    assert d["guarantee"]["kind"] == "model-based" and d["model_check"]["passed"]
    assert (d["A"], d["S_bar"]) == (0, 6)


def test_a_stream_like_the_pilot_passes_and_the_check_follows_its_growth(pilot, tmp_path):
    ledger = tmp_path / "same.db"
    short = publish(pilot, "same", ledger, "--through", 20)  # 21 slots: too few to test
    sc = short["stream_check"]
    assert sc["verdict"] == "unchecked" and sc["why"].startswith("too few readings for a conclusive check: the stream's held-out part has 10 slots, fewer than the 170")
    assert sc["through"] == 20 and sc["recorded"] and not sc["reused"] and sc["runs"] == 1
    assert short["guarantee"]["kind"] == "model-free" and short["model_verdict"]["verdict"] == "unchecked"

    half = publish(pilot, "same", ledger, "--through", 999)
    sc = half["stream_check"]
    assert sc["verdict"] == "passed" and not sc["reused"] and sc["runs"] == 2 and sc["through"] == 999
    assert sc["users"] == USERS and sc["readings"] == USERS * 1000
    assert sc["source"] == "publish: the stream's own readings through slot 999"
    assert not sc["held_out_check"]["markov_test"]["refuted"] and not sc["held_out_check"]["max_tv_check"]["refuted"]
    cmp = sc["max_tv_comparison"]
    assert cmp["max_lag"] == 6 and not cmp["refuted"] and cmp["p_value"] > 0.05
    # the truth: Δ(t) = 0.8^t lies below the design's Δ(t) (two-state chains: Δ(t) = λ*^t) at every lag, so the
    # model-based risk stated is a bound for these users
    assert pilot["design"]["model"]["lambda_star"] > 0.8
    g = half["guarantee"]
    assert g["kind"] == "model-based" and g["epsilon"] == pytest.approx(half["peak_risk"], rel=1e-12)
    assert half["model_verdict"]["verdict"] == "passed" and half["warnings"] == []

    again = publish(pilot, "same", ledger, "--through", 999)  # the stream has not grown: the check is reused
    assert again["stream_check"]["reused"] and again["stream_check"]["runs"] == 2
    assert again["guarantee"]["kind"] == "model-based"

    full = publish(pilot, "same", ledger)
    assert full["stream_check"]["through"] == SLOTS - 2 and full["stream_check"]["runs"] == 3
    assert full["stream_check"]["verdict"] == "passed"

    audit = ok_json("ledger", "--ledger", ledger)
    assert [c["through"] for c in audit["stream_checks"]] == [20, 999, SLOTS - 2]
    assert [c["verdict"] for c in audit["stream_checks"]] == ["unchecked", "passed", "passed"]
    assert all(isinstance(c["recorded_at"], str) for c in audit["stream_checks"])
    assert audit["guarantee"]["kind"] == "model-based" and audit["model_verdict"] == full["model_verdict"]
    text = run_cli("ledger", "--ledger", ledger).stdout.splitlines()
    line = next(ln for ln in text if ln.startswith("stream check: "))
    assert f"through slot {SLOTS - 2}" in line and "3 checks recorded" in line and " passed " in line


def test_a_stickier_stream_is_refuted_by_its_band(pilot, tmp_path):
    out = publish(pilot, "sticky", tmp_path / "sticky.db")
    sc = out["stream_check"]
    cmp = sc["max_tv_comparison"]
    assert sc["verdict"] == "refuted" and cmp["refuted"] and cmp["p_value"] == pytest.approx(1 / 40)
    # the truth: Δ(t) = 0.96^t is above the design's λ*^t at every lag, and the stream's Δ̂ at the worst lag shows it
    assert pilot["design"]["model"]["lambda_star"] < 0.96
    assert cmp["estimate"] > pilot["design"]["model"]["lambda_star"] ** cmp["worst_lag"]
    assert out["guarantee"]["kind"] == "model-free" and out["model_verdict"]["verdict"] == "refuted"
    assert any("refuted" in w for w in out["warnings"])


def test_an_order2_stream_is_refuted(pilot, tmp_path):
    sc = publish(pilot, "order2", tmp_path / "o2.db")["stream_check"]
    assert sc["verdict"] == "refuted"
    assert sc["held_out_check"]["markov_test"]["refuted"] or sc["max_tv_comparison"]["refuted"]


def test_the_stream_check_in_text(pilot, tmp_path):
    res = run_cli("publish", "--schedule", pilot["schedule"], "--data", pilot["streams"]["sticky"], "--ledger",
                  tmp_path / "t.db")
    lines = res.stdout.splitlines()
    assert lines[1].startswith("guarantee   : (") and "stated because the Markov model chain is refuted" in lines[1]
    line = next(ln for ln in lines if ln.startswith("stream check: "))
    assert line.startswith("stream check: chain REFUTED — Δ̂(t) against the pilot's chains p = 0.025")
    assert line.endswith("(publish: the stream's own readings through slot 1498); 1 check recorded")
    assert not any(ln.startswith("design check: ") for ln in lines)
