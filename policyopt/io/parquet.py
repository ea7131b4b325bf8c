"""Parquet data sets of readings: which ``--data`` is Parquet, its files, their schema, one file (partition) at a time,
the whole data set in one table.  Times are integer slots, or with ``stamps`` Arrow timestamps (date-times)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError
from policyopt.io.files import existing_file

__all__ = ["PARQUET_SUFFIXES", "PARQUET_COLUMN_KINDS", "is_parquet_source", "parquet_files", "check_parquet_schema",
           "read_parquet_partition", "read_readings_parquet", "parquet_has_timestamps"]

#: File name endings taken as Parquet by :func:`is_parquet_source` (any other file is read as CSV).
PARQUET_SUFFIXES = (".parquet", ".pq")


def is_parquet_source(spec) -> bool:
    """True if the ``--data`` argument `spec` names Parquet: a directory, a glob pattern or a ``.parquet``/``.pq`` file.

    Anything else (e.g. ``readings.csv``) is a CSV file and keeps going to :func:`read_readings_csv`.
    """
    text = str(spec)
    return Path(text).is_dir() or any(ch in text for ch in "*?[") or text.lower().endswith(PARQUET_SUFFIXES)


def parquet_files(spec, option: str = "--data") -> list:
    """The Parquet files (partitions) named by `spec`, sorted by path.

    Parameters
    ----------
    spec : str or Path
        A directory (every ``*.parquet``/``*.pq`` file below it, recursively), a glob pattern
        (``data/part-*.parquet``; ``**`` recurses) or one Parquet file.
    option : str
        Option name for messages.

    Returns
    -------
    list of Path
        At least one file.

    Raises
    ------
    InvalidInputError
        If nothing matches, or a named file does not exist.
    """
    import glob

    text = str(spec)
    p = Path(text)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(PARQUET_SUFFIXES))
        if not files:
            raise InvalidInputError(f"{option} directory {text!r} holds no Parquet file (*.parquet, *.pq)")
        return files
    if any(ch in text for ch in "*?["):
        files = sorted(Path(f) for f in glob.glob(text, recursive=True) if Path(f).is_file())
        if not files:
            raise InvalidInputError(f"{option} pattern {text!r} matches no file")
        return files
    return [existing_file(p, option)]


def _arrow_kind(dtype) -> str:
    import pyarrow as pa

    if pa.types.is_integer(dtype):
        return "integer"
    if pa.types.is_floating(dtype):
        return "floating"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_dictionary(dtype):
        return _arrow_kind(dtype.value_type)
    if pa.types.is_timestamp(dtype):
        return "timestamp"
    return str(dtype)


#: Arrow type kinds accepted per column of a Parquet reading table.
PARQUET_COLUMN_KINDS = {"user": ("string", "integer"), "time": ("integer", "floating"), "value": ("integer", "floating")}


def check_parquet_schema(schema, source: str, *, stamps: bool = False) -> None:
    """Check that a Parquet schema has exactly the columns user, time, value with usable types.

    user: strings or integers (taken as their decimal text, like the CSV reader's ``str``);
    time: integers (or integral floats, checked per row later), and with `stamps` also date-times (an Arrow
    timestamp, naive taken as UTC); value: integers or floats.

    Raises
    ------
    InvalidInputError
        Missing or unexpected columns (the message lists those found), a column of another type (the message shows
        the Arrow type), or date-times where only integer slots are read (`stamps` false: the Dask path and a
        published Parquet stream).
    """
    names = list(schema.names)
    missing = [c for c in ("user", "time", "value") if c not in names]
    if missing:
        raise InvalidInputError(f"{source} must have columns user,time,value; missing {missing} (found {names})")
    extra = [c for c in names if c not in ("user", "time", "value")]
    if extra:
        raise InvalidInputError(f"{source} has unexpected columns {extra}; expected exactly user,time,value")
    for name, kinds in PARQUET_COLUMN_KINDS.items():
        kind = _arrow_kind(schema.field(name).type)
        if name == "time" and kind == "timestamp" and not stamps:
            raise InvalidInputError(
                f"{source}: column `time` holds date-times ({schema.field(name).type}); on Dask workers and in a "
                "published Parquet stream the times must be integer slots: write slot k for t0 + k·(slot length), or "
                "read the data set in one process (without --workers)")
        if kind not in kinds and not (name == "time" and kind == "timestamp"):
            raise InvalidInputError(
                f"{source}: column `{name}` has type {schema.field(name).type}; expected {' or '.join(kinds)}"
            )


def _refuse_nulls(col, name: str, source: str) -> None:
    """Refuse a column with an empty entry, naming the first row (from 1)."""
    if col.null_count:
        i = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise InvalidInputError(f"{source} row {i + 1}: `{name}` is empty")


def _integer_slots(col, source: str) -> np.ndarray:
    """An integer (or integral floating-point) Arrow ``time`` column as int64 slots.

    Raises
    ------
    InvalidInputError
        Another type; a time that is not a whole number, or beyond what int64 holds exactly (with its row).
    """
    raw = col.to_numpy(zero_copy_only=False)
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise InvalidInputError(f"{source}: `time` is of type {col.type}; Parquet times must be integer slots "
                                "or date-times (an Arrow timestamp column)")
    if np.issubdtype(raw.dtype, np.floating):
        # integral and within ±2^53 (every such float is an exact int64; beyond, the cast is undefined)
        bad = ~np.isfinite(raw) | (raw != np.round(raw)) | (np.abs(raw) > 2.0**53)
    elif np.issubdtype(raw.dtype, np.unsignedinteger):
        bad = raw > np.iinfo(np.int64).max  # would wrap to a negative slot
    else:
        bad = np.zeros(raw.shape, dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        v = raw[i].item()
        beyond = raw.dtype.kind == "u" or (math.isfinite(v) and v == round(v))  # whole, but too large
        raise InvalidInputError(f"{source} row {i + 1}: `time` {v!r} is not an integer slot"
                                + (" policyopt can count (below 2^63; 2^53 for floating-point times)" if beyond else ""))
    return raw.astype(np.int64)


def _timestamp_microseconds(col, source: str) -> np.ndarray:
    """An Arrow timestamp column as int64 microseconds since 1970-01-01 UTC (Arrow stores UTC; a naive column is
    taken as UTC, as the CSV reader takes naive ISO 8601 times).

    Raises
    ------
    InvalidInputError
        A time finer than a microsecond (slots are whole seconds), with its row.
    """
    import pyarrow as pa

    raw = col.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if col.type.unit != "ns":  # seconds, milliseconds, microseconds: exact multiples of a microsecond
        return raw * {"s": 10**6, "ms": 10**3, "us": 1}[col.type.unit]
    sub = raw % 1000 != 0
    if sub.any():
        i = int(np.flatnonzero(sub)[0])
        raise InvalidInputError(f"{source} row {i + 1}: `time` {col[i].as_py()} is finer than a microsecond; "
                                "slots are whole seconds")
    return raw // 1000


def read_parquet_partition(path, option: str = "--data", columns=("user", "time", "value"), *,
                           stamps: bool = False) -> dict:
    """Read and check one Parquet file of readings (one partition of a data set).

    Parameters
    ----------
    path : str or Path
        A Parquet file with columns user, time, value (see :func:`check_parquet_schema`).
    option : str
        Option name for messages.
    columns : sequence of str
        Columns to load (the schema is always checked in full).
    stamps : bool
        Accept a ``time`` column of date-times (Arrow timestamps), returned as ``time_us`` instead of ``time``.

    Returns
    -------
    dict
        ``value``: float64 array (finite); ``time``: int64 array (integer slots), or ``time_us``: int64 array of
        microseconds since 1970-01-01 UTC (date-times; naive ones taken as UTC);
        ``user_code``: int64 array, index into ``users``; ``users``: list of str, the distinct
        users of the file in first-appearance order.  Only the requested columns' entries.

    Raises
    ------
    InvalidInputError
        Not a Parquet file; bad columns or types; a null user; a null, NaN or infinite value; a
        null or non-integral time.  Row numbers count from 1 within the file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    p = existing_file(path, option)
    source = f"{option} {str(p)!r}"
    try:
        schema = pq.read_schema(p)
        check_parquet_schema(schema, source, stamps=stamps)
        table = pq.read_table(p, columns=list(columns))
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"{source} is not a readable Parquet file: {' '.join(str(exc).split())}") from None
    out = {}
    if "value" in columns:
        col = table.column("value")
        value = col.to_numpy(zero_copy_only=False).astype(float, copy=False) if col.null_count == 0 else None
        if value is None or not np.all(np.isfinite(value)):
            bad = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)) if value is None else np.flatnonzero(~np.isfinite(value))
            i = int(bad[0])
            raise InvalidInputError(
                f"{source} row {i + 1}: `value` {col[i].as_py()!r} is not a finite number (NaN readings are not allowed)"
            )
        out["value"] = value
    if "time" in columns:
        col = table.column("time")
        _refuse_nulls(col, "time", source)
        if pa.types.is_timestamp(col.type):
            out["time_us"] = _timestamp_microseconds(col, source)
        else:
            out["time"] = _integer_slots(col, source)
    if "user" in columns:
        col = table.column("user")
        _refuse_nulls(col, "user", source)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        enc = pc.dictionary_encode(col).combine_chunks()
        out["user_code"] = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        out["users"] = [str(u) for u in enc.dictionary.to_pylist()]
    return out


