"""Plots: `policyopt sweep --plot` and `policyopt schedule --plot` draw real, non-empty figures (pixel checks)."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest

from _refs import dec_leak, dec_peak_risk
from policyopt.cli.main import main
from policyopt.errors import BackendUnavailableError, InvalidInputError
from policyopt.models.markov import two_state_chain
from policyopt.studies.plots import plot_schedule, plot_sweep, require_matplotlib
from policyopt.studies.sweep import read_sweep_csv

IID = ["--chain", "two-state:p=0.5,q=0.5", "--users", "20", "--max-age", "10", "--max-interval", "10"]


def gray_pixels(path) -> np.ndarray:
    """The PNG as gray levels in [0, 1] (1 = white)."""
    from matplotlib.image import imread

    img = imread(str(path))
    return img[..., :3].mean(axis=2)


def assert_drawn(path, panels: int) -> None:
    """Every horizontal panel band holds dark ink (lines, markers, labels), not just a blank canvas."""
    g = gray_pixels(path)
    assert g.shape[0] > 300 and g.shape[1] > 300
    assert (g < 0.99).mean() > 0.03  # more than a blank figure with a frame
    bands = np.array_split(g, panels, axis=0)
    for band in bands:
        assert (band < 0.3).mean() > 0.004, "a panel is empty"
    # grayscale styling: several distinct gray levels (black curves, gray benchmarks / grid)
    levels = np.unique(np.round(g[g < 0.95], 1))
    assert levels.size >= 4


def assert_axes_inked(fig, path) -> None:
    """Inside every axes' plot area (frame excluded) there are dark pixels: curves, markers were drawn."""
    g = gray_pixels(path)
    H, W = g.shape
    for ax in fig.axes:
        pos = ax.get_position()  # figure fractions of the last draw (the savefig)
        r0, r1 = int((1 - pos.y1) * H) + 4, int((1 - pos.y0) * H) - 4
        c0, c1 = int(pos.x0 * W) + 4, int(pos.x1 * W) - 4
        inside = g[r0:r1, c0:c1]
        assert inside.size > 10_000
        assert (inside < 0.3).mean() > 0.005, f"axes {ax.get_ylabel()!r} has no curve"


