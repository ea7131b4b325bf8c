"""``policyopt check-data``: the data check before any design — span, slot length, ragged meters, gaps, sparse
quantile states and the changes it suggests, every number recomputed here from the readings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from policyopt.models.estimation import fit_population
from policyopt.studies.backtest import split_slot
from tests._cli import ok_json, refused, run_any, run_cli

T = 2880  # 60 days of 30-minute slots
SPANS = {"A": (0, T), "B": (600, T), "C": (0, 1201)}  # B starts 600 slots late, C ends 1679 slots early
DROPPED = {"A": 0, "B": 37, "C": 11}  # missing slots inside each meter's own span
VALUE_RANGE = (0.0, 10.0)
RANGE = "0:10"


def ragged_readings() -> pd.DataFrame:
    """Three half-hourly meters: AR(1) readings (φ = 0.5, sd 1.5) around 5; C's mean 1.2 lower, so that C is rarely
    in the top quantile state of six (pooled edges) and often enough in the top one of three."""
    rng = np.random.default_rng(5)
    parts = []
    for user, (a, b) in SPANS.items():
        n = b - a
        x = np.empty(n)
        x[0] = rng.normal()
        e = rng.normal(size=n) * np.sqrt(1 - 0.5**2)
        for i in range(1, n):
            x[i] = 0.5 * x[i - 1] + e[i]
        v = 5.0 - (1.2 if user == "C" else 0.0) + 1.5 * x
        keep = np.ones(n, dtype=bool)
        if DROPPED[user]:
            keep[rng.choice(n, DROPPED[user], replace=False)] = False
        parts.append(pd.DataFrame({"user": user, "time": np.arange(a, b)[keep], "value": np.round(v[keep], 4)}))
    return pd.concat(parts, ignore_index=True)


def out_counts(df: pd.DataFrame, states: int) -> dict:
    """{user: transitions out of each state}, from the quantizer schedule fits (numpy, independently of check-data)."""
    quant = fit_population(df, states, value_range=VALUE_RANGE).quantizer
    out = {}
    for user, g in df.sort_values(["user", "time"]).groupby("user"):
        t = g["time"].to_numpy()
        s = quant.transform(np.clip(g["value"].to_numpy(), *VALUE_RANGE))
        out[user] = np.bincount(s[:-1][np.diff(t) == 1], minlength=states)
    return out


@pytest.fixture(scope="module")
def readings():
    return ragged_readings()


@pytest.fixture(scope="module")
def csv(readings, tmp_path_factory):
    path = tmp_path_factory.mktemp("check_data") / "f.csv"
    readings.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def report(csv):
    return ok_json("check-data", "--data", csv, "--value-range", RANGE, "--slot-length", "30min", "--states", 6)


def test_ragged_meters_gaps_and_the_day_of_slots(report):
    assert report["users"] == 3 and report["readings"] == sum(b - a - DROPPED[u] for u, (a, b) in SPANS.items())
    assert (report["first_slot"], report["last_slot"], report["slots"]) == (0, T - 1, T)
    assert (report["slot_length"], report["slot_seconds"], report["slot_length_source"]) == ("30min", 1800, "given")
    assert report["phase_period"] == 48
    assert report["ragged"] == [
        {"user": "B", "first_slot": 600, "last_slot": T - 1, "readings": T - 600 - 37, "missing": 37},
        {"user": "C", "first_slot": 0, "last_slot": 1200, "readings": 1201 - 11, "missing": 11},
    ]
    assert report["gaps"] == 48 and report["gap_fraction"] == pytest.approx(48 / (T + (T - 600) + 1201), rel=1e-15)
    assert any("--phase-period 48" in s for s in report["suggestions"])
    # the default split at 0.5 leaves C without held-out readings; the fraction suggested leaves every meter both sides
    assert split_slot(np.array([0, T - 1]), 0.5) == 1440 > 1200
    tip = next(s for s in report["suggestions"] if s.startswith("backtest --train-fraction "))
    fraction = float(tip.split()[2])
    split = split_slot(np.array([0, T - 1]), fraction)
    assert 600 < split <= 1200 and "C (last reading at slot 1200: no held-out readings)" in tip
    assert report["mse_pilot"] == {"users": 3, "periods": 60, "band_possible": True, "cross_term_users_ok": True}


def test_sparse_rows_and_the_suggested_states_are_the_readings(readings, report):
    quant = fit_population(readings, 6, value_range=VALUE_RANGE).quantizer
    assert report["state_values"] == quant.state_values.tolist()
    assert (report["min_count"], report["min_pairs"]) == (30, 100)
    counts = out_counts(readings, 6)
    expected = sorted(({"user": u, "state": k, "state_value": float(quant.state_values[k]), "count": int(c[k])}
                       for u, c in counts.items() for k in range(6) if c[k] < 100),
                      key=lambda r: (r["count"], r["user"], r["state"]))
    assert report["sparse_rows"] == expected
    assert [(r["user"], r["state"]) for r in expected] == [("C", 5)] and expected[0]["count"] < 100  # C's rare top state
    # the largest K' whose refitted states leave every row with ≥ 100 transitions
    ok = [k for k in range(2, 7) if min(int(c.min()) for c in out_counts(readings, k).values()) >= 100]
    assert report["suggested_states"] == max(ok) == 3
    assert any(s.startswith("use --states 3:") for s in report["suggestions"])


@pytest.mark.slow
def test_the_suggested_states_let_the_empirical_design_claim_what_six_states_cannot(csv, report):
    k = report["suggested_states"]
    again = ok_json("check-data", "--data", csv, "--value-range", RANGE, "--slot-length", "30min", "--states", k)
    assert again["sparse_rows"] == [] and again["suggested_states"] == k
    box = ("--max-tv", "empirical", "--max-age", 4, "--max-interval", 4, "--users", 100, "--max-penalty", 0.05,
           "--penalty", "readings")  # the Δ̃ claim is the subject; the MSE's point estimate keeps f̄ reachable
    good = ok_json("schedule", "--data", csv, "--value-range", RANGE, "--states", k, *box)
    used = good["empirical_max_tv"]["max_tv_used"]
    assert good["empirical_max_tv"]["users_without_claim"] == 0 and min(used[1:]) < 1  # Δ̃ claimed below 1
    assert good["status"] == "optimal"
    bad = ok_json("schedule", "--data", csv, "--value-range", RANGE, "--states", 6, *box)
    assert bad["empirical_max_tv"]["users_without_claim"] == 1  # C's rare row
    assert bad["empirical_max_tv"]["max_tv_used"] == [1.0] * len(used)  # Δ̃ = 1 at every lag


def test_time_stamps_give_the_same_check(readings, report, tmp_path):
    stamped = readings.assign(time=(pd.Timestamp("2024-01-01T00:00:00Z") + pd.to_timedelta(readings["time"] * 30, unit="min"))
                              .dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    path = tmp_path / "stamped.csv"
    stamped.to_csv(path, index=False)
    got = ok_json("check-data", "--data", path, "--value-range", RANGE, "--states", 6)
    assert (got["slot_length"], got["slot_seconds"], got["slot_length_source"]) == ("30min", 1800, "time stamps")
    assert "2024-01-01T00:00:00+00:00" in got["data"]
    skip = ("data", "wall_time_s", "slot_length_source", "suggestions")
    assert {k: v for k, v in got.items() if k not in skip} == {k: v for k, v in report.items() if k not in skip}
    # the one difference: a slot length given as --slot-length must be given to schedule too (time stamps are read by
    # every command, whose phase period is then a day of slots by default)
    extra = [s for s in report["suggestions"] if s.startswith("give schedule --slot-length 30min too")]
    assert len(extra) == 1 and got["suggestions"] == [s for s in report["suggestions"] if s not in extra]


def test_bundled_data():
    from policyopt.data import BUNDLED_VALUE_RANGE, load_citylearn

    r = ok_json("check-data")
    assert (r["users"], r["readings"], r["first_slot"], r["last_slot"], r["slots"]) == (17, 148_920, 0, 8759, 8760)
    assert (r["slot_length"], r["slot_seconds"], r["slot_length_source"], r["phase_period"]) == ("1h", 3600, "bundled", 24)
    assert r["ragged"] == [] and r["gaps"] == 0 and r["gap_fraction"] == 0
    assert r["states"] == 3 and r["sparse_rows"] == [] and r["suggested_states"] == 3
    quant = fit_population(load_citylearn(), 3, value_range=BUNDLED_VALUE_RANGE).quantizer
    assert r["state_values"] == quant.state_values.tolist()
    assert r["mse_pilot"] == {"users": 17, "periods": 365, "band_possible": True, "cross_term_users_ok": True}
    assert r["suggestions"] == [] and r["warnings"] == []


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    refused(run_any("check-data", "--data", tmp_path / "missing.csv"), "--data file not found", "missing.csv")
    refused(run_any("check-data", "--slot-length", "7x"), "--slot-length", "'7x'")
    res = run_any("check-data", "--states", "1")  # argparse's one line: `policyopt check-data: error: …`
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "--states must be ≥ 2, got '1'" in res.stderr


def test_text_has_a_line_per_check(csv):
    text = run_cli("check-data", "--data", csv, "--value-range", RANGE, "--slot-length", "30min", "--states", 6).stdout
    lines = text.splitlines()
    assert lines[0].startswith("policyopt check-data:")
    labels = [ln.split(" : ")[0].strip() for ln in lines[1:]]
    for label in ("data", "readings", "slot length", "ragged", "gaps", "states", "sparse rows", "suggested",
                  "MSE pilot", "suggestion", "warning", "wall time"):
        assert label in labels, (label, text)
    assert "a day is 48 slots: --phase-period 48 of schedule (its default with --slot-length)" in text
    assert "C state 5" in text
    assert lines[-1].startswith("wall time   : ")
