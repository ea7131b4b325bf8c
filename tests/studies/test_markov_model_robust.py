"""``policyopt schedule --markov-model MODEL`` with ``--robust``, ``--credible`` and ``--plot`` (issue 32, item 4: the
uncertainty of Δ_Z carried as the chains' is), and the refusal of ``--max-tv empirical`` with such a model.

Data: 20 users × 3000 hourly binary slots of the order-2 chain of ``tests/_processes.py`` (seed 1); ``order:2`` passes
its held-out checks there.  Each CLI run takes 8–15 s in process (the held-out check is most of it); the runs are
cached and shared by the tests.  The posterior draws are reproduced here from the same seed (the CLI's generator is
``default_rng(--seed)``, whose first consumer is the band, or the credible check without ``--robust``), so the band
and the credible quantile are compared with values computed from the draws with numpy.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

import _processes as P
from _cli import main_json, main_output, refused, run_any
from policyopt.models.estimation import fit_population
from policyopt.models.posterior import simultaneous_upper_band
from policyopt.privacy.age_dependent import peak_risk_values_log
from policyopt.studies.deployment import credible_peak_risk, robust_source
from policyopt.studies.markov_check import fit_for_design

USERS, SLOTS = 20, 3000
BOX = 24
H = BOX + 1  # the band's horizon: max(A_MAX, S_MAX) + 1
COMMON = ("--value-range", "0:1", "--states", "2", "--max-age", str(BOX), "--max-interval", str(BOX), "--users", "10000",
          "--max-rmse", "0.01", "--slot-length", "1h", "--phase-period", "1", "--markov-model", "order:2",
          # the point estimate of the readings' MSE: the users are independent, so at I = 10,000 the staleness band
          # reaches 0 and the default (readings-auto) would design against its upper end; these tests are about Δ_Z
          "--penalty", "readings")


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    """Order-2 binary readings (seed 1), written once."""
    path = tmp_path_factory.mktemp("markov_robust") / "order2.csv"
    P.order2_chain().simulate(USERS, SLOTS, np.random.default_rng(1)).to_csv(path, index=False)
    return str(path)


@lru_cache(maxsize=None)
def _run(path: str, *args: str) -> dict:
    """``policyopt schedule --data PATH COMMON ARGS --json`` in this process (exit 0 asserted), strict JSON."""
    return main_json("schedule", "--data", path, *COMMON, *args)


@lru_cache(maxsize=None)
def _model(path: str):
    """The order-2 model the CLI designs with: fitted on every reading, on the chains' quantile states."""
    df = pd.read_csv(path)
    fitted = fit_population(df, 2, value_range=(0.0, 1.0))
    return fit_for_design("order:2", df, fitted.quantizer, fitted.users, value_range=(0.0, 1.0),
                          smoothing=fitted.smoothing, seed=0, default_period=24)


def test_robust_order2_designs_against_the_band_of_delta_z(csv):
    plain = _run(csv)
    rob = _run(csv, "--robust", "0.9")
    model = _model(csv)
    # the model passed, so the guarantee is the model-based ε* in both runs (the rules are unchanged)
    for out in (plain, rob):
        assert out["model_check"]["chosen"] == "order:2" and out["model_check"]["passed"]
        assert out["guarantee"]["kind"] == "model-based" and out["status"] in ("optimal", "unbounded")
    assert rob["deployment"]["model"]["max_tv_source"] == "posterior-band:0.9"
    assert plain["deployment"]["model"]["max_tv_source"] == "chain"
    rb = rob["robust"]
    assert (rb["level"], rb["draws"], rb["horizon"], rb["model"]) == (0.9, 200, H, "order:2")
    assert "Dir(counts + smoothing)" in rb["posterior"] and rb["coverage"] >= 0.9
    assert "Δ_Z(t) of the Markov model order:2 (level 0.9)" in rob["model"]["max_tv_source"]
    band = np.array(rb["max_tv"])
    ts = np.arange(H + 1)
    point = np.asarray(model.log_max_tv(ts))
    assert band.shape == (H + 1,) and band[0] == 1.0
    assert np.all(np.log(band) >= point - 1e-12)  # ≥ the fitted Δ_Z at every age the design can use
    assert np.all(np.diff(band) <= 0)  # non-increasing, as the chains' band
    assert np.any(np.log(band[2:]) > point[2:] + 1e-3)  # a real margin over the point estimate
    # the band is the chains' construction on the model's posterior draws (same seed, same first use of the generator)
    draws = model.log_max_tv_draws(ts, 200, np.random.default_rng(0))
    q = np.quantile(draws, 0.9, axis=0, method="inverted_cdf")
    assert np.all(np.log(band) >= q - 1e-12)  # ≥ the pointwise 0.9 quantile of the draws
    expected, _ = simultaneous_upper_band(draws, 0.9, point)
    np.testing.assert_allclose(band, np.exp(expected), rtol=1e-12, atol=0)
    # designing against a larger Δ_Z: the stated risk is not below the point design's
    assert rob["peak_risk"] >= plain["peak_risk"] > 0
    assert rob["guarantee"]["epsilon"] == pytest.approx(rob["peak_risk"], rel=1e-12)
    assert rob["guarantee"]["epsilon"] >= plain["guarantee"]["epsilon"]


