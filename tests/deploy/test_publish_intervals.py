"""Every release carries its error bars: publish --out / --json, ledger and backtest (policyopt.deploy.error_bars,
policyopt.utility.intervals), on a replay of the bundled homes whose true means are known."""

from __future__ import annotations

import contextlib
import csv
import math
import sqlite3

import numpy as np
import pytest

from _cli import ok_json, refused, run_any, run_cli
from policyopt.data import load_citylearn
from policyopt.utility.intervals import replay_coverage, staleness_sample

SPLIT = 4380  # the second half of the bundled year
A, S_BAR, EPS = 6, 3, 600.0  # near-noiseless releases: the staleness decides the current-mean interval


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    d = tmp_path_factory.mktemp("homes")
    df = load_citylearn()
    first, full = d / "first.csv", d / "full.csv"
    df[df["time"] < SPLIT].to_csv(first, index=False)
    df.to_csv(full, index=False)
    return df, first, full


def _means(df):
    """Per slot: the mean of the homes' readings clipped to 0:48 (all 17 read every slot)."""
    x = df.assign(value=df["value"].clip(0, 48)).pivot(index="user", columns="time", values="value").to_numpy()
    assert not np.isnan(x).any()
    return x.mean(axis=0)


@pytest.mark.slow
def test_replay_of_the_second_half_covers_at_the_rates_stated(homes, ram_path):
    df, first, full = homes
    out, ledger = ram_path / "out.csv", ram_path / "l.db"
    rep = ok_json("publish", "--A", A, "--S-bar", S_BAR, "--epsilon-c", EPS, "--value-range", "0:48", "--model",
                  f"data:{first}", "--data", full, "--start", SPLIT, "--ledger", ledger, "--out", out, "--slot-length", "1h")
    rows = [r for r in rep["new_releases"] if r["status"] == "released"]
    assert len(rows) == (8759 - SPLIT - A) // S_BAR + 1  # through the last complete slot, 8758
    iv = rep["intervals"]
    assert iv["level"] == 0.95 and iv["age"] == A and iv["phase_period"] == 24 and not iv["pooled"]
    assert iv["current"] is not None and iv["design_slots"] == 182
    m = _means(df)
    slot, inp = np.array([r["slot"] for r in rows]), np.array([r["input_time"] for r in rows])
    lo, hi = (np.array([r[k] for r in rows]) for k in ("ci_low", "ci_high"))
    clo, chi = (np.array([r[k] for r in rows]) for k in ("ci_current_low", "ci_current_high"))
    # (CI1) holds the input mean at its exact level, up to sampling error of the noise (binomial, 4 SE)
    n = len(rows)
    share_in = np.mean((lo <= m[inp]) & (m[inp] <= hi))
    assert abs(share_in - 0.95) < 4 * math.sqrt(0.95 * 0.05 / n)
    # (CI2) holds the current mean at the rate the replay computes from the same design part (exact in the noise)
    share_now = np.mean((clo <= m[slot]) & (m[slot] <= chi))
    cov = replay_coverage(df, A=A, S_bar=S_BAR, split=SPLIT, epsilon_c=EPS, value_range=(0, 48), slot_seconds=3600,
                          reps=99)
    assert abs(share_now - cov["ci_coverage"]) < 0.03
    assert cov["ci_coverage_lower"] - 0.03 <= share_now <= cov["ci_coverage_upper"] + 0.03
    # the interval is (CI2) of the design part's own quantiles, recomputed here
    q = staleness_sample(df[df["time"] < SPLIT], A, value_range=(0, 48), slot_seconds=3600).quantiles(17, 0.95)
    b = np.array([r["noise_scale"] for r in rows])
    v = np.array([r["value"] for r in rows])
    w = b * math.log(2 / 0.05)
    np.testing.assert_allclose(clo, v - w + q.low[slot % 24], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chi, v + w + q.high[slot % 24], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi - lo, 2 * b * math.log(20), rtol=1e-12)
    # --out carries the same four columns, and the ledger audit the same intervals
    with open(out, newline="") as fh:
        got = [r for r in csv.DictReader(fh) if r["status"] == "released"]
    assert list(got[0])[-4:] == ["ci_low", "ci_high", "ci_current_low", "ci_current_high"]
    assert [float(r["ci_current_high"]) for r in got] == chi.tolist()
    audit = ok_json("ledger", "--ledger", ledger)
    assert [r["ci_current_low"] for r in audit["releases"] if r["status"] == "released"] == clo.tolist()
    assert audit["intervals"] == iv


