"""A meter whose readings end before the backtest's split (or start after it) is left out with a line, never a crash
(``schedule --backtest`` and ``backtest --schedule`` ended with ``internal error: KeyError`` before)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from _cli import ok_json, run_any


@pytest.fixture(scope="module")
def ragged_csv(tmp_path_factory):
    """Three meters: m1 stops at slot 1500 (before the split at 2000), m3 starts at 2500 (after it)."""
    rng = np.random.default_rng(7)
    parts = []
    for user, (a, b) in {"m1": (0, 1500), "m2": (0, 4000), "m3": (2500, 4000)}.items():
        t = np.arange(a, b)
        parts.append(pd.DataFrame({"user": user, "time": t,
                                   "value": np.abs(np.sin(t * 2 * np.pi / 24) + rng.normal(0, 0.3, t.size))}))
    path = tmp_path_factory.mktemp("ragged") / "rag.csv"
    pd.concat(parts).to_csv(path, index=False)
    return path


COMMON = ("--value-range", "0:3", "--users", "50000", "--max-rmse", "0.05", "--phase-period", "24",
          "--max-age", "24", "--max-interval", "24")


def test_schedule_backtest_leaves_out_a_meter_without_held_out_readings(ragged_csv):
    r = ok_json("schedule", "--data", ragged_csv, *COMMON, "--backtest", "0.5")
    bt = r["backtest"]
    assert bt["split_slot"] == 2000
    assert bt["left_out_users"] == [
        {"user": "m1", "why": "no held-out readings: its readings end before slot 2000"},
        {"user": "m3", "why": "no training readings: its readings start at or after slot 2000"},
    ]
    text = run_any("schedule", "--data", ragged_csv, *COMMON, "--backtest", "0.5")
    assert text.returncode == 0, text.stderr
    assert "left out: m1 (no held-out readings: its readings end before slot 2000)" in text.stdout


@pytest.mark.slow
def test_backtest_of_a_schedule_file_leaves_out_the_meter(ragged_csv, tmp_path):
    sched = run_any("schedule", "--data", ragged_csv, *COMMON, "--json")
    assert sched.returncode == 0, sched.stderr
    path = tmp_path / "s.json"
    path.write_text(sched.stdout)
    res = run_any("backtest", "--data", ragged_csv, "--schedule", path)
    assert res.returncode == 0, res.stderr
    assert "left out    : m1 (no held-out readings: its readings end before slot 2000)" in res.stdout
    assert "left out    : m3 (no training readings: its readings start at or after slot 2000)" in res.stdout
    r = ok_json("backtest", "--data", ragged_csv, "--schedule", path)
    assert [u["user"] for u in r["left_out_users"]] == ["m1", "m3"]
    lags = sorted({r["schedule"]["A"], r["schedule"]["S_bar"]} - {0})
    assert r["max_tv_comparison"]["lags"] == lags  # the held-out Δ(t) is still compared, on the meters that have one
