"""``policyopt publish`` and ``policyopt ledger``: run a designed schedule and audit its ledger.

Registered in :func:`policyopt.cli.build_parser` through :func:`add_command`.  The work is
done by :mod:`policyopt.deploy` (:class:`~policyopt.deploy.Publisher`,
:class:`~policyopt.deploy.Ledger`); this module parses options and prints.
"""

from __future__ import annotations

import json
import math
import sys
import time

from policyopt.cli.options import (
    int_at_least,
    non_negative_float,
    positive_float,
    value_range_arg,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import fmt_exact, fmt_upper, fmt_value

__all__ = ["add_command", "run_publish", "run_ledger"]

#: Rows of the release table printed by ``policyopt ledger`` (all of them are in --json).
TEXT_ROWS = 12


def _add_model(cmd, default_help: str) -> None:
    cmd.add_argument("--model", metavar="SPEC", default=None,
                     help="model of Δ(t) for the accounting: bundled (CityLearn 2022, as `policyopt schedule`), "
                     f"data:CSV, matrix:FILE or two-state:p=P,q=Q ({default_help})")
    cmd.add_argument("--states", type=int_at_least("--states", 2), default=None, metavar="K",
                     help="quantile states of a fitted model (default 12)")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help="additive smoothing of a fitted model (default 0.01)")


