"""``policyopt check-data``: can these readings support a design?  Span, slot length, ragged meters, gaps, sparse
quantile states, and what to change.

The work is done by :func:`policyopt.studies.data_check.check_data`; this module parses options, reads the data and
prints.
"""

from __future__ import annotations

import json

from policyopt.app.inputs import (
    BUNDLED_STATES,
    BUNDLED_VALUE_RANGE,
    MAX_STATES,
)
from policyopt.cli.options import (
    int_at_least,
    value_range_arg,
)
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run_check_data", "load_readings"]


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


def load_readings(args):
    """(readings, source in words, slot seconds or None, where the slot length came from or None) of the options.

    Raises
    ------
    InvalidInputError
        A bad ``--slot-length`` (or one other than 1h for the bundled data); a missing or malformed ``--data``.
    """
    from policyopt.io import (format_duration, has_timestamps, is_parquet_source, parquet_has_timestamps, parse_duration,
                              read_readings)

    given = None if args.slot_length is None else parse_duration(args.slot_length, "--slot-length")
    how = None if given is None else "given"
    if args.data is None:
        from policyopt.data import BUNDLED_SLOT_LENGTH, load_citylearn

        bundled = parse_duration(BUNDLED_SLOT_LENGTH)
        if given is not None and given != bundled:
            raise InvalidInputError(f"--slot-length {args.slot_length} is not the bundled data's slot ({BUNDLED_SLOT_LENGTH})")
        return (load_citylearn(), "bundled CityLearn 2022 pilot, 17 homes, hourly kWh", bundled,
                "bundled" if given is None else how)
    parquet = is_parquet_source(args.data)
    if parquet_has_timestamps(args.data, "--data") if parquet else has_timestamps(args.data, "--data"):
        from policyopt.io import read_timestamped_csv, read_timestamped_parquet

        reader = read_timestamped_parquet if parquet else read_timestamped_csv
        df, seconds, origin = reader(args.data, "--data", given)
        source = f"data {args.data} (ISO 8601 time stamps: slot k is {origin} + k·{format_duration(seconds)})"
        return df, source, seconds, how or "time stamps"
    return read_readings(args.data), f"data {args.data}", given, how


def run_check_data(args) -> int:
    """Handler of ``policyopt check-data``: read the data, check it, print text or JSON; exit code."""
    from policyopt.formatting import json_clean
    from policyopt.models.estimation import DEFAULT_STATES
    from policyopt.studies.data_check import check_data, format_data_check

    df, source, seconds, how = load_readings(args)
    bundled = args.data is None
    states = args.states if args.states is not None else BUNDLED_STATES if bundled else DEFAULT_STATES
    value_range = BUNDLED_VALUE_RANGE if bundled and args.value_range is None else args.value_range
    try:
        out = check_data(df, states=states, value_range=value_range, slot_seconds=seconds, slot_length_source=how,
                         source=source)
    except InvalidInputError as exc:  # name the option, not the Python argument
        text = str(exc)
        if text.startswith("`n_states`="):
            raise InvalidInputError("--states " + text[len("`n_states`="):]) from None
        raise
    out = json_clean(out)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(format_data_check(out))
    return 0