@pytest.mark.slow
def test_error_bars_cost_no_privacy_and_their_level_is_fixed(homes, tmp_path):
    df, first, full = homes
    runs = {}
    for level in (0.5, 0.99):
        ledger = tmp_path / f"l{level}.db"
        runs[level] = ok_json("publish", "--A", 2, "--S-bar", 5, "--epsilon-c", 0.7, "--value-range", "0:48", "--model",
                              f"data:{first}", "--data", full, "--through", 300, "--ledger", ledger, "--ci-level", level)
    spend = ("slot", "input_time", "users", "epsilon_c", "epsilon_spent", "sensitivity", "noise_scale", "prior_risk",
             "risk_at_release")
    a, b = runs[0.5]["new_releases"], runs[0.99]["new_releases"]
    assert [[r[k] for k in spend] for r in a] == [[r[k] for k in spend] for r in b]
    for k in ("model_free", "peak_risk"):
        assert runs[0.5][k] == runs[0.99][k]
    for level, rep in runs.items():
        r = rep["new_releases"][0]
        assert r["ci_high"] - r["ci_low"] == pytest.approx(2 * r["noise_scale"] * -math.log(1 - level), rel=1e-12)
        assert rep["intervals"]["level"] == level
    # the ledgers' spending columns are equal too (the intervals are not stored in the releases table)
    cols = ", ".join(spend)
    got = []
    for lv in (0.5, 0.99):
        with contextlib.closing(sqlite3.connect(tmp_path / f"l{lv}.db")) as con:
            got.append(con.execute(f"SELECT {cols} FROM releases ORDER BY n").fetchall())
    assert got[0] == got[1] and len(got[0]) == len(a)
    # a later run may not change the level; an audit may
    res = run_any("publish", "--A", 2, "--S-bar", 5, "--epsilon-c", 0.7, "--value-range", "0:48", "--model", f"data:{first}",
                  "--data", full, "--through", 400, "--ledger", tmp_path / "l0.5.db", "--ci-level", 0.9)
    refused(res, "error bars at level 0.5, not 0.9", "ledger --ci-level")
    audit = ok_json("ledger", "--ledger", tmp_path / "l0.5.db", "--ci-level", 0.8)
    r = audit["releases"][0]
    assert audit["intervals"]["level"] == 0.8
    assert r["ci_high"] - r["ci_low"] == pytest.approx(2 * r["noise_scale"] * math.log(5), rel=1e-12)
    bad = run_any("ledger", "--ledger", tmp_path / "l0.5.db", "--ci-level", 1.5)
    assert bad.returncode == 2 and "--ci-level" in bad.stderr and "1.5" in bad.stderr and "Traceback" not in bad.stderr


def test_a_model_without_readings_has_only_the_input_interval(tmp_path):
    rng = np.random.default_rng(3)
    stream = tmp_path / "s.csv"
    with open(stream, "w") as fh:
        fh.write("user,time,value\n")
        for t in range(60):
            for u in range(5):
                fh.write(f"u{u},{t},{rng.integers(0, 2)}\n")
    ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
    args = ["publish", "--A", 1, "--S-bar", 2, "--epsilon-c", 0.5, "--value-range", "0:1", "--model",
            "two-state:p=0.2,q=0.3", "--data", stream, "--ledger", ledger, "--out", out]
    rep = ok_json(*args)
    assert rep["intervals"]["current"] is None and "no readings" in rep["intervals"]["current_why"]
    r = rep["new_releases"][0]
    assert r["ci_low"] < r["value"] < r["ci_high"] and r["ci_current_low"] is None
    text = run_cli(*[a for a in args if a != "--json"], "--through", 58).stdout
    assert "error bars  : [ci_low, ci_high] holds the mean of the input slot's readings" in text
    assert "no current-mean interval: the model" in text
    # an --out written before the interval columns is rebuilt with them, not refused
    lines = out.read_text().splitlines()
    old = ["n,slot,input_time,status,users,sensitivity,noise_scale,epsilon_spent,value"]
    old += [",".join(line.split(",")[:9]) for line in lines[1:]]
    out.write_text("\n".join(old) + "\n")
    again = ok_json(*args)
    assert again["out_rebuilt"] is True and out.read_text().splitlines() == lines


def test_backtest_reports_the_coverage_of_the_current_mean_interval():
    # bundled homes, the demo's design (A = 0): the current mean is the input mean and the coverage is the level exactly
    r = ok_json("backtest", "--max-rmse", 0.19, "--max-age", 24, "--max-interval", 24, "--ci-level", 0.9)
    assert r["schedule"]["A"] == 0 and r["ci_level"] == 0.9 and r["ci_releases"] == 4380
    assert r["ci_coverage"] == pytest.approx(0.9, abs=1e-12)
    assert [p["releases"] for p in r["ci_coverage_parts"]] == [1095] * 4 and r["ci_why"] is None
    text = run_cli("backtest", "--max-rmse", 0.19, "--max-age", 24, "--max-interval", 24).stdout
    assert "error bars  : the 95 % current-mean interval of the releases covered the held-out current mean in 95.0 %" in text


