"""A stream with far fewer users than the schedule's I is a trial (issue 33, item 4): refused unless ``--trial``.

The bundled pilot has 17 homes at every slot; a schedule designed for I users makes releases over 17 users noisier by
(I/17)² in variance.  A release over fewer than half of I (17 < I/2, i.e. I ≥ 35) is refused with nothing published;
``--trial REASON`` publishes and records the reason, the first such release and the fewest users in the ledger.
"""

from __future__ import annotations

import pytest

from policyopt.deploy import TRIAL_FRACTION, Publisher, ScheduleSpec
from policyopt.errors import InvalidInputError
from tests._cli import ok_json, refused, run_any, run_cli


def _schedule(tmp_path, users):
    path = tmp_path / f"s{users}.json"
    res = run_cli("schedule", "--users", users, "--max-age", 24, "--max-interval", 24, "--json")
    path.write_text(res.stdout)
    return path


def run_any_publish(sched, led, through=5):
    return run_any("publish", "--schedule", sched, "--ledger", led, "--through", through)


def test_a_pilot_stream_for_a_large_design_is_refused_without_trial(tmp_path):
    sched, led = _schedule(tmp_path, 100000), tmp_path / "l.db"
    refused(run_any_publish(sched, led), "release 1 at slot 0 would average 17 users' readings, fewer than 0.5 of the "
            "I = 100000 users", "noise variance 3.46e+07 times the schedule's", "--trial REASON", "nothing was published")
    assert not led.exists()


def test_a_declared_trial_publishes_and_is_recorded(tmp_path):
    sched, led = _schedule(tmp_path, 100000), tmp_path / "l.db"
    out = ok_json("publish", "--schedule", sched, "--ledger", led, "--through", 5, "--trial", "the 17-home pilot")
    assert out["released"] == 6
    assert out["trial"] == {"reason": "the 17-home pilot", "first_release": 1, "fewest_users": 17,
                            "design_users": 100000}
    assert all(r["users"] == 17 for r in out["new_releases"])
    audit = ok_json("ledger", "--ledger", led)
    (trial,) = audit["trials"]
    assert {k: trial[k] for k in out["trial"]} == out["trial"] and trial["recorded_at"].startswith("20")
    text = run_cli("ledger", "--ledger", led).stdout
    assert "trial       : the 17-home pilot (publish --trial, " in text and "as few as 17 users' readings" in text
    # a later run without --trial is refused again (each run declares its own), and nothing is added
    refused(run_any_publish(sched, led, through=9), "release 7 at slot 6 would average 17 users' readings")
    assert ok_json("ledger", "--ledger", led)["released"] == 6


@pytest.mark.parametrize("users,is_trial", [(34, False), (35, True)])
def test_the_threshold_is_half_the_design_users(tmp_path, users, is_trial):
    # 17 < 0.5·35 = 17.5 is a trial; 17 < 0.5·34 = 17 is not
    assert TRIAL_FRACTION == 0.5
    sched, led = _schedule(tmp_path, users), tmp_path / "l.db"
    res = run_any_publish(sched, led, through=60)  # these designs age: A = S̄ = 24 here, a first release at slot 24
    if is_trial:
        refused(res, f"fewer than 0.5 of the I = {users} users")
    else:
        assert res.returncode == 0, res.stderr
        assert "trial       :" not in res.stdout


def test_a_trial_reason_is_one_line(tmp_path):
    sch = ScheduleSpec(0, 1, 1.0, (0.0, 1.0))
    for bad in ("", "  ", "two\nlines", 3):
        with pytest.raises(InvalidInputError, match="`trial` must be a one-line reason"):
            Publisher(tmp_path / "l.db", sch, trial=bad)
