"""Figures: the privacy–utility trade-off of a sweep and the risk / AoI trajectory of a schedule.

matplotlib is an optional extra (``pip install 'policyopt[plot]'``) imported only here and only
when a figure is drawn.  Figures are built on a bare :class:`matplotlib.figure.Figure` with the
Agg canvas (no pyplot, no global backend switch, no display needed) and are readable in
grayscale: every curve differs by line style and marker, not by colour alone.

Sources: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024 — Fig. 2 (risk and AoI of
a multi-query mechanism), Fig. 3 (risk over time of an equal-spacing policy, peak risk (30)),
Figs. 4–6 (peak privacy risk against the utility bound, with the noise-only benchmark).
"""

from __future__ import annotations

from pathlib import Path

from policyopt.errors import BackendUnavailableError, InvalidInputError, fmt

__all__ = ["plot_sweep", "plot_schedule", "schedule_trajectory", "auto_epochs", "short_source", "check_plot_path",
           "check_plot_option", "require_matplotlib", "PLOT_FORMATS"]

#: File suffixes a plot can be written to.
PLOT_FORMATS = (".png", ".pdf", ".svg")
_GRAYS = ("0.0", "0.45", "0.25", "0.6", "0.1", "0.35")
_MARKERS = ("o", "s", "^", "D", "P", "*", "h", "p")  # not v, x, +: they mark points that are not optima


def require_matplotlib(option: str = "plot"):
    """Import matplotlib or raise a clear error.

    Parameters
    ----------
    option : str
        What needs it (e.g. ``"--plot"``), for the message.

    Returns
    -------
    module
        ``matplotlib``.

    Raises
    ------
    BackendUnavailableError
        If matplotlib is not installed (the message names the extra to install).
    """
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401 - the part we use
    except ImportError as exc:
        raise BackendUnavailableError(
            f"{option} needs matplotlib, which is not installed: pip install 'policyopt[plot]' "
            f"(or pip install matplotlib); import failed with: {exc}"
        ) from None
    return matplotlib


def check_plot_path(path, option: str = "--plot") -> Path:
    """Validate a plot file name before any work is done.

    Parameters
    ----------
    path : str or path-like
        Output file; its suffix chooses the format.
    option : str
        Option name for messages.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InvalidInputError
        If the suffix is not one of :data:`PLOT_FORMATS` or the directory does not exist.
    """
    p = Path(path)
    if p.suffix.lower() not in PLOT_FORMATS:
        raise InvalidInputError(f"{option} must name a .png, .pdf or .svg file, got {fmt(str(path))}")
    if not p.parent.is_dir():
        raise InvalidInputError(f"{option} {fmt(str(path))}: directory {fmt(str(p.parent))} does not exist")
    return p


def check_plot_option(path, option: str = "--plot") -> Path:
    """A plot a command was asked for, checked before any work: the file name (:func:`check_plot_path`) and
    matplotlib (:func:`require_matplotlib`).

    Raises
    ------
    InvalidInputError
        As :func:`check_plot_path` and :func:`require_matplotlib`.
    """
    p = check_plot_path(path, option)
    require_matplotlib(option)
    return p


def _figure(nrows: int, height: float, width: float = 7.0):
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, 1, sharex=True, squeeze=False)[:, 0]
    return fig, axes


def _risk_scale(ax, values) -> None:
    """Log scale when the values span > 2 decades, symlog when zeros are present, else linear."""
    vals = [v for v in values if v is not None and v == v]
    pos = [v for v in vals if v > 0]
    if not pos:
        return
    if len(pos) < len(vals):
        ax.set_yscale("symlog", linthresh=max(min(pos), 1e-3))
    elif max(pos) / min(pos) > 100:
        ax.set_yscale("log")


def _curve(rows, column, keep=None):
    """(x, y) of a column, with NaN (a gap in the drawn line) for missing values and rows `keep` refuses."""
    xs = [r["max_penalty"] for r in rows]
    ys = [float("nan") if r.get(column) is None or (keep is not None and not keep(r)) else float(r[column])
          for r in rows]
    return xs, ys


