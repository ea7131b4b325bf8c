"""``policyopt check-data``: can these readings support a design?  Span, slot length, ragged meters, gaps, sparse
quantile states, and what to change.

The check is :func:`policyopt.app.check_data.data_check_report` (from Python :func:`policyopt.check_readings`); this
module parses options and prints.
"""

from __future__ import annotations

from policyopt.app.inputs import (
    BUNDLED_STATES,
    BUNDLED_VALUE_RANGE,
    MAX_STATES,
)
from policyopt.cli.options import (
    int_at_least,
    value_range_arg,
)
__all__ = ["add_command", "run_check_data"]


def add_command(sub) -> None:
    """Register the ``check-data`` sub-command on the sub-parsers `sub`."""
    from policyopt.models.empirical import DEFAULT_MIN_PAIRS
    from policyopt.models.estimation import DEFAULT_STATES

    cmd = sub.add_parser(
        "check-data",
        help="check your readings before designing: span, slot length, gaps, ragged meters, sparse quantile states, "
        "and what to change",
        description=(
            "Read the readings and report, before any design, whether they can support one: the slots they span and "
            "the slot length (a day of slots: --phase-period of schedule), meters that start late or end early "
            "(ragged), missing slots, and the (user, state) rows of the quantile states schedule fits that have fewer "
            f"than {DEFAULT_MIN_PAIRS} transitions (Δ(t) estimated from the readings makes no claim there: schedule "
            "--max-tv empirical and check-model use Δ = 1), the most states that leave no such row, what the "
            "readings penalty's MSE needs, and concrete changes.  Without --data: the bundled CityLearn 2022 pilot "
            f"(17 homes, hourly kWh, {BUNDLED_STATES} states, readings in "
            f"{BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh)."
        ),
    )
    cmd.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV with header user,time,value (time in integer "
                     "slots or ISO 8601 date-times, whose most common step is the slot length), or Parquet with those "
                     "columns (default: the bundled pilot)")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states checked, as schedule --states (default {BUNDLED_STATES} for the bundled "
                     f"pilot, {DEFAULT_STATES} for --data; at most {MAX_STATES})")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading: readings are clipped into it before the quantile states (default "
                     f"for the bundled pilot {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh; otherwise the "
                     "data's own range, which is not private)")
    cmd.add_argument("--slot-length", metavar="DUR", default=None,
                     help="length of one slot of --data, e.g. 30min, 1h (default: read from date-time stamps, else "
                     "unknown; the bundled data: 1h)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cmd.set_defaults(handler=run_check_data)


def run_check_data(args) -> int:
    """Handler of ``policyopt check-data``: the report of :func:`policyopt.app.check_data.data_check_report`,
    printed as text or JSON; exit code."""
    from policyopt.app.check_data import CheckDataOptions, data_check_report

    report = data_check_report(CheckDataOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    return 0
