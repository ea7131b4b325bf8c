"""The privacy ledger: an SQLite record of every scheduled release and the risk it carries.

One ledger belongs to one schedule (A, S̄, ε_C, value range, first slot) and one accounting
model.  It holds

* ``meta`` — key/value pairs: ``schema_version``, ``created_at``, ``package_version``, the
  accounting ``model`` (a :class:`ModelSpec` as JSON, pinned to its data's SHA-256) and
  ``provenance`` (JSON: ``model_reason`` — why this model: the schedule's design, an explicit
  ``--model``, or an ``--override`` with its reason —, the design's data identity and the stream's
  at creation);
* ``schedule`` — the one schedule (its JSON and its id, a SHA-256 prefix of the fields that
  fix the mechanism);
* ``releases`` — one row per scheduled publishing time S_n, numbered n = 1, 2, ... without
  gaps: ``released`` (value, users I, sensitivity Δf, noise scale, ε spent) or ``skipped``
  (no reading at the input time, with the reason; nothing spent), each with ``input_sha256``,
  the digest of the readings it was made from (:func:`~policyopt.deploy.ledger_row.input_digest`), so a
  rerun whose stream rewrites the history is told apart.

The ledger is an operator's and auditor's record, not a public release: besides what
``--out`` publishes it holds each release's count of clipped readings, which is computed
from the raw data without noise.  It never holds the noiseless mean.

Durability
----------
The database runs in WAL mode with ``PRAGMA synchronous = FULL``, and the publisher runs
``PRAGMA wal_checkpoint(TRUNCATE)`` after every commit.  SQLite documents that in WAL mode
with ``synchronous = FULL`` the WAL is synced before each commit returns (a committed
transaction survives a crash or power loss as long as the WAL survives), and that a
checkpoint writes the WAL's committed frames back into the database file, syncing it
(``synchronous`` ≥ NORMAL) before the WAL is reset; TRUNCATE then truncates the WAL to zero
bytes (https://www.sqlite.org/pragma.html#pragma_synchronous, #pragma_wal_checkpoint,
https://www.sqlite.org/wal.html).  So once :meth:`Ledger.append` returns, the release is in
the main file and a lost ``-wal`` or ``-shm`` file loses nothing committed.  A transaction that
was not committed lives only in the WAL and never reaches the main file: a release drawn but
not committed is never shown (the CSV is written after the commit).  In exclusive locking
mode SQLite keeps no ``-shm`` file.

The file carries ``PRAGMA application_id`` = 0x506F4C67
("PoLg") and ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`, so a foreign SQLite file, a
non-SQLite file, a corrupted file and a ledger of a newer policyopt are all told apart and
refused without being modified.  A publisher holds SQLite's exclusive lock
(``locking_mode=EXCLUSIVE``) for the whole run: a second publisher, and readers, get
"database is locked" until it finishes.

Accounting and the modules beside this one
------------------------------------------
This module owns the SQLite store: the schema, opening, locking and checking a ledger, reading and
appending rows, its ``meta`` records.  The risk of the releases actually made (Theorem 3 of Zhang, Wei,
Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (25)), the designed
peak (Proposition 3, eq. (30)) and the guarantee that needs no model
(:func:`~policyopt.deploy.ledger_risk.model_free_of_rows`) are :mod:`policyopt.deploy.ledger_risk`, which
:meth:`Ledger.risk` and :meth:`Ledger.model_free` apply to the rows; the schedule and its JSON
(:class:`~policyopt.deploy.schedule_spec.ScheduleSpec`, read from a
:class:`~policyopt.io.schedule_design.ScheduleDesign`) are :mod:`policyopt.deploy.schedule_spec`; one row (:class:`~policyopt.deploy.ledger_row.LedgerRow`), the digest
of its readings and the checks that make a row whose recorded spending is not what its budget gives a
corrupted ledger are :mod:`policyopt.deploy.ledger_row`.  Every name of ``__all__`` is importable from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path

from policyopt.deploy.ledger_risk import (
    DESIGN_REL_TOL,
    MAX_TRAJECTORY,
    LedgerRisk,
    designed_risks,
    model_free_of_rows,
    recorded_discrepancies,
    risk_of_rows,
    schedule_discrepancies,
)
from policyopt.deploy.ledger_row import (
    EMPTY_INPUT_SHA256,
    SPENT_REL_TOL,
    LedgerRow,
    input_digest,
    row_types_ok,
    spending_ok,
)
from policyopt.deploy.model import ModelSpec
from policyopt.deploy.schedule_spec import (
    MAX_EPSILON_C,
    MAX_VALUE,
    PUBLISHABLE_STATUSES,
    ScheduleSpec,
)
from policyopt.errors import InvalidInputError, PolicyOptError

__all__ = ["SCHEMA_VERSION", "APPLICATION_ID", "ScheduleSpec", "input_digest",
           "EMPTY_INPUT_SHA256", "LedgerRow", "LedgerRisk", "Ledger", "LedgerLockedError", "model_free_of_rows",
           "SPENT_REL_TOL", "designed_risks", "schedule_discrepancies", "recorded_discrepancies", "DESIGN_REL_TOL",
           # constants that moved with their concept, still importable from here
           "MAX_TRAJECTORY", "MAX_VALUE", "PUBLISHABLE_STATUSES"]

#: Version of the ledger's tables; a ledger with a larger version is refused.
SCHEMA_VERSION = 2
#: ``PRAGMA application_id`` of a policyopt ledger ("PoLg").
APPLICATION_ID = 0x506F4C67


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE schedule (id TEXT PRIMARY KEY, json TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE releases (
    n INTEGER PRIMARY KEY CHECK (n >= 1),
    slot INTEGER NOT NULL UNIQUE,
    input_time INTEGER NOT NULL CHECK (input_time <= slot),
    status TEXT NOT NULL CHECK (status IN ('released', 'skipped')),
    users INTEGER NOT NULL CHECK (users >= 0),
    clipped INTEGER NOT NULL CHECK (clipped >= 0),
    epsilon_c REAL NOT NULL CHECK (epsilon_c >= 0),
    epsilon_spent REAL NOT NULL CHECK (epsilon_spent >= 0),
    sensitivity REAL,
    noise_scale REAL,
    value REAL,
    prior_risk REAL,
    risk_at_release REAL,
    reason TEXT,
    input_sha256 TEXT NOT NULL,
    schedule_id TEXT NOT NULL REFERENCES schedule(id),
    package_version TEXT NOT NULL,
    sampler TEXT NOT NULL,
    committed_at TEXT NOT NULL
);
"""