def _group_label(key: dict) -> str:
    parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in key.items() if v is not None]
    return ", ".join(parts)


def short_source(source) -> str:
    """A model source for a figure title: a file path shortened to its file name (``data /a/b/x.csv`` → ``data x.csv``)."""
    text = str(source or "").strip()
    head, _, rest = text.partition(" ")
    if head in ("data", "matrix", "--data") and rest:
        names = [Path(part.strip("'\"")).name for part in rest.split(",")]
        return f"{head.lstrip('-')} {', '.join(names)}"
    return text


#: How a sweep point that is not an optimum is marked, and why (the legend text).
_OPTIMAL = ("optimal",)
_STATUS_MARKS = {
    "feasible": dict(marker="o", fill="none", size=7,
                     label="feasible: a schedule, optimality not proven (back end without a proof)"),
    "unbounded": dict(marker="v", fill="none", size=8,
                      label="unbounded: the search limit A ≤ A_MAX binds; ε* → 0 with more aging, no optimum "
                            "(marked under the line at the bottom)"),
    "infeasible": dict(marker="x", fill=None, size=8, label="infeasible: no schedule meets f̄ (marked under the line at the bottom)"),
    "unknown": dict(marker="+", fill=None, size=9, label="unknown: the back end found no schedule and no proof"),
}


def _status_marks(axes, grows, color, suffix: str, strip_y: float) -> set:
    """The marks of one model's points that are not ``optimal`` (:data:`_STATUS_MARKS`): ``feasible`` at its ε*,
    the others on the f̄ axis at height `strip_y` (axes fraction: a row per model in the strip); ``unbounded`` and
    ``feasible`` also on the schedule and ε_C panels.  Returns the statuses drawn."""
    ax_risk, ax_sched, ax_eps = axes
    on_axis = ax_risk.get_xaxis_transform()  # x in data, y in axes fractions: marks on the f̄ axis
    seen = set()
    for status, spec in _STATUS_MARKS.items():
        pts = [r for r in grows if r.get("status") == status]
        if not pts:
            continue
        seen.add(status)
        xs = [r["max_penalty"] for r in pts]
        face = {} if spec["fill"] is None else {"markerfacecolor": spec["fill"]}
        if status == "feasible":
            ax_risk.plot(xs, [r.get("peak_risk") for r in pts], linestyle="none", marker=spec["marker"],
                         markersize=spec["size"], color=color, **face, label=f"{status}{suffix}")
        else:
            ax_risk.plot(xs, [strip_y] * len(xs), linestyle="none", marker=spec["marker"], markersize=spec["size"],
                         color=color, transform=on_axis, clip_on=False, **face, label=f"{status}{suffix}")
        if status in ("unbounded", "feasible"):
            for ax, column in ((ax_sched, "A"), (ax_sched, "S_bar"), (ax_eps, "epsilon_c")):
                ax.plot(xs, [r.get(column) for r in pts], linestyle="none", marker=spec["marker"],
                        markersize=spec["size"], color=color, markerfacecolor="none", label=f"{status}{suffix}")
    return seen


