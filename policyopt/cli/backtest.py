"""``policyopt backtest``: replay a schedule on held-out readings; the realised MSE against f̄."""

from __future__ import annotations

import json

from policyopt.app.inputs import (
    BUNDLED_PHASE_PERIOD,
    BUNDLED_STATES,
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_INTERVAL,
    DEFAULT_PENALTY_LEVEL,
    MAX_AGE_LIMIT,
    MAX_COUNT,
    default_phase_period,
    penalty_bound,
)
from policyopt.cli.options import (
    add_bound_options,
    add_guarantee_options,
    add_max_tv_options,
    int_at_least,
    probability,
    value_range_arg,
)
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run_backtest"]

DEFAULT_TRAIN_FRACTION = 0.5


def _fraction(text):
    """argparse type of --train-fraction: a number strictly between 0 and 1."""
    return probability("--train-fraction")(text)


def add_command(sub) -> None:
    """Register the ``backtest`` sub-command on the sub-parsers `sub`."""
    cmd = sub.add_parser(
        "backtest",
        help="replay a schedule on held-out readings: the realised MSE of the released value for I users, with its "
        "block-bootstrap interval, against the bound f̄",
        description=(
            "Split the readings' time range at --train-fraction; replay the schedule (--schedule, a `policyopt schedule "
            "--json` file, else one designed on the first part with the readings penalty) on the rest: releases every "
            "S_bar slots of the readings A slots old, and report the realised MSE against the current mean of a "
            "deployment of I users drawn like the readings' users (cross(a) + (self(a) - cross(a))/I at each slot's "
            "AoI, plus the Laplace noise 2(Δf/ε_C)^2, Δf = (HI-LO)/I), in the readings' unit squared, with a circular "
            "block-bootstrap interval, against f̄.  Without --data: the bundled CityLearn 2022 year (17 homes, hourly "
            f"kWh), I = {BUNDLED_USERS}, range {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh.  The report "
            "states first the guarantee the evidence supports: the design's ε* only when its Markov model passed its "
            "checks on held-out readings (or was given without data), else the model-free (ε, δ) of the replay's "
            "releases over the held-out span (PLD accountant of dp_accounting)."
        ),
    )
    cmd.add_argument("--schedule", metavar="FILE", help="JSON printed by `policyopt schedule --json` (default: design one "
                     "on the training part)")
    cmd.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV user,time,value (or Parquet); default the bundled year")
    cmd.add_argument("--train-fraction", type=_fraction, default=DEFAULT_TRAIN_FRACTION, metavar="F",
                     help=f"first fraction of the time range held for training; the rest is replayed (default "
                     f"{DEFAULT_TRAIN_FRACTION})")
    cmd.add_argument("--users", type=int_at_least("--users", 1, MAX_COUNT), metavar="I",
                     help="deployment size (default: the schedule's; for a design here the bundled pilot's "
                     f"{BUNDLED_USERS} or the readings' users)")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (default: the schedule's declared range; the bundled pilot's "
                     f"{BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh; else the readings' own, not private)")
    cmd.add_argument("--phase-period", type=int_at_least("--phase-period", 1, MAX_AGE_LIMIT), default=None, metavar="P",
                     help=f"slots per cycle for the worst-phase numbers and a design here (default {BUNDLED_PHASE_PERIOD} "
                     "for the bundled year; for --data a day of slots when its time stamps give the slot length, else 1)")
    add_bound_options(cmd)
    add_max_tv_options(cmd)
    add_guarantee_options(cmd, design=False, markov=False)
    cmd.add_argument("--states", type=int_at_least("--states", 2, 200), default=None, metavar="K",
                     help=f"quantile states of the chains (Δ(t)) of a design here (default {BUNDLED_STATES})")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0, MAX_AGE_LIMIT), default=DEFAULT_MAX_AGE, metavar="A_MAX",
                     help=f"search box of a design here (default {DEFAULT_MAX_AGE})")
    cmd.add_argument("--max-interval", type=int_at_least("--max-interval", 1, MAX_AGE_LIMIT), default=DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"search box of a design here (default {DEFAULT_MAX_INTERVAL})")
    cmd.add_argument("--level", type=probability("--level"), default=DEFAULT_PENALTY_LEVEL, metavar="LEVEL",
                     help=f"two-sided level of the interval (default {DEFAULT_PENALTY_LEVEL})")
    cmd.add_argument("--ci-level", type=probability("--ci-level"), metavar="LEVEL",
                     help="level of the releases' error bars whose coverage is measured on the held-out time (default 0.95; "
                     "as `publish --ci-level`)")
    cmd.add_argument("--seed", type=int_at_least("--seed", 0), default=0, metavar="N",
                     help="seed of the bootstrap resampling (default 0; simulation only)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cmd.add_argument("--plot", metavar="FILE", help="draw the realised error over the held-out time into FILE "
                     "(.png, .pdf or .svg; needs matplotlib)")
    cmd.set_defaults(handler=run_backtest)


