"""Issue 33, item 7: a schedule file is checked, not trusted.  ``publish`` recomputes the schedule's own ε* (eq. (30)
of Zhang et al. 2024) and horizon risk (Theorem 3 over its planned releases) from its A, S̄ and ε_C under its model when
it creates a ledger, and refuses a file whose recorded numbers they do not reproduce (edited after its design) unless
``--override REASON``; a Δ̃(t) table with Δ(0) ≠ 1 is refused.  Reference values: the schedule's own JSON (the design
reproduces itself) and eq. (30) evaluated by hand for a two-state chain (43)."""

from __future__ import annotations

import json
import math

import pytest

from _cli import ok_json, refused, run_any
from policyopt.deploy import ModelSpec
from policyopt.deploy.ledger import DESIGN_REL_TOL, ScheduleSpec, schedule_discrepancies
from policyopt.errors import InvalidInputError
from policyopt.io import parse_chain_spec
from policyopt.models.markov import Population

CHAIN = "two-state:p=0.1,q=0.1"


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    """A ``--chain`` design (A, S̄ > 0, finite ε*) and a stream of 2 users × 40 slots to publish it on."""
    d = tmp_path_factory.mktemp("sched_check")
    path, stream = d / "chain.json", d / "s.csv"
    sched = ok_json("schedule", "--chain", CHAIN, "--users", 100, "--max-penalty", 0.0195)
    path.write_text(json.dumps(sched))
    stream.write_text("user,time,value\n" + "".join(f"u{u},{t},{(t * 7 + u) % 10 / 10}\n" for t in range(40)
                                                    for u in range(2)))
    return path, stream, sched


def edited(design, tmp_path, **changes):
    path, _, sched = design
    out = tmp_path / "edited.json"
    out.write_text(json.dumps({**sched, **changes}))
    return out


def test_the_designs_own_file_reproduces_its_epsilon_star(design, tmp_path):
    path, stream, sched = design
    assert sched["status"] == "optimal" and sched["A"] > 0 and 0 < sched["peak_risk"] < math.inf
    # the chain (43) forgets at rate |1 − p − q|: Δ(t) = 0.8^t
    dS, e = 0.8 ** sched["S_bar"], sched["epsilon_c"]
    sch = ScheduleSpec.from_json_file(path, value_range=(0.0, 1.0))
    pop = Population([parse_chain_spec(CHAIN)])
    assert schedule_discrepancies(sch, pop) == []
    assert sch.designed_peak_risk == pytest.approx(sched["peak_risk"], rel=0)
    assert dS * math.exp(e) < 1  # condition (31): a finite ε*
    assert ok_json("publish", "--trial", "a pilot stream", "--schedule", path, "--data", stream, "--ledger", tmp_path / "l.db", "--value-range",
                   "0:1")["released"] > 0


@pytest.mark.parametrize("field, value", [("epsilon_c", lambda s: s["epsilon_c"] * 1.5), ("A", lambda s: s["A"] + 3),
                                          ("S_bar", lambda s: s["S_bar"] + 1), ("peak_risk", lambda s: s["peak_risk"] / 2)])
def test_an_edited_schedule_is_found(design, tmp_path, field, value):
    _, _, sched = design
    sch = ScheduleSpec.from_json_file(edited(design, tmp_path, **{field: value(sched)}), value_range=(0.0, 1.0))
    found = schedule_discrepancies(sch, Population([parse_chain_spec(CHAIN)]))
    assert len(found) == 1 and found[0].startswith(f"its ε* {sched['peak_risk']!r} nats is not what A = "
                                                  if field != "peak_risk" else "its ε* ")


def test_the_publisher_refuses_before_anything_is_written(design, tmp_path):
    from policyopt.deploy import Publisher
    from policyopt.deploy.stream import read_stream_csv

    path, stream, sched = design
    bad = edited(design, tmp_path, epsilon_c=sched["epsilon_c"] * 2)
    sch = ScheduleSpec.from_json_file(bad, value_range=(0.0, 1.0))
    ledger = tmp_path / "l.db"
    with pytest.raises(InvalidInputError, match=r"does not reproduce its own numbers: its ε\* .* --override REASON"):
        Publisher(ledger, sch, model=ModelSpec(CHAIN)).publish(read_stream_csv(str(stream)))
    assert not ledger.exists() or ledger.stat().st_size == 0 or _no_rows(ledger)
    # the same file with the check off (publish --override) publishes
    rep = Publisher(tmp_path / "ok.db", sch, model=ModelSpec(CHAIN), check_design=False).publish(
        read_stream_csv(str(stream)))
    assert rep.released_total > 0


def _no_rows(ledger) -> bool:
    import sqlite3

    with sqlite3.connect(ledger) as c:
        try:
            return c.execute("SELECT COUNT(*) FROM releases").fetchone()[0] == 0
        except sqlite3.OperationalError:
            return True


def test_cli_refusal_is_one_line_and_override_is_recorded(design, tmp_path):
    path, stream, sched = design
    bad = edited(design, tmp_path, epsilon_c=sched["epsilon_c"] * 1.25)
    common = ("--data", stream, "--value-range", "0:1", "--through", 30)
    refused(run_any("publish", "--schedule", bad, "--ledger", tmp_path / "l.db", *common),
            "does not reproduce its own numbers", "its ε* ", "--override REASON")
    assert not (tmp_path / "l.db").exists() or _no_rows(tmp_path / "l.db")
    assert ok_json("publish", "--trial", "a pilot stream", "--schedule", path, "--ledger", tmp_path / "g.db", *common)["released"] > 0
    over = ok_json("publish", "--trial", "a pilot stream", "--schedule", bad, "--ledger", tmp_path / "o.db", *common, "--override", "edited ε_C")
    assert over["released"] > 0
    audit = ok_json("ledger", "--ledger", tmp_path / "o.db")
    assert audit["provenance"]["override"] == "edited ε_C"
    # the audit says the recorded schedule does not reproduce itself; an honest ledger has no such warning
    assert [w for w in audit["warnings"] if "does not reproduce its own numbers" in w and "edited ε_C" in w]
    assert not [w for w in ok_json("ledger", "--ledger", tmp_path / "g.db")["warnings"] if "reproduce" in w]


@pytest.mark.parametrize("table, phrase", [([0.0, 0.0], r"\[0\] must be 1"), ([1.0, float("nan")], r"\[1\] must be a number"),
                                           ([1.0, 1.5], r"\[1\] must be a number in \[0, 1\]"),
                                           ([1.0, -0.1], r"\[1\] must be a number in \[0, 1\]")])
def test_a_bad_max_tv_table_is_refused(table, phrase):
    with pytest.raises(InvalidInputError, match=phrase):
        ModelSpec("bundled", max_tv_source="empirical:0.95", max_tv_table=table)


def test_tolerance_is_far_above_rounding_and_far_below_an_edit():
    assert 1e-15 < DESIGN_REL_TOL <= 1e-9
