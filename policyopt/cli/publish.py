"""``policyopt publish``: run a designed schedule into a privacy ledger; and the helpers ``ledger`` shares with it.

Registered in :func:`policyopt.cli.build_parser` through :func:`add_command`; ``policyopt ledger`` is
:mod:`policyopt.cli.ledger`.  The work is done by :mod:`policyopt.deploy` (:class:`~policyopt.deploy.Publisher`,
:class:`~policyopt.deploy.Ledger`); this module parses options and prints.

Which guarantee a report states first (issue 32): the age-dependent risk of the releases made
(Zhang et al. 2024, Theorem 3) under the ledger's model only when that model passed the design's
check on held-out readings (:func:`policyopt.studies.backtest.design_verdict` of the schedule file,
recorded in the ledger's provenance as ``design_check`` when the ledger is created) or was given
without data; otherwise the model-free guarantee of the releases made
(:func:`policyopt.deploy.ledger_risk.model_free_of_rows`), as
:func:`policyopt.studies.guarantee.choose_guarantee` decides.  The model-based numbers stay in the
report (the ledger records them per release, ``--max-risk`` acts on them) but are marked as no bound.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

from policyopt.cli.options import (
    probability,
    add_distributed_options,
    add_guarantee_options,
    int_at_least,
    non_negative_float,
    positive_float,
    value_range_arg,
)
from policyopt.errors import InvalidInputError
from policyopt.formatting import check_text, fmt_count, fmt_exact, fmt_upper, fmt_value

__all__ = ["add_command", "run_publish"]



def add_model_options(cmd, default_help: str, override_help: str) -> None:
    """Add ``--model``, ``--states``, ``--smoothing`` and ``--override`` to the sub-parser `cmd` (publish, ledger).

    Parameters
    ----------
    cmd : argparse.ArgumentParser
    default_help : str
        What ``--model`` defaults to, for its help.
    override_help : str
        What ``--override`` allows, for its help.
    """
    cmd.add_argument("--model", metavar="SPEC", default=None,
                     help="model of Δ(t) for the accounting: bundled (CityLearn 2022, as `policyopt schedule`), "
                     f"data:CSV, matrix:FILE or two-state:p=P,q=Q ({default_help})")
    cmd.add_argument("--states", type=int_at_least("--states", 2), default=None, metavar="K",
                     help="quantile states of a fitted model (default: the design's; 3 for the bundled pilot, 12 for data)")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help="additive smoothing of a fitted model (default: the design's; 0.01)")
    cmd.add_argument("--override", metavar="REASON", default=None,
                     help=f"{override_help} on purpose; REASON (one line) says why"
                     + (" and is recorded in the ledger" if "publish" in override_help else ""))


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
    add_model_options(pub, "default: the model recorded in --schedule's deployment, else the bundled pilot as `policyopt schedule` "
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


def add_markov_model_option(cmd, default: str) -> None:
    """``--markov-model`` of ``publish`` and ``ledger``: the Markov model the accounting's Δ(t) is of."""
    cmd.add_argument("--markov-model", metavar="MODEL", default=None,
                     help="the Markov model of the readings the age-dependent risk ε(t) is accounted under (Theorem 3 "
                     "with Δ(t) of its augmented chain Z, fitted on the model's data with the chains' quantile states): "
                     "chain, order:K, phase[:P] or hmm:R (not auto: the design chose); apart from --model, which names "
                     f"the data the model is fitted on; {default}.  ε(t) is stated as a bound only when the design's "
                     "check passed this model")


def markov_accounting(args, model, slot_seconds):
    """`model` with ``--markov-model`` (canonical; ``phase`` gets a day of slots) when given, else `model`.

    Raises
    ------
    InvalidInputError
        ``auto``, an unknown model, ``phase`` without P when the slot length is unknown; a model other than ``chain``
        with a model not fitted to data (``two-state``, ``matrix``) or with an empirical Δ̃(t) table.
    """
    from dataclasses import replace

    from policyopt.cli.check_model import markov_spec_option

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


def _wants_empirical(args) -> bool:
    """Whether ``--max-tv`` asks for the empirical Δ(t) (checked by :func:`_empirical_model`)."""
    return getattr(args, "max_tv", None) is not None and str(args.max_tv).partition(":")[0] == "empirical"


