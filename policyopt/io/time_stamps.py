"""Time: slot lengths as text (``1h``, ``30min``) and ISO 8601 date-times mapped to integer slots, in CSV files and
Parquet data sets (slot k holds the readings stamped t0 + k·L; L given or the most common step within a user's
series)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.io.files import existing_file, read_text
from policyopt.io.parquet import parquet_files, read_parquet_partition

__all__ = ["parse_duration", "format_duration", "has_timestamps", "read_timestamped_csv", "read_timestamped_parquet"]


def parse_duration(text, option: str = "--slot-length") -> int:
    """A duration such as ``30min``, ``1h``, ``15s`` or ``1d`` (pandas Timedelta syntax), in whole seconds.

    Parameters
    ----------
    text : str
    option : str
        Option name for messages.

    Returns
    -------
    int
        Seconds, > 0.

    Raises
    ------
    InvalidInputError
        Not a duration, not positive, or not a whole number of seconds.
    """
    import pandas as pd

    try:
        td = pd.Timedelta(str(text).strip())
    except (ValueError, TypeError):
        raise InvalidInputError(f"{option} must be a duration such as 30min, 1h or 1d, got {fmt(text)}") from None
    seconds = td.total_seconds()
    if td is pd.NaT or not (seconds > 0) or seconds != int(seconds):
        raise InvalidInputError(f"{option} must be a positive whole number of seconds (e.g. 30min, 1h), got {fmt(text)}")
    return int(seconds)


def format_duration(seconds: int) -> str:
    """The shortest of ``Nd``, ``Nh``, ``Nmin``, ``Ns`` that is exact for `seconds` (e.g. 1800 → ``30min``)."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def has_timestamps(path, option: str = "--data") -> bool:
    """True when the first reading of a user,time,value CSV has a ``time`` that is not an integer (a date-time).

    Raises
    ------
    InvalidInputError
        Missing file (see :func:`read_text`).
    """
    p = existing_file(path, option)
    with open(p, encoding="utf-8-sig", errors="replace", newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows, None)
        first = next(rows, None)
    if not header or not first or "time" not in header or len(first) != len(header):
        return False
    field = first[header.index("time")].strip()
    try:
        int(field)
    except ValueError:
        return True
    return False


def read_timestamped_csv(path, option: str = "--data", slot_seconds: int | None = None, *, sort: bool = False):
    """Read a long CSV ``user,time,value`` whose times are date-times, mapping them to integer slots.

    Slot k holds the readings stamped t0 + k·L, t0 the earliest time stamp of the file and L the
    slot length: `slot_seconds`, or (``None``) the most common step between consecutive time stamps of a user
    (a stamp off that grid is then refused, rather than shrinking the slot to the odd step).  Time zones: ISO 8601
    offsets are honoured; naive times are taken as UTC.

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.
    slot_seconds : int, optional
        L in seconds.
    sort : bool
        Sort the rows by user and time (as :func:`read_readings_csv`); default False: the file's row order (a
        stream to publish).

    Returns
    -------
    df : pandas.DataFrame
        Rows in file order (or sorted), columns user (str), time (int64 slots), value (float64).
    slot_seconds : int
        L, given or inferred.
    origin : str
        t0 in ISO 8601 (UTC).

    Raises
    ------
    InvalidInputError
        A time that is not a date-time (with its line), a single time stamp without `slot_seconds`,
        a time stamp off the grid t0 + k·L (with its line), and whatever
        :func:`policyopt.models.estimation.validate_readings` raises.
    """
    import io

    import pandas as pd

    from policyopt.models.estimation import validate_readings

    p = Path(path)
    text = read_text(p, option)
    df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    if "time" not in df.columns:
        raise InvalidInputError(f"{option} {fmt(str(p))} must have columns user,time,value (found {list(df.columns)})")
    stamps = pd.to_datetime(df["time"], errors="coerce", utc=True, format="ISO8601")
    bad = stamps.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(f"{option} {fmt(str(p))} line {i + 2}: time {df['time'].iloc[i]!r} is not an integer slot "
                                "nor an ISO 8601 date-time")
    # Microseconds since 1970 UTC: int64 covers years 1 to 9999, where nanoseconds end in 1677 and 2262.
    if str(stamps.dtype).startswith("datetime64[ns"):
        sub = (stamps.astype("int64").to_numpy() % 1000) != 0
        if sub.any():
            i = int(np.flatnonzero(sub)[0])
            raise InvalidInputError(f"{option} {fmt(str(p))} line {i + 2}: time {df['time'].iloc[i]!r} is finer than a "
                                    "microsecond; slots are whole seconds")
    us = stamps.dt.as_unit("us").astype("int64").to_numpy()
    slots, slot_seconds, origin = _stamps_to_slots(df["user"].to_numpy(), us, slot_seconds, f"{option} {fmt(str(p))}",
                                                   lambda i: f" line {i + 2}: time {df['time'].iloc[i]!r}")
    df["time"] = slots.astype(str)
    return validate_readings(df, source=f"{option} {fmt(str(p))}", sort=sort), slot_seconds, origin