def test_backtest_says_when_a_season_is_not_covered():
    # near-noiseless releases 12 slots old: the autumn of the held-out half changes more over 12 hours than the
    # design's first half did, and the coverage falls below the level there
    df = load_citylearn()
    r = replay_coverage(df, A=12, S_bar=1, split=SPLIT, epsilon_c=600.0, value_range=(0, 48), slot_seconds=3600, reps=99)
    assert r["ci_coverage_upper"] < 0.95
    worst = min(p["coverage"] for p in r["ci_coverage_parts"])
    assert worst < 0.85 and max(p["coverage"] for p in r["ci_coverage_parts"]) > 0.95


def test_plot_draws_the_releases_with_both_bands(tmp_path):
    ledger, fig, fig2 = tmp_path / "l.db", tmp_path / "p.png", tmp_path / "q.svg"
    rep = ok_json("publish", "--A", 3, "--S-bar", 2, "--epsilon-c", 5, "--value-range", "0:48", "--ledger", ledger,
                  "--through", 100, "--plot", fig)
    assert rep["plot"] == str(fig) and rep["plot_truth"] is True  # the bundled stream is the bundled design's data
    assert fig.stat().st_size > 10_000 and fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    audit = ok_json("ledger", "--ledger", ledger, "--plot", fig2)
    assert audit["plot"] == str(fig2) and "<svg" in fig2.read_text()
    bad = run_any("publish", "--A", 3, "--S-bar", 2, "--epsilon-c", 5, "--value-range", "0:48", "--ledger",
                  tmp_path / "m.db", "--plot", tmp_path / "p.gif")
    refused(bad, "--plot", "p.gif")
    assert not (tmp_path / "m.db").exists()  # refused before any work


@pytest.mark.slow
def test_parquet_out_holds_the_csv_columns_and_is_rebuilt_from_the_ledger(tmp_path):
    import pyarrow.parquet as pq

    from policyopt.deploy import Ledger
    from policyopt.deploy.error_bars import recorded_intervals
    from policyopt.deploy.out_file import OUT_HEADER, render_out

    ledger, out = tmp_path / "l.db", tmp_path / "r.parquet"
    args = ["publish", "--A", 3, "--S-bar", 2, "--epsilon-c", 5, "--value-range", "0:48", "--ledger", ledger, "--out", out]
    first = ok_json(*args, "--through", 60)
    second = ok_json(*args, "--through", 100)
    assert first["out"] == second["out"] == str(out) and not second["out_rebuilt"]
    table = pq.read_table(out)
    assert table.column_names == OUT_HEADER.split(",") and table.num_rows == 49
    with Ledger(ledger) as led:
        rows, record = led.rows(), recorded_intervals(led.meta())
    # the same numbers as the CSV form, column by column (floats bit for bit)
    csv_rows = list(csv.DictReader(render_out(rows, record).splitlines()))
    for got, want in zip(table.to_pylist(), csv_rows):
        assert {k: (None if v is None else str(v) if isinstance(v, str) else repr(v)) for k, v in got.items()} == \
            {k: (None if v == "" else v) for k, v in want.items()}
    assert table.to_pylist()[0]["ci_current_low"] is not None
    out.unlink()  # deleted: rebuilt from the ledger, no noise redrawn
    again = ok_json(*args, "--through", 100)
    assert again["released"] == 0 and again["out_rebuilt"] is True and pq.read_table(out).equals(table)
    other = tmp_path / "other.db"  # a new ledger next to a file of releases: refused (fresh noise for released slots)
    refused(run_any(*[other if a == ledger else a for a in args], "--through", 100), "already holds 49 releases")
    assert not other.exists()


def test_a_parquet_design_is_not_read_whole_for_the_current_interval(tmp_path):
    df = load_citylearn()
    df = df[df["time"] < 24 * 20]
    data = tmp_path / "homes.parquet"
    df.to_parquet(data, index=False)
    rep = ok_json("publish", "--A", 2, "--S-bar", 4, "--epsilon-c", 0.5, "--value-range", "0:48", "--model", f"data:{data}",
                  "--data", data, "--through", 100, "--ledger", tmp_path / "l.db")
    assert rep["intervals"]["current"] is None and "Parquet" in rep["intervals"]["current_why"]
    r = rep["new_releases"][0]
    assert r["ci_low"] < r["value"] < r["ci_high"] and r["ci_current_low"] is None
