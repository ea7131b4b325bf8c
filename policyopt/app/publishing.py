"""What ``policyopt publish`` and ``policyopt ledger`` share below the command line: the publish plan (the schedule file
is the deployment), the accounting model and its verdict, the stream, and the guarantee of the releases made.

Which guarantee a report states first: the age-dependent risk of the releases made (Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3) under the ledger's model only when
that model passed the design's check on held-out readings (:func:`policyopt.studies.backtest.design_verdict` of the
schedule file, recorded in the ledger's provenance as ``design_check`` when the ledger is created) or was given
without data; otherwise the model-free guarantee of the releases made
(:func:`policyopt.deploy.ledger_risk.model_free_of_rows`), as :func:`policyopt.studies.guarantee.choose_guarantee`
decides.  A stream other than the design's data is a production stream: accepted, its model ``unchecked`` until
the model's check on the stream's own readings (:func:`production_stream_check`, re-run as the stream grows and
recorded in the ledger) passes.

The functions take `args`, the parsed ``publish``/``ledger`` options (attribute names as the options: ``schedule``,
``data``, ``model``, ``states``, ``ledger``, ``override``, ...); errors name the command-line options.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from policyopt.app.inputs import markov_spec_option
from policyopt.app.option_fields import CommandOptions
from policyopt.errors import InvalidInputError

__all__ = [
    "AccountingOptions", "ACCOUNTING_RULES", "designed_sensitivity", "given_model", "guarantee_lines", "ledger_guarantee_settings", "load_stream",
    "markov_accounting", "model_name", "not_a_bound", "options_verdict", "production_stream_check", "publish_model_check", "publish_plan",
    "recorded_model", "recorded_verdict", "refuse_unless_override", "releases_guarantee", "row_dicts", "same_model",
    "span_text",
]


#: The rules of the options ``publish`` and ``ledger`` share (:class:`AccountingOptions`).
ACCOUNTING_RULES = {
    "ledger": ("text",), "model": ("text",), "states": ("int", 2, None),
    "smoothing": ("float", 0.0, float("inf"), False), "override": ("text",), "delta": ("level",),
    "markov_model": ("text",), "ci_level": ("level",), "plot": ("text",),
}


@dataclass(frozen=True)
class AccountingOptions(CommandOptions):
    """The options ``publish`` and ``ledger`` share: the ledger, the model its releases are accounted with (``model``,
    ``states``, ``smoothing``, ``override``, ``markov_model``), the model-free δ, the error bars' level and the plot
    (rules :data:`ACCOUNTING_RULES`; documented by :class:`~policyopt.app.ledger.LedgerOptions` and
    :class:`~policyopt.app.publish.PublishOptions`)."""

    RULES = ACCOUNTING_RULES

    ledger: str | os.PathLike | None = None
    model: str | None = None
    states: int | None = None
    smoothing: float | None = None
    override: str | None = None
    delta: float | None = None
    markov_model: str | None = None
    ci_level: float | None = None
    plot: str | os.PathLike | None = None


def markov_accounting(args, model, slot_seconds):
    """`model` with ``--markov-model`` (canonical; ``phase`` gets a day of slots) when given, else `model`.

    Raises
    ------
    InvalidInputError
        ``auto``, an unknown model, ``phase`` without P when the slot length is unknown; a model other than ``chain``
        with a model not fitted to data (``two-state``, ``matrix``) or with an empirical Δ̃(t) table.
    """
    from dataclasses import replace

    if getattr(args, "markov_model", None) is None:
        return model
    if args.markov_model == "auto":
        raise InvalidInputError("--markov-model auto selects a model at design time (`policyopt schedule --markov-model "
                                "auto`); here name the model the releases are accounted under (chain, order:K, phase:P, "
                                "hmm:R)")
    name = markov_spec_option(args, slot_seconds)
    if name != "chain" and not model.fitted:
        raise InvalidInputError(f"--markov-model {name} is fitted to readings: it goes with a model fitted to data "
                                f"(bundled or data:CSV), not {model.spec}")
    if name != "chain" and model.max_tv_table is not None:
        raise InvalidInputError(f"--markov-model {name} has its own Δ_Z(t); this accounting uses the Δ̃(t) table of "
                                f"{model.max_tv_source} (the first-order premise): omit --markov-model")
    if name == model.markov_model:
        return model
    return replace(model, markov_model=name, markov_seed=model.markov_seed if name != "chain" else 0)


def given_model(args, base=None):
    """The ModelSpec the model options name (unpinned), completing them from `base` when it is the same model."""
    from policyopt.deploy import ModelSpec

    spec = args.model if args.model is not None else ("bundled" if base is None else base.spec)
    same = base is not None and ModelSpec(spec).spec == base.spec
    kind = spec.partition(":")[0]
    if kind not in ("bundled", "data") and (args.states is not None or args.smoothing is not None):
        raise InvalidInputError(f"--states/--smoothing apply to a fitted model (bundled or data:CSV), not --model {spec!r}")
    if kind not in ("bundled", "data"):
        return ModelSpec(spec)
    states = args.states if args.states is not None else (base.states if same else None)
    smoothing = args.smoothing if args.smoothing is not None else (base.smoothing if same else None)
    value_range = base.value_range if same else (getattr(args, "value_range", None) if kind == "data" else None)
    chains = ModelSpec(spec, states, smoothing, value_range)
    if same and (chains.states, chains.smoothing) == (base.states, base.smoothing):
        # the design's own model: keep its Δ(t) source (and an empirical design's table)
        return ModelSpec(spec, states, smoothing, value_range, max_tv_source=base.max_tv_source,
                         max_tv_table=base.max_tv_table)
    return chains  # other chains: their own Δ(t), eq. (12)


def same_model(a, b) -> bool:
    """Equal models, ignoring their pins (the data may have grown by appended lines since one was pinned)."""
    from dataclasses import replace

    return replace(a, sha256=None, nbytes=None) == replace(b, sha256=None, nbytes=None)


def wants_empirical(args) -> bool:
    """Whether ``--max-tv`` asks for the empirical Δ(t) (checked by :func:`empirical_model`)."""
    return getattr(args, "max_tv", None) is not None and str(args.max_tv).partition(":")[0] == "empirical"


def empirical_model(args, schedule, model):
    """(model, where its table came from) for ``publish --max-tv``: the Δ̃(t) table estimated from the model's data.

    The table is Δ̃(0..max(A + S̄ − 1, max(A, S̄) + 1)) of
    :func:`policyopt.studies.empirical_design.empirical_max_tv_table` (the band's upper edge, non-increasing; 1
    beyond), estimated by :func:`policyopt.studies.empirical_design.estimate_up_to` as ``schedule`` does.  A ledger
    that already holds an ``empirical:`` model of the same data keeps its table (estimated at its creation): a
    stream that grew since does not change the accounting of the releases made.

    Raises
    ------
    InvalidInputError
        A bad SOURCE, or a model not fitted to readings (a matrix, two-state).
    """
    from dataclasses import replace

    from policyopt.studies.empirical_design import (box_last_age, empirical_design, empirical_max_tv_table,
                                                    parse_max_tv_source)

    if getattr(args, "max_tv", None) is None:
        return model, None
    kind, level = parse_max_tv_source(args.max_tv)
    if kind == "model":
        return model, None
    if not model.fitted:
        raise InvalidInputError(f"--max-tv {args.max_tv} estimates Δ(t) from readings: the model {model.spec!r} was "
                                "not fitted to any (give --data, or --model bundled/data:CSV)")
    source = f"empirical:{level:g}"
    recorded = recorded_model(args.ledger)
    if (recorded is not None and recorded.max_tv_source == source and recorded.max_tv_table is not None
            and replace(recorded, sha256=None, nbytes=None, max_tv_table=None)
            == replace(model, sha256=None, nbytes=None, max_tv_source=source)):
        return recorded, "the ledger's record (estimated when it was created)"
    last = box_last_age(schedule.A, schedule.S_bar)
    fitted, readings = model.fit("--model")
    est = empirical_design(fitted, readings, schedule.A, schedule.S_bar, level,
                           what=f"--A {schedule.A} with --S-bar {schedule.S_bar}").estimate
    table = empirical_max_tv_table(est, last)
    where = (f"--max-tv {args.max_tv}: upper edge of the {level:g} block-bootstrap band of Δ(t) estimated from "
             f"{model.spec} ({est.method}, L = {est.max_lag} slots), non-increasing, t ≤ {last}; 1 beyond")
    return replace(model, max_tv_source=source, max_tv_table=tuple(float(v) for v in table)), where


def _ledger_record(path) -> tuple | None:
    """(model, provenance text) recorded in an existing ledger, or ``None`` (no file, a new ledger, or not a readable
    ledger: the publisher opens it again and says what is wrong in one line)."""
    import os

    from policyopt.deploy import Ledger

    if not os.path.isfile(path):
        return None
    try:
        with Ledger(path) as led:
            return None if led.is_new else (led.model, led.meta().get("provenance", "{}"))
    except Exception:  # noqa: BLE001 - reported by the publisher, which opens it again
        return None


def recorded_model(path):
    """The model recorded in an existing ledger, or ``None`` (see :func:`_ledger_record`)."""
    record = _ledger_record(path)
    return None if record is None else record[0]


def refuse_a_switched_stream(args, foreign: str) -> None:
    """Refuse another stream than the design's data into a ledger created on the design's data (its recorded verdict
    speaks for that data): a production stream starts its own ledger, or ``--override`` says why."""
    record = _ledger_record(args.ledger)
    try:
        prov = None if record is None else json.loads(record[1])
    except ValueError:  # an unreadable record: the publisher reports it
        prov = None
    if isinstance(prov, dict) and prov.get("stream_is_design_data") is not False:
        raise InvalidInputError(
            f"{foreign}, but --ledger {str(args.ledger)!r} was created on the design's data, whose model check it "
            "records: publish another stream into a new ledger, or give --override REASON to do so on purpose")


def refuse_unless_override(args, why: str, advice: str) -> None:
    """Refuse (one line, exit 2) unless ``--override REASON`` was given: `why`, then `advice`."""
    if args.override is None:
        raise InvalidInputError(f"{why}; {advice}, or give --override REASON to do so on purpose")


def publish_slot_seconds(args, design) -> int | None:
    """The slot length (s) of a publish run for ``phase`` without P: ``--slot-length``, else the schedule's, else the
    bundled data's when no --data is given; ``None`` when unknown."""
    from policyopt.data import BUNDLED_SLOT_LENGTH
    from policyopt.io import parse_duration

    text = getattr(args, "slot_length", None) or (design or {}).get("slot_length")
    if isinstance(text, str):
        return parse_duration(text, "--slot-length" if getattr(args, "slot_length", None) else "the schedule's slot_length")
    return parse_duration(BUNDLED_SLOT_LENGTH, "the bundled slot") if args.data is None else None