def plot_sweep(rows, path, *, title: str | None = None, penalty_unit: str | None = None):
    """Trade-off figure of a sweep: ε* vs f̄ with both benchmarks, and the chosen A, S̄, ε_C.

    Top panel: the optimal peak risk ε* (eq. (30), nats) against the utility bound f̄, the
    no-aging benchmark (best schedule with A = 0, problem (42)'s setting) and the noise-only
    benchmark (fresh data every slot with Δ ≡ 1: risk after N releases = N·ε_C, grows without
    bound: ``divergent``); f̄ ranges where raising f̄ does not lower ε* (Corollary 3) are hatched.  The solid
    ε* curve joins ``optimal`` points only: ``unbounded`` points (the search limit binds, their ε* is an artefact
    of the box) are hollow down-triangles and ``infeasible`` ones crosses, both on the f̄ axis; ``feasible``
    (no proof) points are hollow circles.  Middle: A and S̄ (slots).  Bottom: ε_C per release (nats); in both,
    unbounded points are hollow down-triangles.  One colour and marker per model when the sweep varies model
    parameters; the legends stand outside the panels.

    Parameters
    ----------
    rows : sequence of dict
        Sweep rows (:attr:`policyopt.studies.sweep.SweepResult.rows` or
        :func:`policyopt.studies.sweep.read_sweep_csv`) with the columns of
        :data:`policyopt.studies.sweep.COLUMNS`.
    path : str or path-like
        Output file (.png, .pdf or .svg).
    title : str, optional
        Figure title (default: "ε* against f̄" and the model source of the first row, a file path shortened to
        its name).
    penalty_unit : str, optional
        Unit of f̄ (default: the rows' ``penalty_unit``, else "squared value units").

    Returns
    -------
    matplotlib.figure.Figure
        The figure written to `path` (for inspection; it is not shown).

    Raises
    ------
    InvalidInputError
        If `rows` is empty or `path` is not a supported file in an existing directory.
    BackendUnavailableError
        If matplotlib is missing.

    References
    ----------
    Zhang et al. (2024): eq. (30), problem (42), Corollary 3, Figs. 4–6.
    """
    path = check_plot_path(path)
    rows = list(rows)
    if not rows:
        raise InvalidInputError("`rows` is empty: nothing to plot")
    unit = penalty_unit or next((r["penalty_unit"] for r in rows if r.get("penalty_unit")), None) or "squared value units"
    groups: dict = {}
    for r in rows:
        key = tuple((k, r.get(k)) for k in ("p", "q", "users", "states"))
        groups.setdefault(key, []).append(r)
    varied = [k for k in ("p", "q", "users", "states") if len({dict(g)[k] for g in groups}) > 1]
    fig, (ax_risk, ax_sched, ax_eps) = _figure(3, 8.5, 10.0)
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cmap = colormaps["cividis"]
    n_groups = len(groups)
    all_risks, seen_status, group_handles = [], set(), []
    nrel = next((r["releases"] for r in rows if r.get("releases")), None)
    optimal = lambda r: r.get("status") in _OPTIMAL  # noqa: E731
    no_aging_optimal = lambda r: r.get("no_aging_status") in _OPTIMAL  # noqa: E731
    hatched = False
    for gi, (key, grows) in enumerate(groups.items()):
        grows = sorted(grows, key=lambda r: r["max_penalty"])
        color = "0.0" if n_groups == 1 else cmap(0.8 * gi / (n_groups - 1))
        mk = _MARKERS[gi % len(_MARKERS)] if n_groups > 1 else "o"
        name = _group_label({k: dict(key)[k] for k in varied}) if varied else ""
        suffix = f" ({name})" if name else ""
        for column, style, keep, label in (
            ("peak_risk", "-", optimal, "optimal ε* (aging + noise)"),
            ("no_aging_peak_risk", "--", no_aging_optimal, "no aging (A = 0)"),
            ("noise_only_risk_after_releases", ":", None, f"noise only, after {nrel} releases"),
        ):
            xs, ys = _curve(grows, column, keep)
            all_risks += ys
            ax_risk.plot(xs, ys, linestyle=style, marker=mk, markersize=4, color=color,
                         markerfacecolor=color if style == "-" else "white", label=label + suffix)
        seen_status |= _status_marks((ax_risk, ax_sched, ax_eps), grows, color, suffix,
                                     _STRIP * (gi % _STRIP_ROWS + 0.5) / min(n_groups, _STRIP_ROWS))
        for column, style, size, label in (("A", "-", 4, "A (aging)"), ("S_bar", "--", 8, "S̄ (inter-publish time)")):
            xs, ys = _curve(grows, column, optimal)  # S̄ hollow and larger: visible where it equals A
            ax_sched.plot(xs, ys, linestyle=style, marker=mk, markersize=size, color=color,
                          markerfacecolor=color if style == "-" else "none", label=label + suffix)
        xs, ys = _curve(grows, "epsilon_c", optimal)
        ax_eps.plot(xs, ys, linestyle="-", marker=mk, markersize=4, color=color, label="ε_C (optimal schedule)" + suffix)
        xs, ys = _curve(grows, "no_aging_epsilon_c", no_aging_optimal)
        ax_eps.plot(xs, ys, linestyle="--", marker=mk, markersize=4, color=color, markerfacecolor="white",
                    label="ε_C (no aging)" + suffix)
        for a, b in zip(grows, grows[1:]):
            if a.get("no_tradeoff") is True:
                ax_risk.axvspan(a["max_penalty"], b["max_penalty"], facecolor="none", edgecolor="0.8", hatch="//",
                                linewidth=0, label="no trade-off (Corollary 3)" + suffix)
                hatched = True
        if varied:
            group_handles.append(Line2D([], [], color=color, marker=mk, linestyle="-", label=name))
    _risk_scale(ax_risk, all_risks)
    if seen_status - {"feasible"}:  # room under the curves for the marks of points without a schedule
        _lower_floor(ax_risk, _STRIP)
        ax_risk.plot([0, 1], [_STRIP, _STRIP], transform=ax_risk.transAxes, color="0.6", linewidth=0.6)
        ax_risk.text(0.005, _STRIP + 0.01, "no optimum:", transform=ax_risk.transAxes, fontsize="x-small", color="0.3",
                     va="bottom")
    black = "0.0"
    kinds = [
        Line2D([], [], color=black, linestyle="-", marker="o", markersize=4, label="optimal ε* (aging + noise)"),
        Line2D([], [], color=black, linestyle="--", marker="o", markersize=4, markerfacecolor="white",
               label="no aging (A = 0), best schedule"),
        Line2D([], [], color=black, linestyle=":", marker="o", markersize=4, markerfacecolor="white",
               label=f"noise only: divergent — risk after {nrel} releases,\nfresh data every slot, grows without bound"),
    ]
    if hatched:
        kinds.append(Patch(facecolor="none", edgecolor="0.6", hatch="//",
                           label="no trade-off: raising f̄ does not\nlower ε* (Corollary 3)"))
    for status in _STATUS_MARKS:
        if status in seen_status:
            spec = _STATUS_MARKS[status]
            face = {} if spec["fill"] is None else {"markerfacecolor": spec["fill"]}
            kinds.append(Line2D([], [], color=black, linestyle="none", marker=spec["marker"], markersize=spec["size"],
                                label=_wrap(spec["label"]), **face))
    legend_kw = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0)
    ax_risk.legend(handles=kinds, **legend_kw)
    ax_risk.set_ylabel("peak privacy risk (nats)")
    ax_risk.grid(True, color="0.85", linewidth=0.5)
    sched = [Line2D([], [], color=black, linestyle="-", marker="o", markersize=4, label="A (aging), optimal"),
             Line2D([], [], color=black, linestyle="--", marker="o", markersize=8, markerfacecolor="none",
                    label="S̄ (inter-publish time), optimal")]
    eps = [Line2D([], [], color=black, linestyle="-", marker="o", markersize=4, label="ε_C, optimal schedule"),
           Line2D([], [], color=black, linestyle="--", marker="o", markersize=4, markerfacecolor="white",
                  label="ε_C, no aging")]
    for status in ("feasible", "unbounded"):
        if status in seen_status:
            spec = _STATUS_MARKS[status]
            for handles in (sched, eps):
                handles.append(Line2D([], [], color=black, linestyle="none", marker=spec["marker"],
                                      markersize=spec["size"], markerfacecolor="none",
                                      label=f"{status} (A, S̄ and ε_C within the box)" if status == "unbounded"
                                      else f"{status} (no proof)"))
    ax_sched.legend(handles=sched, **legend_kw)
    ax_sched.set_ylabel("slots")
    ax_sched.grid(True, color="0.85", linewidth=0.5)
    ax_eps.legend(handles=eps, **legend_kw)
    ax_eps.set_ylabel("ε_C per release (nats)")
    ax_eps.grid(True, color="0.85", linewidth=0.5)
    ax_eps.set_xlabel(f"utility bound f̄: MSE of the released mean ({unit})")
    if group_handles:  # the models, in a legend of their own (colour and marker), outside the panels
        fig.legend(handles=group_handles, loc="outside lower center", ncols=min(len(group_handles), 6),
                   fontsize="small", title="model (colour and marker): " + ", ".join(varied))
    fig.suptitle(title or f"ε* against f̄: {short_source(rows[0].get('source'))}", fontsize="medium")
    fig.savefig(path, dpi=110)
    return fig


