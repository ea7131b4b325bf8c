"""`policyopt sweep`: closed-form rows, resume after a kill, Dask = serial, Corollary 3 detection, errors."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from policyopt.cli.main import main
from policyopt.errors import InvalidInputError
from policyopt.studies.sweep_store import NONDETERMINISTIC
from policyopt.studies.sweep import (
    COLUMNS,
    no_tradeoff_flags,
    no_tradeoff_ranges,
    parse_grid,
    read_sweep_csv,
)

# i.i.d. users (p = q = 1/2): both rows of P are (1/2, 1/2), so Δ(t) = 0 for t ≥ 1.
IID = ["--chain", "two-state:p=0.5,q=0.5", "--users", "20", "--max-age", "10", "--max-interval", "10"]
IID_GRID = "0.03:0.51:17"  # 0.03, 0.06, ..., 0.51 (0.1 itself is not on the grid)


def run(capsys, *args) -> dict:
    assert main(["sweep", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def strip_time(rows):
    return [{k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in rows]


def read_jsonl(path):
    out = []
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        rec["report"].pop("wall_time_s")
        out.append(rec)
    return out


def test_parse_grid():
    assert parse_grid("0.1:0.5:5", "--max-penalty") == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5], rel=1e-15)
    assert parse_grid("0.2,0.5,1", "x") == [0.2, 0.5, 1.0]
    assert parse_grid("10:40:4", "--vary users", integer=True, lower=1) == [10, 20, 30, 40]
    assert parse_grid("0.3:0.3:1", "x") == [0.3]
    for text, match in [
        ("0.1:0.5", "--max-penalty must be START:STOP:N or V1,V2,..., got '0.1:0.5'"),
        ("0.1:0.5:x", "an integer N, got '0.1:0.5:x'"),
        ("0.1:0.5:0", "N must be ≥ 1"),
        ("0.1:0.5:1", "N = 1 needs START = STOP"),
        ("0.5,0.1", "strictly increasing, got '0.5,0.1'"),
        ("0:0.5:3", "values must be > 0, got '0:0.5:3'"),
        ("0.1,nan", "must be finite"),
        ("a,b", "V1,V2,... of numbers, got 'a,b'"),
    ]:
        with pytest.raises(InvalidInputError, match=re.escape(match)):
            parse_grid(text, "--max-penalty", lower=0.0)
    with pytest.raises(InvalidInputError, match=r"--vary users values must be integers, got '10:20:4'"):
        parse_grid("10:20:4", "--vary users", integer=True)


def test_no_tradeoff_flags_and_ranges():
    fs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    risks = [None, 2.0, 1.0, 1.0, 1.0 * (1 + 1e-12), 0.5]
    flags = no_tradeoff_flags(fs, risks)
    # infeasible → feasible lowers the risk; 2 → 1 lowers it; 1 → 1 → 1(+1e-12) does not; 1 → 0.5 does
    assert flags == [False, False, True, True, False, None]
    assert no_tradeoff_ranges(fs, flags) == [(3.0, 5.0)]
    assert no_tradeoff_flags([1.0, 2.0], [None, None]) == [None, None]
    assert no_tradeoff_flags([1.0, 2.0], [1.0, None]) == [None, None]
    assert no_tradeoff_flags([1.0, 2.0], [1.0, 1.0 - 1e-6]) == [False, None]
    assert no_tradeoff_flags([1.0, 2.0], [1.0, 1.0 - 1e-6], rtol=1e-5) == [True, None]
    with pytest.raises(InvalidInputError, match=r"`max_penalties` must be strictly increasing"):
        no_tradeoff_flags([2.0, 1.0], [1.0, 1.0])
    with pytest.raises(InvalidInputError, match=r"same length"):
        no_tradeoff_flags([1.0], [1.0, 2.0])


def test_iid_closed_form_and_corollary_3(tmp_path, capsys):
    """Every row against closed forms; the f̄ > 0.1 range is reported as 'no trade-off'.

    # source: Zhang et al. (2024), eq. (12): i.i.d. users have Δ(0) = 1 and Δ(t) = 0 for t ≥ 1, so eq. (30)
    # gives ε* = ε_C for A = 0 and ε* = 0 for A ≥ 1.  MSE with the corrected noise scale (README: eq. (48) with
    # sensitivity 2/I): noise 2(2/(I ε_C))², staleness of the mean for A ≥ 1: Var(x_t − x_0)/I = 2/I = 0.1.
    # Hence for f̄ < 0.1 only A = 0 is feasible, ε_C = (2/I)·sqrt(2/f̄) = ε*; for f̄ > 0.1 ε* = 0 with
    # ε_C = (2/I)·sqrt(2/(f̄ − 0.1)).  Corollary 3's property (raising f̄ does not lower ε*) holds exactly on (0.1, ∞).
    """
    out = tmp_path / "iid.csv"
    summary = run(capsys, *IID, "--max-penalty", IID_GRID, "--out", str(out))
    rows = read_sweep_csv(out)
    fs = [0.03 * (k + 1) for k in range(17)]
    assert [r["point"] for r in rows] == list(range(17))
    assert [r["max_penalty"] for r in rows] == pytest.approx(fs, rel=1e-12)
    for r in rows:
        f = r["max_penalty"]
        assert r["status"] == "optimal" and r["S_bar"] == 1 and (r["p"], r["q"], r["users"], r["states"]) == (0.5, 0.5, 20, 2)
        assert r["no_aging_peak_risk"] == pytest.approx(0.1 * math.sqrt(2 / f), rel=1e-9)
        assert r["noise_only_risk_after_releases"] == pytest.approx(24 * 0.1 * math.sqrt(2 / f), rel=1e-9)
        if f < 0.1:
            assert r["A"] == 0
            assert r["epsilon_c"] == pytest.approx(0.1 * math.sqrt(2 / f), rel=1e-9)
            assert r["peak_risk"] == pytest.approx(0.1 * math.sqrt(2 / f), rel=1e-9)
        else:
            assert r["A"] >= 1 and r["peak_risk"] == 0.0
            assert r["epsilon_c"] == pytest.approx(0.1 * math.sqrt(2 / (f - 0.1)), rel=1e-6)
    # no trade-off exactly on the intervals with both ends above 0.1
    assert [r["no_tradeoff"] for r in rows] == [False, False, False] + [True] * 13 + [None]
    assert summary["no_tradeoff"] == [
        {"model": {"p": 0.5, "q": 0.5, "users": 20, "states": 2}, "from": pytest.approx(0.12), "to": pytest.approx(0.51),
         "peak_risk": 0.0}
    ]
    assert summary["points"] == 17 and summary["computed"] == 17 and summary["resumed"] == 0
    # the JSON lines: one record per point, same order, full reports
    recs = [json.loads(x) for x in Path(str(out)[:-4] + ".jsonl").read_text().splitlines()]
    assert [x["point"] for x in recs] == list(range(17))
    assert [x["report"]["peak_risk"] for x in recs] == [r["peak_risk"] for r in rows]
    assert [x["no_tradeoff"] for x in recs] == [r["no_tradeoff"] for r in rows]
    # text summary line
    assert main(["sweep", *IID, "--max-penalty", IID_GRID, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "no trade-off : f̄ ∈ [0.12, 0.51]: raising f̄ does not lower ε* = 0 nats (Corollary 3)" in text
    assert "17 resumed" in text


def test_rows_equal_schedule_command(tmp_path, capsys):
    """Each sweep row is what `policyopt schedule --json` reports at that f̄ (and the varied p)."""
    out = tmp_path / "s.csv"
    run(capsys, "--chain", "two-state:p=0.1,q=0.1", "--max-age", "30", "--max-interval", "30",
        "--max-penalty", "0.06,0.09,0.2", "--vary", "p=0.1,0.2", "--out", str(out))
    rows = read_sweep_csv(out)
    assert [(r["p"], r["max_penalty"]) for r in rows] == [(p, f) for p in (0.1, 0.2) for f in (0.06, 0.09, 0.2)]
    for r in rows:
        assert main(["schedule", "--chain", f"two-state:p={r['p']},q=0.1", "--max-age", "30", "--max-interval", "30",
                     "--max-penalty", repr(r["max_penalty"]), "--json"]) == 0
        ref = json.loads(capsys.readouterr().out)
        for key in ("status", "A", "S_bar", "epsilon_c", "peak_risk", "penalty", "peak_aoi"):
            assert r[key] == ref[key], key
        assert r["no_aging_peak_risk"] == ref["benchmarks"]["no_aging"]["peak_risk"]
        assert r["source"] == ref["model"]["source"]


# Every point states its guarantee (the model-free one by dp_accounting's PLD accountant, about 0.1–0.3 s a point), so
# 45 points are long enough to be killed midway.
KILL_ARGS = ["--chain", "two-state:p=0.1,q=0.1", "--max-age", "30", "--max-interval", "30",
             "--max-penalty", "0.1:0.5:15", "--vary", "p=0.05:0.3:3"]
KILL_POINTS = 45


def count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_resume_after_kill_matches_uninterrupted_run(tmp_path, capsys):
    """Kill the sweep midway (SIGKILL), rerun: identical rows to an uninterrupted run, none lost or duplicated."""
    killed = tmp_path / "killed.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "policyopt", "sweep", *KILL_ARGS, "--out", str(killed)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    while count_lines(killed) < 6 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the sweep finished before it could be killed midway"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = count_lines(killed) - 1  # complete rows (header excluded)
    assert 5 <= at_kill < KILL_POINTS
    # resume
    summary = run(capsys, *KILL_ARGS, "--out", str(killed))
    assert summary["points"] == KILL_POINTS
    # the JSON line is flushed before the CSV row, so every complete CSV row is resumed, nothing else
    assert summary["resumed"] == at_kill and summary["resumed"] + summary["computed"] == KILL_POINTS
    assert 0 < summary["computed"] < KILL_POINTS
    # uninterrupted reference
    ref = tmp_path / "ref.csv"
    run(capsys, *KILL_ARGS, "--out", str(ref))
    a, b = read_sweep_csv(killed), read_sweep_csv(ref)
    assert len(a) == KILL_POINTS and [r["point"] for r in a] == list(range(KILL_POINTS))
    assert len({(r["p"], r["max_penalty"]) for r in a}) == KILL_POINTS  # no duplicates
    assert strip_time(a) == strip_time(b)
    assert read_jsonl(tmp_path / "killed.jsonl") == read_jsonl(tmp_path / "ref.jsonl")


@pytest.mark.parametrize("which", ["csv", "jsonl"])
def test_partial_last_line_is_recomputed(tmp_path, capsys, which):
    out = tmp_path / "p.csv"
    run(capsys, *IID, "--max-penalty", "0.05:0.5:10", "--out", str(out))
    ref_rows, ref_json = strip_time(read_sweep_csv(out)), read_jsonl(tmp_path / "p.jsonl")
    target = out if which == "csv" else tmp_path / "p.jsonl"
    data = target.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n")
    target.write_bytes(data[: last + 1 + (len(data) - last) // 2])  # cut the last line in the middle
    assert not target.read_bytes().endswith(b"\n")
    summary = run(capsys, *IID, "--max-penalty", "0.05:0.5:10", "--out", str(out))
    assert (summary["resumed"], summary["computed"]) == (9, 1)
    assert strip_time(read_sweep_csv(out)) == ref_rows
    assert read_jsonl(tmp_path / "p.jsonl") == ref_json


def test_refined_grid_reuses_points(tmp_path, capsys):
    out = tmp_path / "r.csv"
    run(capsys, *IID, "--max-penalty", "0.05,0.2,0.4", "--out", str(out))
    summary = run(capsys, *IID, "--max-penalty", "0.05,0.1,0.2,0.3,0.4", "--out", str(out))
    assert (summary["resumed"], summary["computed"]) == (3, 2)
    assert [r["max_penalty"] for r in read_sweep_csv(out)] == [0.05, 0.1, 0.2, 0.3, 0.4]


def test_dask_local_cluster_matches_serial(tmp_path, capsys):
    """--workers 2 (LocalCluster, 2 processes, two scattered models) writes the serial run's rows."""
    args = ["--chain", "two-state:p=0.1,q=0.1", "--max-age", "20", "--max-interval", "20",
            "--max-penalty", "0.05:0.5:16", "--vary", "users=10,20", "--horizon", "168"]  # 32 points: tasks of 2 points
    serial = run(capsys, *args, "--out", str(tmp_path / "serial.csv"))
    dask = run(capsys, *args, "--out", str(tmp_path / "dask.csv"), "--workers", "2")
    assert dask["workers"] == 2 and dask["computed"] == 32
    assert strip_time(read_sweep_csv(tmp_path / "dask.csv")) == strip_time(read_sweep_csv(tmp_path / "serial.csv"))
    assert read_jsonl(tmp_path / "dask.jsonl") == read_jsonl(tmp_path / "serial.jsonl")
    assert dask["no_tradeoff"] == serial["no_tradeoff"]


