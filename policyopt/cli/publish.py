"""``policyopt publish``: run a designed schedule into a privacy ledger.

Registered in :func:`policyopt.cli.build_parser` through :func:`add_command`; ``policyopt ledger`` is
:mod:`policyopt.cli.ledger`.  The work is done by :mod:`policyopt.deploy` (:class:`~policyopt.deploy.Publisher`,
:class:`~policyopt.deploy.Ledger`) and :mod:`policyopt.app.publishing` (the publish plan, the accounting model and
its verdict, the stream, the guarantee of the releases made: which guarantee a report states first is explained
there); this module parses options and prints.
"""

from __future__ import annotations

import contextlib
import json
import time

from policyopt.cli.options import (
    add_ledger_model_options,
    add_markov_model_option,
    check_plot,
    interrupted,
    probability,
    add_distributed_options,
    add_guarantee_options,
    int_at_least,
    positive_float,
    value_range_arg,
)
from policyopt.app.publishing import (
    designed_sensitivity,
    guarantee_lines,
    ledger_guarantee_settings,
    load_stream,
    not_a_bound,
    publish_model_check,
    publish_plan,
    recorded_verdict,
    releases_guarantee,
    row_dicts,
    span_text,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import check_text, fmt_count, fmt_exact, fmt_upper, fmt_value

__all__ = ["add_command", "run_publish"]



def add_command(sub) -> None:
    """Add the ``publish`` sub-command to the argparse subparsers `sub` (``ledger`` is :mod:`policyopt.cli.ledger`).

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers object of :func:`policyopt.cli.build_parser`.
    """
    pub = sub.add_parser(
        "publish",
        help="release a designed schedule on a growing stream with OpenDP Laplace noise, into an SQLite privacy ledger",
        description=(
            "At each publishing time S_n = first slot + A + (n−1)·S_bar up to the last complete slot of the stream, "
            "release the mean over the users present of their readings at S_n − A, clipped to --value-range, plus "
            "Laplace noise of scale Δf/ε_C (Δf = (HI − LO)/I) drawn by OpenDP.  A slot with no reading is skipped "
            "(recorded, nothing spent).  Each release is committed to the ledger before it is written to --out; "
            "rerun as the stream grows: it resumes after the last committed release and never redraws noise.  "
            "The report states first the guarantee of the releases made that the evidence supports: their age-dependent "
            "risk ε(t) (Theorem 3) only when the design's Markov model passed its checks on held-out readings (or was "
            "given without data), else their model-free (ε, δ) for each user's whole series (PLD accountant of "
            "dp_accounting), which holds whatever the correlation.  "
            "Zhang et al. (2024), 'Age-Dependent Differential Privacy', IEEE Trans. Inf. Theory, 2024, Theorem 3, eq. (30)."
        ),
    )
    pub.add_argument("--schedule", metavar="FILE", help="JSON printed by `policyopt schedule --json`")
    pub.add_argument("--A", dest="A", type=int_at_least("--A", 0), metavar="N", help="aging A, slots, ≤ 2^62 (instead of --schedule)")
    pub.add_argument("--S-bar", dest="S_bar", type=int_at_least("--S-bar", 1), metavar="N",
                     help="inter-publish time S_bar, slots, ≤ 2^62 (instead of --schedule)")
    pub.add_argument("--epsilon-c", dest="epsilon_c", type=positive_float("--epsilon-c"), metavar="E",
                     help="budget per release ε_C, nats, ≤ 700 (beyond, the noise is below float resolution) and large enough that the "
                     "Laplace scale (HI − LO)/(I·ε_C) stays ≤ 1e300 (instead of --schedule)")
    pub.add_argument("--data", metavar="CSV_OR_PARQUET",
                     help="the stream so far: long CSV user,time,value (time in integer slots, each user's times increasing), "
                     "or a Parquet data set with those columns (a directory, a glob or a .parquet file, as `schedule` reads; "
                     "only the input slots' rows are read, by a filter on time); "
                     "default: the bundled CityLearn 2022 data (17 homes, hourly kWh, 8760 slots) as a finished stream. "
                     "With --schedule it must be the data the schedule was designed on, or that CSV grown by appended "
                     "lines (same SHA-256 of its first bytes), unless --override")
    pub.add_argument("--trial", metavar="REASON", default=None,
                     help="publish a stream with far fewer users than the schedule was designed for (a release over fewer "
                     "than half of its I users is refused otherwise: its noise variance is at least 4 times the schedule's); "
                     "REASON (one line) is recorded in the ledger with the first such release and the fewest users")
    pub.add_argument("--slot-length", metavar="DUR",
                     help="length of one slot of --data, e.g. 30min, 1h, 1d (default: read from its time stamps when they are "
                     "date-times — the most common step —, else the schedule's slot length; the bundled data: 1h)")
    pub.add_argument("--resample", metavar="DUR",
                     help="publish on slots of DUR (a multiple of the slot length): each user's mean over each DUR bin, "
                     "as pandas resample(DUR).mean() (CSV or bundled --data)")
    pub.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading, within ±1e300; readings are clipped to it (write --value-range=-1:1 for a negative LO); "
                     "default: the range --schedule declares (required with --A/--S-bar/--epsilon-c)")
    pub.add_argument("--ledger", metavar="FILE", required=True, help="SQLite privacy ledger (created on the first run)")
    pub.add_argument("--out", metavar="CSV_OR_PARQUET",
                     help="releases with their error bars: a CSV, appended after each commit, or a .parquet file, rewritten "
                     "whole at the end of each run; rebuilt from the ledger when behind")
    pub.add_argument("--through", type=int_at_least("--through", 0), metavar="T",
                     help="last complete slot (default: the stream's last slot − 1, whose readings may still be arriving)")
    pub.add_argument("--start", type=int_at_least("--start", 0), metavar="T",
                     help="first input slot of the schedule, ≤ 2^62 (default: the stream's first slot when the ledger is created)")
    pub.add_argument("--max-risk", type=positive_float("--max-risk"), metavar="R",
                     help="refuse (exit 2, nothing written) a run in which a release would have ε(S_n) > R nats")
    pub.add_argument("--max-tv", metavar="SOURCE",
                     help="with --A/--S-bar/--epsilon-c: the Δ(t) the ledger accounts with: model (the chains, default) or "
                     "empirical[:LEVEL] (the upper edge of the LEVEL, default 0.95, block-bootstrap band of Δ(t) estimated "
                     "from the model's data — --data by default — as `schedule --max-tv empirical` does, for t ≤ A + S̄; 1 "
                     "beyond); estimated when the ledger is created and recorded in it (a --schedule carries its own)")
    add_ledger_model_options(pub, "default: the model recorded in --schedule's deployment, else the bundled pilot as `policyopt schedule` "
               "designs it (3 states, fitted on 0:48 kWh); fixed by the ledger's first run",
               "publish with a --model/--states/--smoothing/--value-range that differs from the schedule's design, a "
               "--data stream that is not the design's data (nor that file grown by appended lines), or --data with "
               "--A/--S-bar/--epsilon-c and no --model")
    add_distributed_options(
        pub, "distributed reading (Parquet --data)",
        "split the Parquet --data into its input slots on a local Dask cluster of N worker processes, one file per task "
        "(the releases are then drawn one after another by this process)",
        "the same on an existing Dask cluster (its workers need policyopt, the --data files and the system's temporary "
        "folder at the same paths)")
    add_guarantee_options(pub, design=False, markov=False)
    add_markov_model_option(pub, "default: the model --schedule's design used (its deployment.model.markov_model), else chain; "
                      "fixed by the ledger's first run")
    pub.add_argument("--ci-level", type=probability("--ci-level"), metavar="LEVEL",
                     help="level of each release's error bars (default 0.95; fixed when the ledger is created): "
                     "ci_low..ci_high holds the input slot's mean with probability exactly LEVEL (Laplace quantile), "
                     "ci_current_low..ci_current_high the mean at the publication slot with probability ≥ LEVEL (noise and "
                     "the mean's change over A slots in the design's readings, union bound); post-processing, no privacy spent")
    pub.add_argument("--plot", metavar="FILE",
                     help="draw every release so far with both error bars into FILE (.png, .pdf or .svg; needs matplotlib), "
                     "over the stream's true current mean when the stream is the design's own readings (a replay)")
    pub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    pub.set_defaults(handler=run_publish)


