"""``policyopt backtest`` below the command line: the readings and the schedule file read and checked, the replay
run (:func:`backtest_from_options`).

It takes `args`, the parsed ``backtest`` options (``schedule``, ``data``, ``train_fraction``, ``users``,
``value_range``, ``phase_period``, ...); errors name the command-line options.
"""

from __future__ import annotations

import json

from policyopt.app.inputs import (
    BUNDLED_PHASE_PERIOD,
    BUNDLED_STATES,
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    default_phase_period,
    penalty_bound,
)
from policyopt.errors import InvalidInputError

__all__ = ["backtest_from_options", "check_slot_length"]


def check_slot_length(schedule, slot_seconds: int | None, data: str) -> None:
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


def backtest_from_options(args) -> dict:
    """``policyopt backtest`` below the command line: read the readings (the bundled year or ``--data``) and the
    ``--schedule`` file, check them, replay the schedule (or one designed on the training part) with
    :func:`policyopt.studies.backtest.backtest`, and draw ``--plot``; the report's dict (with its ``series``).

    Raises
    ------
    InvalidInputError
        A missing or unreadable schedule file, options that apply to a design made here given with a schedule,
        ``--horizon`` without ``--max-tv empirical``, readings whose slot length is not the schedule's, and the
        errors of :func:`~policyopt.studies.backtest.backtest`.
    """
    from policyopt.studies.backtest import backtest, plot_backtest
    from policyopt.studies.empirical_design import parse_max_tv_source

    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
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
    check_slot_length(schedule, slot_seconds, "the bundled data" if bundled else f"--data {args.data!r}")
    out = backtest(df, schedule, train_fraction=args.train_fraction, users=users, value_range=value_range,
                   phase_period=phase, max_penalty=penalty_bound(args),
                   states=BUNDLED_STATES if args.states is None else args.states, A_max=args.max_age,
                   S_max=args.max_interval, level=args.level, seed=args.seed, unit=unit, max_tv=max_tv,
                   horizon=args.horizon, delta=args.delta, slot_seconds=slot_seconds, ci_level=args.ci_level)
    if args.plot is not None:
        plot_backtest(out, args.plot, phase_period=phase)
        out["plot"] = str(args.plot)
    return out
