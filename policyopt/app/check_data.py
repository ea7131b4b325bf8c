"""``policyopt check-data`` below the command line: the readings read and checked before any design
(:func:`data_check_report`; from Python :func:`check_readings`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from policyopt.app.inputs import BUNDLED_STATES, BUNDLED_VALUE_RANGE, MAX_STATES
from policyopt.app.option_fields import CommandOptions
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError

__all__ = ["CheckDataOptions", "check_readings", "data_check_report", "load_readings"]


@dataclass(frozen=True)
class CheckDataOptions(CommandOptions):
    """The options of ``policyopt check-data`` (:func:`check_readings`); ``None`` is the command's default.

    Attributes
    ----------
    data : str or os.PathLike, optional
        Long CSV (integer slots or ISO 8601 date-times) or Parquet readings (default: the bundled pilot).
    states : int, optional
        Quantile states checked, 2 to 200 (default 3 for the bundled pilot, 12 for `data`).
    value_range : (float, float), optional
        Public range (LO, HI) of one reading.
    slot_length : str, optional
        Length of one slot (``30min``, ``1h``; default: from date-time stamps, else unknown).

    Raises
    ------
    InvalidInputError
        A value of the wrong type or out of its range (naming the keyword and showing the value).
    """

    COMMAND = "check-data"
    RULES = {"data": ("text",), "states": ("int", 2, MAX_STATES), "value_range": ("range",), "slot_length": ("text",)}

    data: str | os.PathLike | None = None
    states: int | None = None
    value_range: tuple | None = None
    slot_length: str | None = None


def check_readings(**options) -> CommandReport:
    """Check readings before a design as ``policyopt check-data`` does: span, slot length, ragged meters, gaps, sparse
    (user, state) rows, the most states that leave none, and what to change; the command's report.

    Parameters
    ----------
    **options
        The attributes of :class:`CheckDataOptions` by keyword (``data``, ``states``, ``value_range``,
        ``slot_length``).

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` object and ``str()`` its text.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a bad value, or unreadable data.
    """
    return data_check_report(CheckDataOptions.from_keywords("check_readings", options))


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


def data_check_report(args) -> CommandReport:
    """``policyopt check-data`` of parsed options (`args`: :class:`CheckDataOptions` or the command line's namespace):
    the readings read and checked (:func:`policyopt.studies.data_check.check_data`), as the command prints them.

    Raises
    ------
    InvalidInputError
        A bad slot length, states or data (naming the command-line option).
    """
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
    return CommandReport("check-data", out, format_data_check(out))
