"""``policyopt publish`` below the command line: run a designed schedule into a privacy ledger
(:func:`publish_report`; from Python :func:`publish_releases`).

The work is done by :mod:`policyopt.deploy` (:class:`~policyopt.deploy.Publisher`, :class:`~policyopt.deploy.Ledger`)
and :mod:`policyopt.app.publishing` (the publish plan, the accounting model and its verdict, the stream, the guarantee
of the releases made: which guarantee a report states first is explained there).  Releases are drawn by OpenDP's
samplers (Laplace on the 2^-1074 grid); Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans.
Inf. Theory, 2024, Theorem 3 accounts them.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

from policyopt.app.ledger import Interrupted
from policyopt.app.publishing import (
    ACCOUNTING_RULES,
    AccountingOptions,
    designed_sensitivity,
    guarantee_lines,
    ledger_guarantee_settings,
    load_stream,
    not_a_bound,
    production_stream_check,
    publish_model_check,
    publish_plan,
    recorded_verdict,
    releases_guarantee,
    row_dicts,
    span_text,
)
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError
from policyopt.formatting import check_text, fmt_count, fmt_epsilon_c, fmt_upper, fmt_value

__all__ = ["PublishOptions", "publish_releases", "publish_report"]


@dataclass(frozen=True)
class PublishOptions(AccountingOptions):
    """The options of ``policyopt publish`` (:func:`publish_releases`): each attribute the option of the same name
    (``S_bar`` is ``--S-bar``, ``epsilon_c`` ``--epsilon-c``); ``None`` is the command's default.

    Attributes
    ----------
    schedule : str or os.PathLike, optional
        A ``policyopt schedule --json`` file; or the schedule given by `A`, `S_bar`, `epsilon_c` (slots, slots,
        nats per release: A ≥ 0, S̄ ≥ 1, ε_C > 0) with `value_range`.
    data : str or os.PathLike, optional
        The stream: a long CSV or a Parquet data set (default: the bundled pilot).
    trial : str, optional
        Why a stream with far fewer users than the design's I is published (a trial, recorded).
    slot_length, resample : str, optional
        The stream's slot length, and bins to resample its time stamps to.
    value_range : (float, float), optional
        Public range (LO, HI) of one reading.
    ledger : str or os.PathLike
        The SQLite ledger (created on the first run, resumed after).
    out : str or os.PathLike, optional
        A CSV (or Parquet) file of the releases, rebuilt from the ledger when it lags.
    through, start : int, optional
        Last slot of the stream used, and the first input slot (≥ 0).
    max_risk : float, optional
        Refuse any release that would take ε(S_n) above this (nats, > 0).
    max_tv, model, states, smoothing, override, markov_model : optional
        The accounting model (as ``publish --help`` states; `override` says why one other than the design's).
    workers, scheduler : optional
        Split a Parquet stream into its input slots on Dask.
    delta : float, optional
        δ of the model-free (ε, δ) guarantee, in (0, 1).
    ci_level : float, optional
        Level of each release's error bars, in (0, 1) (default 0.95).
    plot : str or os.PathLike, optional
        Draw every release so far with both error bars into this .png, .pdf or .svg file.

    Raises
    ------
    InvalidInputError
        No `ledger`, or a value of the wrong type or out of its range (naming the keyword and showing the value).
    """

    COMMAND = "publish"
    RULES = {
        **ACCOUNTING_RULES, "schedule": ("text",), "A": ("int", 0, None), "S_bar": ("int", 1, None),
        "epsilon_c": ("float", 0.0, float("inf"), True), "data": ("text",), "trial": ("text",),
        "slot_length": ("text",), "resample": ("text",), "value_range": ("range",), "out": ("text",),
        "through": ("int", 0, None), "start": ("int", 0, None), "max_risk": ("float", 0.0, float("inf"), True),
        "max_tv": ("text",), "workers": ("int", 1, None), "scheduler": ("text",),
    }

    schedule: str | os.PathLike | None = None
    A: int | None = None
    S_bar: int | None = None
    epsilon_c: float | None = None
    data: str | os.PathLike | None = None
    trial: str | None = None
    slot_length: str | None = None
    resample: str | None = None
    value_range: tuple | None = None
    out: str | os.PathLike | None = None
    through: int | None = None
    start: int | None = None
    max_risk: float | None = None
    max_tv: str | None = None
    workers: int | None = None
    scheduler: str | None = None

    def __post_init__(self):
        if self.ledger is None:
            raise InvalidInputError("`ledger` is required: the SQLite ledger the releases are committed to")
        super().__post_init__()


def publish_releases(ledger, **options) -> CommandReport:
    """Publish the releases due as ``policyopt publish`` does (OpenDP Laplace noise, committed to the ledger), and
    return its report.

    Parameters
    ----------
    ledger : str or os.PathLike
        The SQLite ledger (created on the first run; a rerun resumes without redrawing a committed release).
    **options
        The other attributes of :class:`PublishOptions` (``schedule`` or ``A``/``S_bar``/``epsilon_c`` with
        ``value_range``, ``data``, ``model``, ``out``, ``through``, ...), each the ``publish`` option of the same name.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall time and the released values' noise aside) and
        ``str()`` its text: the guarantee of the releases made, this run's releases and skips, the ledger's totals,
        the peak of ε(S_n) (Zhang et al. 2024, Theorem 3) and the error bars.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        An unknown keyword, a bad value, data or schedule; a release over ``max_risk``; a ledger in use.
    """
    return publish_report(PublishOptions.from_keywords("publish_releases", {"ledger": ledger, **options}))


def publish_report(args) -> CommandReport:
    """``policyopt publish`` of parsed options (`args`: :class:`PublishOptions` or the command line's namespace):
    the releases due are drawn and committed to the ledger, and the run's report returned as the command prints it.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        Bad options, data or schedule file; a release over ``max_risk``; a ledger in use by another run.
    Interrupted
        Ctrl-C while releases were drawn (the ledger is consistent: every committed release is kept).
    """
    start = time.perf_counter()
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
    schedule, model, provenance, as_designed = publish_plan(args)
    stack = contextlib.ExitStack()
    client = None
    if args.workers is not None or args.scheduler is not None:
        from policyopt.io import is_parquet_source

        if args.workers is not None and args.scheduler is not None:
            raise InvalidInputError(f"give either --workers {args.workers} or --scheduler {args.scheduler}, not both")
        if args.data is None or not is_parquet_source(args.data):
            raise InvalidInputError(f"--workers/--scheduler need a Parquet --data (a directory, a glob or a .parquet file), "
                                    f"got --data {args.data!r}")
        from policyopt.studies.distributed import dask_client

        client = stack.enter_context(dask_client(workers=args.workers, scheduler=args.scheduler))
    with stack:
        return _publish(args, start, schedule, model, provenance, client, as_designed)


def _publish_lines(args, rep, out: dict, privacy: dict, model, check_note, designed_sens, used_sens) -> list[str]:
    """The text of ``policyopt publish`` but its wall time: guarantee, schedule, stream, this run, ledger, peak risk,
    intervals, plot, out file, trial, sensitivity note, model check and warnings (`out` is the ``--json`` object)."""
    from policyopt.deploy.error_bars import intervals_lines
    from policyopt.studies.backtest import verdict_text

    slot_seconds, new, check = out["slot_seconds"], rep.new_rows, out["model_check"]
    released = [r for r in new if r.status == "released"]
    s = rep.schedule
    mv = privacy["model_verdict"]
    lines = [
        "policyopt publish: releases with OpenDP Laplace noise (Zhang et al. 2024, Theorem 3; ledger in SQLite)",
        *guarantee_lines(privacy),
        f"schedule    : A = {fmt_count(s.A, 'slot')}, S̄ = {fmt_count(s.S_bar, 'slot')}, ε_C = {fmt_epsilon_c(s.epsilon_c)} nats, value range "
        f"{fmt_value(s.value_range[0])}:{fmt_value(s.value_range[1])}, first input slot {s.origin} (id {rep.schedule_id})",
        f"stream      : complete through slot {rep.through}{span_text(rep.through, slot_seconds)}"
        + ("" if slot_seconds is None else f"; slots of {out['slot_length']}"),
    ]
    if new:
        lines.append(f"this run    : {len(released)} released, {len(new) - len(released)} skipped (slots {new[0].slot}..{new[-1].slot}), "
                     f"{out['clipped']} readings clipped")
        for r in new:
            if r.status == "skipped":
                lines.append(f"  skipped slot {r.slot}: {r.reason}")
    else:
        lines.append("this run    : nothing due (no new complete publishing time)")
    lines += [
        f"ledger      : {rep.ledger}: {fmt_count(rep.total_rows, 'row')} ({rep.released_total} released, {rep.skipped_total} skipped); "
        f"next release at slot {rep.next_slot}{span_text(rep.next_slot, slot_seconds)}",
        f"peak risk   : max ε(S_n) so far = {fmt_upper(rep.peak_risk)} nats (model {rep.model}){not_a_bound(mv)}",
        f"model from  : {rep.provenance.get('model_reason')}",
    ]
    sc = out["stream_check"]
    if sc is None:
        lines.append(f"design check: {verdict_text(mv)}")
    else:
        from policyopt.studies.stream_check import stream_check_text

        lines.append(f"stream check: {stream_check_text(sc, reused=sc['reused'], runs=sc['runs'])}")
    lines += intervals_lines(out["intervals"])
    if out["plot"] is not None:
        lines.append(f"plot        : {args.plot} (every release so far with both error bars"
                     + (", over the stream's true current mean: a replay of the design's readings)" if out["plot_truth"] else ")"))
    if rep.out:
        lines.append(f"out         : {rep.out}" + (" (rebuilt from the ledger)" if rep.out_rebuilt else ""))
    if rep.trial is not None:
        t = rep.trial
        lines.append(f"trial       : {t['reason']} (--trial) — from release {t['first_release']} the releases average as "
                     f"few as {fmt_count(t['fewest_users'], 'user')}' readings, against the I = {t['design_users']} users "
                     "of the design: their noise variance is ≥ 4 times the schedule's (recorded in the ledger)")
    if designed_sens is not None and used_sens is not None and used_sens > designed_sens * (1 + 1e-3):
        lines.append(f"note        : Δf up to {fmt_value(used_sens)} in this run, above the Δf = {fmt_value(designed_sens)} the schedule's "
                     "penalty assumed (wider --value-range or fewer users): the privacy is as accounted, the error larger")
    if check is not None:
        from policyopt.studies.deployment_text import model_check_text

        lines.append(f"model check : {model_check_text(check, chains_used=model.max_tv_table is None)}")
    elif check_note is not None:
        lines.append(f"model check : {check_note}")
    lines += [f"warning     : {w}" for w in privacy["warnings"]]
    return lines


def _publish(args, start, schedule, model, provenance, client, as_designed: bool) -> CommandReport:
    """The rest of :func:`publish_report` (inside the Dask client's lifetime when there is one); `as_designed`: the
    accounting model is the schedule file's own, whose recorded numbers the publisher then checks."""
    from policyopt.deploy import Publisher
    from policyopt.deploy.error_bars import intervals_summary
    from policyopt.deploy.stream import ParquetStream

    readings, slot_seconds = load_stream(args, provenance, client)
    if args.through is not None:
        t_min, t_max = readings.span() if isinstance(readings, ParquetStream) else (
            int(readings["time"].min()), int(readings["time"].max()))
        if not t_min <= args.through <= t_max:
            raise InvalidInputError(f"--through {args.through} is outside the data's slots {t_min}..{t_max}")
    publisher = Publisher(args.ledger, schedule, model=model, max_risk=args.max_risk, out=args.out, provenance=provenance,
                          check_design=args.override is None and as_designed, ci_level=args.ci_level,
                          slot_seconds=slot_seconds, trial=args.trial)
    try:
        rep = publisher.publish(readings, through=args.through)
    except KeyboardInterrupt:
        raise Interrupted("the ledger is consistent (every committed release is kept); rerun the same command to "
                          "resume") from None
    new = rep.new_rows
    released = [r for r in new if r.status == "released"]
    check, check_note = publish_model_check(model, rep.schedule)
    designed_sens = designed_sensitivity(args.schedule)
    used_sens = max((r.sensitivity for r in released), default=None)
    settings = ledger_guarantee_settings(args, rep.provenance, rep.rows, slot_seconds)
    covered = (rep.last_slot if rep.last_slot is not None else rep.through) - rep.schedule.origin + 1
    stream = production_stream_check(args, model, rep, readings, slot_seconds, client)
    verdict = recorded_verdict(rep.provenance, model, stream_checks=None if stream is None else [stream["record"]])
    privacy = releases_guarantee(rep.rows, verdict, settings, model_epsilon=rep.peak_risk,
                                 model_horizon=max(1, covered), epsilon_c=rep.schedule.epsilon_c)
    out = {
        "guarantee": privacy["guarantee"],
        "model_free": privacy["model_free"],
        "model_verdict": privacy["model_verdict"],
        "guarantee_settings": settings,
        "ledger": rep.ledger,
        "schedule_id": rep.schedule_id,
        "schedule": rep.schedule.to_dict(),
        "model": rep.model,
        "max_tv_source": model.max_tv_source,
        "model_reason": rep.provenance.get("model_reason"),
        "override": rep.provenance.get("override"),
        "trial": rep.trial,
        "slot_length": rep.provenance.get("slot_length"),
        "slot_seconds": slot_seconds,
        "through": rep.through,
        "released": len(released),
        "skipped": len(new) - len(released),
        "clipped": sum(r.clipped for r in new),
        "new_releases": row_dicts(new, rep.intervals),
        "intervals": intervals_summary(rep.intervals, rep.rows),
        "rows": rep.total_rows,
        "released_total": rep.released_total,
        "skipped_total": rep.skipped_total,
        "last_slot": rep.last_slot,
        "next_slot": rep.next_slot,
        "peak_risk": rep.peak_risk,
        "max_risk": args.max_risk,
        "out": rep.out,
        "out_rebuilt": rep.out_rebuilt,
        "designed_sensitivity": designed_sens,
        "model_check": check,
        "stream_check": None if stream is None else {**stream["record"], "reused": stream["reused"],
                                                     "runs": stream["runs"], "recorded": stream["recorded"]},
        "warnings": privacy["warnings"],
        "plot": None,
        "plot_truth": None,
        "wall_time_s": time.perf_counter() - start,
    }
    if args.plot is not None:
        from policyopt.deploy.error_bars import plot_releases, replay_truth

        s = rep.schedule
        truth = replay_truth(readings, rep.rows, s.value_range, model=model, provenance=rep.provenance,
                             stream=args.data)
        plot_releases(row_dicts(rep.rows, rep.intervals), out["intervals"], args.plot, truth=truth,
                      title=f"publish: A = {s.A}, S̄ = {s.S_bar}, ε_C = {s.epsilon_c:.4g} nats")
        out.update(plot=str(args.plot), plot_truth=truth is not None, wall_time_s=time.perf_counter() - start)
    if args.data is not None and not isinstance(readings, ParquetStream):  # a Parquet stream is never read whole
        out["data_check"] = _stream_check(args, readings, model, rep, slot_seconds, out["warnings"])
        out["wall_time_s"] = time.perf_counter() - start
    lines = _publish_lines(args, rep, out, privacy, model, check_note, designed_sens, used_sens)
    lines.append(f"wall time   : {out['wall_time_s']:.3f} s")
    from policyopt.studies.data_check import with_data_check

    return CommandReport("publish", out, with_data_check(check_text("\n".join(lines)), out), allow_nan=True)


def _stream_check(args, readings, model, rep, slot_seconds, warnings: list) -> dict | None:
    """The data check of a CSV stream (:func:`policyopt.studies.data_check.readings_check`) at the accounting model's
    states (the data default when it has none) and the schedule's public range; ``None`` with a warning when the
    check cannot run on these readings (e.g. fewer distinct values than states)."""
    from policyopt.app.inputs import DEFAULT_STATES
    from policyopt.studies.data_check import readings_check

    states = model.states if isinstance(model.states, int) else DEFAULT_STATES
    try:
        return readings_check(readings, states=states, value_range=rep.schedule.value_range, slot_seconds=slot_seconds,
                              slot_length_given=args.slot_length is not None,
                              time_stamps=rep.provenance.get("time_origin") is not None, source=f"data {args.data}")
    except InvalidInputError as exc:
        warnings.append(f"data check not run on the stream: {exc}")
        return None