def _small_model(csv, spec: str, *, users: int, slots: int):
    """The model `spec` fitted for a design on the first `users` users' first `slots` slots of `csv` (binary)."""
    df = pd.read_csv(csv)
    small = df[df["user"].isin(sorted(df["user"].unique())[:users]) & (df["time"] < slots)]
    fitted = fit_population(small, 2, value_range=(0.0, 1.0))
    return fit_for_design(spec, small, fitted.quantizer, fitted.users, value_range=(0.0, 1.0), smoothing=0.01,
                          seed=0, default_period=24)


def test_robust_band_is_the_empirical_quantile_of_the_draws(csv):
    """With one age beyond Δ_Z(1) = 1 (order 2 on binary states: Z holds X_{t−1}), no inflation is needed for the
    band to hold simultaneously, so at t = 2 it is the empirical level quantile of the draws (or the point estimate,
    if larger); over a longer horizon it is that quantile plus the one inflation the info reports."""
    model = _small_model(csv, "order:2", users=5, slots=1500)
    M, level = 1000, 0.8
    src, info = robust_source(model, 2, level=level, draws=M, rng=np.random.default_rng(7))
    draws = model.log_max_tv_draws(np.arange(3), M, np.random.default_rng(7))
    assert np.all(np.abs(draws[:, :2]) <= 1e-15)  # Δ_Z(0) = Δ_Z(1) = 1 in every draw (ln Δ_Z(1) within rounding)
    q = np.quantile(draws[:, 2], level, method="inverted_cdf")
    assert info["inflation"] <= 1e-15 and info["model"] == "order:2"
    assert src.log_max_tv(2) == pytest.approx(max(q, float(model.log_max_tv(2))), abs=1e-15)
    assert info["max_tv"][2] == pytest.approx(math.exp(src.log_max_tv(2)), rel=1e-15)
    assert np.mean(draws[:, 2] <= src.log_max_tv(2) + 1e-15) >= level
    # a horizon of 12 slots: pointwise quantile + one inflation δ (the ⌈level·M⌉-th smallest largest excess)
    M = 300
    src, info = robust_source(model, 12, level=level, draws=M, rng=np.random.default_rng(8))
    draws = model.log_max_tv_draws(np.arange(13), M, np.random.default_rng(8))
    q = np.quantile(draws, level, axis=0, method="inverted_cdf")
    delta = max(0.0, np.sort(np.max(draws - q, axis=1))[math.ceil(level * M) - 1])
    assert info["inflation"] == pytest.approx(delta, abs=1e-15)
    want = np.maximum(q + delta, np.asarray(model.log_max_tv(np.arange(13))))
    want = np.minimum(np.maximum.accumulate(want[::-1])[::-1], 0.0)
    np.testing.assert_allclose(src.log_max_tv(np.arange(13)), want, rtol=0, atol=1e-15)
    assert np.mean(np.all(draws <= want + 1e-12, axis=1)) >= level


def test_credible_with_order2_is_the_quantile_of_epsilon_over_the_draws(csv, tmp_path):
    png = tmp_path / "order2.png"
    out = _run(csv, "--credible", "0.9", "--plot", str(png))
    # --plot draws ε(t) with the model's Δ_Z (whose ln Δ_Z(1) = 0 must not round above 0: eq. (25) refuses that)
    assert out["plot"] == str(png) and png.stat().st_size > 0
    assert out["plot_max_tv"] == "Δ(t) = Δ_Z(t) of the Markov model order:2 (point estimate), as in the design"
    cred = out["credible"]
    assert (cred["level"], cred["draws"], cred["seed"], cred["model"]) == (0.9, 200, 0, "order:2")
    assert "Markov model order:2" in cred["note"] and cred["condition_31_fails"] == 0.0
    # the point estimate is ε* of the design (the same schedule under the fitted Δ_Z), inside (0, upper]
    assert cred["point"] == pytest.approx(out["peak_risk"], rel=1e-12)
    assert 0 < cred["point"] <= cred["upper"] and cred["median"] <= cred["upper"]
    # upper: the ⌈0.9·200⌉-th smallest ε* (30) over the posterior draws of Δ_Z(A), Δ_Z(S̄), reproduced with numpy
    A, S, eps = int(out["A"]), int(out["S_bar"]), float(out["epsilon_c"])
    draws = _model(csv).log_max_tv_draws([A, S], 200, np.random.default_rng(0))
    risks = np.sort(peak_risk_values_log(draws[:, 0], draws[:, 1], eps))
    assert cred["upper"] == pytest.approx(risks[math.ceil(0.9 * 200) - 1], rel=1e-12)
    assert cred["median"] == pytest.approx(risks[math.ceil(0.5 * 200) - 1], rel=1e-12)
    again = credible_peak_risk(_model(csv), A, S, eps, level=0.9, draws=200, rng=np.random.default_rng(0))
    assert again["upper"] == cred["upper"] and again["point"] == cred["point"]