def test_sweep_plot_pixels_and_data(tmp_path, capsys):
    out, png = tmp_path / "s.csv", tmp_path / "s.png"
    assert main(["sweep", *IID, "--max-penalty", "0.03:0.51:17", "--out", str(out), "--plot", str(png), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["plot"] == str(png)
    assert_drawn(png, 3)
    rows = read_sweep_csv(out)
    fig = plot_sweep(rows, tmp_path / "again.png")
    assert_axes_inked(fig, tmp_path / "again.png")
    ax_risk, ax_sched, ax_eps = fig.axes
    # curves carry the sweep's numbers: ε*, the two benchmarks, A and S̄, ε_C
    ys = [np.asarray(line.get_ydata(), dtype=float) for line in ax_risk.lines]
    nan = float("nan")
    only = lambda col, status="status": [r[col] if r[status] == "optimal" else nan for r in rows]  # noqa: E731
    np.testing.assert_array_equal(ys[0], only("peak_risk"))  # the ε* curve joins optimal points only
    np.testing.assert_array_equal(ys[1], only("no_aging_peak_risk", "no_aging_status"))
    assert np.array_equal(ys[2], [r["noise_only_risk_after_releases"] for r in rows])
    np.testing.assert_array_equal(np.asarray(ax_sched.lines[0].get_ydata(), float), only("A"))
    np.testing.assert_array_equal(np.asarray(ax_eps.lines[0].get_ydata(), float), only("epsilon_c"))
    # grayscale-readable: the three risk curves differ in line style
    assert len({line.get_linestyle() for line in ax_risk.lines[:3]}) == 3
    # one hatched span per no-trade-off interval (13 on this grid: see test_sweep's closed form)
    assert sum(1 for p in ax_risk.patches if p.get_hatch() == "//") == sum(r["no_tradeoff"] is True for r in rows) == 13
    # axes labelled with units
    assert "nats" in ax_risk.get_ylabel() and "slots" in ax_sched.get_ylabel() and "nats" in ax_eps.get_ylabel()
    assert "squared value units" in ax_eps.get_xlabel()


def test_sweep_plot_pdf_and_several_models(tmp_path, capsys):
    out, pdf = tmp_path / "m.csv", tmp_path / "m.pdf"
    assert main(["sweep", "--chain", "two-state:p=0.1,q=0.1", "--max-age", "20", "--max-interval", "20",
                 "--max-penalty", "0.06:0.3:5", "--vary", "p=0.1,0.2", "--out", str(out), "--plot", str(pdf)]) == 0
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 5000
    fig = plot_sweep(read_sweep_csv(out), tmp_path / "m.png")
    curves = [line for line in fig.axes[0].lines if line.get_linestyle() in ("-", "--", ":")
              and line.get_label().startswith(("optimal", "no aging", "noise only"))]
    assert len(curves) == 6  # 3 curves × 2 models
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert any("(p=0.1)" in x for x in labels) and any("(p=0.2)" in x for x in labels)
    assert_drawn(tmp_path / "m.png", 3)


def test_schedule_plot_fig3_setting(tmp_path):
    """ε(t) and AoI(t) of A = 2, S̄ = 4, ε_C = 0.5 (the setting of Zhang et al.'s (2024) Fig. 3) on a two-state chain.

    # source: Zhang et al. (2024), Theorem 1 (14) and Theorem 3 (25) with Δ(t) = |1 − p − q|^t = 0.8^t for the
    # two-state chain (43) with p = q = 0.1; peak risk (30); AoI (24).  Reference values in 400-digit decimals.
    """
    chain = two_state_chain(0.1, 0.1)
    png = tmp_path / "fig3.png"
    fig, comp = plot_schedule(2, 4, 0.5, chain, png, epochs=4)
    assert_drawn(png, 2)
    assert_axes_inked(fig, png)
    t = comp.times
    assert t[-1] == 2 + 4 * 3 + 3  # four epochs drawn to the end of the last one
    risk = np.asarray(fig.axes[0].lines[0].get_ydata(), dtype=float)
    assert np.array_equal(risk, comp.risk)
    # first epoch [2, 6): input of slot 0, Theorem 1
    assert risk[0] == risk[1] == 0.0
    for s in range(2, 6):
        assert risk[s] == pytest.approx(dec_leak(0.8**s, 0.5), rel=1e-12)
    # second epoch [6, 10): input of slot 4, prior leakage ε(4) from the first query (25)
    prior = dec_leak(0.8**4, 0.5)
    for s in range(6, 10):
        assert risk[s] == pytest.approx(dec_leak(0.8 ** (s - 4), 0.5 + prior), rel=1e-12)
    # in-epoch peaks increase towards ε* of (30) and stay below it
    peaks = np.asarray(fig.axes[0].lines[1].get_ydata(), dtype=float)
    star = dec_peak_risk(0.8**2, 0.8**4, 0.5)
    assert np.all(np.diff(peaks) > 0) and peaks[-1] < star
    assert fig.axes[0].lines[2].get_ydata()[0] == pytest.approx(star, rel=1e-12)
    # AoI(t) = t − 4n on [2 + 4n, 6 + 4n), undefined before the first publication
    aoi = np.asarray(fig.axes[1].lines[0].get_ydata(), dtype=float)
    assert np.all(np.isnan(aoi[:2]))
    assert np.array_equal(aoi[2:], [s - 4 * ((s - 2) // 4) for s in range(2, 18)])
    assert "nats" in fig.axes[0].get_ylabel() and "slots" in fig.axes[1].get_ylabel() and "slots" in fig.axes[1].get_xlabel()


def test_schedule_plot_command(tmp_path, capsys):
    png = tmp_path / "sch.png"
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.08", "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plot"] == str(png) and (out["A"], out["S_bar"]) == (0, 5)
    assert_drawn(png, 2)
    svg = tmp_path / "sch.svg"
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.08", "--plot", str(svg),
                 "--plot-epochs", "2"]) == 0
    assert f"plot        : {svg}" in capsys.readouterr().out
    assert svg.read_text().lstrip().startswith("<?xml") and "<path" in svg.read_text()


def test_schedule_plot_bundled_data(tmp_path, capsys):
    png = tmp_path / "data.png"
    assert main(["schedule", "--max-penalty", "0.2", "--plot", str(png), "--plot-epochs", "3", "--penalty", "chain",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plot"] == str(png) and (out["status"], out["A"], out["S_bar"]) == ("unbounded", 168, 168)
    assert_drawn(png, 2)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--plot", "{tmp}/x.txt"], r"--plot must name a .png, .pdf or .svg file, got '.*x.txt'"),
        (["--plot", "{tmp}/nodir/x.png"], r"--plot '.*x.png': directory '.*nodir' does not exist"),
        (["--plot", "{tmp}/x.png", "--method", "heuristic", "--relax"], r"--plot draws integer schedules .*; omit --relax"),
    ],
)
def test_schedule_plot_bad_input(tmp_path, capsys, args, match):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before any work
    assert captured.err.count("\n") == 1 and re.search(match, captured.err), captured.err


def test_schedule_plot_infeasible_reports_then_fails(tmp_path, capsys):
    png = tmp_path / "inf.png"
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", "--max-penalty", "0.001", "--plot", str(png)]) == 2
    captured = capsys.readouterr()
    assert "status      : infeasible" in captured.out
    assert captured.err == "policyopt: error: --plot: no schedule to draw (status infeasible)\n"
    assert not png.exists()


def test_plot_functions_reject_bad_input(tmp_path):
    with pytest.raises(InvalidInputError, match=r"`rows` is empty: nothing to plot"):
        plot_sweep([], tmp_path / "e.png")
    with pytest.raises(InvalidInputError, match=r"`S_bar` must be an integer ≥ 1 \(slots\), got 2.5"):
        plot_schedule(1, 2.5, 0.5, two_state_chain(0.1, 0.1), tmp_path / "e.png")
    with pytest.raises(InvalidInputError, match=r"`epochs` must be an integer ≥ 1 \(slots\), got 0"):
        plot_schedule(1, 2, 0.5, two_state_chain(0.1, 0.1), tmp_path / "e.png", epochs=0)


def test_missing_matplotlib_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(BackendUnavailableError, match=r"--plot needs matplotlib, which is not installed: pip install 'policyopt\[plot\]'"):
        require_matplotlib("--plot")
    out = tmp_path / "s.csv"
    assert main(["sweep", *IID, "--max-penalty", "0.1,0.2", "--out", str(out), "--plot", str(tmp_path / "s.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'policyopt[plot]'" in err
    assert not out.exists()  # refused before any point was computed
    assert main(["schedule", "--chain", "two-state:p=0.1,q=0.1", "--plot", str(tmp_path / "x.png")]) == 2
    assert "needs matplotlib" in capsys.readouterr().err


def test_risk_axis_scale_follows_the_data(tmp_path):
    """Zeros (ε* = 0 exactly) need a symlog axis; positive values spanning decades a log axis."""
    base = {"p": None, "q": None, "users": 3, "states": 2, "source": "t", "releases": 24, "A": 1, "S_bar": 2,
            "epsilon_c": 1.0, "no_aging_epsilon_c": 1.0, "no_tradeoff": None, "penalty_unit": None,
            "status": "optimal", "no_aging_status": "optimal"}
    rows = [dict(base, max_penalty=f, peak_risk=r, no_aging_peak_risk=1.0, noise_only_risk_after_releases=24.0)
            for f, r in ((0.1, 1e-6), (0.2, 1e-7))]
    assert plot_sweep(rows, tmp_path / "a.png").axes[0].get_yscale() == "log"
    rows[1]["peak_risk"] = 0.0
    assert plot_sweep(rows, tmp_path / "b.png").axes[0].get_yscale() == "symlog"
    for r in rows:
        r.update(peak_risk=1.0, no_aging_peak_risk=2.0, noise_only_risk_after_releases=3.0)
    assert plot_sweep(rows, tmp_path / "c.png").axes[0].get_yscale() == "linear"
    assert math.isfinite(plot_sweep(rows, tmp_path / "c.png").axes[0].get_ylim()[1])


def _legend_boxes_clear_of_axes(fig):
    """Every legend (of an axes or of the figure) lies outside every axes' plot area: it covers no data."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the figure as saved (constrained layout), drawn again to measure it
    canvas.draw()
    renderer = canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    assert legends
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            area = ax.get_window_extent(renderer)
            assert not box.overlaps(area), (leg.get_texts()[0].get_text(), ax.get_ylabel())


def test_sweep_plot_marks_points_that_are_not_optima(tmp_path, capsys):
    """Unbounded points (the search limit binds) are hollow down-triangles and infeasible ones crosses, apart from
    the ε* curve and explained in the legend; the legends stand outside the panels; the title is short."""
    out, png = tmp_path / "u.csv", tmp_path / "u.png"
    assert main(["sweep", "--chain", "two-state:p=0.1,q=0.1", "--users", "20", "--max-age", "40", "--max-interval", "40",
                 "--max-penalty", "0.05:0.2:7", "--out", str(out), "--plot", str(png)]) == 0
    rows = read_sweep_csv(out)
    statuses = {r["status"] for r in rows}
    assert {"optimal", "unbounded", "infeasible"} <= statuses, statuses
    fig = plot_sweep(rows, tmp_path / "again.png")
    ax_risk = fig.axes[0]
    marks = {line.get_marker(): line for line in ax_risk.lines if line.get_linestyle() == "None"}
    unb, inf = marks["v"], marks["x"]
    assert list(unb.get_xdata()) == [r["max_penalty"] for r in rows if r["status"] == "unbounded"]
    assert unb.get_markerfacecolor() == "none"  # hollow
    assert list(inf.get_xdata()) == [r["max_penalty"] for r in rows if r["status"] == "infeasible"]
    legend = " ".join(t.get_text().replace("\n", " ") for t in ax_risk.get_legend().get_texts())
    assert "unbounded: the search limit A ≤ A_MAX binds" in legend and "infeasible: no schedule meets f̄" in legend
    assert "noise only: divergent" in legend
    _legend_boxes_clear_of_axes(fig)
    assert fig._suptitle.get_text() == "ε* against f̄: two-state chain two-state:p=0.1,q=0.1"
    assert_drawn(png, 3)


@pytest.mark.slow
def test_sweep_plot_of_five_models_keeps_its_legends_off_the_panels(tmp_path, capsys):
    """`--vary states=2,3,4,5,12` on the bundled data: one legend entry per model, below the panels, none on them.

    Five models, with the widest label (``states=12``); the other four are small state spaces, quick to check on
    held-out time (each model's Markov check is most of the sweep's time, and grows with the states)."""
    out, png = tmp_path / "k.csv", tmp_path / "k.png"
    assert main(["sweep", "--vary", "states=2,3,4,5,12", "--max-penalty", "1.2e-5:1.6e-5:3", "--max-age", "12",
                 "--max-interval", "12", "--penalty", "chain", "--out", str(out), "--plot", str(png)]) == 0
    fig = plot_sweep(read_sweep_csv(out), tmp_path / "again.png")
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == [
        f"states={k}" for k in (2, 3, 4, 5, 12)]
    assert all(len(ax.get_legend().get_texts()) <= 8 for ax in fig.axes)  # the models are not repeated per panel
    _legend_boxes_clear_of_axes(fig)
    assert fig._suptitle.get_text() == "ε* against f̄: bundled CityLearn 2022 pilot, 17 homes, hourly kWh"


def test_short_source_names_the_file_not_its_path():
    from policyopt.studies.plots import short_source

    assert short_source("data /tmp/a/b/meters.csv") == "data meters.csv"
    assert short_source("matrix /very/long/path/P.npy") == "matrix P.npy"
    assert short_source("two-state chain two-state:p=0.1,q=0.1") == "two-state chain two-state:p=0.1,q=0.1"


def test_schedule_plot_default_epochs_reach_the_peak_risk(tmp_path):
    """By default the figure shows enough epochs for the in-epoch peaks to come within 5 % of ε* (eq. (30)):
    A = 0, S̄ = 2, ε_C = 0.3 on the two-state chain p = q = 0.1 needs more than the former fixed 4 epochs."""
    from policyopt.studies.plots import auto_epochs, schedule_trajectory

    chain = two_state_chain(0.1, 0.1)
    star = dec_peak_risk(1.0, 0.8**2, 0.3)
    four = schedule_trajectory(0, 2, 0.3, chain, epochs=4).epoch_peaks
    assert four[-1] < 0.95 * star  # 4 epochs stop far below ε*
    n = auto_epochs(0, 2, 0.3, chain, star)
    peaks = schedule_trajectory(0, 2, 0.3, chain, epochs=n).epoch_peaks
    assert peaks[-1] >= 0.95 * star > peaks[-2]  # the fewest epochs that get there
    fig, comp = plot_schedule(0, 2, 0.3, chain, tmp_path / "auto.png")
    assert len(comp.epoch_peaks) == n and f"{n} epochs" in fig._suptitle.get_text()
    _legend_boxes_clear_of_axes(fig)
