"""One deployment from design to audit (issue #25): the schedule file carries its model, the ledger the identity of
the stream; every refusal is one line on stderr with exit code 2, through the installed `policyopt`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from policyopt.deploy import Ledger
from policyopt.deploy.out_file import render_out

from _cli import default_sigint, ok_json, refused, run_any as run  # noqa: E402

EXE = str(Path(sys.executable).with_name("policyopt"))
CHAIN = "two-state:p=0.3,q=0.3"
HOMES = [f"Building_{i}" for i in range(1, 9)]


def rows(path):
    with Ledger(path) as led:
        return led.rows()


@pytest.fixture(scope="module")
def homes_csv(tmp_path_factory):
    """Another CSV: 8 of the 17 bundled homes, the first 1000 hours, in time order (io's long user,time,value)."""
    from policyopt.data import load_citylearn

    df = load_citylearn()
    df = df[df.user.isin(HOMES) & (df.time < 1000)].sort_values(["time", "user"], kind="stable")
    path = tmp_path_factory.mktemp("homes") / "homes.csv"
    df.to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_readme_design_publish_audit_states_the_model_free_guarantee(tmp_path):
    """README's design → publish → audit on the bundled homes: their chains are refuted on held-out readings, so the
    schedule states no ε* and the ledger leads with the model-free guarantee of the releases made (issue 32)."""
    sched = tmp_path / "schedule.json"
    design = run("schedule", "--json")
    assert design.returncode == 0, design.stderr
    sched.write_text(design.stdout)
    d = json.loads(design.stdout)
    dep = d["deployment"]
    assert dep["model"] == {"spec": "bundled", "states": 3, "smoothing": 0.01, "value_range": [0.0, 48.0],
                            "sha256": dep["data"]["sha256"], "nbytes": dep["data"]["bytes"], "max_tv_source": "chain"}
    assert dep["data"]["format"] == "bundled" and len(dep["data"]["sha256"]) == 64
    assert dep["users"] == 100000 and dep["value_range"] == [0.0, 48.0] and dep["slot_length"] == "1h"
    assert dep["max_tv_horizon"] == 169
    ledger = tmp_path / "ledger.db"
    pub = ok_json("publish", "--trial", "a pilot stream", "--schedule", sched, "--ledger", ledger, "--out", tmp_path / "r.csv", "--through", 200)
    assert pub["released"] == len(range(d["A"], 201, d["S_bar"]))
    assert pub["model_reason"].startswith("the design recorded in --schedule")
    audit = ok_json("ledger", "--ledger", ledger)
    assert d["peak_risk"] is None and d["model_check"]["refuted"] and audit["designed_peak_risk"] > 0
    assert audit["model_verdict"]["verdict"] == "refuted" and audit["guarantee"]["kind"] == "model-free"
    assert audit["model_free"]["releases"] == pub["released"] and audit["guarantee"]["epsilon"] == audit["model_free"]["epsilon"]
    assert audit["provenance"]["design_data"] == dep["data"] and audit["provenance"]["stream"]["format"] == "bundled"
    assert audit["provenance"]["design_check"]["verdict"] == "refuted"
    text = run("ledger", "--ledger", ledger).stdout
    assert text.splitlines()[1] == f"guarantee   : {audit['guarantee']['statement']}"
    designed = next(x for x in text.splitlines() if x.startswith("designed    : ε* = "))
    assert designed.endswith("— under the REFUTED model chain: not a bound for these data")


def test_readme_table_publish_then_ledger_is_finite(tmp_path):
    """`publish --A 0 --S-bar 4 --epsilon-c 0.34` accounts with the bundled pilot as `schedule` designs it (3 states)."""
    ledger = tmp_path / "readme.db"
    pub = ok_json("publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.34, "--value-range", "0:48", "--ledger", ledger,
                  "--through", 200)
    assert pub["model"].startswith("bundled (3 states, smoothing 0.01, fitted on 0:48")
    audit = ok_json("ledger", "--ledger", ledger)
    assert audit["designed_status"] == "finite" and audit["designed_peak_risk"] < 1.02


@pytest.mark.slow
def test_another_csv_design_publish_audit_and_refusals(tmp_path, homes_csv):
    sched = tmp_path / "homes.json"
    design = run("schedule", "--data", homes_csv, "--value-range", "0:48", "--states", 3, "--max-age", 24,
                 "--max-interval", 24, "--users", 100000, "--max-penalty", 1.5e-5, "--penalty", "chain",
                 "--accept-refuted", "compare the ledger's ε* with the design's", "--json")
    assert design.returncode == 0, design.stderr
    sched.write_text(design.stdout)
    d = json.loads(design.stdout)
    assert d["status"] == "optimal" and d["deployment"]["data"]["source"] == str(homes_csv)
    ledger = tmp_path / "l.db"
    pub = ok_json("publish", "--trial", "a pilot stream", "--schedule", sched, "--data", homes_csv, "--ledger", ledger, "--through", 300)
    assert pub["released"] > 0
    audit = ok_json("ledger", "--ledger", ledger)
    assert audit["designed_peak_risk"] == pytest.approx(d["peak_risk"], rel=1e-9)
    assert audit["model"].startswith(f"data:{homes_csv} (3 states")
    assert audit["guarantee"]["kind"] == ("model-based" if d["model_check"]["passed"] else "model-free")

    fresh = tmp_path / "x.db"
    # a stream that is not the design's data (the bundled homes): a production stream, accepted and accounted
    # model-free first (the design's check spoke for its own data); into a ledger created on the design's data, refused
    prod = tmp_path / "prod.db"
    other = ok_json("publish", "--trial", "a pilot stream", "--schedule", sched, "--ledger", prod, "--through", 100)
    assert other["released"] > 0 and other["guarantee"]["kind"] == "model-free"
    # the model is checked on the stream's own readings: the bundled homes through slot 100 refute the chains
    assert other["model_verdict"]["verdict"] == "refuted" and other["stream_check"]["verdict"] == "refuted"
    assert other["model_verdict"]["source"] == "publish: the stream's own readings through slot 100"
    assert other["model_reason"].endswith("the stream is not the design's data (a production stream): the model is "
                                          "checked on the stream's own readings as it grows, and accounted model-free "
                                          "first unless that check passes")
    prod_audit = ok_json("ledger", "--ledger", prod)
    assert prod_audit["provenance"]["stream_is_design_data"] is False and prod_audit["guarantee"]["kind"] == "model-free"
    assert prod_audit["provenance"]["design_check"]["verdict"] == "unchecked"
    assert audit["provenance"]["stream_is_design_data"] is True
    refused(run("publish", "--trial", "a pilot stream", "--schedule", sched, "--ledger", ledger),
            "is not the data the schedule was designed on", "was created on the design's data", "--override REASON")
    # a model other than the design's
    refused(run("publish", "--schedule", sched, "--data", homes_csv, "--ledger", fresh, "--states", 4),
            "is not the model --schedule", "--override REASON")
    refused(run("publish", "--schedule", sched, "--data", homes_csv, "--ledger", fresh, "--model", "bundled"),
            "is not the model --schedule")
    # a value range other than the design's
    refused(run("publish", "--schedule", sched, "--data", homes_csv, "--ledger", fresh, "--value-range", "0:4"),
            "--value-range 0:4 is not the range")
    # --data with direct options and no --model
    refused(run("publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.34, "--value-range", "0:48", "--data", homes_csv,
                "--ledger", fresh), "no --model would be accounted with the bundled pilot's chains")
    # the design's file changed in place (one value): another source
    changed = tmp_path / "changed.csv"
    text = homes_csv.read_text().splitlines()
    first = text[1].split(",")
    text[1] = ",".join([first[0], first[1], repr(float(first[2]) + 0.5)])
    changed.write_text("\n".join(text) + "\n")
    refused(run("publish", "--schedule", sched, "--data", changed, "--ledger", ledger), "is not the data the schedule")
    # ledger --model other than recorded
    refused(run("ledger", "--ledger", ledger, "--model", "bundled"), "is not the model recorded in the ledger")
    assert not fresh.exists()
    # on purpose: recorded with the reason
    over = ok_json("publish", "--trial", "a pilot stream", "--schedule", sched, "--data", homes_csv, "--ledger", fresh, "--through", 100, "--states", 4,
                   "--override", "4 states checked by hand")
    assert over["model_reason"].startswith("--override: 4 states checked by hand (the design used data:")
    assert over["model"].startswith(f"data:{homes_csv} (4 states")
    other = ok_json("ledger", "--ledger", ledger, "--model", "bundled", "--override", "compare with the pilot")
    assert other["model_is_recorded"] is False and other["override"] == "compare with the pilot"


@pytest.mark.slow
def test_rewritten_history_is_refused_naming_the_first_changed_slot(tmp_path):
    data, ledger = tmp_path / "s.csv", tmp_path / "l.db"
    lines = ["user,time,value"] + [f"u{u},{t},{(t * 7 + u) % 10 / 5:.1f}" for t in range(40) for u in range(3)]
    data.write_text("\n".join(lines) + "\n")
    args = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--model", CHAIN,
            "--data", data, "--ledger", ledger]
    assert run(*args).returncode == 0
    before = rows(ledger)
    assert [r.input_time for r in before][:3] == [0, 2, 4]
    # every value replaced: refused at the first release (input slot 0)
    data.write_text("\n".join(lines[:1] + [ln.rsplit(",", 1)[0] + ",1.5" for ln in lines[1:]]) + "\n")
    refused(run(*args), "the stream rewrites history: the readings of input slot 0 differ from those of release 1 at slot 1")
    # one reading of input slot 6 (release 4 at slot 7) changed
    edited = list(lines)
    i = edited.index(next(ln for ln in edited if ln.startswith("u1,6,")))
    edited[i] = "u1,6,1.9"
    data.write_text("\n".join(edited) + "\n")
    refused(run(*args), "input slot 6 differ from those of release 4 at slot 7")
    # a reading added at a slot no release used (odd slots are never inputs): accepted
    data.write_text("\n".join(lines + ["u9,39,1.0", "u0,40,1.0"]) + "\n")
    assert run(*args).returncode == 0
    assert rows(ledger)[: len(before)] == before


