"""The files of a sweep: the CSV and JSON-lines pair, its metadata file and its lock (what ``policyopt sweep --out``
writes, resumes and refuses).

The file layout and its guarantees (one writer per output, no resume across changed inputs, unique temporary files)
are described in :mod:`policyopt.studies.sweep`; this module owns the columns, the cell format (``repr`` of a float:
an exact round trip), the parsers and the writer.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import math
import os
from pathlib import Path
from typing import Sequence

from policyopt.errors import InvalidInputError, fmt
from policyopt.io.files import atomic_write
from policyopt.studies.sweep_meta import meta_mismatch

__all__ = ["COLUMNS", "INPUT_COLUMNS", "MODEL_INPUTS", "GUARANTEE_COLUMNS", "RESULT_COLUMNS", "NONDETERMINISTIC",
           "SweepStore", "SweepLockedError", "SweepInputsChangedError", "read_sweep_csv", "jsonl_path", "lock_path",
           "meta_path", "exclusive_lock", "cell_text", "point_key"]

#: Columns that identify a point (its inputs); a row of an existing file is reused when these match.
INPUT_COLUMNS = (
    "max_penalty", "p", "q", "users", "pilot_users", "states", "smoothing", "value_range_lo", "value_range_hi", "source",
    "max_tv_source", "horizon", "max_age", "max_interval", "releases", "method", "relax",
)
#: The input columns a :class:`SweepModel` supplies (its ``inputs``); the others come from f̄ and the settings.
MODEL_INPUTS = ("p", "q", "users", "pilot_users", "states", "smoothing", "value_range_lo", "value_range_hi", "source",
                "max_tv_source", "horizon")
#: The guarantee columns (issue 32): what the row states first, and the model-free guarantee every row has.
GUARANTEE_COLUMNS = (
    "guarantee_kind", "guarantee_epsilon", "guarantee_delta", "model_free_epsilon", "model_free_epsilon_pure",
    "model_free_delta", "model_free_releases", "model_free_horizon", "markov_model", "model_verdict",
)
#: Result columns, in file order.
RESULT_COLUMNS = (
    "status", "A", "S_bar", "epsilon_c", "peak_risk", *GUARANTEE_COLUMNS, "penalty", "peak_aoi", "min_penalty", "bound",
    "termination", "backend",
    "risk_kind", "horizon_status", "horizon_accounting", "horizon_A", "horizon_S_bar", "horizon_epsilon_c",
    "horizon_risk", "horizon_releases",
    "no_aging_status", "no_aging_S_bar", "no_aging_epsilon_c", "no_aging_peak_risk", "no_aging_penalty",
    "noise_only_epsilon_c", "noise_only_risk_after_releases",
    "c", "rho", "penalty_unit", "message", "wall_time_s", "no_tradeoff",
)
#: Every CSV column, in file order (``point`` is the index on the sweep grid).
COLUMNS = ("point",) + INPUT_COLUMNS + RESULT_COLUMNS
_TEXT = {"source", "max_tv_source", "method", "status", "termination", "backend", "risk_kind", "horizon_status",
         "no_aging_status", "penalty_unit", "message", "guarantee_kind", "markov_model", "model_verdict",
         "horizon_accounting"}
_BOOL = {"relax", "no_tradeoff"}
#: Columns that vary between otherwise identical runs (timing only).
NONDETERMINISTIC = ("wall_time_s",)


def cell_text(value) -> str:
    """CSV text of a value: '' for None, true/false, repr for floats (exact round trip)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, int):
        return str(value)
    return " ".join(str(value).split())  # one physical line per row


def _parsecell_text(column: str, text: str):
    """Typed value of a CSV cell (inverse of :func:`cell_text`)."""
    if text == "":
        return None
    if column in _TEXT:
        return text
    if column in _BOOL:
        if text not in ("true", "false"):
            raise ValueError(f"column {column!r}: expected true/false, got {text!r}")
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return float(text)