def publish_plan(args):
    """(schedule, model, provenance, as designed) of ``publish``: the schedule file is the deployment (issue #25);
    *as designed* — the accounting model is the schedule's own, so its recorded ε* and horizon risk must reproduce.

    The provenance also records the verdict on the accounting model (``design_check``: the schedule file's design
    check of the first-order chains, :func:`policyopt.studies.backtest.design_verdict`; for options or an overridden
    model :func:`options_verdict`), the schedule's deployment size (``design_users``) and δ (``design_delta``).

    Raises
    ------
    InvalidInputError
        Conflicting schedule options; a model, value range or stream other than the design's without
        ``--override``; ``--data`` with direct schedule options and no ``--model`` without ``--override``.
    """
    import os

    from policyopt.deploy import ModelSpec, ScheduleSpec
    from policyopt.deploy.model import same_source
    from policyopt.io import data_digest
    from policyopt.io.schedule_design import ScheduleDesign

    given = args.model is not None or args.states is not None or args.smoothing is not None
    direct = [args.A, args.S_bar, args.epsilon_c]
    foreign = None  # why the stream is not the design's data, when it is not
    if args.max_tv is not None and args.schedule is not None:
        raise InvalidInputError(f"--max-tv {args.max_tv} goes with --A/--S-bar/--epsilon-c; a --schedule carries the "
                                "Δ(t) it was designed with (design with `schedule --max-tv empirical`)")
    design = None
    if args.schedule is not None:
        if any(v is not None for v in direct):
            raise InvalidInputError("give either --schedule FILE or --A/--S-bar/--epsilon-c, not both")
        read = ScheduleDesign.read(args.schedule).check_publishable()  # the schedule file, read once
        sched_json = read.to_dict()
        design = sched_json.get("deployment")
        if design is None and not given:
            raise InvalidInputError(
                f"--schedule {args.schedule!r} records no `deployment` (written by an earlier policyopt): redesign it with "
                "`policyopt schedule --json`, or give the accounting model with --model")
        if design is not None and design.get("backtest") is not None:
            refuse_unless_override(
                args, f"--schedule {args.schedule!r} was designed with --backtest {design['backtest']:g} (on the first part "
                "of the data only, for a replay)", "redesign it without --backtest to publish")
        declared = None if design is None else design.get("value_range")
        if args.value_range is not None and declared is not None and tuple(args.value_range) != tuple(declared):
            refuse_unless_override(
                args, f"--value-range {args.value_range[0]:g}:{args.value_range[1]:g} is not the range --schedule "
                f"{args.schedule!r} was designed with ({declared[0]:g}:{declared[1]:g})", "omit --value-range")
        schedule = ScheduleSpec.from_design(read, value_range=args.value_range, origin=args.start)
    else:
        if any(v is None for v in direct):
            missing = [n for n, v in zip(("--A", "--S-bar", "--epsilon-c"), direct) if v is None]
            raise InvalidInputError(f"give --schedule FILE or all of --A, --S-bar, --epsilon-c (missing {', '.join(missing)})")
        if args.value_range is None:
            raise InvalidInputError("--value-range LO:HI is required with --A/--S-bar/--epsilon-c (the public range of one reading)")
        schedule = ScheduleSpec(args.A, args.S_bar, args.epsilon_c, args.value_range, args.start, source="options")
    designed = None if design is None else ModelSpec.from_schedule(sched_json, f"--schedule {args.schedule!r}")
    if designed is not None:
        model = designed
        reason = f"the design recorded in --schedule {os.path.abspath(args.schedule)}"
        if given:
            model = given_model(args, designed)
            if not same_model(model, designed):
                refuse_unless_override(
                    args, f"--model {model.describe()} is not the model --schedule {args.schedule!r} was designed with "
                    f"({designed.describe()}): the ledger would not account for the designed schedule",
                    "omit --model/--states/--smoothing")
                reason = f"--override: {args.override} (the design used {designed.describe()})"
            else:
                model = designed
        foreign = same_source(design.get("data"), args.data, "--data")
        if foreign is not None and args.override is not None:
            reason += f"; stream accepted by --override: {args.override}"
            foreign = None  # the design's verdict is carried to the stream on purpose (recorded)
        elif foreign is not None:  # a production stream: accepted, and no model-based number is a bound for it
            refuse_a_switched_stream(args, foreign)
            reason += ("; the stream is not the design's data (a production stream): the model is checked on the "
                       "stream's own readings as it grows, and accounted model-free first unless that check passes")
    elif args.schedule is not None:
        model, reason = given_model(args), "--model given (the schedule records no deployment)"
    elif given:
        model, reason = given_model(args), "--model given"
    elif args.data is not None and wants_empirical(args):
        model, reason = ModelSpec(f"data:{args.data}"), ("--max-tv: Δ(t) estimated from --data's readings on its "
                                                          "quantile states (the chains' default fit)")
    else:
        if args.data is not None:
            refuse_unless_override(
                args, f"--data {args.data!r} with --A/--S-bar/--epsilon-c and no --model would be accounted with the bundled "
                "pilot's chains, not its users'", "give --model (e.g. data:CSV) or a --schedule designed on it")
            reason = f"--override: {args.override} (the bundled pilot's chains for --data)"
        else:
            reason = "default: the bundled pilot as `policyopt schedule` designs it"
        model = ModelSpec()
    model = model.pinned("--model")
    model, table_from = empirical_model(args, schedule, model)
    model = markov_accounting(args, model, publish_slot_seconds(args, design))
    checks = None
    if foreign is not None:
        check = {"model": model_name(model), "verdict": "unchecked",
                 "why": f"{foreign}: the design checked the model on its own data, not on the stream's readings, and no "
                        "check on the stream has run", "source": "publish: the stream's identity"}
    elif args.schedule is not None and (designed is None or model.same_chains(designed)):
        from policyopt.studies.backtest import design_verdict

        # the design's verdict on every model it checked (for `ledger --markov-model`), the accounting model's among them
        at = f"--schedule {os.path.abspath(args.schedule)}, at design time"
        mc = sched_json.get("model_check") if isinstance(sched_json.get("model_check"), dict) else {}
        names = {"chain", model.markov_model} | {str(m["model"]) for m in mc.get("models") or []
                                                 if isinstance(m, dict) and m.get("model")}
        checks = {n: design_verdict(sched_json, accounting=n, source=at) for n in sorted(names) if n != "auto"}
        check = checks[model.markov_model]
    else:
        check = options_verdict(model, "--override: the accounting model is not the design's" if designed is not None
                                else None)
    settings = (sched_json.get("guarantee_settings") if args.schedule is not None else None) or {}
    provenance = {
        "model_reason": reason,
        "override": args.override,
        "schedule_file": None if args.schedule is None else os.path.abspath(args.schedule),
        "design_data": None if design is None else design.get("data"),
        "max_tv_table_from": table_from if table_from is not None else (
            f"empirical_max_tv.max_tv_used of --schedule {os.path.abspath(args.schedule)}"
            if model.max_tv_table is not None and args.schedule is not None else None),
        "slot_length": None if design is None else design.get("slot_length"),
        "stream": data_digest(args.data, "--data"),
        "stream_is_design_data": None if design is None else foreign is None,
        "design_check": check,
        "design_checks": checks,
        "design_users": (design or {}).get("users") if isinstance((design or {}).get("users"), int) else None,
        "design_delta": settings.get("delta") if isinstance(settings, dict) else None,
    }
    return schedule, model, provenance, designed is not None and model == designed


