"""Slot length (issue #25): date-time stamps, --slot-length, --resample, and the reports in hours/days, through the
installed `policyopt`; every refusal is one line on stderr with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from policyopt.deploy import Ledger
from policyopt.formatting import text_problems

from _cli import ok_json, refused, run_any as run  # noqa: E402

CHAIN = "two-state:p=0.3,q=0.3"


@pytest.fixture()
def half_hourly(tmp_path):
    """Three users, 30-min time stamps over 2 days (96 slots), one reading missing; values seeded uniform in [-1, 1]."""
    rng = np.random.default_rng(25)
    t0 = pd.Timestamp("2024-03-01T00:00")
    rows = [(f"u{u}", (t0 + pd.Timedelta(minutes=30 * k)).strftime("%Y-%m-%dT%H:%M"), float(rng.uniform(-1, 1)))
            for k in range(96) for u in range(3) if (k, u) != (7, 1)]
    df = pd.DataFrame(rows, columns=["user", "time", "value"])
    path = tmp_path / "half.csv"
    df.to_csv(path, index=False)
    return path, df


def _input_digests(path):
    with Ledger(path) as led:
        return [(r.slot, r.input_time, r.users, r.input_sha256) for r in led.rows()]


@pytest.mark.slow
def test_time_stamps_give_the_slot_length_and_resample_is_pandas_mean(tmp_path, half_hourly):
    path, df = half_hourly
    base = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range=-1:1", "--model", CHAIN]
    half = ok_json(*base, "--data", path, "--ledger", tmp_path / "half.db")
    assert half["slot_length"] == "30min" and half["slot_seconds"] == 1800 and half["through"] == 94
    hourly = ok_json(*base, "--data", path, "--resample", "1h", "--ledger", tmp_path / "h.db")
    assert hourly["slot_length"] == "1h" and hourly["slot_seconds"] == 3600 and hourly["through"] == 46
    # the same hourly means from pandas' own resample, written with integer slots: identical inputs, slot by slot
    ts = pd.to_datetime(df["time"])
    ref = (df.assign(time=ts).set_index("time").groupby("user")["value"].resample("1h").mean().dropna().reset_index())
    ref["time"] = ((ref["time"] - ts.min()) // pd.Timedelta("1h")).astype(int)
    ref = ref.sort_values(["time", "user"], kind="stable")
    ref_csv = tmp_path / "hourly.csv"
    ref[["user", "time", "value"]].to_csv(ref_csv, index=False)
    ok_json(*base, "--data", ref_csv, "--slot-length", "1h", "--ledger", tmp_path / "ref.db")
    assert _input_digests(tmp_path / "h.db") == _input_digests(tmp_path / "ref.db")
    # reports in slots and hours/days
    text = run("ledger", "--ledger", tmp_path / "h.db").stdout
    assert "up to slot 45 (45 h); slots of 1h" in text and "AoI = 1 slot (1 h)" in text and text_problems(text) == [], text
    led = ok_json("ledger", "--ledger", tmp_path / "half.db")
    assert led["slot_length"] == "30min" and led["provenance"]["time_origin"] == "2024-03-01T00:00:00+00:00"


def test_slot_length_refusals(tmp_path, half_hourly):
    path, _ = half_hourly
    design = run("schedule", "--chain", CHAIN, "--max-age", 12, "--max-interval", 12, "--max-penalty", 0.2,
                 "--slot-length", "1h", "--value-range=-1:1", "--json")
    assert design.returncode == 0, design.stderr
    sched = tmp_path / "s.json"
    sched.write_text(design.stdout)
    assert json.loads(design.stdout)["deployment"]["slot_length"] == "1h"
    ledger = tmp_path / "l.db"
    # 30-min stream against a schedule in hours: refused, also with --override
    refused(run("publish", "--schedule", sched, "--data", path, "--ledger", ledger),
            "the stream's slots are 30min but the schedule's A, S̄ and chains count slots of 1h", "--resample 1h")
    refused(run("publish", "--schedule", sched, "--data", path, "--ledger", ledger, "--override", "why not"),
            "slots are 30min")
    refused(run("publish", "--schedule", sched, "--data", path, "--ledger", ledger, "--resample", "45min"),
            "--resample 45min is not a whole number of the data's 30min slots")
    refused(run("publish", "--schedule", sched, "--data", path, "--ledger", ledger, "--resample", "soon"),
            "--resample must be a duration")
    refused(run("publish", "--schedule", sched, "--data", path, "--ledger", ledger, "--slot-length", "20min"),
            "is not on the grid of 20min slots")
    assert not ledger.exists()
    first = ok_json("publish", "--trial", "a pilot stream", "--schedule", sched, "--data", path, "--ledger", ledger, "--resample", "1h")
    assert first["slot_length"] == "1h" and first["released"] > 0
    # a ledger in hours fed with 2-hour slots
    refused(run("publish", "--A", first["schedule"]["A"], "--S-bar", first["schedule"]["S_bar"], "--epsilon-c",
                first["schedule"]["epsilon_c"], "--value-range=-1:1", "--model", CHAIN, "--data", path, "--resample", "2h",
                "--ledger", ledger), "counts slots of 1h, this stream's are 2h")


def test_slot_options_that_do_not_apply(tmp_path, half_hourly):
    path, df = half_hourly
    base = ["publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.34, "--value-range", "0:48", "--ledger", tmp_path / "l.db"]
    refused(run(*base, "--slot-length", "30min"), "--slot-length 30min is not the bundled data's slot (1h)")
    pq = tmp_path / "pq"
    pq.mkdir()
    ints = df.assign(time=pd.to_datetime(df["time"]).sub(pd.Timestamp("2024-03-01")).floordiv(pd.Timedelta("30min")))
    ints.to_parquet(pq / "part-0.parquet", index=False)
    refused(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range=-1:1", "--model", CHAIN, "--data", pq,
                "--slot-length", "30min", "--resample", "1h", "--ledger", tmp_path / "p.db"),
            "--resample is not available with a Parquet --data")
    refused(run("publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range=-1:1", "--model", CHAIN, "--data", pq,
                "--resample", "1h", "--ledger", tmp_path / "p.db"), "--resample 1h needs the data's slot length")
    refused(run("schedule", "--slot-length", "2h", "--json"), "--slot-length 2h is not the bundled data's slot (1h)")
