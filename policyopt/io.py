"""Reading user files: long CSV readings and transition-matrix files.

Every failure raises :class:`~policyopt.errors.InvalidInputError` with the file name and,
for CSV, the line number (the header is line 1).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from .errors import InvalidInputError, fmt
from .models.markov import MarkovChain

__all__ = [
    "read_readings_csv",
    "read_matrix",
    "parse_matrix_arg",
    "read_budgets",
    "read_text",
    "MAX_FILE_BYTES",
    "read_readings",
    "read_readings_timed",
    "read_readings_parquet",
    "read_parquet_partition",
    "parquet_files",
    "is_parquet_source",
    "check_parquet_schema",
    "data_digest",
    "file_prefix_sha256",
    "parse_duration",
    "format_duration",
    "has_timestamps",
    "read_timestamped_csv",
    "read_timestamped_parquet",
    "parquet_has_timestamps",
    "resample_readings",
]

#: Largest input file read (bytes), checked before reading: 2 GiB.
MAX_FILE_BYTES = 2 * 1024**3


def _existing(path, option: str) -> Path:
    p = Path(path)
    try:
        is_file = p.is_file()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise InvalidInputError(f"{option} {fmt(str(p))} is not a usable file name ({exc.strerror})") from None
    if not is_file:
        raise InvalidInputError(f"{option} file not found: {fmt(str(p))}")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidInputError(f"{option} {fmt(str(p))} is {size} bytes; at most {MAX_FILE_BYTES} are read")
    return p


def read_text(path, option: str) -> str:
    """The text of a user file, decoded strictly: UTF-8 (a UTF-8 or UTF-16 byte-order mark is honoured).

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.

    Returns
    -------
    str
        The decoded text (byte-order mark removed).

    Raises
    ------
    InvalidInputError
        Missing file, a file larger than :data:`MAX_FILE_BYTES`, a binary file (NUL bytes without a UTF-16
        byte-order mark) or bytes that are not UTF-8 (the message gives the offset of the first bad byte).
    """
    p = _existing(path, option)
    raw = p.read_bytes()
    name = fmt(str(p))
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{option} {name} starts with a UTF-16 byte-order mark but is not valid UTF-16 "
                                    f"(byte {exc.start}); save it as UTF-8 text") from None
    if b"\x00" in raw:
        raise InvalidInputError(f"{option} {name} is a binary file (NUL byte at offset {raw.index(0)}); "
                                "expected UTF-8 text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{option} {name} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                                f"{exc.start}); save it as UTF-8") from None


def read_readings_csv(path, option: str = "--data", *, sort: bool = True):
    """Read a long CSV with header ``user,time,value`` (one reading per row).

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.
    sort : bool
        Sort by user and time (default), or keep the file's row order.

    Returns
    -------
    pandas.DataFrame
        Validated readings (see :func:`policyopt.models.estimation.validate_readings`).

    Raises
    ------
    InvalidInputError
        Missing file; a row with the wrong number of fields (with its line number); missing
        columns; non-numeric, NaN or infinite values; non-integer times; duplicated (user, time).
    """
    import pandas as pd

    from .models.estimation import validate_readings

    import io

    p = Path(path)
    text = read_text(p, option)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise InvalidInputError(f"{option} {fmt(str(p))} is empty; expected a header user,time,value")
        rows = 0
        for line, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise InvalidInputError(
                    f"{option} {fmt(str(p))} line {line}: expected {len(header)} fields ({','.join(header)}), got {len(row)}"
                )
            rows += 1
    except csv.Error as exc:
        raise InvalidInputError(f"{option} {fmt(str(p))} line {reader.line_num}: not CSV ({exc})") from None
    if rows == 0:
        raise InvalidInputError(f"{option} {fmt(str(p))} has a header but no readings; expected rows user,time,value")
    # every column as text: times are parsed as exact integers (not through float), values checked below
    df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    return validate_readings(df, source=f"{option} {fmt(str(p))}", sort=sort)


def read_matrix(path, option: str = "--matrix") -> MarkovChain:
    """Read a transition matrix, with optional state values, from CSV or NPY.

    The file holds either a K×K matrix, or a (K+1)×K array whose first row is the state
    values and whose remaining K rows are the matrix.  CSV files are comma-separated
    numbers without a header.  Without values, states are valued 0..K−1.

    Parameters
    ----------
    path : str or Path
        ``.csv`` or ``.npy``.
    option : str
        Option name for messages.

    Returns
    -------
    MarkovChain

    Raises
    ------
    InvalidInputError
        Missing file, unknown extension, a non-numeric CSV field (with its line number), or
        a shape that is neither K×K nor (K+1)×K.
    InvalidModelError
        If the matrix is not stochastic (the message names the row and its sum).
    """
    p = _existing(path, option)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise InvalidInputError(f"{option} {fmt(str(p))} is not a numeric .npy array ({' '.join(str(exc).split())})") from None
        arr = np.asarray(arr)
        if np.iscomplexobj(arr):
            raise InvalidInputError(f"{option} {fmt(str(p))} holds complex numbers (dtype {arr.dtype}); a transition "
                                    "matrix is real")
        if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise InvalidInputError(f"{option} {fmt(str(p))} is not a numeric .npy array (dtype {arr.dtype})")
        arr = arr.astype(float)
    elif suffix == ".csv":
        import io

        rows = []
        text = read_text(p, option)
        try:
            for line, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
                if not row or all(not f.strip() for f in row):
                    continue
                try:
                    rows.append([float(f) for f in row])
                except ValueError:
                    bad = next(f for f in row if not _is_float(f))
                    raise InvalidInputError(f"{option} {fmt(str(p))} line {line}: {fmt(bad)} is not a number") from None
        except csv.Error as exc:
            raise InvalidInputError(f"{option} {fmt(str(p))}: not CSV ({exc})") from None
        widths = {len(r) for r in rows}
        if len(widths) > 1:
            raise InvalidInputError(f"{option} {str(p)!r}: rows have different numbers of fields {sorted(widths)}")
        arr = np.array(rows, dtype=float)
    else:
        raise InvalidInputError(f"{option} must be a .csv or .npy file, got {str(p)!r}")
    if arr.ndim != 2 or arr.size == 0:
        raise InvalidInputError(f"{option} {str(p)!r} must hold a 2-D array, got shape {arr.shape}")
    k = arr.shape[1]
    if arr.shape == (k, k):
        return MarkovChain(arr)
    if arr.shape == (k + 1, k):
        return MarkovChain(arr[1:], state_values=arr[0])
    raise InvalidInputError(
        f"{option} {str(p)!r} has shape {arr.shape}; expected K×K or (K+1)×K (first row = state values)"
    )


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def parse_chain_spec(spec: str, option: str = "--chain") -> MarkovChain:
    """Parse ``two-state:p=P,q=Q`` into the chain (43) with values ±1.

    Raises
    ------
    InvalidInputError
        If the spec is not of that form (the message shows the spec received).
    """
    from .models.markov import two_state_chain

    kind, _, params = spec.partition(":")
    if kind != "two-state":
        raise InvalidInputError(f"unknown {option} spec {fmt(spec)}; expected two-state:p=P,q=Q")
    values = {}
    for part in params.split(","):
        key, eq, val = part.partition("=")
        if not eq or key.strip() not in ("p", "q") or key.strip() in values:
            raise InvalidInputError(f"bad {option} spec {fmt(spec)}; expected two-state:p=P,q=Q")
        try:
            values[key.strip()] = float(val)
        except ValueError:
            raise InvalidInputError(f"bad {option} spec {fmt(spec)}: {val!r} is not a number") from None
    if set(values) != {"p", "q"}:
        raise InvalidInputError(f"bad {option} spec {fmt(spec)}; expected two-state:p=P,q=Q")
    return two_state_chain(values["p"], values["q"])


def parse_matrix_arg(text: str, option: str) -> np.ndarray:
    """A transition matrix given as a file (``.csv``/``.npy``, see :func:`read_matrix`) or inline rows.

    Inline form: rows separated by ``;``, entries by ``,``, e.g. ``"0.8,0.2;0.2,0.8"``.

    Returns
    -------
    numpy.ndarray, shape (n, n)
        The validated (row-stochastic) matrix.

    Raises
    ------
    InvalidInputError
        A missing file, or inline text that is not a matrix of numbers.
    InvalidModelError
        If the matrix is not square and row-stochastic.
    """
    inline = any(c in text for c in ",;") and not text.lower().endswith((".csv", ".npy"))
    if not inline:
        return np.array(read_matrix(text, option).P)
    rows = []
    for r, part in enumerate(text.split(";")):
        try:
            rows.append([float(x) for x in part.split(",")])
        except ValueError:
            raise InvalidInputError(
                f"{option} {fmt(text)}: row {r} is not a list of numbers; give a CSV/NPY file or rows like 0.8,0.2;0.2,0.8"
            ) from None
    if len({len(r) for r in rows}) != 1:
        raise InvalidInputError(f"{option} {fmt(text)}: rows have different lengths")
    return np.array(MarkovChain(rows).P)


def read_budgets(path, option: str = "--budgets", *, max_budget: float = math.inf,
                 max_count: int = 10**9) -> np.ndarray:
    """Per-step budgets ε_1..ε_T (nats) from a CSV/text file: numbers separated by commas or newlines.

    Raises
    ------
    InvalidInputError
        Missing file, a field that is not a number (with its line), a negative or non-finite
        budget or one above `max_budget` (nats), more than `max_count` budgets, or no budget at all.
    """
    p = Path(path)
    values = []
    for line, text in enumerate(read_text(p, option).splitlines(), start=1):
        for field in text.replace(",", " ").split():
            try:
                v = float(field)
            except ValueError:
                raise InvalidInputError(f"{option} {fmt(str(p))} line {line}: {fmt(field)} is not a number") from None
            if not (np.isfinite(v) and 0 <= v <= max_budget):
                raise InvalidInputError(f"{option} {fmt(str(p))} line {line}: budget {field} must be finite, ≥ 0 and "
                                        f"≤ {max_budget:g} nats")
            values.append(v)
            if len(values) > max_count:
                raise InvalidInputError(f"{option} {fmt(str(p))} holds more than {max_count} budgets")
    if not values:
        raise InvalidInputError(f"{option} {fmt(str(p))} holds no budget")
    return np.array(values)


# --------------------------------------------------------------------------------------------------
# Partitioned Parquet readings (user,time,value), read with pyarrow.
# --------------------------------------------------------------------------------------------------

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
    return [_existing(p, option)]


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
    per_us = {"s": None, "ms": None, "us": 1, "ns": 1000}[col.type.unit]
    if per_us is None:  # seconds or milliseconds: exact multiples of a microsecond
        return raw * (10**6 if col.type.unit == "s" else 10**3)
    if per_us > 1:
        sub = raw % per_us != 0
        if sub.any():
            i = int(np.flatnonzero(sub)[0])
            raise InvalidInputError(f"{source} row {i + 1}: `time` {col[i].as_py()} is finer than a microsecond; "
                                    "slots are whole seconds")
        return raw // per_us
    return raw


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

    p = _existing(path, option)
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
        if col.null_count:
            i = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise InvalidInputError(f"{source} row {i + 1}: `time` is empty")
        if pa.types.is_timestamp(col.type):
            out["time_us"] = _timestamp_microseconds(col, source)
        else:
            out["time"] = _integer_slots(col, source)
    if "user" in columns:
        col = table.column("user")
        if col.null_count:
            i = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise InvalidInputError(f"{source} row {i + 1}: `user` is empty")
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

    from .models.estimation import validate_readings

    from .progress import bar

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


def read_readings(spec, option: str = "--data"):
    """Readings from CSV (:func:`read_readings_csv`) or Parquet (:func:`read_readings_parquet`, see :func:`is_parquet_source`)."""
    if is_parquet_source(spec):
        return read_readings_parquet(spec, option)
    return read_readings_csv(spec, option)


#: Bytes read at a time when hashing a file.
_HASH_CHUNK = 1 << 20


def file_prefix_sha256(path, nbytes: int | None = None) -> str:
    """SHA-256 (hex) of the first `nbytes` bytes of a file (all of it when ``None``), read in chunks.

    Parameters
    ----------
    path : str or Path
    nbytes : int, optional
        How many leading bytes to hash; a shorter file hashes what it has.

    Returns
    -------
    str
        64 hex digits.
    """
    import hashlib

    h = hashlib.sha256()
    left = math.inf if nbytes is None else int(nbytes)
    with open(path, "rb") as fh:
        while left > 0:
            chunk = fh.read(int(min(_HASH_CHUNK, left)))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def data_digest(spec, option: str = "--data") -> dict:
    """The identity of a data source: its resolved path, format, size and content digest.

    A CSV file's digest is the SHA-256 of its bytes.  A Parquet data set's (directory, glob or
    file) is the SHA-256 of the text ``"NAME\\tSIZE\\tSHA256\\n"`` over its files sorted by path
    (NAME relative to the files' common folder), so renaming, adding, removing or changing a
    partition changes it.

    ``None`` names the bundled data (:data:`policyopt.data.CITYLEARN_PATH`), whose digest is that
    of its file's bytes.

    Parameters
    ----------
    spec : str or Path or None
        What ``--data`` names (see :func:`is_parquet_source`); ``None`` for the bundled data.
    option : str
        Option name for messages.

    Returns
    -------
    dict
        ``source`` (absolute path or pattern, or ``"bundled"``), ``format`` (``"csv"``, ``"parquet"`` or ``"bundled"``),
        ``sha256`` (64 hex digits), ``bytes`` (total size) and ``files`` (number of files).

    Raises
    ------
    InvalidInputError
        If the file or data set does not exist (see :func:`parquet_files`).
    """
    import hashlib
    import os

    if spec is None:
        from .data import CITYLEARN_PATH

        return {"source": "bundled", "format": "bundled", "sha256": file_prefix_sha256(CITYLEARN_PATH),
                "bytes": CITYLEARN_PATH.stat().st_size, "files": 1}
    if is_parquet_source(spec):
        files = parquet_files(spec, option)
        root = os.path.commonpath([str(f.resolve().parent) for f in files])
        h = hashlib.sha256()
        total = 0
        for f in files:
            size = f.stat().st_size
            total += size
            h.update(f"{os.path.relpath(str(f.resolve()), root)}\t{size}\t{file_prefix_sha256(f)}\n".encode())
        return {"source": os.path.abspath(str(spec)), "format": "parquet", "sha256": h.hexdigest(), "bytes": total,
                "files": len(files)}
    p = _existing(spec, option)
    return {"source": os.path.abspath(str(p)), "format": "csv", "sha256": file_prefix_sha256(p),
            "bytes": p.stat().st_size, "files": 1}


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
    p = _existing(path, option)
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

    from .models.estimation import validate_readings

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

    from .models.estimation import validate_readings

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
        schema = pq.read_schema(_existing(files[0], option))
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"{option} {str(files[0])!r} is not a readable Parquet file: "
                                f"{' '.join(str(exc).split())}") from None
    return "time" in schema.names and pa.types.is_timestamp(schema.field("time").type)


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


def read_readings_timed(spec, option: str = "--data", slot_seconds: int | None = None):
    """Readings of any command's ``--data`` — integer slots or ISO 8601 date-times — with their slot length.

    Parameters
    ----------
    spec : str or Path
        A CSV file ``user,time,value`` (integer slots, or date-times: :func:`read_timestamped_csv`) or a Parquet data
        set (:func:`read_readings_parquet`, integer slots, or date-times: :func:`read_timestamped_parquet`).
    option : str
        Option name for messages.
    slot_seconds : int, optional
        The slot length given by the user (``--slot-length``), seconds.

    Returns
    -------
    df : pandas.DataFrame
        Validated readings sorted by user and time (columns user, time in int64 slots, value).
    slot_seconds : int or None
        The slot length: `slot_seconds`, else inferred from the date-times (:func:`read_timestamped_csv`), else
        ``None``.
    origin : str or None
        Slot 0's date-time (ISO 8601, UTC) for date-time stamps, else ``None``.

    Raises
    ------
    InvalidInputError
        What :func:`read_readings`, :func:`read_timestamped_csv` or :func:`read_timestamped_parquet` raises.
    """
    if is_parquet_source(spec):
        if parquet_has_timestamps(spec, option):
            return read_timestamped_parquet(spec, option, slot_seconds)
    elif has_timestamps(spec, option):
        return read_timestamped_csv(spec, option, slot_seconds, sort=True)
    return read_readings(spec, option), slot_seconds, None


def resample_readings(df, factor: int):
    """Each user's mean reading over bins of `factor` consecutive slots (new slot k = old slots k·factor .. k·factor + factor − 1).

    The same as pandas ``resample(...).mean()`` on each user's series with empty bins dropped.  Row
    order: the first appearance of each (user, bin), so a stream in time order stays in time order.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns user, time (int64 slots), value.
    factor : int
        Slots per bin, ≥ 1.

    Returns
    -------
    pandas.DataFrame
        Columns user, time (bins), value (mean, float64).
    """
    if factor == 1:
        return df
    binned = df.assign(time=df["time"] // int(factor))
    return binned.groupby(["user", "time"], sort=False, as_index=False)["value"].mean()