def model_name(model) -> str:
    """The accounting model of a ledger in the words of the guarantee: ``chain`` (fitted first-order chains), the
    first-order Markov premise of an empirical Δ̃(t) table, the richer Markov model (``order:2``, …) fitted to the
    data, or the given chain / matrix."""
    import os

    from policyopt.studies.backtest import EMPIRICAL_PREMISE

    if model.max_tv_table is not None:
        return EMPIRICAL_PREMISE
    if model.fitted:
        return model.markov_model
    kind = model.spec.partition(":")[0]
    return f"the given chain {model.spec}" if kind == "two-state" else f"the given matrix {os.path.basename(model.path)}"


def options_verdict(model, override: str | None = None) -> dict:
    """The verdict on an accounting model no schedule file's design check speaks for (``--A/--S-bar/--epsilon-c``, or
    another model by ``--override``): a chain or matrix given without data is ``assumed`` (the user's model, as
    ``schedule --chain``); chains fitted to readings are ``unchecked`` (no held-out check was made for them)."""
    src = override or "the schedule given by --A/--S-bar/--epsilon-c"
    if not model.fitted:
        return {"model": model_name(model), "verdict": "assumed",
                "why": "a model given without data: nobody checked it against readings", "source": src}
    return {"model": model_name(model), "verdict": "unchecked",
            "why": "no design checked it on held-out readings; design with `policyopt schedule --json` and publish "
                   "--schedule", "source": src}