def test_dask_chunks_stay_within_one_model():
    from policyopt.studies.sweep import MAX_CHUNK, _chunks

    grid = [(m, f) for m in range(3) for f in range(50)]
    todo = [i for i in range(len(grid)) if i % 7 != 3]  # some points already done
    chunks = _chunks(todo, grid, 2)
    assert [i for c in chunks for i in c] == todo  # every point once, in grid order
    assert all(len({grid[i][0] for i in c}) == 1 for c in chunks)  # one model per task (one scattered object)
    assert max(len(c) for c in chunks) == min(MAX_CHUNK, len(todo) // 16)
    assert all(len(c) == 1 for c in _chunks(todo[:10], grid, 2))


def test_existing_scheduler_matches_serial(tmp_path, capsys, monkeypatch):
    """--scheduler ADDRESS runs on an existing cluster (here an in-process one) with identical rows."""
    from distributed import LocalCluster

    args = [*IID, "--max-penalty", "0.05:0.5:8"]
    run(capsys, *args, "--out", str(tmp_path / "serial.csv"))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        summary = run(capsys, *args, "--out", str(tmp_path / "remote.csv"), "--scheduler", cluster.scheduler_address)
        assert summary["scheduler"] == cluster.scheduler_address and summary["computed"] == 8
        assert strip_time(read_sweep_csv(tmp_path / "remote.csv")) == strip_time(read_sweep_csv(tmp_path / "serial.csv"))
        # a worker-side failure that is not an input error (e.g. policyopt missing there) is one line, exit 2
        import policyopt.studies.sweep as sweep_mod

        def broken(model, max_penalty, settings):
            """Stand-in for a worker that cannot run policyopt."""
            raise ModuleNotFoundError("No module named 'policyopt'")

        monkeypatch.setattr(sweep_mod, "solve_point", broken)  # in-process workers see the module attribute
        assert main(["sweep", *args, "--out", str(tmp_path / "broken.csv"), "--scheduler", cluster.scheduler_address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(
        r"^policyopt: error: point max_penalty=[0-9.]+, p=0.5, q=0.5, users=20, states=2: a Dask worker failed: ModuleNotFoundError: "
        r"No module named 'policyopt' \(the workers need policyopt 0.1.0", err), err


def test_tabulated_population_is_the_population():
    """The Δ table shared by a sweep's points gives the bits Population.log_max_tv gives, and survives pickling."""
    import pickle

    import numpy as np

    from policyopt.models.markov import MarkovChain, Population
    from policyopt.studies.sweep import TabulatedPopulation, tabulate_population

    chains = [MarkovChain([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.3, 0.7]], state_values=[0.0, 1.0, 3.0]),
              MarkovChain([[0.6, 0.4], [0.2, 0.8]], state_values=[0.0, 2.0])]
    pop = Population(chains, [3, 2])
    tab = tabulate_population(pop, 40)
    assert isinstance(tab, TabulatedPopulation) and tab.n_users == 5 and tab.counts == (3, 2)
    for n in (1, 2, 17, 41):
        assert np.array_equal(tab.log_max_tv(np.arange(n)), pop.log_max_tv(np.arange(n)))
    assert np.array_equal(tab.log_max_tv(np.arange(60)), pop.log_max_tv(np.arange(60)))  # beyond the table
    assert tab.log_max_tv(7) == pop.log_max_tv(7)  # other requests are computed as before
    assert np.array_equal(tab.log_max_tv([3, 9]), pop.log_max_tv([3, 9]))
    assert tab.envelope(40) == pop.envelope(40) and tab.spectral_rate == pop.spectral_rate
    back = pickle.loads(pickle.dumps(tab))
    assert np.array_equal(back.log_max_tv(np.arange(41)), pop.log_max_tv(np.arange(41)))
    with pytest.raises(InvalidInputError, match=r"`horizon` must be an integer ≥ 0 \(slots\), got -1"):
        tabulate_population(pop, -1)


def test_progress_bar_only_when_asked(tmp_path, capsys):
    from policyopt.studies.sweep import SweepSettings, run_sweep
    from policyopt.cli.main import build_parser
    from policyopt.app.sweep import build_models

    args = build_parser().parse_args(["sweep", *IID, "--max-penalty", "0.1,0.2", "--out", "x.csv"])
    models = build_models(args, {})
    settings = SweepSettings(max_age=10, max_interval=10, releases=24)
    run_sweep(models, [0.1, 0.2], settings, tmp_path / "a.csv", progress=True)
    assert re.search(r"sweep: 100%.*2/2", capsys.readouterr().err)
    # the CLI shows it only on a terminal: pytest's stderr is not one
    assert main(["sweep", *IID, "--max-penalty", "0.1,0.2", "--out", str(tmp_path / "b.csv")]) == 0
    assert capsys.readouterr().err == ""


def test_data_states_vary(tmp_path, capsys):
    """--vary states on the bundled data: one model per K, users and states columns filled.

    K = 2, 3: the smallest state spaces, whose held-out model checks (one per K in the sweep, one per schedule run)
    are the quickest (K = 4, 6 took about twice as long); any two K take the same per-model path."""
    out = tmp_path / "d.csv"
    summary = run(capsys, "--vary", "states=2,3", "--max-penalty", "0.2,0.4", "--max-age", "24", "--max-interval", "24",
                  "--out", str(out))
    rows = read_sweep_csv(out)
    assert [(r["states"], r["max_penalty"]) for r in rows] == [(2, 0.2), (2, 0.4), (3, 0.2), (3, 0.4)]
    # users = the bundled pilot's documented deployment (10^5 homes; was the 17 pilot homes before issue 11)
    assert all(r["users"] == 100_000 and r["smoothing"] == 0.01 and r["penalty_unit"] == "kWh^2" for r in rows)
    assert summary["varied"] == {"states": [2, 3]}
    # one model check per K (schedule's, on held-out readings), the guarantee of each row as schedule states it
    assert [c["states"] for c in summary["model_check"]] == [2, 3]
    for r in rows[1::2]:  # one point per K: each schedule run repeats the model check
        assert main(["schedule", "--states", str(r["states"]), "--max-penalty", repr(r["max_penalty"]), "--max-age", "24",
                     "--max-interval", "24", "--json"]) == 0
        ref = json.loads(capsys.readouterr().out)
        assert (r["status"], r["A"], r["S_bar"], r["peak_risk"]) == (ref["status"], ref["A"], ref["S_bar"], ref["peak_risk"])
        assert (r["guarantee_kind"], r["guarantee_epsilon"], r["model_free_epsilon"]) == \
            (ref["guarantee"]["kind"], ref["guarantee"]["epsilon"], ref["model_free"]["epsilon"])
        assert r["model_verdict"] == ("passed" if ref["model_check"]["passed"] else "refuted")


def test_csv_header_is_the_documented_one(tmp_path, capsys):
    out = tmp_path / "h.csv"
    run(capsys, *IID, "--max-penalty", "0.2", "--out", str(out))
    with open(out, newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == COLUMNS
    assert {"max_penalty", "status", "A", "S_bar", "epsilon_c", "peak_risk", "penalty", "no_aging_peak_risk",
            "noise_only_risk_after_releases", "backend", "wall_time_s", "no_tradeoff"} <= set(header)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--vary", "rho=0.1:0.2:2"], r"--vary 'rho=0.1:0.2:2': expected NAME=START:STOP:N with NAME one of p, q, users, states"),
        (["--chain", "two-state:p=0.1,q=0.1", "--vary", "states=3,4"], r"--vary states applies to data"),
        (["--vary", "p=0.1,0.2"], r"--vary p applies to --chain only"),
        (["--chain", "two-state:p=0.1,q=0.1", "--users", "5", "--vary", "users=5,10"], r"give either --users or --vary users"),
        (["--chain", "two-state:p=0.1,q=0.1", "--vary", "p=0.1,0.2", "--vary", "p=0.3"], r"--vary p given twice"),
        (["--chain", "two-state:p=0.1,q=0.1", "--vary", "p=0.5,1.5"], r"`p` must be a probability in \[0, 1\], got 1.5"),
        (["--chain", "two-state:p=0.1,q=0.1", "--vary", "users=0,5"], r"--vary users values must be ≥ 1"),
        (["--chain", "two-state:p=0.1,q=0.1", "--out", "{tmp}/x.txt"], r"--out must name a .csv file"),
        (["--chain", "two-state:p=0.1,q=0.1", "--out", "{tmp}/nodir/x.csv"], r"directory .* does not exist"),
        (["--chain", "two-state:p=0.1,q=0.1", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], r"give either --workers 2"),
        (["--chain", "two-state:p=0.1,q=0.1", "--method", "cvxpy"],
         r"point max_penalty=0.1, p=0.1, q=0.1, users=20, states=2: method 'cvxpy' solves the continuous relaxation"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, args, match):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "e.csv")]
    assert main(["sweep", "--max-penalty", "0.1,0.2", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("policyopt: error: ")
    assert re.search(match, err), err


@pytest.mark.parametrize(
    "args, match",
    [
        (["--max-penalty", "0.1:0.5"], r"--max-penalty must be START:STOP:N or V1,V2,..., got '0.1:0.5'"),
        (["--max-penalty", "0:0.5:3"], r"--max-penalty values must be > 0, got '0:0.5:3'"),
        (["--max-penalty", "0.1,0.2", "--workers", "0"], r"--workers must be ≥ 1, got '0'"),
        (["--max-penalty", "0.1,0.2"], r"the following arguments are required: --out"),
    ],
)
def test_bad_options_one_line_exit_2(capsys, args, match):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err), err


def test_other_sweep_in_out_file_is_refused(tmp_path, capsys):
    out = tmp_path / "o.csv"
    run(capsys, *IID, "--max-penalty", "0.1,0.2", "--out", str(out))
    before = out.read_bytes()
    other = [a if a != "10" else "12" for a in IID]  # another --max-age / --max-interval: another sweep
    assert main(["sweep", *other, "--max-penalty", "0.1,0.2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"holds 2 point\(s\) that are not on this sweep's grid \(first: max_penalty=0.1, .*max_age=10", err), err
    assert out.read_bytes() == before  # nothing dropped
    bad = tmp_path / "notsweep.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["sweep", *IID, "--max-penalty", "0.1", "--out", str(bad)]) == 2
    assert "is not a policyopt sweep file" in capsys.readouterr().err


def test_failed_point_keeps_finished_points(tmp_path, capsys, monkeypatch):
    """A point that raises stops the sweep with the point named; finished points stay and are resumed."""
    import policyopt.studies.sweep as sweep_mod

    real = sweep_mod.solve_point

    def failing(model, max_penalty, settings):
        """Fail at f̄ = 0.3 (a stand-in for a back end error)."""
        if max_penalty == 0.3:
            raise InvalidInputError("synthetic failure")
        return real(model, max_penalty, settings)

    monkeypatch.setattr(sweep_mod, "solve_point", failing)
    out = tmp_path / "f.csv"
    assert main(["sweep", *IID, "--max-penalty", "0.1,0.2,0.3,0.4", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"point max_penalty=0.3, p=0.5, q=0.5, users=20, states=2: synthetic failure \(2 finished point\(s\) kept", err)
    assert [r["max_penalty"] for r in read_sweep_csv(out)] == [0.1, 0.2]
    monkeypatch.setattr(sweep_mod, "solve_point", real)
    summary = run(capsys, *IID, "--max-penalty", "0.1,0.2,0.3,0.4", "--out", str(out))
    assert (summary["resumed"], summary["computed"]) == (2, 2)


def test_unreachable_scheduler_is_one_line(tmp_path, capsys, monkeypatch):
    import policyopt.studies.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "SCHEDULER_TIMEOUT", "1s")
    assert main(["sweep", *IID, "--max-penalty", "0.1", "--out", str(tmp_path / "u.csv"),
                 "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Timed out trying to connect to tcp://127.0.0.1:9" in err