def run_publish(args) -> int:
    """Handler of ``policyopt publish``; prints text or JSON and returns the exit code.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    start = time.perf_counter()
    check_plot(args)
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
        f"schedule    : A = {fmt_count(s.A, 'slot')}, S̄ = {fmt_count(s.S_bar, 'slot')}, ε_C = {fmt_exact(s.epsilon_c)} nats, value range "
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
        f"design check: {verdict_text(mv)}",
    ]
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


def _publish(args, start, schedule, model, provenance, client, as_designed: bool) -> int:
    """The rest of :func:`run_publish` (inside the Dask client's lifetime when there is one); `as_designed`: the
    accounting model is the schedule file's own, whose recorded numbers the publisher then checks."""
    from policyopt.deploy import Publisher
    from policyopt.deploy.error_bars import intervals_summary

    readings, slot_seconds = load_stream(args, provenance, client)
    if args.through is not None:
        from policyopt.deploy.stream import ParquetStream

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
        return interrupted("the ledger is consistent (every committed release is kept); rerun the same command to resume")
    new = rep.new_rows
    released = [r for r in new if r.status == "released"]
    check, check_note = publish_model_check(model, rep.schedule)
    designed_sens = designed_sensitivity(args.schedule)
    used_sens = max((r.sensitivity for r in released), default=None)
    settings = ledger_guarantee_settings(args, rep.provenance, rep.rows, slot_seconds)
    covered = (rep.last_slot if rep.last_slot is not None else rep.through) - rep.schedule.origin + 1
    privacy = releases_guarantee(rep.rows, recorded_verdict(rep.provenance, model), settings, model_epsilon=rep.peak_risk,
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
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    lines = _publish_lines(args, rep, out, privacy, model, check_note, designed_sens, used_sens)
    lines.append(f"wall time   : {out['wall_time_s']:.3f} s")
    print(check_text("\n".join(lines)))
    return 0