def recorded_verdict(provenance: dict, model, markov_model: str | None = None, stream_checks=None) -> dict:
    """The design check a ledger recorded at its creation (``provenance.design_check``), or ``unchecked`` for a ledger
    created before policyopt recorded it.  With `stream_checks` (a production stream's checks on its own readings,
    oldest first, :func:`production_stream_check`), the latest of them instead.  With `markov_model` (an audit under
    another Markov model than the ledger's), the verdict the design's check gave that model
    (``provenance.design_checks``), ``unchecked`` when the design did not check it."""
    def valid(v) -> bool:
        """Whether `v` is a recorded verdict: a dict with a known ``verdict`` and string ``model``/``why``/``source``."""
        return (isinstance(v, dict) and v.get("verdict") in ("passed", "refuted", "assumed", "unchecked")
                and all(isinstance(v.get(k), str) for k in ("model", "why", "source")))

    prov = provenance if isinstance(provenance, dict) else {}
    if stream_checks and markov_model is None:
        from policyopt.studies.stream_check import stream_verdict

        return stream_verdict(stream_checks[-1])
    if markov_model is not None:
        checks = prov.get("design_checks")
        v = checks.get(markov_model) if isinstance(checks, dict) else None
        if valid(v):
            return {k: v[k] for k in ("model", "verdict", "why", "source")}
        return {"model": model_name(model), "verdict": "unchecked",
                "why": f"the ledger's design did not check {markov_model} on held-out readings; check it with "
                       f"`policyopt check-model --markov-model {markov_model}` on the design data",
                "source": "this audit's --markov-model"}
    v = prov.get("design_check")
    if valid(v):
        return {k: v[k] for k in ("model", "verdict", "why", "source")}
    return {"model": model_name(model), "verdict": "unchecked",
            "why": "the ledger was created before policyopt recorded its design's model check (no `design_check` in its "
                   "provenance); treated as unchecked", "source": "the ledger's record"}


