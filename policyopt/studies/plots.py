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

__all__ = ["plot_sweep", "plot_schedule", "schedule_trajectory", "check_plot_path", "require_matplotlib", "PLOT_FORMATS"]

#: File suffixes a plot can be written to.
PLOT_FORMATS = (".png", ".pdf", ".svg")
_GRAYS = ("0.0", "0.45", "0.25", "0.6", "0.1", "0.35")
_MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*")


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


def _figure(nrows: int, height: float):
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, height), layout="constrained")
    axes = fig.subplots(nrows, 1, sharex=True, squeeze=False)[:, 0]
    return fig, axes


def _risk_scale(ax, values) -> None:
    """Log scale when the values span > 2 decades, symlog when zeros are present, else linear."""
    vals = [v for v in values if v is not None]
    pos = [v for v in vals if v > 0]
    if not pos:
        return
    if len(pos) < len(vals):
        ax.set_yscale("symlog", linthresh=max(min(pos), 1e-3))
    elif max(pos) / min(pos) > 100:
        ax.set_yscale("log")


def _curve(rows, column):
    """(x, y) of a column, with None for missing values (matplotlib draws gaps there)."""
    xs = [r["max_penalty"] for r in rows]
    ys = [float("nan") if r.get(column) is None else float(r[column]) for r in rows]
    return xs, ys


def _group_label(key: dict) -> str:
    parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in key.items() if v is not None]
    return ", ".join(parts)


