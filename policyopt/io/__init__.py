"""Reading user files: long CSV readings, Parquet data sets, transition-matrix and budget files.

Every failure raises :class:`~policyopt.errors.InvalidInputError` with the file name and,
for CSV, the line number (the header is line 1).  The file checks are :mod:`policyopt.io.files`, the Parquet readers
:mod:`policyopt.io.parquet`, slot lengths and date-times :mod:`policyopt.io.time_stamps`, a ``policyopt schedule
--json`` object read once :mod:`policyopt.io.schedule_design`; every name of ``__all__`` is importable from here.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.io.files import MAX_FILE_BYTES, existing_file, file_prefix_sha256, read_text
from policyopt.io.parquet import (
    check_parquet_schema,
    is_parquet_source,
    parquet_files,
    parquet_has_timestamps,
    read_parquet_partition,
    read_readings_parquet,
)
from policyopt.io.time_stamps import (
    format_duration,
    has_timestamps,
    parse_duration,
    read_timestamped_csv,
    read_timestamped_parquet,
)
from policyopt.io.schedule_design import PUBLISHABLE_STATUSES, ScheduleDesign
from policyopt.models.markov import MarkovChain

__all__ = [
    "ScheduleDesign",
    "PUBLISHABLE_STATUSES",
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

    from policyopt.models.estimation import validate_readings

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
    p = existing_file(path, option)
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
    from policyopt.models.markov import two_state_chain

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

def read_readings(spec, option: str = "--data"):
    """Readings from CSV (:func:`read_readings_csv`) or Parquet (:func:`read_readings_parquet`, see :func:`is_parquet_source`)."""
    if is_parquet_source(spec):
        return read_readings_parquet(spec, option)
    return read_readings_csv(spec, option)


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
        from policyopt.data import CITYLEARN_PATH

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
    p = existing_file(spec, option)
    return {"source": os.path.abspath(str(p)), "format": "csv", "sha256": file_prefix_sha256(p),
            "bytes": p.stat().st_size, "files": 1}


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