def ledger_guarantee_settings(args, provenance: dict, rows, slot_seconds) -> dict:
    """δ and the w-event windows of the model-free guarantee of a ledger's releases.

    δ: ``--delta``, else the schedule's ``guarantee_settings.delta`` recorded at the ledger's creation, else
    :func:`policyopt.privacy.model_free.default_delta` of I — the schedule's deployment size, or the most users of
    any release made (1 before any).  Windows: a day and a week of slots (24 and 168 when the slot length is unknown).
    """
    from policyopt.deploy.model import is_number
    from policyopt.privacy.model_free import default_delta
    from policyopt.studies.guarantee import default_windows

    windows = list(default_windows(slot_seconds))
    if args.delta is not None:
        return {"delta": float(args.delta), "dp_delta_source": "given", "windows": windows}
    d = provenance.get("design_delta")
    if is_number(d) and 0.0 < d < 1.0:
        return {"delta": float(d), "dp_delta_source": "the schedule's guarantee_settings.delta", "windows": windows}
    users = provenance.get("design_users")
    if isinstance(users, int) and not isinstance(users, bool) and users >= 1:
        whose = "the schedule's deployment size"
    else:
        users, whose = max([r.users for r in rows if r.status == "released"] + [1]), "the most users of a release made"
    return {"delta": default_delta(int(users)), "dp_delta_source": f"default min(1e-6, 1/(10·I)) with I = {users} ({whose})",
            "windows": windows}


