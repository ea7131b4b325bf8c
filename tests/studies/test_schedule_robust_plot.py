"""`policyopt schedule --robust LEVEL --plot FILE` draws ε(t) with the Δ(t) band the design used (issue 11 follow-up).

The plotted values come from :func:`policyopt.studies.plots.schedule_trajectory` (returned by ``plot_schedule``); the
tests compare them with Theorem 3's eq. (25) written out here from the band, never by reading the image.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from policyopt.cli.main import main
from policyopt.errors import InvalidInputError
from policyopt.models.markov import MarkovChain, Population
from policyopt.models.tabulated import TabulatedMaxTV
import _warm_cli  # noqa: E402

EXE = Path(sys.executable).with_name("policyopt")
BOX = ["--max-age", "48", "--max-interval", "48"]  # band horizon H = max(48, 48) + 1 = 49 slots
H = 49


def _no_constants(name):
    raise ValueError(f"non-finite constant {name} in JSON")


def band_delta(log_band: np.ndarray, t: int) -> float:
    """Δ(t) of the band, continued beyond H by Δ(qH + r) ≤ Δ(H)^q Δ(r) (written out independently of the code)."""
    h = len(log_band) - 1
    if t <= h:
        return math.exp(log_band[t])
    q, r = divmod(t, h)
    return math.exp(log_band[h]) ** q * math.exp(log_band[r])


def theorem3_risk(A: int, S_bar: int, eps: float, delta, epochs: int) -> np.ndarray:
    """ε(t), t = 0..A + epochs·S̄ − 1, of publications S_n = A + n·S̄ of the inputs n·S̄ (Zhang et al. 2024, eq. (25)).

    In epoch n, ε(t) = ln(1 + Δ(t − n·S̄)(e^{ε_C + ε_n} − 1)) with ε_0 = 0 and ε_n the leakage of queries < n about
    input n·S̄: ε_n = ln(1 + Δ(S̄)(e^{ε_C + ε_{n−1}} − 1)).
    """
    T = A + epochs * S_bar - 1
    risk = np.zeros(T + 1)
    prior = 0.0
    for n in range(epochs):
        if n > 0:
            prior = math.log1p(delta(S_bar) * math.expm1(eps + prior))
        for t in range(A + n * S_bar, A + (n + 1) * S_bar):
            risk[t] = math.log1p(delta(t - n * S_bar) * math.expm1(eps + prior))
    return risk


@pytest.fixture
def two_chains(nonreversible3):
    slow = MarkovChain([[0.9, 0.1, 0.0], [0.05, 0.9, 0.05], [0.0, 0.2, 0.8]], state_values=[0.0, 1.0, 3.0])
    return Population([nonreversible3, slow], [1, 1])


def test_extended_table_bounds_the_exact_max_tv(two_chains):
    """Continuing ln Δ(0..6) by submultiplicativity stays ≥ the exact Δ(t) of eq. (12) up to t = 80."""
    h = 6
    exact = np.asarray(two_chains.log_max_tv(np.arange(81)), dtype=float)
    tab = TabulatedMaxTV(exact[: h + 1], two_chains.n_users, two_chains.spectral_rate)
    ext = tab.extended(80)
    got = np.asarray(ext.log_max_tv(np.arange(81)), dtype=float)
    assert ext.horizon == 80 and ext.n_users == 2
    assert np.array_equal(got[: h + 1], exact[: h + 1])  # tabulated ages keep their value
    assert np.all(got >= exact - 1e-12)  # an upper bound on the true Δ(t)
    assert np.all(np.diff(got) <= 1e-12)  # non-increasing
    for t in (7, 13, 20, 80):  # pinned by the formula: ln Δ(qH + r) = q ln Δ(H) + ln Δ(r)
        q, r = divmod(t, h)
        assert got[t] == pytest.approx(q * exact[h] + exact[r], rel=1e-14)
    assert got[80] < exact[h]  # strictly below the constant continuation Δ(H)
    assert tab.extended(4) is tab and tab.extended(6) is tab


def test_extended_table_errors():
    tab = TabulatedMaxTV([0.0, -1.0], 1, 0.5)
    with pytest.raises(InvalidInputError, match=r"`horizon`"):
        tab.extended(-1)
    with pytest.raises(InvalidInputError, match=r"a Δ\(t\) table with only Δ\(0\) cannot be extended"):
        TabulatedMaxTV([0.0], 1, 0.5).extended(3)
    # Δ(t) = 0 from t = 1 on (i.i.d. users): the continuation stays exactly 0, never NaN
    zero = TabulatedMaxTV([0.0, -np.inf], 1, 0.5).extended(5)
    assert np.array_equal(zero.log_max_tv(np.arange(6)), [0.0] + [-np.inf] * 5)


def test_schedule_trajectory_equals_theorem_3_on_a_band():
    """A band shorter than the plot: schedule_trajectory continues it and follows eq. (25) slot by slot."""
    from policyopt.studies.plots import schedule_trajectory

    log_band = np.log([1.0, 0.8, 0.55, 0.4, 0.33, 0.3])  # H = 5
    src = TabulatedMaxTV(log_band, 3, 0.9)
    comp = schedule_trajectory(2, 4, 0.7, src, epochs=5)  # T = 2 + 5·4 − 1 = 21 > H
    ref = theorem3_risk(2, 4, 0.7, lambda t: band_delta(log_band, t), 5)
    assert comp.times.tolist() == list(range(22))
    np.testing.assert_allclose(comp.risk, ref, rtol=1e-13, atol=0)
    with pytest.raises(InvalidInputError, match=r"`S_bar` must be an integer ≥ 1 \(slots\), got 0"):
        schedule_trajectory(2, 0, 0.7, src)
    with pytest.raises(InvalidInputError, match=r"`epochs` must be an integer ≥ 1 \(slots\), got 0"):
        schedule_trajectory(2, 4, 0.7, src, epochs=0)


def test_robust_plot_draws_the_band_the_design_used(tmp_path, capsys, monkeypatch):
    """The ε(t) the CLI plots is eq. (25) on the --robust band (recomputed here), not on the point estimate."""
    import policyopt.studies.plots as plots
    from policyopt.data import load_citylearn
    from policyopt.models.estimation import fit_population
    from policyopt.studies.deployment import robust_source

    drawn = []
    real = plots.plot_schedule

    def recording(*args, **kwargs):
        fig, comp = real(*args, **kwargs)
        drawn.append((fig, comp))
        return fig, comp

    monkeypatch.setattr(plots, "plot_schedule", recording)
    png = tmp_path / "robust.png"
    epochs = 12
    # the chain penalty at the former demo bound: a schedule with S̄ > 1, so the plot runs beyond the band's horizon
    # the homes refute the chains (issue 32): the refuted chains' robust ε* is drawn on request
    assert main(["schedule", "--robust", "0.9", "--draws", "60", *BOX, "--plot", str(png), "--plot-epochs", str(epochs),
                 "--penalty", "chain", "--max-penalty", "1.5e-5", "--accept-refuted", "plot test", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal" and png.stat().st_size > 0
    assert out["plot_max_tv"] == "Δ(t) = the simultaneous posterior upper band, level 0.9 (--robust), as in the design"
    (fig, comp), = drawn
    A, S_bar, eps = out["A"], out["S_bar"], out["epsilon_c"]
    assert A + epochs * S_bar - 1 > H  # the plot runs beyond the band's horizon: the continuation is exercised

    # the band, rebuilt from the bundled pilot with the CLI's defaults (K = 3, smoothing 0.01, 0:48 kWh, seed 0)
    fitted = fit_population(load_citylearn(), 3, smoothing=0.01, source="bundled data", value_range=(0.0, 48.0))
    band, info = robust_source(fitted, H, level=0.9, draws=60, rng=np.random.default_rng(0))
    assert info["inflation"] == pytest.approx(out["robust"]["inflation"], rel=1e-15)
    log_band = np.asarray(band.log_max_tv(np.arange(H + 1)), dtype=float)
    ref = theorem3_risk(A, S_bar, eps, lambda t: band_delta(log_band, t), epochs)
    np.testing.assert_allclose(comp.risk, ref, rtol=1e-12, atol=0)
    # what the old plot drew (the point estimate) is visibly lower: the test tells the two apart
    log_point = np.asarray(fitted.population.log_max_tv(np.arange(A + epochs * S_bar)), dtype=float)
    point = theorem3_risk(A, S_bar, eps, lambda t: math.exp(log_point[t]), epochs)
    assert np.max(ref - point) > 0.05 and np.all(ref >= point - 1e-12)
    # the design's ε* is eq. (30) on the band (the limit of the in-epoch peaks ln(1 + Δ(A)(e^{ε_C + ε_n} − 1)), with
    # e^{ε_n} → (1 − Δ(S̄))/(1 − Δ(S̄)e^{ε_C})), and the plotted peaks rise towards it, never above it
    d_a, d_s = band_delta(log_band, A), band_delta(log_band, S_bar)
    limit = math.log1p(d_a * (math.exp(eps) * (1 - d_s) / (1 - d_s * math.exp(eps)) - 1))
    assert out["peak_risk"] == pytest.approx(limit, rel=1e-12)
    peaks = comp.epoch_peaks
    assert np.all(np.diff(peaks) > 0) and peaks[-1] <= out["peak_risk"]
    np.testing.assert_allclose(peaks, [ref[A + n * S_bar] for n in range(epochs)], rtol=1e-12)
    # the figure says which Δ(t) it shows: title line and legend
    title = fig._suptitle.get_text()
    assert "ε(t) drawn with Δ(t) = the simultaneous posterior upper band, level 0.9 (--robust), as in the design" in title
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == "ε(t), eq. (25), with the Δ(t) named in the title"


@pytest.mark.slow
def test_robust_plot_through_the_entry_point(tmp_path):
    """Installed `policyopt`: JSON names the Δ(t) drawn; the text report says the band was drawn."""
    svg = tmp_path / "r.svg"
    proc = _warm_cli.run(["schedule", "--robust", "0.9", "--draws", "40", *BOX, "--plot", str(svg), "--json"],
                         timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout, parse_constant=_no_constants)
    assert out["plot"] == str(svg) and svg.stat().st_size > 0
    assert out["plot_max_tv"].startswith("Δ(t) = the simultaneous posterior upper band, level 0.9 (--robust)")
    assert out["model"]["max_tv_source"] == "simultaneous posterior upper band of Δ(t) (level 0.9)"
    proc = _warm_cli.run(["schedule", "--robust", "0.9", "--draws", "40", *BOX, "--plot", str(svg)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^plot        : .*r\.svg \(ε\(t\) and AoI\(t\) over the first epochs; ε\(t\) with the --robust Δ\(t\) "
                     r"band the design used\)$", proc.stdout, re.M), proc.stdout
    # without --robust the plot is of the point estimate, and says so
    proc = _warm_cli.run(["schedule", *BOX, "--plot", str(svg), "--json"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout, parse_constant=_no_constants)
    assert out["plot_max_tv"] == "Δ(t) of the model (eq. (12), point estimate for data), as in the design"