def _check_slot_length(schedule, slot_seconds: int | None, data: str) -> None:
    """Refuse readings whose slot length (known from time stamps, or the bundled data's hour) is not the one the
    schedule file was designed for (``deployment.slot_length``): its A, S̄ and ε_C would mean other spans of time."""
    from policyopt.io import format_duration, parse_duration

    designed = ((schedule.get("deployment") or {}).get("slot_length") if isinstance(schedule, dict) else None)
    if slot_seconds is None or not isinstance(designed, str):
        return
    try:
        want = parse_duration(designed, "the schedule's deployment.slot_length")
    except InvalidInputError:
        return  # an unreadable record is the schedule check's to report, not a slot-length mismatch
    if want != slot_seconds:
        raise InvalidInputError(
            f"{data} has slots of {format_duration(slot_seconds)}, the --schedule was designed for slots of {designed}: "
            "its A, S̄ and releases would fall at other times; replay it on readings of its slot length")


def run_backtest(args) -> int:
    """Handler of ``policyopt backtest``: read, replay, print text or JSON; exit code."""
    from policyopt.formatting import json_clean
    from policyopt.studies.backtest import backtest, format_backtest, plot_backtest
    from policyopt.studies.empirical_design import parse_max_tv_source

    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    schedule = None
    if args.schedule is not None:
        given = [o for o, v in (("--max-penalty", args.max_penalty), ("--max-rmse", args.max_rmse), ("--states", args.states),
                                ("--max-tv", args.max_tv), ("--horizon", args.horizon)) if v is not None]
        if given:
            raise InvalidInputError(f"{', '.join(given)} applies to a design made here; the --schedule file carries its own")
        try:
            with open(args.schedule, encoding="utf-8") as fh:
                schedule = json.load(fh)
        except FileNotFoundError:
            raise InvalidInputError(f"--schedule file not found: {args.schedule!r}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"--schedule {args.schedule!r} is not a JSON file of `policyopt schedule --json`: "
                                    f"{' '.join(str(exc).split())}") from None
        except RecursionError:
            raise InvalidInputError(f"--schedule {args.schedule!r} is JSON nested too deeply; expected the output of "
                                    "`policyopt schedule --json`") from None
    max_tv = "model" if args.max_tv is None else args.max_tv
    if parse_max_tv_source(max_tv)[0] == "model" and args.horizon is not None:
        raise InvalidInputError(f"--horizon {args.horizon} applies to --max-tv empirical only; add it or omit --horizon")
    bundled = args.data is None
    slot_seconds = None
    if bundled:
        from policyopt.data import BUNDLED_SLOT_LENGTH, load_citylearn
        from policyopt.io import parse_duration

        df, unit = load_citylearn(), "kWh^2"
        slot_seconds = parse_duration(BUNDLED_SLOT_LENGTH)
        value_range = BUNDLED_VALUE_RANGE if args.value_range is None else args.value_range
        users = (BUNDLED_USERS if schedule is None else None) if args.users is None else args.users
        phase = BUNDLED_PHASE_PERIOD if args.phase_period is None else args.phase_period
    else:
        from policyopt.io import read_readings_timed

        df, slot_seconds, _ = read_readings_timed(args.data, "--data")  # ISO 8601 time stamps give the slot length
        unit = ""
        value_range, users = args.value_range, args.users
        phase = default_phase_period(False, slot_seconds) if args.phase_period is None else args.phase_period
    if schedule is not None and args.value_range is None:
        value_range = None  # the schedule's declared range (else the readings' own)
    _check_slot_length(schedule, slot_seconds, "the bundled data" if bundled else f"--data {args.data!r}")
    out = backtest(df, schedule, train_fraction=args.train_fraction, users=users, value_range=value_range,
                   phase_period=phase, max_penalty=penalty_bound(args),
                   states=BUNDLED_STATES if args.states is None else args.states, A_max=args.max_age,
                   S_max=args.max_interval, level=args.level, seed=args.seed, unit=unit, max_tv=max_tv,
                   horizon=args.horizon, delta=args.delta, slot_seconds=slot_seconds, ci_level=args.ci_level)
    if args.plot is not None:
        plot_backtest(out, args.plot, phase_period=phase)
        out["plot"] = str(args.plot)
    if args.json:
        out.pop("series")
        print(json.dumps(json_clean(out), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(format_backtest(out))
    return 0