def releases_guarantee(rows, verdict: dict, settings: dict, *, at=None, model_epsilon=None, model_horizon=None,
                       epsilon_c=None) -> dict:
    """``model_free``, ``model_verdict``, ``guarantee`` and ``warnings`` of the releases a ledger records.

    The model-free guarantee is :func:`policyopt.deploy.ledger_risk.model_free_of_rows` (each release's
    ``epsilon_spent`` on its input slot); the model-based one the largest age-dependent risk of the releases made
    (Zhang et al. 2024, Theorem 3) over `model_horizon` slots; :func:`policyopt.studies.guarantee.choose_guarantee`
    decides which is stated first from `verdict`.  Before the first release the model-free object has ``releases`` 0
    and ε = 0.
    """
    from policyopt.deploy.ledger import model_free_of_rows
    from policyopt.privacy.model_free import accountant_name
    from policyopt.studies.guarantee import choose_guarantee

    delta, windows = settings["delta"], settings["windows"]
    made = model_free_of_rows(rows, delta=delta, windows=windows, at=at)
    if made is None:
        mf = {"horizon": 0, "releases": 0, "epsilon_c": epsilon_c, "epsilon_pure": 0.0, "delta": delta, "epsilon": 0.0,
              "accountant": accountant_name(delta),
              "w_event": [{"w": int(w), "releases": 0, "epsilon_pure": 0.0, "epsilon": 0.0} for w in windows]}
    else:
        mf = made.to_dict()
    g, _, warnings = choose_guarantee(model=verdict["model"], verdict=verdict["verdict"], why=verdict["why"],
                                      model_free=mf, model_epsilon=model_epsilon, model_horizon=model_horizon)
    g = g.to_dict()
    if made is None and g["kind"] == "model-free":
        _, sep, why = g["statement"].partition(" — ")
        g["statement"] = "nothing released yet: no user's reading has been used, so ε = 0 whatever the correlation" + sep + why
    return {"model_free": mf, "model_verdict": dict(verdict, bound=verdict["verdict"] in ("passed", "assumed")),
            "guarantee": g, "warnings": warnings}


def not_a_bound(mv: dict, brief: bool = False) -> str:
    """What follows a model-based number whose model the evidence does not support ('' when it is a bound)."""
    if mv["bound"]:
        return ""
    if brief:
        return f" (under the {mv['verdict'].upper()} model {mv['model']}: not a bound)"
    return f" — under the {mv['verdict'].upper()} model {mv['model']}: not a bound for these data"


