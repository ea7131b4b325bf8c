"""The data check opens ``schedule``, ``check-model``, ``backtest`` and ``publish`` on ``--data`` (issue 33, item 1): the same
object as ``policyopt check-data --json`` (its wall time aside) as ``data_check``, and its lines right after the
guarantee the report states first."""

from __future__ import annotations

import pytest
from _cli import ok_json, run_cli, without_times

# 3 meters, 600 slots; the third starts at slot 200 (ragged); the second reads low nearly always, so its rows of the
# upper quantile states are sparse
CSV = "user,time,value\n" + "".join(
    f"m{u},{t},{(0.2 + (t % 5) * 0.05 + (2.0 if t % 150 == 0 else 0.0) if u == 1 else 1.0 + ((t * (u + 3)) % 7) * 0.3):.2f}\n"
    for t in range(600) for u in range(3) if not (u == 2 and t < 200))

COMMANDS = {
    "schedule": ["--states", "3", "--value-range", "0:5", "--max-age", "6", "--max-interval", "6", "--users", "1000"],
    "check-model": ["--states", "3", "--value-range", "0:5", "--max-lag", "12", "--draws", "19", "--boot", "20"],
    "backtest": ["--states", "3", "--value-range", "0:5", "--max-age", "24", "--max-interval", "24", "--users",
                 "100000", "--max-rmse", "0.05"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_data_check_opens_the_report(command, tmp_path):
    data = tmp_path / "m.csv"
    data.write_text(CSV)
    argv = ["--data", data, *COMMANDS[command]]
    out = ok_json(command, *argv)
    check = ok_json("check-data", "--data", data, "--states", "3", "--value-range", "0:5")
    assert without_times(out["data_check"]) == without_times(check)
    assert [r["user"] for r in check["ragged"]] == ["m2"] and check["sparse_rows"]
    lines = run_cli(command, *argv).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("data check  :"))
    assert all(line.startswith(("guarantee   :", "model free  :")) for line in lines[1:at])  # the guarantee first
    assert "3 users over 600 slots" in lines[at] and "1 ragged meter (m2)" in lines[at]
    advice = [line for line in lines[at + 1:] if line.startswith("data advice :")]
    assert len(advice) == len(check["suggestions"]) >= 1


def test_the_bundled_data_has_no_data_check():
    out = ok_json("schedule", "--privacy", "model-free", "--max-rmse", "0.19", "--max-age", "24", "--max-interval", "24")
    assert "data_check" not in out


def test_publish_checks_its_csv_stream(tmp_path):
    """publish on a CSV stream: the check of the stream at the accounting model's states and the schedule's range."""
    data = tmp_path / "m.csv"
    data.write_text(CSV)
    sched = tmp_path / "s.json"
    sched.write_text(run_cli("schedule", "--data", data, *COMMANDS["schedule"], "--json").stdout)
    argv = ["--schedule", sched, "--data", data, "--trial", "a pilot stream", "--through", 100]
    out = ok_json("publish", *argv, "--ledger", tmp_path / "a.db")
    check = ok_json("check-data", "--data", data, "--states", "3", "--value-range", "0:5")
    assert "3 states" in out["model"] and out["schedule"]["value_range"] == [0.0, 5.0]
    assert without_times(out["data_check"]) == without_times(check)
    lines = run_cli("publish", *argv, "--ledger", tmp_path / "b.db").stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("data check  :"))
    assert all(line.startswith(("guarantee   :", "model free  :")) for line in lines[1:at])
    assert lines[at + 1 + len(check["suggestions"])].startswith("schedule    :")


def test_publish_without_data_has_no_data_check(tmp_path):
    out = ok_json("publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.34, "--value-range", "0:48", "--ledger",
                  tmp_path / "l.db", "--through", 40)
    assert "data_check" not in out