def jsonl_path(csv_path) -> Path:
    """The JSON-lines companion of a sweep CSV: ``FILE.jsonl`` next to ``FILE.csv``.

    Raises
    ------
    InvalidInputError
        If `csv_path` does not end in ``.csv``.
    """
    path = Path(csv_path)
    if path.suffix.lower() != ".csv":
        raise InvalidInputError(f"--out must name a .csv file (the JSON lines go next to it), got {fmt(str(csv_path))}")
    return path.with_suffix(".jsonl")


def lock_path(csv_path) -> Path:
    """The lock file of a sweep output: ``FILE.csv.lock`` next to ``FILE.csv``, present while a sweep writes it."""
    path = Path(csv_path)
    return path.with_name(path.name + ".lock")


def meta_path(csv_path) -> Path:
    """The metadata file of a sweep output: ``FILE.meta.json`` next to ``FILE.csv``."""
    return jsonl_path(csv_path).with_suffix(".meta.json")


class SweepLockedError(InvalidInputError):
    """Another process holds the lock of the sweep output (and ``wait`` was not requested)."""


class SweepInputsChangedError(InvalidInputError):
    """The existing sweep output was computed from other input files, another Δ(t) source or policyopt version."""


@contextlib.contextmanager
def exclusive_lock(csv_path: Path, *, wait: bool):
    """Hold ``fcntl.flock(LOCK_EX)`` on ``FILE.csv.lock`` for the block; refuse at once unless `wait`.

    The lock file is removed on the way out, while the lock is still held.  A process that opened the file before it
    was removed and then gets the lock holds a lock on an unlinked file, so after locking it checks that the path still
    names the file it locked (same device and inode) and starts over if not: at any time at most one process holds
    the lock on the file the path names.
    """
    path = lock_path(csv_path)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise SweepLockedError(
                f"--out {fmt(str(csv_path))} is being written by another policyopt sweep (lock {path} is held); "
                "add --wait to wait for it, or give another --out"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        held = os.fstat(fd)
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the previous holder removed the file we locked: lock the one the path names now
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)  # closing the descriptor releases the lock


def point_key(inputs: dict) -> tuple:
    """The identity of a point: its input columns as CSV text (a row of an existing file is reused when it matches)."""
    return tuple(cell_text(inputs.get(c)) for c in INPUT_COLUMNS)


def read_sweep_csv(path) -> list:
    """Rows of a sweep CSV as typed dicts (columns :data:`COLUMNS`).

    A last line without its newline (left by a sweep killed while writing) is ignored.

    Raises
    ------
    InvalidInputError
        If the file's header is not a sweep header or a row is malformed (the message gives the line).
    OSError
        If the file cannot be read.
    """
    text = _complete_lines(Path(path).read_bytes(), Path(path))
    return [row for _, row in _parse_csv(text, Path(path))]


def _complete_lines(data: bytes, path: Path | None = None) -> str:
    """Text up to and including the last newline (drops a partially written last line).

    Raises
    ------
    InvalidInputError
        If those bytes are not UTF-8 (the file is not a sweep output of policyopt).
    """
    end = data.rfind(b"\n")
    try:
        return data[: end + 1].decode("utf-8") if end >= 0 else ""
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"--out: the existing {fmt(str(path))} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}), "
            "so it is not a policyopt sweep file; give another --out or delete the file"
        ) from None


def _parse_csv(text: str, path: Path) -> list:
    lines = text.splitlines()
    if not lines:
        return []
    header = next(csv.reader([lines[0]]))
    if tuple(header) != COLUMNS and header[:2] == ["point", "max_penalty"] and "guarantee_kind" not in header:
        raise InvalidInputError(
            f"--out {fmt(str(path))} was written by an older policyopt sweep: its header has no guarantee columns "
            f"({', '.join(GUARANTEE_COLUMNS[:3])}, …), so its rows state ε* without the model check and the model-free "
            "guarantee every row now has; it cannot be resumed: delete it (and its .jsonl and .meta.json) or give "
            "another --out"
        )
    if tuple(header) != COLUMNS:
        raise InvalidInputError(
            f"--out {fmt(str(path))} exists but is not a policyopt sweep file of this version "
            f"(header {fmt(','.join(header))}); give another --out or delete the file"
        )
    out = []
    for lineno, fields in enumerate(csv.reader(lines[1:]), start=2):
        if len(fields) != len(COLUMNS):
            raise InvalidInputError(f"{path}, line {lineno}: expected {len(COLUMNS)} fields, got {len(fields)}")
        try:
            row = {c: _parsecell_text(c, v) for c, v in zip(COLUMNS, fields)}
        except ValueError as exc:
            raise InvalidInputError(f"{path}, line {lineno}: {exc}") from None
        out.append((lineno, row))
    return out


