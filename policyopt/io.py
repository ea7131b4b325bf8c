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

__all__ = ["read_readings_csv", "read_matrix", "parse_matrix_arg", "read_budgets", "read_text", "MAX_FILE_BYTES"]

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


def read_readings_csv(path, option: str = "--data"):
    """Read a long CSV with header ``user,time,value`` (one reading per row).

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.

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
    return validate_readings(df, source=f"{option} {fmt(str(p))}")


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
