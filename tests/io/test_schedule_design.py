"""ScheduleDesign: a ``policyopt schedule --json`` object read once, the one rule for which schedule it runs, and the
checks publish (check_publishable) and backtest (replay_fields) make of it, on designs the installed command wrote."""

from __future__ import annotations

import json

import pytest

from policyopt.deploy import ScheduleSpec
from policyopt.errors import InvalidInputError
from policyopt.io import PUBLISHABLE_STATUSES, ScheduleDesign
from policyopt.studies.backtest import backtest

from tests._cli import ok_json


@pytest.fixture(scope="module")
def finite():
    """The README's design: a finite ε* under the bundled homes' chains."""
    return ok_json("schedule")


@pytest.fixture(scope="module")
def horizon():
    """A design against the data's Δ̃(t) band for which (31) fails: no finite ε*, an optimal horizon design."""
    return ok_json("schedule", "--max-tv", "empirical", "--max-age", 24, "--max-interval", 24, "--max-rmse", 0.008,
                   "--horizon", 300)


def test_a_finite_design_runs_its_own_schedule(finite):
    d = ScheduleDesign.from_json(finite)
    assert d.replayed == "schedule" and d.horizon_design is None
    assert d.to_dict() == finite and d.to_dict() is not d.fields  # a copy
    assert d.check_publishable() is d
    r = d.replay_fields()
    assert (r["A"], r["S_bar"], r["epsilon_c"]) == (finite["A"], finite["S_bar"], finite["epsilon_c"])
    assert r["max_penalty"] == finite["max_penalty"] and r["users"] == finite["model"]["users"]
    assert r["promised"] == finite["penalty"]
    # the chains' Δ(t) at A and S̄ are what the design says it used
    assert r["design_max_tv"]["source"] == "the design's chains"
    assert r["design_max_tv"]["values"] == {w["t"]: w["max_tv"] for w in finite["model"]["max_tv_witnesses"]}


def test_the_horizon_design_is_the_schedule_when_no_finite_epsilon_star(horizon):
    hd = horizon["horizon_design"]
    assert horizon["status"] == "infeasible" and horizon["A"] is None and hd["status"] == "optimal"
    d = ScheduleDesign.from_json(horizon)
    assert d.replayed == "horizon_design" and d.horizon_design == hd
    f = d.to_dict()
    assert (f["A"], f["S_bar"], f["epsilon_c"], f["penalty"]) == (hd["A"], hd["S_bar"], hd["epsilon_c"], hd["penalty"])
    assert f["status"] == "infeasible"  # the design's own status is kept
    spec = ScheduleSpec.from_design(d)
    assert (spec.A, spec.S_bar, spec.epsilon_c, spec.horizon) == (hd["A"], hd["S_bar"], hd["epsilon_c"], 300)
    assert spec.horizon_accounting == ("model-free" if hd["accounting"] == "model-free" else "theorem-3")
    r = d.replay_fields()
    assert r["design_max_tv"]["source"] == "the data's upper band (--max-tv empirical)"
    assert r["design_max_tv"]["values"] == dict(enumerate(horizon["empirical_max_tv"]["max_tv_used"]))


def test_publish_and_backtest_agree_on_the_schedule(horizon, tmp_path):
    """The two readers of one file run the same (A, S̄, ε_C): the publisher's spec and backtest's replay."""
    path = tmp_path / "h.json"
    path.write_text(json.dumps(horizon), encoding="utf-8")
    spec = ScheduleSpec.from_json_file(path)
    from policyopt.data import load_citylearn

    readings = load_citylearn()
    rep = backtest(readings, horizon, train_fraction=0.5)
    assert rep["schedule"]["replayed"] == "horizon_design"
    assert (rep["schedule"]["A"], rep["schedule"]["S_bar"], rep["schedule"]["epsilon_c"]) == \
        (spec.A, spec.S_bar, spec.epsilon_c)


def test_a_horizon_design_that_is_not_optimal_is_not_run(horizon):
    bad = dict(horizon, horizon_design=dict(horizon["horizon_design"], status="infeasible"))
    d = ScheduleDesign.from_json(bad)
    assert d.replayed == "schedule" and d.horizon_design is None
    with pytest.raises(InvalidInputError, match=r"has status 'infeasible': there is no schedule to publish"):
        d.check_publishable()
    with pytest.raises(InvalidInputError, match=r"no integer schedule to replay \(A=None"):
        d.replay_fields()


@pytest.mark.parametrize("field, value, message", [
    ("A", 4.5, r"`A` = 4\.5 is not a whole number of slots \(a --relax design\?\)"),
    ("S_bar", True, r"`S_bar` = True is not a whole number of slots"),
    ("epsilon_c", None, r"lacks \['epsilon_c'\]"),
    ("deployment", {"value_range": [0, 1]}, r"`deployment` has no `model`"),
])
def test_publish_refuses_what_it_cannot_run(finite, field, value, message):
    d = ScheduleDesign.from_json(dict(finite, **{field: value}), "--schedule 'x.json'")
    with pytest.raises(InvalidInputError, match=r"^--schedule 'x\.json'.*" + message):
        d.check_publishable()


def test_replay_needs_a_positive_bound(finite):
    with pytest.raises(InvalidInputError, match=r"has no positive `max_penalty` \(f̄\), got 0"):
        ScheduleDesign.from_json(dict(finite, max_penalty=0)).replay_fields()
    with pytest.raises(InvalidInputError, match=r"the replay must hold the JSON object .* got list"):
        ScheduleDesign.from_json([1, 2], "the replay")


def test_read_names_the_file_and_the_problem(tmp_path, finite):
    with pytest.raises(InvalidInputError, match=r"^--schedule file not found: '.*nope\.json'$"):
        ScheduleDesign.read(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"^--schedule '.*bad\.json' is not JSON \("):
        ScheduleDesign.read(bad)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"is JSON nested too deeply|has no `status`"):
        ScheduleDesign.read(deep)
    nostatus = tmp_path / "n.json"
    nostatus.write_text(json.dumps({"A": 1}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"^--design '.*n\.json' has no `status`"):
        ScheduleDesign.read(nostatus, "--design")
    good = tmp_path / "s.json"
    good.write_text(json.dumps(finite), encoding="utf-8")
    d = ScheduleDesign.read(good)
    assert d.where == f"--schedule {str(good)!r}" and d.to_dict() == finite
    assert PUBLISHABLE_STATUSES == ("optimal", "feasible", "unbounded")