def plot_sweep(rows, path, *, title: str | None = None, penalty_unit: str | None = None):
    """Trade-off figure of a sweep: ε* vs f̄ with both benchmarks, and the chosen A, S̄, ε_C.

    Top panel: the optimal peak risk ε* (eq. (30), nats) against the utility bound f̄, the
    no-aging benchmark (best schedule with A = 0, problem (42)'s setting) and the noise-only
    benchmark (fresh data every slot with Δ ≡ 1: risk after N releases = N·ε_C, grows without
    bound); f̄ ranges where raising f̄ does not lower ε* (Corollary 3) are hatched.  Middle:
    A and S̄ (slots).  Bottom: ε_C per release (nats).  One set of curves per model when the
    sweep varies model parameters.

    Parameters
    ----------
    rows : sequence of dict
        Sweep rows (:attr:`policyopt.studies.sweep.SweepResult.rows` or
        :func:`policyopt.studies.sweep.read_sweep_csv`) with the columns of
        :data:`policyopt.studies.sweep.COLUMNS`.
    path : str or path-like
        Output file (.png, .pdf or .svg).
    title : str, optional
        Figure title (default: the model source of the first row).
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
    fig, (ax_risk, ax_sched, ax_eps) = _figure(3, 8.5)
    all_risks = []
    for gi, (key, grows) in enumerate(groups.items()):
        grows = sorted(grows, key=lambda r: r["max_penalty"])
        gray, mk = _GRAYS[gi % len(_GRAYS)], _MARKERS[gi % len(_MARKERS)]
        suffix = f" ({_group_label({k: dict(key)[k] for k in varied})})" if varied else ""
        nrel = next((r["releases"] for r in grows if r.get("releases")), None)
        for column, style, label in (
            ("peak_risk", "-", "optimal ε* (aging + noise)"),
            ("no_aging_peak_risk", "--", "no aging (A = 0)"),
            ("noise_only_risk_after_releases", ":", f"noise only, after {nrel} releases"),
        ):
            xs, ys = _curve(grows, column)
            all_risks += [r.get(column) for r in grows]
            ax_risk.plot(xs, ys, linestyle=style, marker=mk, markersize=4, color=gray,
                         markerfacecolor=gray if style == "-" else "white", label=label + suffix)
        for column, style, size, label in (("A", "-", 4, "A (aging)"), ("S_bar", "--", 8, "S̄ (inter-publish time)")):
            xs, ys = _curve(grows, column)  # S̄ hollow and larger: visible where it equals A
            ax_sched.plot(xs, ys, linestyle=style, marker=mk, markersize=size, color=gray,
                          markerfacecolor=gray if style == "-" else "none", label=label + suffix)
        xs, ys = _curve(grows, "epsilon_c")
        ax_eps.plot(xs, ys, linestyle="-", marker=mk, markersize=4, color=gray, label="ε_C (optimal schedule)" + suffix)
        xs, ys = _curve(grows, "no_aging_epsilon_c")
        ax_eps.plot(xs, ys, linestyle="--", marker=mk, markersize=4, color=gray, markerfacecolor="white",
                    label="ε_C (no aging)" + suffix)
        labelled = False
        for a, b in zip(grows, grows[1:]):
            if a.get("no_tradeoff") is True:
                ax_risk.axvspan(a["max_penalty"], b["max_penalty"], facecolor="none", edgecolor="0.7", hatch="//",
                                linewidth=0, label=None if labelled else "no trade-off (Corollary 3)" + suffix)
                labelled = True
    _risk_scale(ax_risk, all_risks)
    ax_risk.set_ylabel("peak privacy risk (nats)")
    ax_risk.legend(fontsize="small")
    ax_risk.grid(True, color="0.85", linewidth=0.5)
    ax_sched.set_ylabel("slots")
    ax_sched.legend(fontsize="small")
    ax_sched.grid(True, color="0.85", linewidth=0.5)
    ax_eps.set_ylabel("ε_C per release (nats)")
    ax_eps.legend(fontsize="small")
    ax_eps.grid(True, color="0.85", linewidth=0.5)
    ax_eps.set_xlabel(f"utility bound f̄: MSE of the released mean ({unit})")
    fig.suptitle(title or f"privacy–utility trade-off: {rows[0].get('source') or ''}", fontsize="medium")
    fig.savefig(path, dpi=110)
    return fig


def schedule_trajectory(A, S_bar, epsilon_c, max_tv, *, epochs: int = 4):
    """The values :func:`plot_schedule` draws: ε(t) and AoI(t) of an equal-spacing schedule (no matplotlib).

    Publications at S_n = A + n·S̄ (n = 0..epochs−1) release the input of slot n·S̄ with budget
    ε_C; ε(t) is eq. (25) of Theorem 3 and AoI(t) eq. (24), from slot 0 to the end of the last
    epoch, T = A + epochs·S̄ − 1.  A tabulated Δ(t) source shorter than T (the ``--robust`` band,
    :class:`~policyopt.models.posterior.TabulatedMaxTV`) is continued by
    :meth:`~policyopt.models.posterior.TabulatedMaxTV.extended` (submultiplicativity, an upper bound
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

    from policyopt.models.posterior import TabulatedMaxTV
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


def plot_schedule(A, S_bar, epsilon_c, max_tv, path, *, epochs: int = 4, peak_risk: float | None = None,
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
    epochs : int
        Number of publications drawn (≥ 1).
    peak_risk : float, optional
        ε* to draw (default: eq. (30) by :func:`policyopt.privacy.age_dependent.peak_risk`; not drawn when
        condition (31) fails).
    title : str, optional
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

    from policyopt.formatting import fmt_upper

    path = check_plot_path(path)
    comp = schedule_trajectory(A, S_bar, epsilon_c, max_tv, epochs=epochs)
    A, S_bar = int(A), int(S_bar)
    publish = A + S_bar * np.arange(int(epochs))
    if peak_risk is None:
        from policyopt.privacy.age_dependent import log_max_tv_table, peak_risk_values_log

        src = max_tv.extended(max(A, S_bar) + 1) if hasattr(max_tv, "extended") else max_tv
        logs = log_max_tv_table(src, max(A, S_bar) + 1)
        value = float(peak_risk_values_log(logs[A], logs[S_bar], float(epsilon_c)))  # eq. (30) in log space
        peak_risk = value if np.isfinite(value) else None  # NaN: condition (31) fails, no finite ε*
    fig, (ax_risk, ax_aoi) = _figure(2, 6.0)
    t = comp.times
    ax_risk.plot(t, comp.risk, drawstyle="steps-post", color="0.0", linestyle="-",
                 label="ε(t), eq. (25)" + (", with the Δ(t) named in the title" if max_tv_label else ""))
    ax_risk.plot(publish, comp.epoch_peaks, linestyle="none", marker="o", color="0.0", markerfacecolor="white",
                 label="in-epoch peaks ε(S_n)")
    if peak_risk is not None:
        ax_risk.axhline(peak_risk, color="0.4", linestyle="--", label=f"peak risk ε* = {fmt_upper(peak_risk, 4)} nats, eq. (30)")
    ax_aoi.plot(t, comp.aoi, drawstyle="steps-post", color="0.0", linestyle="-", label="AoI(t), eq. (24)")
    ax_aoi.axhline(A + S_bar - 1, color="0.4", linestyle="--", label=f"peak AoI A + S̄ − 1 = {A + S_bar - 1} slots")
    for ax in (ax_risk, ax_aoi):
        for s in publish:
            ax.axvline(s, color="0.75", linestyle=":", linewidth=0.8)
        ax.grid(True, color="0.9", linewidth=0.5)
        ax.legend(fontsize="small", loc="best")
    ax_risk.set_ylabel("privacy risk ε(t) (nats)")
    ax_aoi.set_ylabel("age of information (slots)")
    ax_aoi.set_xlabel("time t (slots); dotted lines: publications S_n")
    head = f"A = {A} slots, S̄ = {S_bar} slots, ε_C = {fmt_upper(float(epsilon_c), 4)} nats"
    head = f"{title}: {head}" if title else head
    if max_tv_label:
        head += f"\nε(t) drawn with Δ(t) = {max_tv_label}"
    fig.suptitle(head, fontsize="medium")
    fig.savefig(path, dpi=110)
    return fig, comp