def test_robust_and_credible_text_lines_name_the_model(csv):
    code, text, err = main_output("schedule", "--data", csv, *COMMON, "--robust", "0.9", "--draws", "20")
    assert code == 0, err
    assert "Δ(t)        : simultaneous posterior upper band of Δ_Z(t) of the Markov model order:2 (level 0.9)" in text
    assert "robust      : designed against a Δ_Z(t) band of the Markov model order:2 that holds for the whole curve" in text
    assert "credible    : posterior median ε* = " in text and "over 20 posterior draws of Δ_Z (seed 0)" in text
    assert "for any order:2 models whose Δ_Z(t) lies below the band" in text


def test_max_tv_empirical_with_a_markov_model_is_refused(csv):
    res = run_any("schedule", "--data", csv, *COMMON, "--max-tv", "empirical")
    refused(res, "--max-tv empirical estimates Δ̃(t) from lag pairs of the readings X",
            "--markov-model order:2 needs Δ_Z(t)", "--robust LEVEL")


def test_auto_choosing_order2_designs_the_horizon_against_its_band(tmp_path):
    """XOR chain (an order-2 chain; ``auto`` chooses ``order:2``): no schedule has a finite ε*, so the design bounds the
    risk over the horizon by Theorem 3, here under the ``--robust`` band of Δ_Z, continued beyond its horizon H by
    submultiplicativity (the box's last age A_MAX + S_MAX − 1 is beyond H)."""
    from policyopt.models.tabulated import TabulatedMaxTV
    from policyopt.privacy.age_dependent import compose

    path = tmp_path / "xor.csv"
    P.xor_chain().simulate(USERS, SLOTS, np.random.default_rng(1)).to_csv(path, index=False)
    args = {**dict(zip(COMMON[::2], COMMON[1::2])), "--markov-model": "auto", "--max-rmse": "0.005"}
    args = [x for kv in args.items() for x in kv]
    r = main_json("schedule", "--data", path, *args, "--robust", "0.9")
    assert r["model_check"]["requested"] == "auto" and r["model_check"]["chosen"] == "order:2" and r["model_check"]["passed"]
    assert r["deployment"]["model"]["max_tv_source"] == "posterior-band:0.9"
    assert r["robust"]["model"] == "order:2" and r["A"] is None and r["credible"] is None
    hd = r["horizon_design"]
    assert hd["status"] == "optimal" and hd["accounting"] == "theorem-3"
    assert r["guarantee"]["kind"] == "model-based" and r["guarantee"]["epsilon"] == hd["horizon_risk"]
    df = pd.read_csv(path)
    fitted = fit_population(df, 2, value_range=(0.0, 1.0))
    model = fit_for_design("order:2", df, fitted.quantizer, fitted.users, value_range=(0.0, 1.0),
                           smoothing=fitted.smoothing, seed=0, default_period=24)
    band = np.log(np.array(r["robust"]["max_tv"]))
    assert np.all(band >= np.asarray(model.log_max_tv(np.arange(H + 1))) - 1e-12)
    # the stated horizon risk is Theorem 3's composition under the band (continued beyond H), not under Δ_Z itself
    A, S, eps = hd["A"], hd["S_bar"], hd["epsilon_c"]
    source = TabulatedMaxTV(band, USERS, 1.0).extended(2 * BOX - 1)
    publish = A + S * np.arange(hd["releases"])
    risk = compose(publish, A, eps, source, horizon=hd["horizon"]).risk
    assert float(np.max(risk)) == pytest.approx(hd["horizon_risk"], rel=1e-9)
    point = compose(publish, A, eps, model, horizon=hd["horizon"]).risk
    assert float(np.max(risk)) >= float(np.max(point))


def test_hmm_band_is_a_parametric_bootstrap_band(csv):
    """``hmm:R``: the draws of Δ_Z behind the band are the parametric bootstrap of
    :meth:`~policyopt.models.hidden_regime.HiddenRegimeModel.log_max_tv_draws` (its default), and the band and the
    credible result say so."""
    model = _small_model(csv, "hmm:2", users=3, slots=600)
    src, info = robust_source(model, 6, level=0.75, draws=4, rng=np.random.default_rng(3))
    draws = model.log_max_tv_draws(np.arange(7), 4, np.random.default_rng(3))  # method="bootstrap"
    expected, _ = simultaneous_upper_band(draws, 0.75, np.asarray(model.log_max_tv(np.arange(7))))
    np.testing.assert_array_equal(src.log_max_tv(np.arange(7)), expected)
    assert info["model"] == "hmm:2" and info["posterior"].startswith("a parametric bootstrap, not a posterior")
    assert np.all(expected >= np.asarray(model.log_max_tv(np.arange(7))))
    cred = credible_peak_risk(model, 2, 3, 0.05, level=0.75, draws=4, rng=np.random.default_rng(3))
    assert cred["note"].startswith("Bootstrap credible statement") and "hmm:2" in cred["note"]
    d = model.log_max_tv_draws([2, 3], 4, np.random.default_rng(3))
    assert cred["upper"] == np.sort(peak_risk_values_log(d[:, 0], d[:, 1], 0.05))[math.ceil(0.75 * 4) - 1]
