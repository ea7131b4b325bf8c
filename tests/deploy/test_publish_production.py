"""From pilot to production: a schedule designed on a CSV publishes a Parquet stream that is other data, accounted
model-free first, and the stream's new partition files publish the new slots on the next run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from _cli import ok_json, refused, run_any, run_cli

READINGS = Path(__file__).resolve().parents[2] / "examples" / "readings.csv"


def test_a_parquet_production_stream_grows_by_partitions(tmp_path):
    design = run_cli("schedule", "--data", READINGS, "--states", 3, "--max-age", 12, "--max-interval", 12,
                     "--value-range", "0:10", "--json")
    sched = tmp_path / "s.json"
    sched.write_text(design.stdout)
    d = json.loads(design.stdout)
    df = pd.read_csv(READINGS)
    stream = tmp_path / "stream"
    stream.mkdir()
    users = sorted(df["user"].unique())
    df[df["user"].isin(users[:2])].to_parquet(stream / "a.parquet", index=False)
    df[df["user"].isin(users[2:])].to_parquet(stream / "b.parquet", index=False)
    last = int(df["time"].max())
    ledger = tmp_path / "l.db"
    args = ["publish", "--schedule", sched, "--data", stream, "--ledger", ledger, "--trial", "3 meters"]

    first = ok_json(*args)
    assert first["released"] == len(range(d["A"], last, d["S_bar"]))
    assert first["guarantee"]["kind"] == "model-free" and first["model_verdict"]["verdict"] == "unchecked"
    # the model is checked on the stream's own readings (a Parquet stream, read whole for it): its 95 complete slots are too few
    sc = first["stream_check"]
    assert sc["verdict"] == "unchecked" and sc["through"] == first["through"] == last - 1 and sc["users"] == 3 and sc["runs"] == 1
    assert first["model_verdict"]["why"].startswith("too few readings for a conclusive check: the stream's held-out "
                                                    "part has 47 slots")

    later = df.assign(time=df["time"] + last + 1)  # the next days of the same meters, one new file
    later.to_parquet(stream / "c.parquet", index=False)
    second = ok_json(*args)
    assert second["released"] == len(range(d["A"], 2 * last + 1, d["S_bar"])) - first["released"]
    assert [r["slot"] for r in second["new_releases"]][0] == d["A"] + first["released"] * d["S_bar"]
    assert second["stream_check"]["through"] == second["through"] and second["stream_check"]["runs"] == 2  # re-run: it grew
    audit = ok_json("ledger", "--ledger", ledger)
    assert [c["through"] for c in audit["stream_checks"]] == [last - 1, second["through"]]
    prov = audit["provenance"]
    assert prov["stream_is_design_data"] is False and prov["design_data"] == d["deployment"]["data"]
    assert audit["model_free"]["releases"] == first["released"] + second["released"]

    # a released slot rewritten: refused, nothing published
    changed = pd.read_parquet(stream / "c.parquet")
    changed.loc[changed.index[0], "value"] += 1.0
    changed.to_parquet(stream / "c.parquet", index=False)
    refused(run_any(*args), "the stream rewrites history: the readings of input slot")
    assert ok_json("ledger", "--ledger", ledger)["model_free"]["releases"] == audit["model_free"]["releases"]
