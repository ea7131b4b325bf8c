"""``policyopt check-model`` / ``po.check_model``: the fitted chains' Δ(t) against the readings."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest

import policyopt as po
from policyopt.formatting import text_problems
from policyopt.studies.check_model import lag_ranges
from tests._cli import POLICYOPT, run_cli, strict_json

FAST = ("--draws", "19", "--boot", "20")


def loop_direct_max_tv(series, K, t, min_pairs):
    """Δ̂(t) by plain loops: count (state at s, state at s − t) per user, rows with ≥ min_pairs pairs, max row TV."""
    best = 0.0
    for x in series:
        counts = [[0] * K for _ in range(K)]
        for s in range(t, len(x)):
            counts[x[s]][x[s - t]] += 1
        rows = [sum(r) for r in counts]
        for a in range(K):
            for b in range(a + 1, K):
                if rows[a] >= min_pairs and rows[b] >= min_pairs:
                    tv = 0.5 * sum(abs(counts[a][y] / rows[a] - counts[b][y] / rows[b]) for y in range(K))
                    best = max(best, tv)
    return best


def bundled_states(K):
    df = po.load_citylearn()
    fit = po.fit_population(df, K, value_range=(0.0, 48.0))
    series = []
    for user in fit.users:
        v = np.clip(df.loc[df["user"] == user].sort_values("time")["value"].to_numpy(), 0.0, 48.0)
        series.append([int(s) for s in fit.quantizer.transform(v)])
    return series


@pytest.mark.parametrize("K", [3, 12])
def test_bundled_chains_are_refuted_from_a_day_on(K):
    out = strict_json(run_cli("check-model", "--states", K, "--max-lag", 170, *FAST, "--json").stdout)
    assert out["states"] == K and out["level"] == 0.95 and out["users"] == 17
    lags = {row["lag"]: row for row in out["lags"]}
    assert sorted(lags) == list(range(1, 171))
    assert all(lags[t]["refuted"] for t in range(24, 171))
    assert set(range(24, 171)) <= set(out["refuted_lags"])
    for row in out["lags"]:
        assert 0 <= row["empirical_lower"] <= row["empirical_max_tv"] <= row["empirical_upper"] <= 1
    # the direct estimate is an independent lagged-pair count (plain loops), not the chain's
    series = bundled_states(K)
    for t in (24, 48, 168):
        assert lags[t]["empirical_max_tv"] == pytest.approx(loop_direct_max_tv(series, K, t, out["min_pairs"]), abs=1e-12)
        assert lags[t]["empirical_max_tv"] > 0.8 and lags[t]["model_max_tv"] < 0.2


def _chain_readings(P, users, T, seed):
    """Readings 0/1/2 of `users` independent runs of the chain P (state k read as value k)."""
    from policyopt.models.empirical import simulate_chain_states

    rng = np.random.default_rng(seed)
    x = simulate_chain_states([P] * users, [T] * users, rng.integers(0, 3, users), 1, rng)[0]
    return pd.DataFrame({"user": np.repeat([f"u{i}" for i in range(users)], T), "time": np.tile(np.arange(T), users),
                         "value": x.reshape(-1).astype(float)})


def test_data_from_a_chain_are_refuted_at_about_the_nominal_share_of_lags():
    pi = np.array([0.2, 0.3, 0.5])  # quantile edges then fall between the values 0, 1, 2: states are recovered exactly
    P = 0.6 * np.eye(3) + 0.4 * pi[None, :]  # stationary π, Δ(t) = 0.6^t
    df = _chain_readings(P, 4, 4000, seed=11)
    rep = po.check_model(df, n_states=3, max_lag=120, draws=39, n_boot=20, seed=3)
    share = len(rep.refuted_lags) / 120
    assert share <= 0.12, rep.refuted_lags  # nominal 0.05 per lag; lags are dependent, so allow some spread
    np.testing.assert_allclose(rep.model_max_tv[:5], 0.6 ** np.arange(1, 6), atol=0.05)


def test_a_slowly_switching_regime_refutes_the_first_order_chain():
    # a regime that persists ~400 slots; readings i.i.d. given the regime: long memory a chain over states cannot hold
    rng = np.random.default_rng(12)
    rows = []
    for u in range(4):
        regime, vals = 0, []
        for _ in range(6000):
            if rng.random() < 1 / 400:
                regime = 1 - regime
            vals.append(rng.normal(2.0 * regime, 1.0))
        rows.append(pd.DataFrame({"user": f"u{u}", "time": np.arange(6000), "value": vals}))
    rep = po.check_model(pd.concat(rows), n_states=3, max_lag=150, draws=19, n_boot=20)
    assert set(range(30, 151)) <= set(rep.refuted_lags)
    d = rep.to_dict()
    assert d["lags"][99]["model_max_tv"] < 0.01 < d["lags"][99]["empirical_lower"]


def test_python_report_prints_the_cli_text_and_holdout():
    rep = po.check_model(n_states=3, max_lag=60, holdout=0.5, draws=19, n_boot=20)
    d = rep.to_dict()
    assert d["holdout"] == 0.5 and d["slots"] == 4380 and d["fit_slots"] == 4380
    text = str(rep)
    assert text.startswith("policyopt check-model:")
    assert "fitted on the first 50% of each series" in text
    assert f"refuted     : at {len(d['refuted_lags'])} of 60 lags" in text
    assert isinstance(rep.empirical, po.EmpiricalMaxTV)


def test_cli_text_and_plot(tmp_path):
    png = tmp_path / "check.png"
    out = run_cli("check-model", "--max-lag", 48, *FAST, "--plot", png).stdout
    assert out.startswith("policyopt check-model:") and text_problems(out) == [], out
    assert "REFUTED" in out and f"plot        : {png}" in out
    assert png.stat().st_size > 10_000


def test_cli_csv_holdout_json(tmp_path):
    pi = np.array([0.2, 0.3, 0.5])
    df = _chain_readings(0.6 * np.eye(3) + 0.4 * pi[None, :], 2, 1500, seed=5)
    csv = tmp_path / "r.csv"
    df.to_csv(csv, index=False)
    out = strict_json(run_cli("check-model", "--data", csv, "--states", 3, "--holdout", 0.4, *FAST, "--json").stdout)
    assert out["holdout"] == 0.4 and out["max_lag"] == 60 and out["source"] == f"data {csv}"
    assert {"lag", "model_max_tv", "empirical_max_tv", "empirical_lower", "empirical_upper", "refuted"} <= set(out["lags"][0])


@pytest.mark.parametrize(
    "args, message",
    [
        (("--level", "1.5"), "--level must be a probability strictly between 0 and 1, got '1.5'"),
        (("--max-lag", "0"), "--max-lag must be ≥ 1, got '0'"),
        (("--holdout", "1"), "--holdout must be a probability strictly between 0 and 1, got '1'"),
        (("--max-lag", "9000"), "--max-lag 9000 must be below the series length T = 8760 slots"),
        (("--data", "/nonexistent.csv"), "/nonexistent.csv"),
        (("--plot", "x.gif"), "--plot must name a .png, .pdf or .svg file"),
    ],
)
def test_cli_bad_input_one_line_exit_2(args, message):
    proc = subprocess.run([POLICYOPT, "check-model", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


def test_lag_ranges():
    assert lag_ranges([1, 2, 3, 7, 9, 10]) == "1–3, 7, 9–10"
    assert lag_ranges([]) == "none"


def test_schedule_says_whether_the_lags_its_design_uses_are_refuted():
    """The model check names the lags the chosen schedule's ε* rests on (A..A + S̄ − 1 and S̄) and which are refuted."""
    import subprocess

    from _cli import POLICYOPT, strict_json

    run = subprocess.run([POLICYOPT, "schedule", "--max-penalty", "0.2", "--json"], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    out = strict_json(run.stdout)
    A, S = out["A"], out["S_bar"]
    mc = out["model_check"]
    assert mc["design_lags"] == sorted(({*range(A, A + S)} | {S}) - {0})
    assert mc["design_lags_refuted"] == [t for t in mc["design_lags"] if t in set(mc["refuted_lags"])]
    assert mc["design_lags_refuted"]  # an aged design on the bundled homes rests on refuted lags
    text = subprocess.run([POLICYOPT, "schedule", "--max-penalty", "0.2"], capture_output=True, text=True, timeout=600)
    line = next(x for x in text.stdout.splitlines() if x.startswith("model check"))
    assert "so its ε* is not a bound for the data" in line