#: Bottom fraction of the risk panel kept free of curves for the marks of unbounded / infeasible points (at most
#: `_STRIP_ROWS` rows, one per model).
_STRIP, _STRIP_ROWS = 0.2, 6


def _lower_floor(ax, fraction: float) -> None:
    """Lower the y axis so that its bottom `fraction` holds no data (in the axis' own scale: log or linear); a linear
    axis gets no tick labels below its former bottom (no negative risk is suggested)."""
    import math

    from matplotlib.ticker import FuncFormatter

    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log" and lo > 0 and hi > lo:
        span = math.log10(hi) - math.log10(lo)
        ax.set_ylim(10 ** (math.log10(lo) - span * fraction / (1 - fraction)), hi)
    elif ax.get_yscale() == "linear" and hi > lo:
        ax.set_ylim(lo - (hi - lo) * fraction / (1 - fraction), hi)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos: "" if v < lo else f"{v:g}"))


def _wrap(text: str, width: int = 44) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def schedule_trajectory(A, S_bar, epsilon_c, max_tv, *, epochs: int = 4):
    """The values :func:`plot_schedule` draws: ε(t) and AoI(t) of an equal-spacing schedule (no matplotlib).

    Publications at S_n = A + n·S̄ (n = 0..epochs−1) release the input of slot n·S̄ with budget
    ε_C; ε(t) is eq. (25) of Theorem 3 and AoI(t) eq. (24), from slot 0 to the end of the last
    epoch, T = A + epochs·S̄ − 1.  A tabulated Δ(t) source shorter than T (the ``--robust`` band,
    :class:`~policyopt.models.tabulated.TabulatedMaxTV`) is continued by
    :meth:`~policyopt.models.tabulated.TabulatedMaxTV.extended` (submultiplicativity, an upper bound
    on the same posterior event); ages up to max(A, S̄) — all eq. (30) needs — keep their table value.

    Parameters
    ----------
    A, S_bar : int
        Aging and inter-publish time (slots, integers; S̄ ≥ 1).
    epsilon_c : float
        Budget per release (nats, ≥ 0).
    max_tv : MarkovChain, Population, TabulatedMaxTV, callable or array_like
        Δ(t) as accepted by :func:`policyopt.privacy.age_dependent.compose`: the Δ(t) the schedule
        was designed with.
    epochs : int
        Number of publications (≥ 1).

    Returns
    -------
    policyopt.privacy.age_dependent.Composition
        ``times`` (0..T), ``risk`` (ε(t), nats), ``aoi`` (slots, NaN before S_0), ``epoch_peaks``
        (ε(S_n)) and ``prior_risk``.

    Raises
    ------
    InvalidInputError
        Non-integer or negative A, S̄ < 1, `epochs` < 1; errors of
        :func:`~policyopt.privacy.age_dependent.compose`.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3
    (eq. (25)), AoI (24).
    """
    import numpy as np

    from policyopt.models.tabulated import TabulatedMaxTV
    from policyopt.privacy.age_dependent import compose

    for name, v, lo in (("A", A, 0), ("S_bar", S_bar, 1), ("epochs", epochs, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or v != int(v) or v < lo:
            raise InvalidInputError(f"`{name}` must be an integer ≥ {lo} (slots), got {fmt(v)}")
    A, S_bar, epochs = int(A), int(S_bar), int(epochs)
    publish = A + S_bar * np.arange(epochs)
    horizon = int(publish[-1] + S_bar - 1)
    if isinstance(max_tv, TabulatedMaxTV):
        max_tv = max_tv.extended(horizon)
    return compose(publish, A, float(epsilon_c), max_tv, horizon=horizon)


#: Fewest and most epochs :func:`auto_epochs` chooses, and how close to ε* its last in-epoch peak must come.
MIN_AUTO_EPOCHS, MAX_AUTO_EPOCHS, AUTO_EPOCHS_FRACTION = 4, 100, 0.95


def auto_epochs(A, S_bar, epsilon_c, max_tv, peak_risk) -> int:
    """Epochs :func:`plot_schedule` draws by default: the fewest (at least 4, at most 100) whose last in-epoch peak
    ε(S_n) reaches 95 % of the peak risk ε* of eq. (30), so the figure shows ε(t) rising to the dashed ε*.

    The in-epoch peaks increase to ε* (Zhang et al. (2024), Proposition 3); they are computed by
    :func:`schedule_trajectory` for 4, 8, 16, … epochs until one reaches the fraction.  With ε* ``None``
    (condition (31) fails) or 0, 4 epochs.

    Returns
    -------
    int
    """
    import numpy as np

    if peak_risk is None or not peak_risk > 0:
        return MIN_AUTO_EPOCHS
    n = MIN_AUTO_EPOCHS
    while True:
        peaks = np.asarray(schedule_trajectory(A, S_bar, epsilon_c, max_tv, epochs=n).epoch_peaks, dtype=float)
        hit = np.flatnonzero(peaks >= AUTO_EPOCHS_FRACTION * float(peak_risk))
        if hit.size:
            return max(MIN_AUTO_EPOCHS, int(hit[0]) + 1)
        if n >= MAX_AUTO_EPOCHS:
            return MAX_AUTO_EPOCHS
        n = min(2 * n, MAX_AUTO_EPOCHS)


def plot_schedule(A, S_bar, epsilon_c, max_tv, path, *, epochs: int | None = None, peak_risk: float | None = None,
                  title: str | None = None, max_tv_label: str | None = None):
    """Risk ε(t) and AoI(t) of an equal-spacing schedule over its first epochs (Figs. 2–3 of Zhang et al. (2024)).

    Publications at S_n = A + n·S̄ (n = 0..epochs−1) release the input of slot n·S̄ with
    budget ε_C; ε(t) is eq. (25) (Theorem 3) and AoI(t) = t − (S_n − A) on [S_n, S_{n+1})
    (eq. (24)), drawn from slot 0 to the end of the last epoch; the values are those of
    :func:`schedule_trajectory`.  The peak risk ε* of eq. (30), the limit of the in-epoch peaks,
    and the peak AoI A + S̄ − 1 are drawn as dashed lines.  Pass the Δ(t) the schedule was
    designed with (e.g. the ``--robust`` band) and name it with `max_tv_label`.

    Parameters
    ----------
    A, S_bar : int
        Aging and inter-publish time (slots, integers; S̄ ≥ 1).
    epsilon_c : float
        Budget per release (nats, ≥ 0).
    max_tv : MarkovChain, Population, callable or array_like
        Δ(t) as accepted by :func:`policyopt.privacy.age_dependent.compose`.
    path : str or path-like
        Output file (.png, .pdf or .svg).
    epochs : int, optional
        Number of publications drawn (≥ 1); default :func:`auto_epochs`: enough for the in-epoch peaks to reach
        95 % of ε* (4 to 100).
    peak_risk : float, optional
        ε* to draw (default: eq. (30) by :func:`policyopt.privacy.age_dependent.peak_risk`; not drawn when
        condition (31) fails).
    title : str, optional
        Model name put before the schedule in the figure title (a file path is shortened to its name).
    max_tv_label : str, optional
        Which Δ(t) `max_tv` is (e.g. "the simultaneous posterior upper band, level 0.9"): shown under
        the title ("ε(t) drawn with Δ(t) = ...") and referred to by the ε(t) legend entry.  Default: not named.

    Returns
    -------
    (matplotlib.figure.Figure, policyopt.privacy.age_dependent.Composition)
        The figure written to `path` and the trajectory it shows.

    Raises
    ------
    InvalidInputError
        Non-integer or negative A, S̄ < 1, `epochs` < 1, or a bad `path`; errors of
        :func:`~policyopt.privacy.age_dependent.compose`.
    BackendUnavailableError
        If matplotlib is missing.

    References
    ----------
    Zhang et al. (2024): Theorem 3 (25), AoI (24), Proposition 3 (30), Figs. 2–3.
    """
    import numpy as np

    from policyopt.formatting import fmt_count, fmt_upper

    path = check_plot_path(path)
    schedule_trajectory(A, S_bar, epsilon_c, max_tv, epochs=1 if epochs is None else epochs)  # checks the inputs
    A, S_bar = int(A), int(S_bar)
    if peak_risk is None:
        from policyopt.privacy.age_dependent import log_max_tv_table, peak_risk_values_log

        src = max_tv.extended(max(A, S_bar) + 1) if hasattr(max_tv, "extended") else max_tv
        logs = log_max_tv_table(src, max(A, S_bar) + 1)
        value = float(peak_risk_values_log(logs[A], logs[S_bar], float(epsilon_c)))  # eq. (30) in log space
        peak_risk = value if np.isfinite(value) else None  # NaN: condition (31) fails, no finite ε*
    if epochs is None:
        epochs = auto_epochs(A, S_bar, epsilon_c, max_tv, peak_risk)
    comp = schedule_trajectory(A, S_bar, epsilon_c, max_tv, epochs=epochs)
    publish = A + S_bar * np.arange(int(epochs))
    fig, (ax_risk, ax_aoi) = _figure(2, 6.0, 10.0)
    t = comp.times
    ax_risk.plot(t, comp.risk, drawstyle="steps-post", color="0.0", linestyle="-",
                 label="ε(t), eq. (25)" + (", with the Δ(t) named in the title" if max_tv_label else ""))
    ax_risk.plot(publish, comp.epoch_peaks, linestyle="none", marker="o", color="0.0", markerfacecolor="white",
                 label="in-epoch peaks ε(S_n)")
    if peak_risk is not None:
        ax_risk.axhline(peak_risk, color="0.4", linestyle="--", label=f"peak risk ε* = {fmt_upper(peak_risk, 4)} nats, eq. (30)")
    ax_aoi.plot(t, comp.aoi, drawstyle="steps-post", color="0.0", linestyle="-", label="AoI(t), eq. (24)")
    ax_aoi.axhline(A + S_bar - 1, color="0.4", linestyle="--", label=f"peak AoI A + S̄ − 1 = {A + S_bar - 1}")
    for ax in (ax_risk, ax_aoi):
        for s in publish:
            ax.axvline(s, color="0.75", linestyle=":", linewidth=0.8)
        ax.grid(True, color="0.9", linewidth=0.5)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax_risk.set_ylabel("privacy risk ε(t) (nats)")
    ax_aoi.set_ylabel("age of information (slots)")
    from matplotlib.ticker import MaxNLocator

    ax_aoi.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_aoi.set_xlabel("time t (slots); dotted lines: publications S_n")
    head = (f"A = {fmt_count(A, 'slot')}, S̄ = {fmt_count(S_bar, 'slot')}, ε_C = {fmt_upper(float(epsilon_c), 4)} nats, "
            f"{fmt_count(int(epochs), 'epoch')}")
    head = f"{short_source(title)}: {head}" if title else head
    if max_tv_label:
        head += f"\nε(t) drawn with Δ(t) = {max_tv_label}"
    fig.suptitle(head, fontsize="medium")
    fig.savefig(path, dpi=110)
    return fig, comp
