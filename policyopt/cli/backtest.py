"""``policyopt backtest``: replay a schedule on held-out readings; the realised MSE against f̄."""

from __future__ import annotations

from policyopt.app.backtest import DEFAULT_TRAIN_FRACTION
from policyopt.app import inputs
from policyopt.cli.options import (
    add_bound_options,
    add_guarantee_options,
    add_max_tv_options,
    int_at_least,
    probability,
    value_range_arg,
)

__all__ = ["add_command", "run_backtest"]


def _fraction(text):
    """argparse type of --train-fraction: a number strictly between 0 and 1."""
    return probability("--train-fraction")(text)


def add_command(sub) -> None:
    """Register the ``backtest`` sub-command on the sub-parsers `sub`."""
    lo, hi = inputs.BUNDLED_VALUE_RANGE
    cap = inputs.MAX_AGE_LIMIT  # the largest --phase-period, --max-age, --max-interval
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
            f"kWh), I = {inputs.BUNDLED_USERS}, range {lo:g}:{hi:g} kWh.  The report "
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
    cmd.add_argument("--users", type=int_at_least("--users", 1, inputs.MAX_COUNT), metavar="I",
                     help="deployment size (default: the schedule's; for a design here the bundled pilot's "
                     f"{inputs.BUNDLED_USERS} or the readings' users)")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (default: the schedule's declared range; the bundled pilot's "
                     f"{lo:g}:{hi:g} kWh; else the readings' own, not private)")
    cmd.add_argument("--phase-period", type=int_at_least("--phase-period", 1, cap), default=None, metavar="P",
                     help="slots per cycle for the worst-phase numbers and a design here (default "
                     f"{inputs.BUNDLED_PHASE_PERIOD} "
                     "for the bundled year; for --data a day of slots when its time stamps give the slot length, else 1)")
    add_bound_options(cmd)
    add_max_tv_options(cmd)
    add_guarantee_options(cmd, design=False, markov=False)
    cmd.add_argument("--states", type=int_at_least("--states", 2, 200), default=None, metavar="K",
                     help=f"quantile states of the chains (Δ(t)) of a design here (default {inputs.BUNDLED_STATES})")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0, cap), default=inputs.DEFAULT_MAX_AGE, metavar="A_MAX",
                     help=f"search box of a design here (default {inputs.DEFAULT_MAX_AGE})")
    cmd.add_argument("--max-interval", type=int_at_least("--max-interval", 1, cap), default=inputs.DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"search box of a design here (default {inputs.DEFAULT_MAX_INTERVAL})")
    cmd.add_argument("--level", type=probability("--level"), default=inputs.DEFAULT_PENALTY_LEVEL, metavar="LEVEL",
                     help=f"two-sided level of the interval (default {inputs.DEFAULT_PENALTY_LEVEL})")
    cmd.add_argument("--ci-level", type=probability("--ci-level"), metavar="LEVEL",
                     help="level of the releases' error bars whose coverage is measured on the held-out time (default 0.95; "
                     "as `publish --ci-level`)")
    cmd.add_argument("--seed", type=int_at_least("--seed", 0), default=0, metavar="N",
                     help="seed of the bootstrap resampling (default 0; simulation only)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cmd.add_argument("--plot", metavar="FILE", help="draw the realised error over the held-out time into FILE "
                     "(.png, .pdf or .svg; needs matplotlib)")
    cmd.set_defaults(handler=run_backtest)


def run_backtest(args) -> int:
    """Handler of ``policyopt backtest``: the replay of :func:`policyopt.app.backtest.backtest_from_options`, printed
    as text or JSON; exit code."""
    from policyopt.app.backtest import BacktestOptions, backtest_report

    report = backtest_report(BacktestOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    return 0