def _parse_jsonl(text: str, path: Path) -> list:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}, line {lineno}: not JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("inputs"), dict) or "report" not in rec:
            raise InvalidInputError(f"{path}, line {lineno}: not a policyopt sweep record (needs `inputs` and `report`)")
        out.append(rec)
    return out


def _csv_line(row: dict) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([cell_text(row.get(c)) for c in COLUMNS])
    return buf.getvalue()


def _json_line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


def _header() -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(COLUMNS)
    return buf.getvalue()


class SweepStore:
    """The CSV + JSONL pair: load (resume), atomic rewrite, append with a flush per point."""

    def __init__(self, csv_path: Path):
        self.csv_path = Path(csv_path)
        self.jsonl_path = jsonl_path(csv_path)
        if not self.csv_path.parent.is_dir():
            raise InvalidInputError(f"--out {fmt(str(csv_path))}: directory {fmt(str(self.csv_path.parent))} does not exist")
        self.meta_path = meta_path(csv_path)
        self._csv = self._jsonl = None

    def check_meta(self, meta: dict, has_rows: bool) -> None:
        """Refuse to resume rows computed from other inputs; record `meta` (atomically) otherwise."""
        if self.meta_path.exists():
            try:
                old = json.loads(self.meta_path.read_bytes().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                old = None
            if not isinstance(old, dict):
                raise SweepInputsChangedError(
                    f"{self.meta_path} is not a policyopt sweep metadata file; delete the sweep files or give another --out"
                )
            why = meta_mismatch(old, meta) if has_rows else None
            if why is not None:
                raise SweepInputsChangedError(
                    f"cannot resume --out {self.csv_path}: {why}; delete {self.csv_path.name}, "
                    f"{self.jsonl_path.name} and {self.meta_path.name} or give another --out"
                )
        elif has_rows:
            raise SweepInputsChangedError(
                f"cannot resume --out {self.csv_path}: it has rows but no {self.meta_path.name} recording the inputs "
                "they were computed from (written by an older policyopt?); give another --out or delete the files"
            )
        atomic_write(self.meta_path, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")

    def load(self) -> dict:
        """key → (row, record) for points present in both files, in CSV order (first copy wins)."""
        rows = []
        if self.csv_path.exists():
            rows = [r for _, r in _parse_csv(_complete_lines(self.csv_path.read_bytes(), self.csv_path), self.csv_path)]
        records = {}
        if self.jsonl_path.exists():
            for rec in _parse_jsonl(_complete_lines(self.jsonl_path.read_bytes(), self.jsonl_path), self.jsonl_path):
                records.setdefault(point_key(rec["inputs"]), rec)
        done: dict = {}
        for row in rows:
            key = point_key(row)
            if key in records and key not in done:
                done[key] = (row, records[key])
        return done

    def rewrite(self, entries: Sequence) -> None:
        """Replace both files atomically by `entries` ((row, record) pairs, in order)."""
        for path, text in (
            (self.jsonl_path, "".join(_json_line(rec) for _, rec in entries)),
            (self.csv_path, _header() + "".join(_csv_line(row) for row, _ in entries)),
        ):
            atomic_write(path, text)

    def __enter__(self):
        self._jsonl = open(self.jsonl_path, "a", encoding="utf-8")
        self._csv = open(self.csv_path, "a", encoding="utf-8")
        return self

    def append(self, row: dict, record: dict) -> None:
        """Append one point: the JSON record first, then the CSV row; each flushed at once."""
        self._jsonl.write(_json_line(record))
        self._jsonl.flush()
        self._csv.write(_csv_line(row))
        self._csv.flush()

    def __exit__(self, *exc):
        for f in (self._jsonl, self._csv):
            if f is not None:
                f.close()
        return False
