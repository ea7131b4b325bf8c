"""``policyopt ledger`` below the command line: audit a privacy ledger written by ``policyopt publish``
(:func:`audit_report`; from Python :func:`audit_ledger`).

The age-dependent risk ε(t) of the releases actually made (Zhang et al. (2024), "Age-Dependent Differential Privacy",
IEEE Trans. Inf. Theory, Theorem 3, eq. (25)), its peak, the designed ε* (eq. (30)), AoI (eq. (24)), the model-free
(ε, δ) of those releases and their error bars.  What it shares with ``publish`` is in :mod:`policyopt.app.publishing`
(the accounting model and its verdict, the guarantee, the rows' JSON).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

from policyopt.app.publishing import (
    ACCOUNTING_RULES,
    AccountingOptions,
    given_model,
    guarantee_lines,
    ledger_guarantee_settings,
    markov_accounting,
    not_a_bound,
    options_verdict,
    recorded_verdict,
    refuse_unless_override,
    releases_guarantee,
    row_dicts,
    same_model,
    span_text,
)
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError
from policyopt.formatting import check_text, fmt_count, fmt_epsilon_c, fmt_upper, fmt_value

__all__ = ["Interrupted", "LedgerOptions", "audit_ledger", "audit_report"]

#: Rows of the release table printed by ``policyopt ledger`` (all of them are in --json).
TEXT_ROWS = 12


class Interrupted(KeyboardInterrupt):
    """Ctrl-C at a point where the command can say what state it left (`what`, e.g. "nothing was changed")."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class LedgerOptions(AccountingOptions):
    """The options of ``policyopt ledger`` (:func:`audit_ledger`): each attribute the option of the same name
    (``ci_level`` is ``--ci-level``); ``None`` is the command's default.

    Attributes
    ----------
    ledger : str or os.PathLike
        The SQLite ledger written by ``policyopt publish``.
    at : int, optional
        Report ε and AoI at this slot, ≥ 0 (default: the last row's slot).
    model, states, smoothing : optional
        Audit under another model than the recorded one (needs `override`): a ``--model`` specification, quantile
        states (≥ 2) and the smoothing pseudo-count (≥ 0).
    override : str, optional
        Why the audit uses another model (recorded in the output).
    delta : float, optional
        δ of the model-free (ε, δ) guarantee, in (0, 1) (default: the ledger's).
    markov_model : str, optional
        Re-account the same releases under another Markov model (``chain``, ``order:K``, ``phase[:P]``, ``hmm:R``).
    ci_level : float, optional
        Level of the releases' error bars in this audit, in (0, 1) (default: the ledger's).
    plot : str or os.PathLike, optional
        Draw the releases with both error bars into this .png, .pdf or .svg file.

    Raises
    ------
    InvalidInputError
        No `ledger`, or a value of the wrong type or out of its range (naming the keyword and showing the value).
    """

    COMMAND = "ledger"
    RULES = {**ACCOUNTING_RULES, "at": ("int", 0, None)}

    at: int | None = None

    def __post_init__(self):
        if self.ledger is None:
            raise InvalidInputError("`ledger` is required: the SQLite ledger written by `policyopt publish`")
        super().__post_init__()


def audit_ledger(ledger, **options) -> CommandReport:
    """Audit a privacy ledger as ``policyopt ledger`` does, and return its report.

    Parameters
    ----------
    ledger : str or os.PathLike
        The SQLite ledger written by ``policyopt publish`` (read only; nothing is changed).
    **options
        The other attributes of :class:`LedgerOptions` (``at``, ``markov_model``, ``delta``, ``ci_level``, ``plot``,
        ...), each the ``ledger`` option of the same name.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall time aside) and ``str()`` its text: the
        age-dependent risk ε(t) of the releases actually made (Zhang et al. 2024, Theorem 3, eq. (25)), its peak,
        the designed ε* (eq. (30)), AoI (eq. (24)), the model-free (ε, δ) of those releases and their error bars.

    Raises
    ------
    InvalidInputError, LedgerLockedError
        An unknown keyword, a bad value, a ledger without a schedule, locked or corrupt.
    """
    return audit_report(LedgerOptions.from_keywords("audit_ledger", {"ledger": ledger, **options}))