def _empirical_model(args, schedule, model):
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

    from policyopt.studies.empirical_design import (box_last_age, empirical_max_tv_table, estimate_up_to,
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
    recorded = _recorded_model(args.ledger)
    if (recorded is not None and recorded.max_tv_source == source and recorded.max_tv_table is not None
            and replace(recorded, sha256=None, nbytes=None, max_tv_table=None)
            == replace(model, sha256=None, nbytes=None, max_tv_source=source)):
        return recorded, "the ledger's record (estimated when it was created)"
    last = box_last_age(schedule.A, schedule.S_bar)
    fitted, readings = model.fit("--model")
    est, _ = estimate_up_to(fitted, readings, last, level, what=f"--A {schedule.A} with --S-bar {schedule.S_bar}")
    table = empirical_max_tv_table(est, last)
    where = (f"--max-tv {args.max_tv}: upper edge of the {level:g} block-bootstrap band of Δ(t) estimated from "
             f"{model.spec} ({est.method}, L = {est.max_lag} slots), non-increasing, t ≤ {last}; 1 beyond")
    return replace(model, max_tv_source=source, max_tv_table=tuple(float(v) for v in table)), where


def _recorded_model(path):
    """The model recorded in an existing ledger, or ``None`` (no file, or not a readable ledger: publish says why)."""
    import os

    from policyopt.deploy import Ledger

    if not os.path.isfile(path):
        return None
    try:
        with Ledger(path) as led:
            return None if led.is_new else led.model
    except Exception:  # noqa: BLE001 - the publisher opens it again and reports what is wrong in one line
        return None


def _refuse_a_switched_stream(args, foreign: str) -> None:
    """Refuse another stream than the design's data into a ledger created on the design's data (its recorded verdict
    speaks for that data): a production stream starts its own ledger, or ``--override`` says why."""
    import os

    from policyopt.deploy import Ledger

    if not os.path.isfile(args.ledger):
        return
    try:
        with Ledger(args.ledger) as led:
            prov = None if led.is_new else json.loads(led.meta().get("provenance", "{}"))
    except Exception:  # noqa: BLE001 - the publisher opens it again and reports what is wrong in one line
        return
    if isinstance(prov, dict) and prov.get("stream_is_design_data") is not False:
        raise InvalidInputError(
            f"{foreign}, but --ledger {str(args.ledger)!r} was created on the design's data, whose model check it "
            "records: publish another stream into a new ledger, or give --override REASON to do so on purpose")


def refuse_unless_override(args, why: str, advice: str) -> None:
    """Refuse (one line, exit 2) unless ``--override REASON`` was given: `why`, then `advice`."""
    if args.override is None:
        raise InvalidInputError(f"{why}; {advice}, or give --override REASON to do so on purpose")


def _slot_seconds_of(args, design) -> int | None:
    """The slot length (s) of a publish run for ``phase`` without P: ``--slot-length``, else the schedule's, else the
    bundled data's when no --data is given; ``None`` when unknown."""
    from policyopt.data import BUNDLED_SLOT_LENGTH
    from policyopt.io import parse_duration

    text = getattr(args, "slot_length", None) or (design or {}).get("slot_length")
    if isinstance(text, str):
        return parse_duration(text, "--slot-length" if getattr(args, "slot_length", None) else "the schedule's slot_length")
    return parse_duration(BUNDLED_SLOT_LENGTH, "the bundled slot") if args.data is None else None


def _publish_plan(args):
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
    from policyopt.deploy.ledger import read_schedule_json
    from policyopt.deploy.model import same_source
    from policyopt.io import data_digest

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
        sched_json = read_schedule_json(args.schedule)
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
        schedule = ScheduleSpec.from_json_file(args.schedule, value_range=args.value_range, origin=args.start)
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
            _refuse_a_switched_stream(args, foreign)
            reason += "; the stream is not the design's data (a production stream): accounted model-free first"
    elif args.schedule is not None:
        model, reason = given_model(args), "--model given (the schedule records no deployment)"
    elif given:
        model, reason = given_model(args), "--model given"
    elif args.data is not None and _wants_empirical(args):
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
    model, table_from = _empirical_model(args, schedule, model)
    model = markov_accounting(args, model, _slot_seconds_of(args, design))
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


def recorded_verdict(provenance: dict, model, markov_model: str | None = None) -> dict:
    """The design check a ledger recorded at its creation (``provenance.design_check``), or ``unchecked`` for a ledger
    created before policyopt recorded it.  With `markov_model` (an audit under another Markov model than the
    ledger's), the verdict the design's check gave that model (``provenance.design_checks``), ``unchecked`` when the
    design did not check it."""
    def valid(v) -> bool:
        """Whether `v` is a recorded verdict: a dict with a known ``verdict`` and string ``model``/``why``/``source``."""
        return (isinstance(v, dict) and v.get("verdict") in ("passed", "refuted", "assumed", "unchecked")
                and all(isinstance(v.get(k), str) for k in ("model", "why", "source")))

    prov = provenance if isinstance(provenance, dict) else {}
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


def guarantee_settings(args, provenance: dict, rows, slot_seconds) -> dict:
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
        return {"delta": float(args.delta), "delta_source": "given", "windows": windows}
    d = provenance.get("design_delta")
    if is_number(d) and 0.0 < d < 1.0:
        return {"delta": float(d), "delta_source": "the schedule's guarantee_settings.delta", "windows": windows}
    users = provenance.get("design_users")
    if isinstance(users, int) and not isinstance(users, bool) and users >= 1:
        whose = "the schedule's deployment size"
    else:
        users, whose = max([r.users for r in rows if r.status == "released"] + [1]), "the most users of a release made"
    return {"delta": default_delta(int(users)), "delta_source": f"default min(1e-6, 1/(10·I)) with I = {users} ({whose})",
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


def _load_stream(args, provenance, client=None):
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


def _designed_sensitivity(path):
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


def interrupted(what: str) -> int:
    """Print ``policyopt: interrupted; WHAT`` on stderr and return 130 (Ctrl-C inside a publish or ledger run)."""
    print(f"policyopt: interrupted; {what}", file=sys.stderr)
    return 130


def check_plot(args) -> None:
    """``--plot FILE``: a writable image name and matplotlib, checked before any work."""
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")


def run_publish(args) -> int:
    """Handler of ``policyopt publish``; prints text or JSON and returns the exit code.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    start = time.perf_counter()
    check_plot(args)
    schedule, model, provenance, as_designed = _publish_plan(args)
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

    readings, slot_seconds = _load_stream(args, provenance, client)
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
    check, check_note = _publish_model_check(model, rep.schedule)
    designed_sens = _designed_sensitivity(args.schedule)
    used_sens = max((r.sensitivity for r in released), default=None)
    settings = guarantee_settings(args, rep.provenance, rep.rows, slot_seconds)
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


def _publish_model_check(model, schedule) -> tuple[dict | None, str | None]:
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