def _readable(conn) -> bool:
    """Whether a fresh connection can read the database header (a WAL file needs its -shm to be readable)."""
    try:
        conn.execute("PRAGMA application_id").fetchone()
        return True
    except sqlite3.Error:
        return False


def _wal_is_empty(path: Path) -> bool:
    wal = Path(str(path) + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


def _rollback(conn) -> None:
    """Roll back an open transaction, if any, without masking the exception being handled.

    A Ctrl-C (KeyboardInterrupt) can arrive before BEGIN or after COMMIT; a plain ``ROLLBACK`` then fails with
    "cannot rollback - no transaction is active" and that error would replace the interrupt (exit 1, not 130).
    """
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # the connection is closed next; SQLite rolls back an unfinished transaction itself
            pass


def _brief(exc) -> str:
    """An SQLite error for a message: without the undecodable text SQLite quotes, at most 200 characters."""
    return str(exc).split(" with text ")[0][:200]


class LedgerLockedError(PolicyOptError):
    """Another process holds the ledger's SQLite lock (a publisher is running)."""


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def package_version() -> str:
    """Installed version of policyopt (``"unknown"`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policyopt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


_COLUMNS = tuple(f.name for f in fields(LedgerRow))



def _classify_open_error(path: Path, exc: Exception, option: str, writer: bool = True) -> PolicyOptError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        what = ("a second publisher is refused — wait for the first to finish" if writer
                else "the ledger can be read when it finishes")
        return LedgerLockedError(
            f"{option} {str(path)!r} is locked by another process (SQLite: {text}): a publisher is running on it; "
            f"{what}"
        )
    if "readonly" in text or "read-only" in text:
        return InvalidInputError(
            f"{option} {str(path)!r} is read-only (SQLite: {text}); "
            + ("publishing writes the ledger: make it writable, or audit it with `policyopt ledger`" if writer
               else "a WAL ledger whose -wal/-shm side files cannot be read or created; copy it somewhere writable to "
                    "audit it")
        )
    if "not a database" in text:
        return InvalidInputError(f"{option} {str(path)!r} is not a policyopt ledger (not an SQLite database: {text}); "
                                 "it was not modified")
    return InvalidInputError(f"{option} {str(path)!r} is corrupted (SQLite: {text}); it was not modified — restore it "
                             "from a backup")




class Ledger:
    """A policyopt privacy ledger (SQLite, WAL mode, schema :data:`SCHEMA_VERSION`).

    Parameters
    ----------
    path : str or Path
        The ledger file.
    writer : bool
        ``False`` (default): open an existing ledger to read (audit); the file must exist.
        ``True``: open or create it for publishing, taking SQLite's exclusive lock until
        :meth:`close`, so that a second publisher is refused.
    timeout : float
        Seconds a reader waits for a running publisher's lock (a writer never waits).
    option : str
        Name of the path in messages (e.g. ``"--ledger"``).

    Raises
    ------
    InvalidInputError
        If a reader's file does not exist; if the file is not SQLite, is SQLite but not a
        policyopt ledger, has a newer schema, fails SQLite's ``quick_check`` or has rows that
        break the ledger's invariants (gaps, slots out of order, a foreign schedule id).
    LedgerLockedError
        If another process holds the lock.

    Notes
    -----
    Creation of the tables happens in :meth:`initialise`, so opening for writing does not
    change an existing file; a failed check leaves the file untouched.
    """

    def __init__(self, path, *, writer: bool = False, timeout: float = 10.0, option: str = "--ledger"):
        self.path = Path(path)
        self.option = option
        self.writer = writer
        if not writer and not self.path.is_file():
            raise InvalidInputError(f"{option} file not found: {str(self.path)!r}")
        if self.path.exists() and not self.path.is_file():
            raise InvalidInputError(f"{option} {str(self.path)!r} is not a file")
        if writer and self.path.exists() and not (os.access(self.path, os.W_OK)
                                                  and os.access(self.path.parent or ".", os.W_OK)):
            raise InvalidInputError(
                f"{option} {str(self.path)!r} is read-only (the file or its directory): publishing writes the ledger "
                "and its WAL side files; make it writable, or audit it with `policyopt ledger`"
            )
        try:
            if writer:
                self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=0)
            else:  # an audit never writes: read-only, so a read-only file or directory can be audited
                from urllib.parse import quote

                uri = f"file:{quote(str(self.path.resolve()))}"
                self._conn = sqlite3.connect(uri + "?mode=ro", uri=True, isolation_level=None, timeout=timeout)
                if not _readable(self._conn) and _wal_is_empty(self.path):
                    # WAL mode in a directory this user cannot write: no -shm can be made, so even a read-only
                    # connection fails; with no pending WAL content the main file is the whole ledger and it is
                    # read as immutable (a running publisher always has a non-empty -wal, so it is never bypassed)
                    self._conn.close()
                    self._conn = sqlite3.connect(uri + "?immutable=1", uri=True, isolation_level=None, timeout=timeout)
        except sqlite3.Error as exc:
            raise _classify_open_error(self.path, exc, option, writer) from None
        try:
            self._check_and_lock()
        except BaseException:
            self._conn.close()
            raise

    # -- opening ---------------------------------------------------------------------------
    def _check_and_lock(self):
        c = self._conn
        try:
            app = c.execute("PRAGMA application_id").fetchone()[0]
            version = c.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            raise _classify_open_error(self.path, exc, self.option, self.writer) from None
        self.is_new = app == 0 and not tables
        if not self.is_new:
            if app != APPLICATION_ID:
                raise InvalidInputError(
                    f"{self.option} {str(self.path)!r} is an SQLite database but not a policyopt ledger "
                    f"(application_id {app:#x}, tables {sorted(tables)}); it was not modified"
                )
            if version < SCHEMA_VERSION:
                raise InvalidInputError(
                    f"{self.option} {str(self.path)!r} has ledger schema {version}, written by an earlier policyopt "
                    f"without the digests of released inputs (schema {SCHEMA_VERSION}); audit it with that version, "
                    "publish into a new ledger"
                )
            if version > SCHEMA_VERSION:
                raise InvalidInputError(
                    f"{self.option} {str(self.path)!r} has ledger schema {version}, newer than this policyopt's "
                    f"{SCHEMA_VERSION}; upgrade policyopt"
                )
        elif not self.writer:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is an empty database, not a policyopt ledger")
        try:
            if self.writer:
                if self.path.stat().st_size > 0 or not self.is_new:
                    mode = c.execute("PRAGMA journal_mode").fetchone()[0]
                    if mode != "wal" and not self.is_new:
                        raise InvalidInputError(f"{self.option} {str(self.path)!r} is not in WAL mode ({mode}); "
                                                "not a ledger written by policyopt")
                c.execute("PRAGMA journal_mode = WAL")
                c.execute("PRAGMA synchronous = FULL")
                c.execute("PRAGMA locking_mode = EXCLUSIVE")
                c.execute("BEGIN EXCLUSIVE")  # takes the lock; kept after COMMIT in exclusive mode
                c.execute("COMMIT")
            if not self.is_new:
                check = c.execute("PRAGMA quick_check").fetchall()
                if [r[0] for r in check] != ["ok"]:
                    raise InvalidInputError(
                        f"{self.option} {str(self.path)!r} is corrupted (SQLite quick_check: {check[0][0]}); "
                        "it was not modified — restore it from a backup"
                    )
                self._check_rows()
        except sqlite3.Error as exc:
            raise _classify_open_error(self.path, exc, self.option, self.writer) from None

    def _check_rows(self):
        c = self._conn
        try:
            sched = c.execute("SELECT id, json FROM schedule").fetchall()
            keys = dict(c.execute("SELECT key, value FROM meta").fetchall())
            stats = c.execute(
                "SELECT count(*), coalesce(min(n), 1), coalesce(max(n), 0) FROM releases"
            ).fetchone()
            disorder = c.execute(
                "SELECT count(*) FROM releases a JOIN releases b ON b.n = a.n + 1 "
                "WHERE b.slot <= a.slot OR b.input_time < a.input_time"
            ).fetchone()[0]
        except sqlite3.Error as exc:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted or not a ledger "
                                    f"(SQLite: {_brief(exc)}); it was not modified") from None
        if len(sched) != 1 or "model" not in keys:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: expected one schedule and a "
                                    f"model, found {len(sched)} schedules")
        if not all(isinstance(v, str) for v in keys.values()):
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: its meta table holds a non-text "
                                    "value; it was not modified — restore it from a backup")
        version = keys.get("schema_version")
        if version != str(SCHEMA_VERSION):
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} records schema_version {version!r} in its meta table, not "
                f"{SCHEMA_VERSION} (a newer policyopt's ledger, or a corrupted one); it was not modified"
            )
        self.schedule_id = sched[0][0]
        try:
            d = json.loads(sched[0][1])
            self.schedule = ScheduleSpec(d["A"], d["S_bar"], d["epsilon_c"], tuple(d["value_range"]), d["origin"],
                                         d.get("source", "ledger"), d.get("designed_peak_risk"), d.get("horizon"),
                                         d.get("designed_horizon_risk"), d.get("horizon_accounting"))
            self.model = ModelSpec.from_json(keys["model"])
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError, InvalidInputError) as exc:
            why = exc if isinstance(exc, InvalidInputError) else f"{type(exc).__name__}: {exc}"
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: its schedule or model record is unreadable "
                f"({str(why)[:200]}); it was not modified — restore it from a backup"
            ) from None
        if self.schedule.origin is None:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: its schedule has no first input "
                                    "slot")
        try:
            self._all_rows = self._read_rows()
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: a release row is unreadable ({type(exc).__name__}: "
                f"{_brief(exc)}); it was not modified — restore it from a backup"
            ) from None
        bad = next((r for r in self._all_rows if not row_types_ok(r)), None)
        if bad is not None:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: release n={bad.n} (status {bad.status!r}) lacks a "
                "value, a budget or a risk, or holds a non-number; it was not modified — restore it from a backup"
            )
        bad = next((r for r in self._all_rows if not spending_ok(r)), None)
        if bad is not None:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: release n={bad.n} (status {bad.status!r}) records ε "
                f"spent = {bad.epsilon_spent!r} nats for ε_C = {bad.epsilon_c!r} (a release spends OpenDP's map of its "
                f"ε_C, at most {MAX_EPSILON_C:g} nats; a skipped one nothing); it was not modified — restore it from a "
                "backup"
            )
        count, first, last = stats
        if count and (first != 1 or last != count):
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: releases numbered {first}..{last} "
                                    f"but {count} rows (a gap)")
        if disorder:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: release slots or input times out "
                                    "of order")
        foreign = c.execute("SELECT count(*) FROM releases WHERE schedule_id != ?", (self.schedule_id,)).fetchone()[0]
        if foreign:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: {foreign} rows carry another "
                                    "schedule id")

    def initialise(self, schedule: ScheduleSpec, model: ModelSpec, provenance: dict | None = None, *,
                   intervals: dict | None = None) -> None:
        """Create the tables of a new ledger and record `schedule`, `model` and why (one transaction).

        `provenance` (JSON-ready) goes into the ``meta`` table as ``provenance``: which model
        was chosen and why (``model_reason``), the design's data and the stream's identity; `intervals` (the
        error bars' record, :func:`policyopt.deploy.error_bars.design_intervals`) as ``intervals``.

        Raises
        ------
        InvalidInputError
            If the ledger already holds a schedule, or was opened read-only.
        """
        if not self.writer or not self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: only a new ledger opened for writing can be "
                                    "initialised")
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    c.execute(stmt)
            c.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            now = now_utc()
            c.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema_version", str(SCHEMA_VERSION)), ("created_at", now),
                ("package_version", package_version()), ("model", model.to_json()),
                ("provenance", json.dumps(provenance or {}, sort_keys=True)),
                *([] if intervals is None else [("intervals", json.dumps(intervals, sort_keys=True))]),
            ])
            c.execute("INSERT INTO schedule VALUES (?, ?, ?)",
                      (schedule.id, json.dumps(schedule.to_dict(), sort_keys=True), now))
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            raise
        self._checkpoint()
        self.is_new = False
        self.schedule, self.schedule_id, self.model = schedule, schedule.id, model

    # -- rows ------------------------------------------------------------------------------
    def _read_rows(self) -> list[LedgerRow]:
        cur = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM releases ORDER BY n")
        return [LedgerRow(*r) for r in cur.fetchall()]

    def rows(self) -> list[LedgerRow]:
        """All rows in release order."""
        if self.is_new:
            return []
        return self._read_rows()

    def last_row(self) -> LedgerRow | None:
        """The last committed row, or ``None``."""
        if self.is_new:
            return None
        r = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM releases ORDER BY n DESC LIMIT 1").fetchone()
        return None if r is None else LedgerRow(*r)

    def last_released(self) -> LedgerRow | None:
        """The last row with status ``released``, or ``None``."""
        if self.is_new:
            return None
        r = self._conn.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM releases WHERE status = 'released' ORDER BY n DESC LIMIT 1"
        ).fetchone()
        return None if r is None else LedgerRow(*r)

    def append(self, row: LedgerRow) -> None:
        """Commit one row in its own transaction (the publisher calls this before writing the CSV).

        Raises
        ------
        InvalidInputError
            If the ledger is not open for writing, or `row` does not continue the ledger
            (number, slot and input time must follow the last row; its schedule id must match).
        """
        self.append_many([row])

    def append_many(self, rows) -> None:
        """Commit consecutive rows in one transaction (the publisher's runs of skipped rows: no noise, one fsync).

        Raises
        ------
        InvalidInputError
            As :meth:`append`, for the first row that does not continue the ledger; nothing is committed then.
        """
        if not self.writer or self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is not open for publishing")
        for row in rows:
            if row.schedule_id != self.schedule_id:
                raise InvalidInputError(f"row for schedule {row.schedule_id} cannot go into the ledger of schedule "
                                        f"{self.schedule_id}")
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            last = c.execute("SELECT n, slot, input_time FROM releases ORDER BY n DESC LIMIT 1").fetchone()
            n, slot, tau = last if last is not None else (0, None, None)
            for row in rows:
                if row.n != n + 1 or (slot is not None and (row.slot <= slot or row.input_time < tau)):
                    raise InvalidInputError(
                        f"row n={row.n} at slot {row.slot} does not continue the ledger (last n={n}, slot {slot}, "
                        f"input {tau})"
                    )
                n, slot, tau = row.n, row.slot, row.input_time
            c.executemany(f"INSERT INTO releases ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                          [tuple(getattr(row, k) for k in _COLUMNS) for row in rows])
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            raise
        self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the committed WAL frames into the database file, fsync it and truncate the WAL.

        ``PRAGMA wal_checkpoint(TRUNCATE)`` runs the checkpoint to completion (no reader can hold
        it back: the publisher has the exclusive lock) and, with ``synchronous = FULL``, syncs the
        database file before truncating the WAL to zero bytes.  After it returns, the release is
        in the main file: losing the ``-wal`` file later loses nothing committed.

        Raises
        ------
        PolicyOptError
            If SQLite reports the checkpoint as blocked (it then kept the WAL).
        """
        busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:  # pragma: no cover - the exclusive lock rules it out
            raise PolicyOptError(f"{self.option} {str(self.path)!r}: SQLite could not checkpoint the WAL (busy)")

    # -- accounting ------------------------------------------------------------------------
    def risk(self, population, at: int | None = None) -> LedgerRisk:
        """ε(t) of Theorem 3 (eq. 25) for the releases made, the AoI (24) and the design (30):
        :func:`~policyopt.deploy.ledger_risk.risk_of_rows` of this ledger's schedule and rows.

        Parameters
        ----------
        population : policyopt.models.markov.Population or MarkovChain
            The model of Δ(t) (eq. 12), e.g. ``ledger.model.load()``.
        at : int, optional
            Last slot of the trajectory (absolute); releases after it are left out.  Default:
            the slot of the last row.

        Returns
        -------
        LedgerRisk

        Raises
        ------
        InvalidInputError
            If `at` is before the schedule's first input slot or the ledger has no schedule.

        Notes
        -----
        How each release enters (its own publishing time, aging and ``epsilon_spent``) and how the risks are
        rounded outward: :func:`~policyopt.deploy.ledger_risk.risk_of_rows`.
        """
        if self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} holds no schedule yet")
        return risk_of_rows(self.schedule, self.rows(), population, at)

    def model_free(self, *, delta: float, windows=(), at: int | None = None):
        """The model-free guarantee of the releases made up to slot `at` (all by default):
        :func:`~policyopt.deploy.ledger_risk.model_free_of_rows` of this ledger's rows (``None`` before the first
        release).

        Raises
        ------
        InvalidInputError
            If the ledger holds no schedule yet, or as :func:`~policyopt.deploy.ledger_risk.model_free_of_rows`.
        """
        if self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} holds no schedule yet")
        return model_free_of_rows(self.rows(), delta=delta, windows=windows, at=at)

    def meta(self) -> dict:
        """The ``meta`` table as a dict."""
        return {} if self.is_new else dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def _meta_list(self, key: str, what: str) -> list:
        """The JSON list of objects in the ``meta`` record `key` (``[]`` when absent), or :class:`InvalidInputError`
        naming `what` when it is not one (an edited ledger)."""
        text = self.meta().get(key)
        if text is None:
            return []
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = None
        if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: its `{key}` record is not a list of {what} "
                                    f"({text[:80]!r}); the ledger was edited")
        return items

    def _append_meta_list(self, key: str, what: str, item: dict) -> None:
        """Append `item` (with the time it was recorded) to the ``meta`` list `key` in one transaction."""
        if not self.writer or self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: a {what} is recorded in an initialised ledger "
                                    "opened for writing")
        items = self._meta_list(key, what + "s") + [{**item, "recorded_at": now_utc()}]
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(items, sort_keys=True)))
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            raise

    def trials(self) -> list:
        """The runs declared trials (:meth:`record_trial`), oldest first; ``[]`` when none (or a ledger before them).

        Raises
        ------
        InvalidInputError
            If the ``trials`` record is not a JSON list of objects (an edited ledger).
        """
        return self._meta_list("trials", "trials")

    def record_trial(self, trial: dict) -> None:
        """Append a trial run to the ``meta`` record ``trials`` (one transaction), with the time it was recorded.

        Parameters
        ----------
        trial : dict
            JSON-ready: ``reason`` (``publish --trial``), ``first_release`` (the run's first release over fewer than
            :data:`policyopt.deploy.publisher.TRIAL_FRACTION` of the design's users), ``fewest_users``,
            ``design_users``.

        Raises
        ------
        InvalidInputError
            If the ledger is new or opened read-only.
        """
        self._append_meta_list("trials", "trial", trial)

    def stream_checks(self) -> list:
        """The checks of the design's model on a production stream's own readings, oldest first
        (:func:`policyopt.studies.stream_check.stream_model_check` records, each with ``recorded_at``); ``[]`` when
        none ran (the stream is the design's data, or a ledger before them).

        Raises
        ------
        InvalidInputError
            If the ``stream_checks`` record is not a JSON list of objects with a ``verdict`` and an integer
            ``through`` (an edited ledger).
        """
        checks = self._meta_list("stream_checks", "stream checks")
        for c in checks:
            if c.get("verdict") not in ("passed", "refuted", "unchecked") or isinstance(c.get("through"), bool) \
                    or not isinstance(c.get("through"), int) or not all(isinstance(c.get(k), str)
                                                                        for k in ("model", "why", "source")):
                raise InvalidInputError(f"{self.option} {str(self.path)!r}: a `stream_checks` record is not a check "
                                        f"({json.dumps(c)[:80]!r}); the ledger was edited")
        return checks

    def record_stream_check(self, check: dict) -> None:
        """Append a stream check (JSON-ready, from :func:`policyopt.studies.stream_check.stream_model_check`) to the
        ``meta`` record ``stream_checks`` (one transaction), with the time it was recorded.

        Raises
        ------
        InvalidInputError
            If the ledger is new or opened read-only.
        """
        self._append_meta_list("stream_checks", "stream check", check)

    def close(self) -> None:
        """Release the lock and close the connection (WAL is checkpointed by SQLite)."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