def _ledger_model(args, recorded):
    """The model ``ledger`` audits with: the recorded one, or another only with --override."""
    if args.model is None and args.states is None and args.smoothing is None:
        return recorded
    model = given_model(args, recorded)
    if same_model(model, recorded):
        return recorded
    refuse_unless_override(
        args, f"--model {model.describe()} is not the model recorded in the ledger ({recorded.describe()}): the audit would "
        "not be of the deployment as published", "omit --model/--states/--smoothing")
    return model.pinned("--model")



def _slots(x):
    """An AoI value for JSON: ``None`` for NaN (before the first release), else an int (slots)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)



def _ledger_lines(args, out: dict, led, risk, model, privacy: dict, made: list, peaks: dict) -> list[str]:
    """The text of ``policyopt ledger`` but its wall time (`out` is the ``--json`` object; `led` the closed ledger,
    `risk` its accounting, `made` the releases made up to the audited slot, `peaks` ε(S_n) by release slot)."""
    import numpy as np

    from policyopt.deploy.error_bars import intervals_lines
    from policyopt.studies.backtest import verdict_text

    sch, trials, mv = led.schedule, out["trials"], privacy["model_verdict"]
    slot_seconds, slot_len = out["slot_seconds"], out["slot_length"]
    designed = (f"ε* = {fmt_upper(risk.designed_peak_risk)} nats (eq. (30), the limit of ε(S_n) for the schedule as designed)"
                f"{not_a_bound(mv)}" if risk.designed_peak_risk is not None else
                "divergent: condition (31) Δ(S̄)e^ε_C < 1 fails")
    if risk.designed_peak_risk is None and risk.designed_horizon_risk is not None and sch.horizon_accounting == "model-free":
        k = -(-sch.horizon // sch.S_bar)  # ⌈H/S̄⌉ planned releases
        designed = (f"no finite ε* (condition (31) Δ(S̄)e^ε_C < 1 fails); designed over {fmt_count(sch.horizon, 'slot')}"
                    f"{span_text(sch.horizon, slot_seconds)} for the model-free guarantee: pure ε ≤ "
                    f"{fmt_upper(risk.designed_horizon_risk)} nats for its {fmt_count(k, 'planned release')} (basic "
                    "composition, whatever the correlation); the releases made so far are accounted above")
    elif risk.designed_peak_risk is None and risk.designed_horizon_risk is not None:
        designed = (f"no finite ε* (condition (31) Δ(S̄)e^ε_C < 1 fails); designed over {fmt_count(sch.horizon, 'slot')}"
                    f"{span_text(sch.horizon, slot_seconds)}: largest risk ≤ {fmt_upper(risk.designed_horizon_risk)} nats "
                    f"(Theorem 3, every planned release made){not_a_bound(mv)}; the releases made so far are accounted "
                    "above")
    aoi = out["aoi_at"]
    checks = out["stream_checks"]
    if checks and out["model_is_recorded"]:
        from policyopt.studies.stream_check import stream_check_text

        stream_lines = [f"stream check: {stream_check_text(checks[-1], runs=len(checks))} (recorded "
                        f"{checks[-1].get('recorded_at')})"]
    else:
        stream_lines = [f"design check: {verdict_text(mv)}"]
    lines = [
        "policyopt ledger: age-dependent risk of the releases made (Zhang et al. 2024, Theorem 3, eq. (25); nats, slots)",
        *guarantee_lines(privacy),
        f"ledger      : {args.ledger} (schema {out['schema_version']}, created {out['created_at']}, policyopt {out['package_version']})",
        f"schedule    : A = {fmt_count(sch.A, 'slot')}, S̄ = {fmt_count(sch.S_bar, 'slot')}, ε_C = {fmt_epsilon_c(sch.epsilon_c)} nats, value range "
        f"{fmt_value(sch.value_range[0])}:{fmt_value(sch.value_range[1])}, first input slot {sch.origin} (id {led.schedule_id})",
        f"model       : {model.describe()}" + ("" if out["model_is_recorded"] else
                                                 f" (not the ledger's recorded model: --override {args.override})"
                                                 if args.override is not None else
                                                 f" (--markov-model {model.markov_model}; the ledger's is "
                                                 f"{led.model.markov_model})"),
        f"model from  : {out['model_reason']}",
        *stream_lines,
        *(f"trial       : {t.get('reason')} (publish --trial, {t.get('recorded_at')}) — from release "
          f"{t.get('first_release')} the releases average as few as {fmt_count(t.get('fewest_users'), 'user')}' "
          f"readings, against the I = {t.get('design_users')} users of the design" for t in trials),
        f"releases    : {risk.released} made, {risk.skipped} skipped, up to slot {risk.at}{span_text(risk.at, slot_seconds)}"
        + ("" if slot_seconds is None else f"; slots of {slot_len}"),
        f"now         : ε({risk.at}) = {fmt_upper(out['risk_at'])} nats{not_a_bound(mv, brief=True)}, "
        + ("AoI undefined (nothing released yet)" if aoi is None else f"AoI = {fmt_count(aoi, 'slot')}{span_text(aoi, slot_seconds)}"),
        f"peak so far : max ε(S_n) = {fmt_upper(risk.peak_risk)} nats{not_a_bound(mv)}",
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
    lines.append(f"trajectory  : {fmt_count(risk.times.size, 'slot')} ({'--json' if risk.times.size else ''} prints ε(t), AoI(t)); "
                 f"max ε(t) = {fmt_upper(float(risk.risk[worst]))} at slot {int(risk.times[worst])}{not_a_bound(mv)}")
    lines += intervals_lines(out["intervals"])
    if out["plot"] is not None:
        lines.append(f"plot        : {args.plot} (the releases up to slot {risk.at} with both error bars)")
    lines += [f"warning     : {w}" for w in out["warnings"]]
    return lines



def audit_report(args) -> CommandReport:
    """``policyopt ledger`` of parsed options (`args`: :class:`LedgerOptions` or the command line's namespace): the
    audit of the releases the ledger records, as the command prints it.

    Raises
    ------
    InvalidInputError, LedgerLockedError
        A ledger that holds no schedule, is locked or corrupt; an audit model other than the recorded one without
        ``override``; bad options.
    Interrupted
        Ctrl-C while the ledger was read (nothing was changed).
    """
    import numpy as np

    from policyopt.deploy import Ledger
    from policyopt.deploy.error_bars import intervals_summary, recorded_intervals
    from policyopt.io import parse_duration

    start = time.perf_counter()
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
    try:
        with Ledger(args.ledger) as led:
            if led.is_new:
                raise InvalidInputError(f"--ledger {args.ledger!r} holds no schedule")
            meta = led.meta()
            provenance = json.loads(meta.get("provenance", "{}"))
            slot_len = provenance.get("slot_length")
            slot_seconds = None if slot_len is None else parse_duration(slot_len, "the ledger's slot_length")
            model = markov_accounting(args, _ledger_model(args, led.model), slot_seconds)
            population = model.load()
            risk = led.risk(population, at=args.at)
            rows = led.rows()
            trials = led.trials()
            stream_checks = led.stream_checks()
            sch = led.schedule
    except KeyboardInterrupt:
        raise Interrupted("nothing was changed") from None
    made = [r for r in rows if r.status == "released" and r.slot <= risk.at]
    peaks = dict(zip(risk.release_slots.tolist(), risk.epoch_peaks.tolist()))
    if model == led.model:  # a production stream's latest check on its own readings speaks, when there is one
        verdict = recorded_verdict(provenance, model, stream_checks=stream_checks)
    elif model.same_chains(led.model):
        verdict = recorded_verdict(provenance, model, model.markov_model)  # only the Markov model differs
    else:
        verdict = options_verdict(model, f"this audit's --model (--override: {args.override})")
    from policyopt.deploy.ledger import recorded_discrepancies

    edited = [] if model != led.model else recorded_discrepancies(sch, risk.designed_peak_risk, risk.designed_horizon_risk)
    settings = ledger_guarantee_settings(args, provenance, rows, slot_seconds)
    largest = max(risk.peak_risk, float(np.max(risk.risk)) if risk.risk.size else 0.0)
    privacy = releases_guarantee(rows, verdict, settings, at=risk.at, model_epsilon=largest,
                                 model_horizon=int(risk.times.size), epsilon_c=sch.epsilon_c)
    mv = privacy["model_verdict"]
    shown_rows = [r for r in rows if r.slot <= risk.at]
    ci_record = recorded_intervals(meta)
    out = {
        "guarantee": privacy["guarantee"],
        "model_free": privacy["model_free"],
        "model_verdict": mv,
        "guarantee_settings": settings,
        "ledger": str(args.ledger),
        "schema_version": int(meta.get("schema_version", 0)),
        "created_at": meta.get("created_at"),
        "package_version": meta.get("package_version"),
        "schedule_id": led.schedule_id,
        "schedule": sch.to_dict(),
        "model": model.describe(),
        "model_is_recorded": model == led.model,
        "model_reason": provenance.get("model_reason"),
        "override": provenance.get("override") if model == led.model else args.override,
        "trials": trials,
        "stream_checks": stream_checks,
        "provenance": provenance,
        "slot_length": slot_len,
        "slot_seconds": slot_seconds,
        "at": risk.at,
        "released": risk.released,
        "skipped": risk.skipped,
        "risk_at": float(risk.risk[-1]),
        "aoi_at": _slots(float(risk.aoi[-1])),
        "peak_risk": risk.peak_risk,
        "designed_peak_risk": risk.designed_peak_risk,
        "designed_status": risk.designed_status,
        "max_tv_source": model.max_tv_source,
        "max_tv_table": None if model.max_tv_table is None else list(model.max_tv_table),
        "designed_horizon": sch.horizon,
        "designed_horizon_risk": risk.designed_horizon_risk,
        "designed_horizon_accounting": sch.horizon_accounting,
        "releases": [dict(d, risk_at_release=peaks.get(r.slot) if r.status == "released" else None,
                          recorded_risk_at_release=r.risk_at_release)
                     for r, d in zip(shown_rows, row_dicts(shown_rows, ci_record, args.ci_level))],
        "intervals": intervals_summary(ci_record, shown_rows, args.ci_level),
        "trajectory": {
            "times": risk.times.tolist(),
            "risk": risk.risk.tolist(),
            "aoi": [_slots(v) for v in risk.aoi.tolist()],
        },
        "warnings": privacy["warnings"] + [
            f"the schedule recorded in the ledger does not reproduce its own numbers under its model: {e} (published "
            f"with --override: {provenance.get('override')})" for e in edited],
        "plot": None,
        "wall_time_s": time.perf_counter() - start,
    }
    if args.plot is not None:
        from policyopt.deploy.error_bars import plot_releases

        plot_releases(out["releases"], out["intervals"], args.plot,
                      title=f"ledger {args.ledger}: A = {sch.A}, S̄ = {sch.S_bar}, ε_C = {sch.epsilon_c:.4g} nats")
        out.update(plot=str(args.plot), wall_time_s=time.perf_counter() - start)
    lines = _ledger_lines(args, out, led, risk, model, privacy, made, peaks)
    lines.append(f"wall time   : {out['wall_time_s']:.3f} s")
    return CommandReport("ledger", out, check_text("\n".join(lines)), allow_nan=True)