def test_empty_ledger_next_to_a_full_out_is_refused(tmp_path):
    data, ledger, out = tmp_path / "s.csv", tmp_path / "l.db", tmp_path / "r.csv"
    data.write_text("user,time,value\n" + "".join(f"u{u},{t},1.0\n" for t in range(20) for u in range(2)))
    args = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--model", CHAIN,
            "--data", data, "--ledger", ledger, "--out", out]
    assert run(*args).returncode == 0
    released = out.read_text()
    ledger.unlink()
    refused(run(*args), "already holds 9 releases but `ledger`", "is new or empty")
    assert not ledger.exists() and out.read_text() == released


@pytest.mark.parametrize("how", ["killed", "committed"])
def test_committed_releases_survive_the_loss_of_side_files(tmp_path, how):
    data, ledger, out = tmp_path / "s.csv", tmp_path / "l.db", tmp_path / "r.csv"
    data.write_text("user,time,value\n" + "".join(f"u{u},{t},{(t + u) % 3 / 2}\n" for t in range(60) for u in range(3)))
    args = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:2", "--model", CHAIN,
            "--data", data, "--ledger", ledger, "--out", out]
    if how == "killed":  # SIGKILL right after the 5th commit, before the CSV line: the process never closes the ledger
        env = {k: v for k, v in os.environ.items() if k != "POLICYOPT_PUBLISH_PAUSE"}
        env["POLICYOPT_PUBLISH_PAUSE"] = "committed:5"
        proc = subprocess.Popen([EXE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=default_sigint)
        assert proc.stderr.readline().startswith("policyopt-pause committed")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        expected = 5
    else:
        assert run(*args, "--through", 20).returncode == 0
        expected = 10
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(str(ledger) + suffix)
        if side.exists():
            side.unlink()
    kept = rows(ledger)
    assert [r.n for r in kept] == list(range(1, expected + 1))
    con = sqlite3.connect(ledger)
    assert con.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    con.close()
    assert run(*args).returncode == 0  # resumes; the committed releases keep their values (no noise redrawn)
    after = rows(ledger)
    assert after[:expected] == kept and len(after) == 29
    assert out.read_text() == render_out(after)


@pytest.mark.slow
def test_parquet_data_set_publishes_the_same_releases_as_its_csv(tmp_path, homes_csv):
    """Three Parquet partitions (users split across files) read slot by slot give the CSV's releases: same slots, users,
    Δf and digests of the inputs (the values differ only by their fresh noise)."""
    import pandas as pd

    df = pd.read_csv(homes_csv)
    users = sorted(df.user.unique())
    pq = tmp_path / "homes_pq"
    pq.mkdir()
    for i in range(3):
        df[df.user.isin(users[i::3])].to_parquet(pq / f"part-{i}.parquet", index=False)
    base = ["publish", "--A", 2, "--S-bar", 5, "--epsilon-c", 0.4, "--value-range", "0:48", "--model", f"data:{homes_csv}"]
    via_csv = ok_json(*base, "--data", homes_csv, "--ledger", tmp_path / "csv.db", "--through", 400)
    via_pq = ok_json(*base, "--data", pq, "--ledger", tmp_path / "pq.db", "--through", 200)
    again = ok_json(*base, "--data", pq, "--ledger", tmp_path / "pq.db")  # resumes: the history is checked slot by slot
    assert via_csv["through"] == 400 and again["through"] == 998 and again["rows"] == 200

    def key(path):
        return [(r.slot, r.input_time, r.status, r.users, r.sensitivity, r.noise_scale, r.input_sha256) for r in rows(path)]

    assert key(tmp_path / "pq.db")[:80] == key(tmp_path / "csv.db")
    assert len(key(tmp_path / "csv.db")) == 80 and via_pq["released"] == 40
    # the same split into slots on a local Dask cluster (one task per file)
    ok_json(*base, "--data", pq, "--ledger", tmp_path / "dask.db", "--through", 400, "--workers", 2)
    assert key(tmp_path / "dask.db") == key(tmp_path / "csv.db")
    refused(run(*base, "--data", homes_csv, "--ledger", tmp_path / "n.db", "--workers", 2),
            "--workers/--scheduler need a Parquet --data")
    refused(run(*base, "--data", pq, "--ledger", tmp_path / "n.db", "--workers", 2, "--scheduler", "tcp://127.0.0.1:1"),
            "give either --workers 2 or --scheduler tcp://127.0.0.1:1, not both")


@pytest.mark.slow
def test_more_refusals_one_line_exit_2(tmp_path, homes_csv):
    import sqlite3 as sq

    design = run("schedule", "--json")
    assert design.returncode == 0
    d = json.loads(design.stdout)
    fresh = tmp_path / "x.db"
    # a schedule JSON of an earlier policyopt (no deployment) needs --model
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in d.items() if k != "deployment"}))
    refused(run("publish", "--schedule", old, "--ledger", fresh), "records no `deployment`", "give the accounting model with --model")
    # a design against a Δ(t) the ledger cannot reproduce (e.g. schedule --robust's posterior band)
    band = tmp_path / "band.json"
    band.write_text(json.dumps({**d, "deployment": {**d["deployment"], "model": {**d["deployment"]["model"],
                                                                               "max_tv_source": "posterior-band:0.9"}}}))
    refused(run("publish", "--schedule", band, "--ledger", fresh, "--through", 10),
            "the model's Δ(t) comes from 'posterior-band:0.9', which the ledger cannot reproduce")
    # direct options need a value range
    refused(run("publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.34, "--ledger", fresh), "--value-range LO:HI is required")
    assert not fresh.exists()
    # the data a ledger's model was fitted on, changed in place: the audit is refused
    data = tmp_path / "homes.csv"
    data.write_bytes(homes_csv.read_bytes())
    ledger = tmp_path / "l.db"
    assert run("publish", "--A", 0, "--S-bar", 4, "--epsilon-c", 0.4, "--value-range", "0:48", "--model", f"data:{data}",
               "--data", data, "--ledger", ledger, "--through", 20).returncode == 0
    data.write_text(data.read_text().replace("Building_1,", "Building_01,", 1))
    refused(run("ledger", "--ledger", ledger), f"--model 'data:{data}' is not the data the model was fitted on")
    # a ledger of the earlier schema (no input digests) is refused, not rewritten
    con = sq.connect(ledger)
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    refused(run("ledger", "--ledger", ledger), "has ledger schema 1, written by an earlier policyopt")