def _stamps_to_slots(users: np.ndarray, us: np.ndarray, slot_seconds: int | None, source: str, where):
    """Time stamps (µs since 1970 UTC) to slots k = (t − t0)/L, t0 the earliest stamp and L the slot length
    (`slot_seconds`, else the most common step within a user's series, :func:`_typical_step`).

    Returns
    -------
    (slots, slot_seconds, origin) : int64 array, int, str (t0 in ISO 8601, UTC)

    Raises
    ------
    InvalidInputError
        A single stamp without `slot_seconds`; a most common step that is not whole seconds; a stamp off the grid
        t0 + k·L (``where(i)`` names the reading, e.g. its line).
    """
    import pandas as pd

    t0 = int(us.min())
    if slot_seconds is None:
        step = _typical_step(users, us)
        if step is None:
            raise InvalidInputError(f"{source} has a single time stamp: give the slot length (--slot-length)")
        if step % 10**6:
            raise InvalidInputError(f"{source}: the most common step between time stamps ({step} µs) is not a "
                                    "whole number of seconds; give --slot-length")
        slot_seconds = step // 10**6
    width = int(slot_seconds) * 10**6
    off = (us - t0) % width
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise InvalidInputError(
            f"{source}{where(i)} is not on the grid of {format_duration(int(slot_seconds))} slots from the first time "
            "stamp; give another --slot-length or --resample"
        )
    return (us - t0) // width, int(slot_seconds), pd.Timestamp(t0, unit="us", tz="UTC").isoformat()


def read_timestamped_parquet(spec, option: str = "--data", slot_seconds: int | None = None):
    """Read a Parquet data set of readings whose ``time`` column holds date-times, mapping them to integer slots.

    As :func:`read_timestamped_csv` (slot k holds the readings stamped t0 + k·L, t0 the earliest stamp of the data
    set, L `slot_seconds` or the most common step within a user's series; naive times are UTC), over every file of
    the data set (:func:`parquet_files`) in one process.

    Returns
    -------
    df : pandas.DataFrame
        Validated readings sorted by user and time (columns user, time in int64 slots, value).
    slot_seconds : int
    origin : str

    Raises
    ------
    InvalidInputError
        What :func:`read_parquet_partition` raises; files of which some hold date-times and some integer slots; a
        stamp off the grid (with its file and row); a repeated (user, time) pair; no reading.
    """
    import pandas as pd

    from policyopt.models.estimation import validate_readings

    files = parquet_files(spec, option)
    parts = [read_parquet_partition(path, option, stamps=True) for path in files]
    kinds = {"time_us" in part for part in parts}
    if len(kinds) > 1:
        first = next(str(f) for f, part in zip(files, parts) if "time_us" not in part)
        raise InvalidInputError(f"{option} {str(spec)!r}: {first!r} holds integer slots and other files date-times; "
                                "write one kind of time in every file")
    users = np.concatenate([np.array(part["users"], dtype=object)[part["user_code"]] for part in parts])
    us = np.concatenate([part["time_us"] for part in parts])
    value = np.concatenate([part["value"] for part in parts])
    if us.size == 0:
        raise InvalidInputError(f"{option} {str(spec)!r} holds no readings (every Parquet file is empty)")
    file_of = np.repeat(np.arange(len(files)), [part["value"].size for part in parts])
    starts = np.cumsum([0] + [part["value"].size for part in parts])

    def where(i):
        """The file and row (from 1) of reading `i`, and its time."""
        f = int(file_of[i])
        return (f" ({str(files[f])!r} row {i - int(starts[f]) + 1}): time "
                f"{pd.Timestamp(int(us[i]), unit='us', tz='UTC').isoformat()}")

    slots, slot_seconds, origin = _stamps_to_slots(users, us, slot_seconds, f"{option} {str(spec)!r}", where)
    df = pd.DataFrame({"user": users, "time": slots, "value": value})
    dup = df.duplicated(["user", "time"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InvalidInputError(f"{option} {str(spec)!r}: user {df['user'].iloc[i]!r} has a second reading in slot "
                                f"{int(df['time'].iloc[i])}{where(i)}")
    return validate_readings(df, source=f"{option} {str(spec)!r}"), slot_seconds, origin


def _typical_step(users: np.ndarray, us: np.ndarray) -> int | None:
    """The most common positive step between consecutive time stamps of a user (µs; ties: the smallest), else the
    smallest step between any two distinct stamps, else ``None`` (a single stamp)."""
    order = np.lexsort((us, users))
    u, t = users[order], us[order]
    steps = np.diff(t)[(u[1:] == u[:-1]) & (np.diff(t) > 0)]
    if steps.size == 0:
        steps = np.diff(np.unique(us))
        if steps.size == 0:
            return None
        return int(steps.min())
    values, counts = np.unique(steps, return_counts=True)
    return int(values[np.argmax(counts)])  # np.unique sorts: argmax takes the smallest of tied counts
