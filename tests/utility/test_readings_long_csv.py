"""Issue 24's done-when on long CSVs that are not the bundled data.

"On the bundled homes at I = 10⁵ and on any long CSV, the MSE a design promises is within 20 % of (or above) an
independent cross/self computation on the same readings at the design's peak AoI."  The bundled homes are tested in
tests/utility/test_readings_penalty.py (``test_design_promise_covers_the_readings_at_peak_aoi``); here two simulated long
hourly CSVs (numpy, seeded; simulation only, never released noise) go through the installed CLI,
``policyopt schedule --data FILE --users 100000 --max-penalty f --json``, and the promise is compared with a
brute-force computation written here: a loop over pairs of users for the cross term, per phase of the day.

- ``weather``: 30 users, a year (8,784 hourly slots): a user-scaled hour-of-day profile (morning and evening peaks),
  a common weather-like AR(1) factor (φ = 0.97) shared by every user, and an own AR(1) part (φ = 0.5).  Designed with
  ``--phase-period 24`` (worst hour of day).
- ``regime``: 25 users, a year: each user's level switches between 0.5 and 2.5 with probability 0.003 per slot (a
  slowly switching regime with long memory, mean dwell ≈ 14 days, independent across users), plus a common
  hour-of-day sine and white noise.  Designed with the default ``--phase-period`` (1: one phase, all slots pooled).

The bounds f̄ ∈ {0.05, 0.2, 0.5} (the data's unit squared; the bundled set's kWh² values) lie inside both data sets'
trade-off ranges by construction of the simulation; the test asserts it from the JSON's ``model.tradeoff_range``.
A short search box (``--max-age 48 --max-interval 48``), 3 states and 20 posterior draws keep the file under a minute.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from _cli import ok_json

T = 24 * 366  # one (leap) year of hourly slots
USERS = 100_000
F_BARS = (0.05, 0.2, 0.5)


def weather_panel(rng, n=30):
    """(n, T): amp_i · hour-of-day profile + common AR(1) weather factor + own AR(1) part."""
    h = np.arange(T) % 24
    prof = 0.6 + 0.5 * np.exp(-0.5 * ((h - 19) / 2.5) ** 2) + 0.3 * np.exp(-0.5 * ((h - 8) / 1.5) ** 2)
    w, e = np.zeros(T), rng.normal(0.0, 0.12, T)
    own, eo = np.zeros((n, T)), rng.normal(0.0, 0.3, (n, T))
    for k in range(1, T):
        w[k] = 0.97 * w[k - 1] + e[k]
        own[:, k] = 0.5 * own[:, k - 1] + eo[:, k]
    return rng.uniform(0.6, 1.4, n)[:, None] * prof[None, :] + w[None, :] + own


def regime_panel(rng, n=25):
    """(n, T): per-user two-level regime switching with probability 0.003 per slot + common daily sine + noise."""
    h = np.arange(T) % 24
    s = np.zeros((n, T), dtype=int)
    s[:, 0] = rng.integers(0, 2, n)
    flip = rng.random((n, T)) < 0.003
    for k in range(1, T):
        s[:, k] = np.where(flip[:, k], 1 - s[:, k - 1], s[:, k - 1])
    return np.where(s == 1, 2.5, 0.5) + 0.8 * np.sin(2 * np.pi * (h - 14) / 24)[None, :] + rng.normal(0.0, 0.3, (n, T))


CASES = {"weather": (weather_panel, 11, 24), "regime": (regime_panel, 12, None)}


@pytest.fixture(scope="module", params=sorted(CASES))
def long_csv(request, tmp_path_factory):
    """(name, path of the long CSV user,time,value, phase period or None)."""
    make, seed, period = CASES[request.param]
    X = make(np.random.default_rng(seed))  # simulation only
    n = X.shape[0]
    path = tmp_path_factory.mktemp("long") / f"{request.param}.csv"
    pd.DataFrame({"user": np.repeat(np.arange(n), T), "time": np.tile(np.arange(T), n), "value": X.ravel()}).to_csv(path, index=False)
    return request.param, path, period


def independent_worst_phase(X, a, I, P):
    """max over phases h = t mod P of cross_h(a) + (self_h(a) − cross_h(a))/I, by a loop over pairs of users.

    self: a user's own a-step change squared, averaged over users and the slots t ≥ a of the phase; cross: the mean
    over pairs i < j (each pair once: the ordered pairs' mean is the same) of d_i(t)·d_j(t), same slots."""
    n = X.shape[0]
    d = X[:, a:] - X[:, :-a]  # d[:, k] is the change at slot t = a + k
    pair = np.zeros(d.shape[1])
    for i, j in itertools.combinations(range(n), 2):
        pair += d[i] * d[j]
    pair /= n * (n - 1) / 2
    own = np.mean(d**2, axis=0)
    phase = (np.arange(a, X.shape[1])) % P
    frame = pd.DataFrame({"phase": phase, "self": own, "cross": pair}).groupby("phase").mean()
    return float(np.max(frame["cross"] + (frame["self"] - frame["cross"]) / I))


@pytest.fixture(scope="module")
def designs(long_csv):
    name, path, period = long_csv
    args = ["schedule", "--data", path, "--users", USERS, "--states", 3, "--max-age", 48, "--max-interval", 48,
            "--draws", 20]
    if period:
        args += ["--phase-period", period]
    return {f: ok_json(*args, "--max-penalty", f) for f in F_BARS}


@pytest.mark.slow
@pytest.mark.parametrize("f_bar", F_BARS)
def test_promise_covers_an_independent_computation_on_a_long_csv(long_csv, designs, f_bar):
    name, path, period = long_csv
    rep = designs[f_bar]
    X = pd.read_csv(path).pivot(index="user", columns="time", values="value").to_numpy()  # the readings as written
    low, high = rep["model"]["tradeoff_range"]
    assert low < f_bar < high, (name, low, high)  # f̄ inside the data's trade-off range (by the simulation's design)
    assert rep["model"]["penalty"] == "readings-mse" and rep["model"]["readings_penalty"]["phase_period"] == (period or 1)
    assert rep["status"] in ("optimal", "feasible", "unbounded") and rep["A"] is not None
    assert rep["penalty"] <= f_bar  # the design meets f̄
    peak = rep["peak_aoi"]
    assert peak == rep["A"] + rep["S_bar"] - 1
    noise = 2 * ((X.max() - X.min()) / USERS / rep["epsilon_c"]) ** 2  # Laplace noise of the mean, range = data's own
    indep = (independent_worst_phase(X, peak, USERS, period or 1) if peak > 0 else 0.0) + noise
    assert indep > 0.01 and rep["penalty"] >= 0.8 * indep, (name, peak, rep["penalty"], indep)


def independent_max_tv(states, L, min_pairs=100):
    """max over users of the largest TV between two rows (current state, ≥ `min_pairs` pairs) of the lag-t pair counts
    N[x, y] = #{s : state_s = x, state_{s−t} = y}, t = 1..L, by a loop over users and lags (no gaps here)."""
    K = int(states.max()) + 1
    out = np.zeros(L)
    for x in states:
        for t in range(1, L + 1):
            N = np.bincount(x[t:] * K + x[:-t], minlength=K * K).reshape(K, K)  # N[x_s, x_{s−t}] += 1 for each s
            rows = [N[k] / N[k].sum() for k in range(K) if N[k].sum() >= min_pairs]
            tv = [0.5 * np.abs(r - q).sum() for r, q in itertools.combinations(rows, 2)]
            out[t - 1] = max(out[t - 1], max(tv, default=0.0))
    return out


def test_schedule_max_tv_empirical_on_a_long_csv(long_csv):
    """Issue 23's done-when on a long CSV that is not the bundled data: ``schedule --max-tv empirical`` designs, the
    Δ(t) it uses is ≥ the direct estimate (which equals an independent count) at every lag ≤ L, and the printed risk
    is ≥ Theorem 3's recomputation with that Δ(t)."""
    import policyopt as po

    name, path, period = long_csv
    df = pd.read_csv(path)
    lo, hi = float(np.floor(df["value"].min())), float(np.ceil(df["value"].max()))
    args = ["schedule", "--data", path, "--users", USERS, "--states", 3, f"--value-range={lo}:{hi}",
            "--max-age", 12, "--max-interval", 12, "--draws", 20, "--max-tv", "empirical", "--max-penalty", 0.2,
            "--accept-refuted", "checks the numerics of the band's design"]
    if period:
        args += ["--phase-period", period]
    rep = ok_json(*args)
    emp = rep["empirical_max_tv"]
    used, est, upper = emp["max_tv_used"], emp["estimate"], emp["upper"]
    L = len(est)
    assert L >= 12 + 12 - 1 and used[0] == 1.0
    assert all(used[t] >= upper[t - 1] >= est[t - 1] for t in range(1, len(used)))
    # the direct estimate against an independent count on the states of the same quantile edges
    fit = po.fit_population(df.assign(user=df["user"].astype(str)), 3, value_range=(lo, hi))
    X = df.pivot(index="user", columns="time", values="value").to_numpy()
    states = np.searchsorted(fit.quantizer.edges, np.clip(X, lo, hi), side="right")
    np.testing.assert_allclose(est, independent_max_tv(states, L), rtol=0, atol=1e-12)
    assert max(est[23:]) > 0.1  # long memory: the households' regimes / weather still show after a day
    # issue 32: that memory refutes the first-order premise on held-out time: the guarantee stated is model-free
    assert rep["model_check"]["markov_test"]["refuted"] is True and rep["guarantee"]["kind"] == "model-free"
    if rep["horizon_design"] is not None:  # no infinite-horizon ε*: the largest risk over the horizon
        hd = rep["horizon_design"]
        times = hd["A"] + hd["S_bar"] * np.arange(hd["releases"])
        comp = po.compose(times, hd["A"], hd["epsilon_c"], np.array(used + [1.0] * hd["horizon"]), horizon=hd["horizon"])
        assert hd["horizon_risk"] >= float(comp.risk.max())
    else:
        assert rep["peak_risk"] >= po.peak_risk(used[rep["A"]], used[rep["S_bar"]], rep["epsilon_c"]).value