def add_command(sub) -> None:
    """Add the ``publish`` and ``ledger`` sub-commands to the argparse subparsers `sub`.

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
    pub.add_argument("--data", metavar="CSV",
                     help="the stream so far: long CSV user,time,value (time in integer slots, each user's times increasing); "
                     "default: the bundled CityLearn 2022 data (17 homes, hourly kWh, 8760 slots) as a finished stream")
    pub.add_argument("--value-range", type=value_range_arg("--value-range"), required=True, metavar="LO:HI",
                     help="public range of one reading, within ±1e300; readings are clipped to it (write --value-range=-1:1 for a negative LO)")
    pub.add_argument("--ledger", metavar="FILE", required=True, help="SQLite privacy ledger (created on the first run)")
    pub.add_argument("--out", metavar="CSV", help="releases CSV, appended after each commit and rebuilt from the ledger when behind")
    pub.add_argument("--through", type=int_at_least("--through", 0), metavar="T",
                     help="last complete slot (default: the stream's last slot − 1, whose readings may still be arriving)")
    pub.add_argument("--start", type=int_at_least("--start", 0), metavar="T",
                     help="first input slot of the schedule, ≤ 2^62 (default: the stream's first slot when the ledger is created)")
    pub.add_argument("--max-risk", type=positive_float("--max-risk"), metavar="R",
                     help="refuse (exit 2, nothing written) a run in which a release would have ε(S_n) > R nats")
    _add_model(pub, "default bundled; fixed by the ledger's first run")
    pub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    pub.set_defaults(handler=run_publish)

    led = sub.add_parser(
        "ledger",
        help="audit a privacy ledger: age-dependent risk ε(t) of the releases made, its peak, the designed peak, AoI",
        description=(
            "The age-dependent risk ε(t) (Theorem 3, eq. (25)) of the releases actually made — their own times, agings "
            "and budgets, so missed or skipped releases count — its peak so far, the designed peak ε* (eq. (30)) and "
            "AoI(t) (eq. (24)).  Zhang et al. (2024), 'Age-Dependent Differential Privacy', IEEE Trans. Inf. Theory, 2024."
        ),
    )
    led.add_argument("--ledger", metavar="FILE", required=True, help="SQLite ledger written by `policyopt publish`")
    led.add_argument("--at", type=int_at_least("--at", 0), metavar="T", help="report ε and AoI at slot T (default: the last row's slot); the trajectory from the first input slot to T "
                     "holds at most 10^7 slots (memory)")
    _add_model(led, "default: the model recorded in the ledger")
    led.add_argument("--json", action="store_true", help="print one JSON object (with the whole trajectory) instead of text")
    led.set_defaults(handler=run_ledger)


def _model_spec(args, recorded=None):
    from policyopt.deploy import ModelSpec

    if args.model is None and recorded is not None:
        if args.states is not None or args.smoothing is not None:
            raise InvalidInputError("--states/--smoothing need --model (the ledger's recorded model is used otherwise)")
        return recorded
    spec = "bundled" if args.model is None else args.model
    if not spec.startswith(("bundled", "data:")) and (args.states is not None or args.smoothing is not None):
        raise InvalidInputError(f"--states/--smoothing apply to a fitted model (bundled or data:CSV), not --model {spec!r}")
    return ModelSpec(spec, 12 if args.states is None else args.states, 0.01 if args.smoothing is None else args.smoothing)


def _schedule(args):
    from policyopt.deploy import ScheduleSpec

    direct = [args.A, args.S_bar, args.epsilon_c]
    if args.schedule is not None:
        if any(v is not None for v in direct):
            raise InvalidInputError("give either --schedule FILE or --A/--S-bar/--epsilon-c, not both")
        return ScheduleSpec.from_json_file(args.schedule, value_range=args.value_range, origin=args.start)
    if any(v is None for v in direct):
        missing = [n for n, v in zip(("--A", "--S-bar", "--epsilon-c"), direct) if v is None]
        raise InvalidInputError(f"give --schedule FILE or all of --A, --S-bar, --epsilon-c (missing {', '.join(missing)})")
    return ScheduleSpec(args.A, args.S_bar, args.epsilon_c, args.value_range, args.start, source="options")


def _row_dict(r) -> dict:
    return {k: getattr(r, k) for k in ("n", "slot", "input_time", "status", "users", "clipped", "epsilon_c", "epsilon_spent",
                                       "sensitivity", "noise_scale", "value", "prior_risk", "risk_at_release", "reason")}


def _designed_sensitivity(path):
    """``model.sensitivity`` of a schedule JSON (the Δf its penalty assumed), or ``None``."""
    if path is None:
        return None
    try:
        value = json.loads(open(path, encoding="utf-8").read()).get("model", {}).get("sensitivity")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _schedule_model(path):
    """The accounting model a schedule JSON was designed with, when it is the bundled pilot; else ``None``.

    ``policyopt schedule`` fits the bundled data with ``model.states`` states and ``model.smoothing``; the ledger
    must account with the same chains, or its designed peak (30) would not be the schedule's.
    """
    from policyopt.deploy import ModelSpec

    if path is None:
        return None
    try:
        model = json.loads(open(path, encoding="utf-8").read()).get("model", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(model, dict):  # `"model": null` or a non-object: no recorded model
        return None
    states, smoothing = model.get("states"), model.get("smoothing")
    if not str(model.get("source", "")).startswith("bundled") or not isinstance(states, int):
        return None
    return ModelSpec("bundled", states, 0.01 if not isinstance(smoothing, (int, float)) else float(smoothing))


def _interrupted(what: str) -> int:
    print(f"policyopt: interrupted; {what}", file=sys.stderr)
    return 130


def run_publish(args) -> int:
    """Handler of ``policyopt publish``; prints text or JSON and returns the exit code.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    from policyopt.deploy import Publisher
    from policyopt.deploy.publisher import read_stream_csv

    start = time.perf_counter()
    schedule = _schedule(args)
    model = None if args.model is None and args.states is None and args.smoothing is None else _model_spec(args)
    if model is None:
        model = _schedule_model(args.schedule)
    if args.data is None:
        from policyopt.data import load_citylearn

        readings = load_citylearn()
    else:
        readings = read_stream_csv(args.data, "--data")
    if args.through is not None:
        t_min, t_max = int(readings["time"].min()), int(readings["time"].max())
        if not t_min <= args.through <= t_max:
            raise InvalidInputError(f"--through {args.through} is outside the data's slots {t_min}..{t_max}")
    publisher = Publisher(args.ledger, schedule, model=model, max_risk=args.max_risk, out=args.out)
    try:
        rep = publisher.publish(readings, through=args.through)
    except KeyboardInterrupt:
        return _interrupted("the ledger is consistent (every committed release is kept); rerun the same command to resume")
    new = rep.new_rows
    released = [r for r in new if r.status == "released"]
    designed_sens = _designed_sensitivity(args.schedule)
    used_sens = max((r.sensitivity for r in released), default=None)
    out = {
        "ledger": rep.ledger,
        "schedule_id": rep.schedule_id,
        "schedule": rep.schedule.to_dict(),
        "model": rep.model,
        "through": rep.through,
        "released": len(released),
        "skipped": len(new) - len(released),
        "clipped": sum(r.clipped for r in new),
        "new_releases": [_row_dict(r) for r in new],
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
        "wall_time_s": time.perf_counter() - start,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    s = rep.schedule
    lines = [
        "policyopt publish: releases with OpenDP Laplace noise (Zhang et al. 2024, Theorem 3; ledger in SQLite)",
        f"schedule    : A = {s.A} slots, S̄ = {s.S_bar} slots, ε_C = {fmt_exact(s.epsilon_c)} nats, value range "
        f"{fmt_value(s.value_range[0])}:{fmt_value(s.value_range[1])}, first input slot {s.origin} (id {rep.schedule_id})",
        f"stream      : complete through slot {rep.through}",
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
        f"ledger      : {rep.ledger}: {rep.total_rows} rows ({rep.released_total} released, {rep.skipped_total} skipped); "
        f"next release at slot {rep.next_slot}",
        f"peak risk   : max ε(S_n) so far = {fmt_upper(rep.peak_risk)} nats (model {rep.model})",
    ]
    if rep.out:
        lines.append(f"out         : {rep.out}" + (" (rebuilt from the ledger)" if rep.out_rebuilt else ""))
    if designed_sens is not None and used_sens is not None and used_sens > designed_sens * (1 + 1e-3):
        lines.append(f"note        : Δf up to {fmt_value(used_sens)} in this run, above the Δf = {fmt_value(designed_sens)} the schedule's "
                     "penalty assumed (wider --value-range or fewer users): the privacy is as accounted, the error larger")
    lines.append(f"wall time   : {out['wall_time_s']:.3f} s")
    print("\n".join(lines))
    return 0


def _slots(x):
    """An AoI value for JSON: ``None`` for NaN (before the first release), else an int (slots)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def run_ledger(args) -> int:
    """Handler of ``policyopt ledger``; prints text or JSON and returns the exit code.

    Raises
    ------
    InvalidInputError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    import numpy as np

    from policyopt.deploy import Ledger

    start = time.perf_counter()
    try:
        with Ledger(args.ledger) as led:
            if led.is_new:
                raise InvalidInputError(f"--ledger {args.ledger!r} holds no schedule")
            model = _model_spec(args, led.model)
            population = model.load()
            risk = led.risk(population, at=args.at)
            rows = led.rows()
            meta = led.meta()
            sch = led.schedule
    except KeyboardInterrupt:
        return _interrupted("nothing was changed")
    made = [r for r in rows if r.status == "released" and r.slot <= risk.at]
    peaks = dict(zip(risk.release_slots.tolist(), risk.epoch_peaks.tolist()))
    out = {
        "ledger": str(args.ledger),
        "schema_version": int(meta.get("schema_version", 0)),
        "created_at": meta.get("created_at"),
        "package_version": meta.get("package_version"),
        "schedule_id": led.schedule_id,
        "schedule": sch.to_dict(),
        "model": model.describe(),
        "model_is_recorded": model == led.model,
        "at": risk.at,
        "released": risk.released,
        "skipped": risk.skipped,
        "risk_at": float(risk.risk[-1]),
        "aoi_at": _slots(float(risk.aoi[-1])),
        "peak_risk": risk.peak_risk,
        "designed_peak_risk": risk.designed_peak_risk,
        "designed_status": risk.designed_status,
        "releases": [dict(_row_dict(r), risk_at_release=peaks.get(r.slot) if r.status == "released" else None,
                          recorded_risk_at_release=r.risk_at_release) for r in rows if r.slot <= risk.at],
        "trajectory": {
            "times": risk.times.tolist(),
            "risk": risk.risk.tolist(),
            "aoi": [_slots(v) for v in risk.aoi.tolist()],
        },
        "wall_time_s": time.perf_counter() - start,
    }
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    designed = (f"ε* = {fmt_upper(risk.designed_peak_risk)} nats (eq. (30), the limit of ε(S_n) for the schedule as designed)"
                if risk.designed_peak_risk is not None else "divergent: condition (31) Δ(S̄)e^ε_C < 1 fails")
    aoi = out["aoi_at"]
    lines = [
        "policyopt ledger: age-dependent risk of the releases made (Zhang et al. 2024, Theorem 3, eq. (25); nats, slots)",
        f"ledger      : {args.ledger} (schema {out['schema_version']}, created {out['created_at']}, policyopt {out['package_version']})",
        f"schedule    : A = {sch.A} slots, S̄ = {sch.S_bar} slots, ε_C = {fmt_exact(sch.epsilon_c)} nats, value range "
        f"{fmt_value(sch.value_range[0])}:{fmt_value(sch.value_range[1])}, first input slot {sch.origin} (id {led.schedule_id})",
        f"model       : {model.describe()}" + ("" if out["model_is_recorded"] else " (not the ledger's recorded model)"),
        f"releases    : {risk.released} made, {risk.skipped} skipped, up to slot {risk.at}",
        f"now         : ε({risk.at}) = {fmt_upper(out['risk_at'])} nats, AoI = {'—' if aoi is None else aoi} slots",
        f"peak so far : max ε(S_n) = {fmt_upper(risk.peak_risk)} nats",
        f"designed    : {designed}",
    ]
    if made:
        lines.append(f"{'n':>6} {'slot':>7} {'input':>7} {'users':>5} {'ε spent':>10} {'ε(S_n)':>10} {'AoI':>5}")
        shown = made if len(made) <= TEXT_ROWS else made[:3] + made[-(TEXT_ROWS - 3):]
        for i, r in enumerate(shown):
            if len(made) > TEXT_ROWS and i == 3:
                lines.append(f"{'...':>6}")
            lines.append(f"{r.n:>6} {r.slot:>7} {r.input_time:>7} {r.users:>5} {fmt_upper(r.epsilon_spent):>10} "
                         f"{fmt_upper(peaks[r.slot]):>10} {r.slot - r.input_time:>5}")
    worst = int(np.argmax(risk.risk)) if risk.risk.size else 0
    lines.append(f"trajectory  : {risk.times.size} slots ({'--json' if risk.times.size else ''} prints ε(t), AoI(t)); "
                 f"max ε(t) = {fmt_upper(float(risk.risk[worst]))} at slot {int(risk.times[worst])}")
    lines.append(f"wall time   : {out['wall_time_s']:.3f} s")
    print("\n".join(lines))
    return 0