def read_readings_parquet(spec, option: str = "--data"):
    """Read a Parquet data set of readings (all its files) into one table, as :func:`read_readings_csv` does for CSV.

    Parameters
    ----------
    spec : str or Path
        Directory, glob pattern or file (see :func:`parquet_files`).
    option : str
        Option name for messages.

    Returns
    -------
    pandas.DataFrame
        Validated readings (see :func:`policyopt.models.estimation.validate_readings`): columns
        user (str), time (int64), value (float64), sorted by user and time.

    Raises
    ------
    InvalidInputError
        No file; a file that is not Parquet or fails :func:`read_parquet_partition`; no reading
        at all; a repeated (user, time) pair (within or across files).
    """
    import pandas as pd

    from policyopt.models.estimation import validate_readings

    from policyopt.progress import bar

    frames = []
    files = parquet_files(spec, option)
    steps = bar(len(files), f"reading {option}", unit="file")
    for path in files:
        steps.update(1)
        part = read_parquet_partition(path, option)
        users = np.array(part["users"], dtype=object)
        frames.append(pd.DataFrame({"user": users[part["user_code"]], "time": part["time"], "value": part["value"]}))
    steps.close()
    df = pd.concat(frames, ignore_index=True)
    if len(df) == 0:
        raise InvalidInputError(f"{option} {str(spec)!r} holds no readings (every Parquet file is empty)")
    dup = df.duplicated(["user", "time"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InvalidInputError(
            f"{option} {str(spec)!r}: user {df['user'].iloc[i]!r} has a second reading at time {int(df['time'].iloc[i])}"
        )
    return validate_readings(df, source=f"{option} {str(spec)!r}")


def parquet_has_timestamps(spec, option: str = "--data") -> bool:
    """True when the first file of a Parquet data set has a ``time`` column of date-times (an Arrow timestamp).

    Raises
    ------
    InvalidInputError
        No file, or a file that is not Parquet (see :func:`parquet_files`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = parquet_files(spec, option)
    try:
        schema = pq.read_schema(existing_file(files[0], option))
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"{option} {str(files[0])!r} is not a readable Parquet file: "
                                f"{' '.join(str(exc).split())}") from None
    return "time" in schema.names and pa.types.is_timestamp(schema.field("time").type)
