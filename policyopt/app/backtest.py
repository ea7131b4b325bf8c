"""``policyopt backtest`` below the command line: the readings and the schedule file read and checked, the replay
run (:func:`backtest_from_options`).

It takes `args`, the parsed ``backtest`` options (``schedule``, ``data``, ``train_fraction``, ``users``,
``value_range``, ``phase_period``, ...); errors name the command-line options.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from policyopt.app import inputs
from policyopt.app.inputs import (
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_INTERVAL,
    DEFAULT_PENALTY_LEVEL,
    MAX_AGE_LIMIT,
    MAX_COUNT,
    MAX_HORIZON,
    default_phase_period,
    penalty_bound,
)
from policyopt.app.option_fields import CommandOptions
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError

__all__ = ["BacktestOptions", "backtest_deployment", "backtest_from_options", "backtest_report", "check_slot_length"]

#: ``--train-fraction`` default: the first half of the time range trains, the second is replayed.
DEFAULT_TRAIN_FRACTION = 0.5


@dataclass(frozen=True)
class BacktestOptions(CommandOptions):
    """The options of ``policyopt backtest`` (:func:`backtest_deployment`): each attribute the option of the same
    name (``train_fraction`` is ``--train-fraction``) with its default; ``None`` is the command's default.

    Attributes
    ----------
    schedule : str or os.PathLike, optional
        A ``policyopt schedule --json`` file to replay; without one a schedule is designed on the training part.
    data : str or os.PathLike, optional
        Long CSV or Parquet readings (default: the bundled CityLearn pilot).
    train_fraction : float
        First fraction of the time range held for training, in (0, 1) (default 0.5).
    users : int, optional
        Deployment size I, 1 to 10⁹ (default: the schedule's; for a design here the bundled pilot's or the readings').
    value_range : (float, float), optional
        Public range (LO, HI) of one reading.
    phase_period : int, optional
        Slots per cycle of the worst-phase numbers and of a design here, 1 to 10⁵.
    max_penalty, max_rmse : float, optional
        The bound f̄ of a design here (> 0, ≤ 1e300), or its root R (f̄ = R², in [1e-150, 1e150]); not both.
    max_tv : str, optional
        ``model`` (default) or ``empirical[:LEVEL]`` (a design here against the data's Δ(t) band).
    horizon : int, optional
        Slots of the model-free guarantee, 1 to 10⁷ (with ``max_tv`` empirical).
    delta : float, optional
        δ of the model-free (ε, δ) guarantee, in (0, 1).
    states : int, optional
        Quantile states of a design here, 2 to 200.
    max_age, max_interval : int
        Search box of a design here, slots (defaults 168).
    level : float
        Two-sided level of the MSE interval, in (0, 1) (default 0.95).
    ci_level : float, optional
        Level of the releases' error bars whose coverage is measured, in (0, 1) (default 0.95).
    seed : int
        Seed of the bootstrap resampling, ≥ 0 (default 0; simulation only).
    plot : str or os.PathLike, optional
        Draw the realised error over the held-out time into this .png, .pdf or .svg file.

    Raises
    ------
    InvalidInputError
        A value of the wrong type or out of its range, naming the keyword and showing the value.
    """

    COMMAND = "backtest"
    VALUED = ("train_fraction", "max_age", "max_interval", "level", "seed")
    RULES = {
        "schedule": ("text",), "data": ("text",), "train_fraction": ("level",), "users": ("int", 1, MAX_COUNT),
        "value_range": ("range",), "phase_period": ("int", 1, MAX_AGE_LIMIT),
        "max_penalty": ("float", 0.0, 1e300, True), "max_rmse": ("float", 1e-150, 1e150, False),
        "max_tv": ("text",), "horizon": ("int", 1, MAX_HORIZON), "delta": ("level",), "states": ("int", 2, 200),
        "max_age": ("int", 0, MAX_AGE_LIMIT), "max_interval": ("int", 1, MAX_AGE_LIMIT), "level": ("level",),
        "ci_level": ("level",), "seed": ("int", 0, None), "plot": ("text",),
    }

    schedule: str | os.PathLike | None = None
    data: str | os.PathLike | None = None
    train_fraction: float = DEFAULT_TRAIN_FRACTION
    users: int | None = None
    value_range: tuple | None = None
    phase_period: int | None = None
    max_penalty: float | None = None
    max_rmse: float | None = None
    max_tv: str | None = None
    horizon: int | None = None
    delta: float | None = None
    states: int | None = None
    max_age: int = DEFAULT_MAX_AGE
    max_interval: int = DEFAULT_MAX_INTERVAL
    level: float = DEFAULT_PENALTY_LEVEL
    ci_level: float | None = None
    seed: int = 0
    plot: str | os.PathLike | None = None

    def __post_init__(self):
        if self.max_penalty is not None and self.max_rmse is not None:
            raise InvalidInputError("give `max_penalty` or `max_rmse`, not both")
        super().__post_init__()


def backtest_report(args) -> CommandReport:
    """``policyopt backtest`` of parsed options (`args`: :class:`BacktestOptions` or the command line's namespace):
    the report the command prints (:func:`backtest_from_options`); the held-out ``series`` is in ``extras``."""
    from policyopt.formatting import json_clean
    from policyopt.studies.backtest import format_backtest

    from policyopt.studies.data_check import with_data_check

    out = backtest_from_options(args)
    series = out.pop("series")
    return CommandReport("backtest", json_clean(out), with_data_check(format_backtest(out), out),
                         extras={"series": series})


def backtest_deployment(**options) -> CommandReport:
    """Replay a schedule on held-out readings as ``policyopt backtest`` does, and return its report.

    Parameters
    ----------
    **options
        The attributes of :class:`BacktestOptions`, by keyword (``schedule``, ``data``, ``train_fraction``,
        ``users``, ``max_penalty`` or ``max_rmse``, ``max_tv``, ...), each the ``backtest`` option of the same name
        with its default.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object (its wall time aside) and ``str()`` its text: the realised
        MSE of the released value on the held-out time with its block-bootstrap interval against f̄, the design's
        Δ(t) against the held-out readings', the releases' error-bar coverage and the model-free guarantee;
        ``extras["series"]`` holds the held-out times, ages and realised MSE.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a value of the wrong type or out of range, or bad data or schedule (cross-option
        messages name the command-line options, as the command prints them).

    Examples
    --------
    >>> import policyopt as po
    >>> report = po.backtest_deployment(max_rmse=0.19, max_age=24, max_interval=24)
    >>> report.fields["train_fraction"]
    0.5
    """
    return backtest_report(BacktestOptions.from_keywords("backtest_deployment", options))


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
        value_range = inputs.BUNDLED_VALUE_RANGE if args.value_range is None else args.value_range
        users = (inputs.BUNDLED_USERS if schedule is None else None) if args.users is None else args.users
        phase = inputs.BUNDLED_PHASE_PERIOD if args.phase_period is None else args.phase_period
    else:
        from policyopt.io import read_readings_timed

        df, slot_seconds, origin = read_readings_timed(args.data, "--data")  # ISO 8601 stamps give the slot length
        unit = ""
        value_range, users = args.value_range, args.users
        phase = default_phase_period(False, slot_seconds) if args.phase_period is None else args.phase_period
    if schedule is not None and args.value_range is None:
        value_range = None  # the schedule's declared range (else the readings' own)
    check_slot_length(schedule, slot_seconds, "the bundled data" if bundled else f"--data {args.data!r}")
    out = backtest(df, schedule, train_fraction=args.train_fraction, users=users, value_range=value_range,
                   phase_period=phase, max_penalty=penalty_bound(args),
                   states=inputs.BUNDLED_STATES if args.states is None else args.states, A_max=args.max_age,
                   S_max=args.max_interval, level=args.level, seed=args.seed, unit=unit, max_tv=max_tv,
                   horizon=args.horizon, delta=args.delta, slot_seconds=slot_seconds, ci_level=args.ci_level)
    if not bundled:  # what check-data says of --data opens the report
        from policyopt.studies.data_check import readings_check

        recorded = ((schedule or {}).get("model") or {}).get("states") if isinstance(schedule, dict) else None
        states = args.states if args.states is not None else recorded if isinstance(recorded, int) else inputs.BUNDLED_STATES
        out["data_check"] = readings_check(df, states=states, value_range=value_range, slot_seconds=slot_seconds,
                                           time_stamps=origin is not None, source=f"data {args.data}")
    if args.plot is not None:
        plot_backtest(out, args.plot, phase_period=phase)
        out["plot"] = str(args.plot)
    return out