def guarantee_lines(rep: dict) -> list:
    """:func:`policyopt.studies.guarantee.guarantee_lines` of a publish or ledger report: no ``model free`` line
    before the first release."""
    from policyopt.studies import guarantee

    mf = rep["model_free"]
    return guarantee.guarantee_lines({**rep, "model_free": mf if mf["releases"] else None})


def load_stream(args, provenance, client=None):
    """The stream (DataFrame or ParquetStream) in slots of the effective slot length, and that length (s or None).

    The slot length of the data is --slot-length, else read from date-time stamps, else the schedule's
    (the bundled data: 1 h); --resample bins it to a longer slot (each user's mean per bin).  A slot length
    other than the schedule's is refused, also with --override (A, S̄ and the chains' steps count the
    schedule's slots).  What was
    decided goes into `provenance` (``slot_length``, ``resample``, ``time_origin``).
    """
    from policyopt.data import BUNDLED_SLOT_LENGTH
    from policyopt.deploy.stream import ParquetStream, check_stream_order, read_stream_csv
    from policyopt.io import (format_duration, has_timestamps, is_parquet_source, parse_duration, read_timestamped_csv,
                              resample_readings)

    given = None if args.slot_length is None else parse_duration(args.slot_length, "--slot-length")
    design = provenance.pop("slot_length", None)
    design_s = None if design is None else parse_duration(design, "--schedule slot_length")
    origin = None
    if args.data is None:
        from policyopt.data import load_citylearn

        readings, data_s = load_citylearn(), parse_duration(BUNDLED_SLOT_LENGTH)
        if given is not None and given != data_s:
            raise InvalidInputError(f"--slot-length {args.slot_length} is not the bundled data's slot ({BUNDLED_SLOT_LENGTH})")
    elif is_parquet_source(args.data):
        readings, data_s = ParquetStream(args.data, "--data", client), given  # read slot by slot, never whole
    elif has_timestamps(args.data, "--data"):
        readings, data_s, origin = read_timestamped_csv(args.data, "--data", given)
        check_stream_order(readings, f"--data {args.data!r}")
    else:
        readings, data_s = read_stream_csv(args.data, "--data"), given
    if data_s is None:
        data_s = design_s  # integer slots of the data the schedule was designed on
    slot_s = data_s
    if args.resample is not None:
        target = parse_duration(args.resample, "--resample")
        if data_s is None:
            raise InvalidInputError(f"--resample {args.resample} needs the data's slot length: give --slot-length")
        if target % data_s:
            raise InvalidInputError(f"--resample {args.resample} is not a whole number of the data's "
                                    f"{format_duration(data_s)} slots")
        if isinstance(readings, ParquetStream):
            raise InvalidInputError("--resample is not available with a Parquet --data (read slot by slot); resample the "
                                    "data set, or publish a CSV")
        readings, slot_s = resample_readings(readings, target // data_s), target
    if design_s is not None and slot_s is not None and slot_s != design_s:  # not overridable: the chains step per slot
        raise InvalidInputError(
            f"the stream's slots are {format_duration(slot_s)} but the schedule's A, S̄ and chains count slots of "
            f"{format_duration(design_s)}: give --resample {format_duration(design_s)} (or the right --slot-length), "
            "or design on slots of this length")
    provenance.update(slot_length=None if slot_s is None else format_duration(slot_s),
                      resample=args.resample, time_origin=origin)
    return readings, slot_s


def row_dicts(rows, intervals: dict | None, level: float | None = None) -> list:
    """The JSON rows of ledger rows: their fields and their error bars (:mod:`policyopt.deploy.error_bars`)."""
    from policyopt.deploy.error_bars import release_intervals

    keys = ("n", "slot", "input_time", "status", "users", "clipped", "epsilon_c", "epsilon_spent", "sensitivity",
            "noise_scale", "value", "prior_risk", "risk_at_release", "reason")
    return [dict({k: getattr(r, k) for k in keys}, **ci) for r, ci in zip(rows, release_intervals(rows, intervals, level))]


def designed_sensitivity(path):
    """``model.sensitivity`` of a schedule JSON (the Δf its penalty assumed), or ``None``."""
    if path is None:
        return None
    try:
        value = json.loads(open(path, encoding="utf-8").read()).get("model", {}).get("sensitivity")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def span_text(slots, slot_seconds) -> str:
    """`slots` as a duration for people (`` (2.5 h)``, `` (8.3 days)``), or '' when the slot length is unknown."""
    if slot_seconds is None or slots is None:
        return ""
    hours = slots * slot_seconds / 3600
    return f" ({hours:.4g} h)" if abs(hours) < 48 else f" ({hours / 24:.4g} days)"


def publish_model_check(model, schedule) -> tuple[dict | None, str | None]:
    """(``model_check``, note) of a publish run: the accounting model's chains against the readings they were fitted on.

    As ``schedule`` does (:func:`policyopt.studies.check_model.quick_check`, lags 1..A + S̄, with the lags the
    schedule's risk uses, :func:`policyopt.studies.markov_check.design_lags`).  ``(None, None)`` for a matrix or two-state
    model (nothing was fitted to readings); ``(None, why)`` for a Parquet model (not read whole in this process).
    """
    from policyopt.app.inputs import DEFAULT_SEED
    from policyopt.studies.markov_check import design_lags
    from policyopt.io import is_parquet_source
    from policyopt.studies.check_model import quick_check

    if not model.fitted:
        return None, None
    if model.markov_model != "chain":
        return None, (f"not run here: the releases are accounted under {model.markov_model}, whose held-out checks are "
                      "the design check")
    if model.path is not None and is_parquet_source(model.path):
        return None, ("not run: the model's data are a Parquet data set, which publish does not read whole; run "
                      "`check-model --data` on it before trusting the chains' ε")
    fitted, readings = model.fit("--model")
    check = quick_check(fitted, readings, schedule.A, schedule.S_bar + 1, seed=DEFAULT_SEED)
    check.update(design_lags(check, schedule.A, schedule.S_bar))
    return check, None


def production_stream_check(args, model, rep, readings, slot_seconds, client=None) -> dict | None:
    """The check of the ledger's model on a production stream's own readings (``publish``), re-run as it grows.

    Only for a ledger whose stream is not the design's data (``provenance.stream_is_design_data`` false) and a model
    fitted to readings.  The latest check recorded in the ledger (:meth:`policyopt.deploy.Ledger.stream_checks`) is
    reused while the stream has not grown past its slot; otherwise
    :func:`policyopt.studies.stream_check.stream_model_check` runs on the readings through ``rep.through`` (a Parquet
    stream is read whole for it; not with ``--workers``/``--scheduler``) and its record is appended to the ledger.

    Returns
    -------
    dict or None
        ``record`` (the check used), ``reused`` (bool), ``runs`` (checks recorded), ``recorded`` (bool: the record
        is in the ledger); ``None`` when no stream check applies.
    """
    from policyopt.app.inputs import DEFAULT_SEED
    from policyopt.deploy import Ledger
    from policyopt.deploy.stream import ParquetStream
    from policyopt.studies.stream_check import not_run_record, stream_model_check

    if rep.provenance.get("stream_is_design_data") is not False or not model.fitted:
        return None
    with Ledger(args.ledger) as led:
        checks = led.stream_checks()
    if checks and checks[-1]["through"] >= rep.through:
        return {"record": checks[-1], "reused": True, "runs": len(checks), "recorded": True}
    name, s = model_name(model), rep.schedule
    if client is not None:
        record = not_run_record(name, model.markov_model, rep.through,
                                "not run with --workers/--scheduler (the stream is not read whole here); run publish "
                                "once without them to check the stream")
        return {"record": record, "reused": False, "runs": len(checks), "recorded": False}
    if isinstance(readings, ParquetStream):
        from policyopt.io import read_readings_parquet

        readings = read_readings_parquet(args.data, "--data")
    fitted = model.fit("--model")[0]
    record = stream_model_check(readings, fitted.quantizer, model=name, spec=model.markov_model,
                                first_order_table=model.max_tv_table is not None,
                                pilot_chains=[c.P for c in fitted.population.chains], A=s.A,
                                S_bar=s.S_bar, through=rep.through, value_range=s.value_range,
                                slot_seconds=slot_seconds, seed=DEFAULT_SEED, smoothing=float(model.smoothing))
    with Ledger(args.ledger, writer=True) as led:
        led.record_stream_check(record)
        checks = led.stream_checks()
    return {"record": checks[-1], "reused": False, "runs": len(checks), "recorded": True}
