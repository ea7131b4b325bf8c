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
  the digest of the readings it was made from (:func:`input_digest`), so a rerun whose stream
  rewrites the history is told apart.

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

Accounting
----------
The risk of the releases actually made is Theorem 3 of Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (25), evaluated by
:func:`policyopt.privacy.age_dependent.compose` with each release's own publishing time S_n, aging
A_n = S_n − (input time) and budget (OpenDP's privacy map of the measurement actually used,
which is ≥ the nominal ε_C).  Skipped releases are not releases: they change the trajectory
only by their absence.  Where the paper writes ε(S_n − A_n) for the leakage about the n-th
input, the code uses the leakage of queries 1..n−1 about X_{S_n − A_n} (the previous epoch's
formula at S_n − A_n), which is what the proof (Appendix E, (63b)) bounds and which differs
from the trajectory value at time S_n − A_n when A_n exceeds the inter-publish time.  The
designed peak is Proposition 3, eq. (30), under condition (31).

Theorem 3 assumes the readings are a Markov chain with the model's Δ(t).  The guarantee that needs no
model is :func:`model_free_of_rows`: each release is a Laplace mechanism of its ``epsilon_spent`` on the
readings of its input slot, so the releases made compose for each user's whole series — pure Σ ε by basic
composition (Dwork & Roth 2014, Theorem 3.16), (ε, δ) by ``dp_accounting``'s PLD accountant
(:func:`policyopt.privacy.model_free.model_free_of_releases`), w-event over windows of input slots.  A row
whose recorded spending is not what its budget gives (a released row's ``epsilon_spent`` outside
[ε_C, ε_C·(1 + :data:`SPENT_REL_TOL`)], ε_C above :data:`MAX_EPSILON_C`, or a skipped row that spends
anything) makes the ledger corrupted: both accountings read ``epsilon_spent``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from policyopt.deploy.model import ModelSpec, int_param, is_number
from policyopt.errors import InvalidInputError, PolicyOptError, fmt
from policyopt.formatting import fmt_count

__all__ = ["SCHEMA_VERSION", "APPLICATION_ID", "ScheduleSpec", "read_schedule_json", "input_digest", "EMPTY_INPUT_SHA256",
           "LedgerRow", "LedgerRisk", "Ledger", "LedgerLockedError", "model_free_of_rows", "SPENT_REL_TOL",
           "designed_risks", "schedule_discrepancies", "recorded_discrepancies", "DESIGN_REL_TOL"]

#: Version of the ledger's tables; a ledger with a larger version is refused.
SCHEMA_VERSION = 2
#: ``PRAGMA application_id`` of a policyopt ledger ("PoLg").
APPLICATION_ID = 0x506F4C67
#: Largest per-release budget ε_C (nats): beyond it e^{ε_C} overflows a float and the Laplace noise is below the
#: resolution of any released value, i.e. no privacy at all.
MAX_EPSILON_C = 700.0
#: Largest |LO|, |HI| of the value range: OpenDP's float-safe sensitivity bound must stay finite.
MAX_VALUE = 1e300
#: Most slots of an audited trajectory (``ledger --at``): ε(t) and AoI(t) are held per slot.
MAX_TRAJECTORY = 10**7
#: Largest relative excess of a release's recorded ``epsilon_spent`` over its ``epsilon_c``: OpenDP's privacy map of the
#: Laplace measurement is ε_C raised by its outward rounding (measured ≤ 2.3e-16 relative); a row beyond this (or below
#: ε_C) does not record what its budget spends, and the ledger is refused as corrupted.
SPENT_REL_TOL = 1e-9
#: Statuses of a schedule JSON that carry a schedule one may publish.
PUBLISHABLE_STATUSES = ("optimal", "feasible", "unbounded")

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


def _row_ok(r) -> bool:
    """A row's types as the ledger writes them: a released row carries a value, a budget and its risks."""
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (r.n, r.slot, r.input_time, r.users, r.clipped))
    texts = all(isinstance(v, str) for v in (r.status, r.schedule_id, r.package_version, r.sampler, r.committed_at))
    if not (ints and texts and (r.reason is None or isinstance(r.reason, str))):
        return False
    if not (is_number(r.epsilon_c) and is_number(r.epsilon_spent)):
        return False
    optional = all(is_number(v, optional=True) for v in (r.sensitivity, r.noise_scale, r.prior_risk, r.risk_at_release))
    return optional and is_number(r.value, optional=r.status != "released")


def _spending_ok(r) -> bool:
    """Whether a row's recorded spending is what its budget gives: a skipped row spends nothing (ε_C = spent = 0); a
    released row's ``epsilon_spent`` is OpenDP's privacy map of its Laplace measurement, ε_C ≤ spent ≤
    ε_C·(1 + :data:`SPENT_REL_TOL`), with ε_C ≤ :data:`MAX_EPSILON_C` (the publisher's limit)."""
    if r.status != "released":
        return r.epsilon_c == 0.0 and r.epsilon_spent == 0.0
    return 0.0 <= r.epsilon_c <= MAX_EPSILON_C and r.epsilon_c <= r.epsilon_spent <= r.epsilon_c * (1.0 + SPENT_REL_TOL)


def model_free_of_rows(rows, *, delta: float, windows=(), at: int | None = None):
    """The model-free guarantee of the releases a ledger records (:func:`policyopt.privacy.model_free.model_free_of_releases`).

    Every released row is a Laplace mechanism on the readings of its input slot (``input_time`` = S_n − A_n), whose
    privacy loss for one user's whole series is its ``epsilon_spent`` (OpenDP's privacy map of the measurement
    actually used, ≥ the nominal ε_C); whatever the correlation between a user's readings, the releases made compose:
    pure Σ ε by basic composition (Dwork & Roth 2014, Theorem 3.16; Zhang et al. 2024, Proposition 2), (ε, δ) by
    ``dp_accounting``'s PLD accountant, and w-event privacy (Kellaris et al., PVLDB 2014) over the releases whose input
    slots lie in any w consecutive slots.  Skipped rows spend nothing and are left out.

    Parameters
    ----------
    rows : sequence of LedgerRow
        The ledger's rows (any order; e.g. :meth:`Ledger.rows`).
    delta : float
        0 ≤ δ < 1 of (ε, δ)-DP.
    windows : sequence of int
        w-event windows w ≥ 1 (slots), e.g. a day and a week of slots.
    at : int, optional
        Only releases published at slots ≤ `at` (default: all).

    Returns
    -------
    policyopt.privacy.model_free.ModelFreeGuarantee or None
        ``None`` when no release has been made (nothing was spent: ε = 0).  ``horizon`` is the span of the input
        slots (slots), ``epsilon_c`` the largest per-release budget (nats).

    Raises
    ------
    InvalidInputError
        If `delta` is not in [0, 1) or a window is not an integer ≥ 1.
    """
    from policyopt.privacy.model_free import check_delta, check_windows, model_free_of_releases

    delta, windows = check_delta(delta), check_windows(windows)
    made = [r for r in rows if r.status == "released" and (at is None or r.slot <= at)]
    if not made:
        return None
    spent = np.array([float(r.epsilon_spent) for r in made], dtype=float)
    inputs = np.array([int(r.input_time) for r in made], dtype=np.int64)
    return model_free_of_releases(spent, inputs, delta=delta, windows=windows)


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


@dataclass(frozen=True)
class ScheduleSpec:
    """The schedule a publisher runs: equal spacing S̄, constant aging A and budget ε_C.

    Publishing times are S_n = origin + A + (n − 1)·S̄ (slots, n = 1, 2, ...); the n-th release
    uses the readings of slot S_n − A = origin + (n − 1)·S̄ (Zhang et al. 2024, IEEE Trans. Inf.
    Theory, 2024, the equal-spacing policy of Proposition 3).

    Attributes
    ----------
    A : int
        Aging, slots (≥ 0).
    S_bar : int
        Inter-publish time, slots (≥ 1).
    epsilon_c : float
        Nominal per-release budget ε_C > 0, nats.
    value_range : tuple of float
        Public range (LO, HI) of one reading; readings are clipped to it and Δf = (HI − LO)/I.
    origin : int or None
        First input slot; ``None`` until the publisher fixes it to the stream's first slot
        when it creates the ledger.
    source : str
        Where the schedule came from (file or options); not part of :attr:`id`.
    designed_peak_risk : float or None
        ε* printed by ``policyopt schedule`` (nats), for the record; ``None`` when given directly.
    horizon : int or None
        The deployment horizon H (slots) of a horizon design (``schedule --max-tv empirical`` when no
        schedule has a finite ε*: ``horizon_design``): releases at S_n ≤ origin + H.  Not part of :attr:`id`.
    designed_horizon_risk : float or None
        The largest risk over H the schedule printed (``horizon_design.horizon_risk``, nats), for the record.
    horizon_accounting : str or None
        How the horizon design bounds the risk over H (``horizon_design.accounting``): ``"theorem-3"`` (the largest
        age-dependent risk under the model, Zhang et al. 2024, Theorem 3) or ``"model-free"`` (the pure ε of the
        ⌈H/S̄⌉ planned releases by basic composition, whatever the correlation); ``None`` without a horizon.  Not part
        of :attr:`id`.

    Raises
    ------
    InvalidInputError
        If A or S̄ is not an integer in range, ε_C is not finite and > 0, or the range is not
        two finite numbers LO < HI.
    """

    A: int
    S_bar: int
    epsilon_c: float
    value_range: tuple
    origin: int | None = None
    source: str = "options"
    designed_peak_risk: float | None = None
    horizon: int | None = None
    designed_horizon_risk: float | None = None
    horizon_accounting: str | None = None

    def __post_init__(self):
        from policyopt.errors import check_positive

        if self.horizon is not None:
            object.__setattr__(self, "horizon", int_param(self.horizon, "horizon", 1))
            acc = "theorem-3" if self.horizon_accounting is None else self.horizon_accounting
            if acc not in ("theorem-3", "model-free"):
                raise InvalidInputError(f"`horizon_accounting` must be 'theorem-3' or 'model-free', got {fmt(acc)}")
            object.__setattr__(self, "horizon_accounting", acc)
        elif self.horizon_accounting is not None:
            raise InvalidInputError(f"`horizon_accounting` = {fmt(self.horizon_accounting)} needs a `horizon`")

        object.__setattr__(self, "A", int_param(self.A, "A", 0))
        object.__setattr__(self, "S_bar", int_param(self.S_bar, "S_bar", 1))
        object.__setattr__(self, "epsilon_c", check_positive(self.epsilon_c, "epsilon_c", "nats"))
        if self.epsilon_c > MAX_EPSILON_C:
            raise InvalidInputError(
                f"`epsilon_c` must be ≤ {MAX_EPSILON_C:g} nats, got {fmt(self.epsilon_c)}: beyond it e^ε_C overflows and "
                "the Laplace noise is below the resolution of the released value (no privacy)"
            )
        if self.origin is not None:
            if isinstance(self.origin, bool) or not isinstance(self.origin, (int, np.integer)):
                raise InvalidInputError(f"`origin` must be an integer slot, got {fmt(self.origin)}")
            object.__setattr__(self, "origin", int_param(self.origin, "origin", 0))
        try:
            lo, hi = (float(v) for v in self.value_range)
        except (TypeError, ValueError):
            raise InvalidInputError(f"`value_range` must be two numbers (LO, HI), got {fmt(self.value_range)}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidInputError(f"`value_range` must be finite with LO < HI, got {fmt(self.value_range)}")
        if max(abs(lo), abs(hi)) > MAX_VALUE:
            raise InvalidInputError(
                f"`value_range` must lie within ±{MAX_VALUE:g} (the mean's sensitivity must stay finite), got {fmt(self.value_range)}"
            )
        object.__setattr__(self, "value_range", (lo, hi))
        if not (hi - lo) / self.epsilon_c * 4.0 < MAX_VALUE:
            raise InvalidInputError(
                f"`epsilon_c` = {self.epsilon_c!r} nats is too small for the value range {lo!r}:{hi!r}: the Laplace scale "
                f"(HI − LO)/(I·ε_C) would exceed {MAX_VALUE:g} (a release of pure noise)"
            )

    @property
    def id(self) -> str:
        """SHA-256 prefix (16 hex digits) of A, S̄, ε_C, the value range and the origin."""
        if self.origin is None:
            raise InvalidInputError("the schedule's first input slot (`origin`) is not fixed yet")
        key = {"A": self.A, "S_bar": self.S_bar, "epsilon_c": repr(self.epsilon_c),
               "value_range": [repr(v) for v in self.value_range], "origin": self.origin}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def publish_time(self, n: int) -> int:
        """S_n (slots) of the n-th release, n ≥ 1."""
        return self.origin + self.A + (n - 1) * self.S_bar

    def to_dict(self) -> dict:
        """The schedule as a JSON-ready dict (value range as a list)."""
        d = asdict(self)
        d["value_range"] = list(self.value_range)
        return d

    def describe(self) -> str:
        """One line for people: the schedule's or model's parameters."""
        lo, hi = self.value_range
        return (f"A = {fmt_count(self.A, 'slot')}, S̄ = {fmt_count(self.S_bar, 'slot')}, ε_C = {self.epsilon_c!r} nats, "
                f"value range {lo!r}:{hi!r}, first input slot {self.origin}")

    @classmethod
    def from_json_file(cls, path, *, value_range=None, origin: int | None = None, option: str = "--schedule") -> "ScheduleSpec":
        """Read the JSON printed by ``policyopt schedule --json``.

        Parameters
        ----------
        path : str or Path
        value_range : tuple of float, optional
            The public range readings are clipped to.  Default: the schedule's declared
            ``deployment.value_range``.
        origin : int, optional
            First input slot (default: fixed by the publisher from the stream).
        option : str
            Name shown in messages.

        Raises
        ------
        InvalidInputError
            Whatever :func:`read_schedule_json` raises, and no `value_range` when the schedule
            declares none (its design used the data's own range, which is not public).
        """
        data = read_schedule_json(path, option)
        if value_range is None:
            declared = (data.get("deployment") or {}).get("value_range")
            if declared is None:
                raise InvalidInputError(
                    f"{option} {str(path)!r} declares no public value range (it was designed on the data's own range, "
                    "which is not private): give --value-range LO:HI"
                )
            value_range = tuple(declared)
        peak = data.get("peak_risk")
        hd = _horizon_design(data)
        horizon = None if hd is None else hd["horizon"]
        risk = None if hd is None else hd.get("horizon_risk")
        return cls(int(data["A"]), int(data["S_bar"]), data["epsilon_c"], value_range, origin,
                   source=f"{option} {str(path)!r}", designed_peak_risk=peak if is_number(peak) else None,
                   horizon=horizon, designed_horizon_risk=risk if is_number(risk) else None,
                   horizon_accounting=None if hd is None else ("model-free" if hd.get("accounting") == "model-free"
                                                               else "theorem-3"))


def _horizon_design(data: dict) -> dict | None:
    """The schedule JSON's ``horizon_design`` when it is the schedule (no finite ε*, the design over H slots)."""
    hd = data.get("horizon_design")
    if data.get("status") not in PUBLISHABLE_STATUSES and isinstance(hd, dict) and hd.get("status") == "optimal":
        return hd
    return None


def read_schedule_json(path, option: str = "--schedule") -> dict:
    """The JSON object printed by ``policyopt schedule --json``, checked to hold a publishable schedule.

    Parameters
    ----------
    path : str or Path
    option : str
        Name shown in messages.

    Returns
    -------
    dict
        The parsed object (with ``deployment`` when written by this policyopt).

    Raises
    ------
    InvalidInputError
        Missing file, not JSON, no ``status``/``A``/``S_bar``/``epsilon_c``, a status other
        than optimal/feasible/unbounded (e.g. infeasible: there is no schedule), or a
        non-integer A/S̄ (a ``--relax`` design).

    Notes
    -----
    A ``schedule --max-tv empirical`` design for which no schedule has a finite ε* (status
    ``infeasible``, ``A`` null) carries its schedule in ``horizon_design`` (status ``optimal``):
    the object returned then has that design's ``A``, ``S_bar`` and ``epsilon_c``.
    """
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"{option} file not found: {str(p)!r}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{option} {str(p)!r} is not JSON ({exc}); expected the output of `policyopt schedule --json`") from None
    except RecursionError:
        raise InvalidInputError(f"{option} {str(p)!r} is JSON nested too deeply; expected the output of `policyopt schedule --json`") from None
    if not isinstance(data, dict) or "status" not in data:
        raise InvalidInputError(f"{option} {str(p)!r} has no `status`; expected the output of `policyopt schedule --json`")
    status = data["status"]
    hd = _horizon_design(data)
    if hd is not None:
        if not is_number(hd.get("horizon")) or not is_number(hd.get("epsilon_c")):
            raise InvalidInputError(f"{option} {str(p)!r}: `horizon_design` lacks its horizon or ε_C")
        data = dict(data, A=hd.get("A"), S_bar=hd.get("S_bar"), epsilon_c=hd["epsilon_c"])
    elif status not in PUBLISHABLE_STATUSES:
        why = str(data.get("message") or "")[:120]
        raise InvalidInputError(
            f"{option} {str(p)!r} has status {status!r}: there is no schedule to publish"
            + (f" ({why})" if why else "") + "; design a feasible schedule first"
        )
    missing = [k for k in ("A", "S_bar", "epsilon_c") if data.get(k) is None]
    if missing:
        raise InvalidInputError(f"{option} {str(p)!r} lacks {missing}; expected the output of `policyopt schedule --json`")
    for k in ("A", "S_bar"):
        v = data[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
            raise InvalidInputError(
                f"{option} {str(p)!r}: `{k}` = {fmt(v)} is not a whole number of slots (a --relax design?); "
                "round it and pass --A/--S-bar/--epsilon-c"
            )
    dep = data.get("deployment")
    if dep is not None and (not isinstance(dep, dict) or not isinstance(dep.get("model"), dict)):
        raise InvalidInputError(f"{option} {str(p)!r}: `deployment` has no `model`; expected the output of `policyopt schedule --json`")
    return data


@dataclass(frozen=True)
class LedgerRow:
    """One scheduled release as recorded in the ledger.

    Attributes
    ----------
    n : int
        Release number (1, 2, ... without gaps).
    slot : int
        Publishing time S_n, slots.
    input_time : int
        S_n − A_n, the slot whose readings were released.
    status : str
        ``"released"`` or ``"skipped"`` (no reading at `input_time`; nothing spent).
    users : int
        I, the users with a reading at `input_time`.
    clipped : int
        Readings outside the value range, clipped to it.
    epsilon_c : float
        Nominal budget of the release (nats; 0 when skipped).
    epsilon_spent : float
        OpenDP's privacy map of the measurement at the replace-one distance (nats; ≥ ε_C by
        OpenDP's outward rounding; 0 when skipped).  The accounting uses this.
    sensitivity : float or None
        Δf of the clipped mean over I users: OpenDP's float-safe bound on (HI − LO)/I.
    noise_scale : float or None
        Laplace scale Δf/ε_C.
    value : float or None
        The released value (``None`` when skipped).
    prior_risk : float or None
        Leakage about the input of this release from the earlier ones (nats, Theorem 3), an upper
        bound rounded outward (:func:`policyopt.privacy.age_dependent.risk_after_aging_upper`).
    risk_at_release : float or None
        ε(S_n) of eq. (25) with the ledger's model at publish time (nats), an upper bound rounded outward.
    reason : str or None
        Why a release was skipped.
    input_sha256 : str
        SHA-256 of the readings at `input_time` (:func:`input_digest`), also of a skipped slot's
        (none): a rerun whose stream changes them is refused.
    schedule_id, package_version, sampler, committed_at : str
    """

    n: int
    slot: int
    input_time: int
    status: str
    users: int
    clipped: int
    epsilon_c: float
    epsilon_spent: float
    sensitivity: float | None
    noise_scale: float | None
    value: float | None
    prior_risk: float | None
    risk_at_release: float | None
    reason: str | None
    input_sha256: str
    schedule_id: str
    package_version: str
    sampler: str
    committed_at: str


_COLUMNS = tuple(f.name for f in fields(LedgerRow))


@dataclass(frozen=True)
class LedgerRisk:
    """Age-dependent risk of the releases in a ledger (Theorem 3) beside the design (30).

    Attributes
    ----------
    times : numpy.ndarray of int, shape (T+1,)
        Absolute slots origin .. at.
    risk : numpy.ndarray, shape (T+1,)
        ε(t) of eq. (25), nats (0 before the first release).
    aoi : numpy.ndarray, shape (T+1,)
        AoI(t) of eq. (24), slots (NaN before the first release).
    release_slots : numpy.ndarray of int, shape (N,)
        S_n of the releases made up to `at` (skipped ones excluded).
    epoch_peaks : numpy.ndarray, shape (N,)
        ε(S_n), nats.
    peak_risk : float
        max_n ε(S_n) over the releases made so far (0 without release), nats.
    designed_peak_risk : float or None
        ε* of eq. (30) for the schedule's (A, S̄, ε_C); ``None`` when (31) fails.
    designed_status : str
        ``"finite"`` or ``"divergent"`` (condition (31)).
    at : int
        Last slot of the trajectory.
    released, skipped : int
        Rows of each status up to `at`.
    designed_horizon_risk : float or None
        For a schedule designed over a horizon H (``ScheduleSpec.horizon``): the largest risk over the
        H slots of the schedule as designed (every release made, ε_C as budget), Theorem 3 (eq. (25))
        with the ledger's Δ(t), rounded outward; for a model-free horizon design
        (``ScheduleSpec.horizon_accounting``) the pure ε of its ⌈H/S̄⌉ releases (basic composition, rounded
        up); ``None`` without a horizon.
    """

    times: np.ndarray
    risk: np.ndarray
    aoi: np.ndarray
    release_slots: np.ndarray
    epoch_peaks: np.ndarray
    peak_risk: float
    designed_peak_risk: float | None
    designed_status: str
    at: int
    released: int
    skipped: int
    designed_horizon_risk: float | None = None


#: SHA-256 of no readings (the input digest of a skipped slot): the count 0 as 8 bytes.
EMPTY_INPUT_SHA256 = hashlib.sha256((0).to_bytes(8, "little")).hexdigest()


def input_digest(users, values) -> str:
    """SHA-256 (hex) of the readings of one input slot, independent of their order.

    The readings are sorted by user (UTF-8 byte order; users are unique within a slot) and the bytes
    hashed are: the count I (8 bytes, little-endian), the UTF-8 length of each user name (I × 8 bytes),
    the names' UTF-8 bytes, and the values as little-endian float64 (I × 8 bytes).  The same readings
    from a CSV and from a Parquet copy give the same digest; it is computed with Arrow's sort, so
    10⁶ readings take well under a second.

    Parameters
    ----------
    users : sequence of str or pyarrow.Array, shape (I,)
    values : sequence of float, shape (I,)

    Returns
    -------
    str
        64 hex digits (:data:`EMPTY_INPUT_SHA256` for no reading).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    vals = np.asarray(values, dtype="<f8")
    if vals.size == 0:
        return EMPTY_INPUT_SHA256
    u = users if isinstance(users, pa.Array) else pa.array(np.asarray(users, dtype=object), type=pa.string())
    u = u.cast(pa.string())
    order = pc.sort_indices(u)
    u = pc.take(u, order)
    idx = order.to_numpy()
    offsets = np.frombuffer(u.buffers()[1], dtype=np.int32)[u.offset: u.offset + len(u) + 1]
    data = u.buffers()[2]
    h = hashlib.sha256()
    h.update(len(u).to_bytes(8, "little"))
    h.update(np.diff(offsets).astype("<i8").tobytes())
    h.update(memoryview(data)[int(offsets[0]): int(offsets[-1])])
    h.update(np.ascontiguousarray(vals[idx]).tobytes())
    return h.hexdigest()


def _classify_open_error(path: Path, exc: Exception, option: str, writer: bool = True) -> PolicyOptError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        what = ("a second publisher is refused — wait for the first to finish" if writer
                else "the ledger can be read when it finishes")
        return LedgerLockedError(
            f"{option} {str(path)!r} is locked by another process (SQLite: {text}): a publisher is running on it; {what}"
        )
    if "readonly" in text or "read-only" in text:
        return InvalidInputError(
            f"{option} {str(path)!r} is read-only (SQLite: {text}); "
            + ("publishing writes the ledger: make it writable, or audit it with `policyopt ledger`" if writer
               else "a WAL ledger whose -wal/-shm side files cannot be read or created; copy it somewhere writable to audit it")
        )
    if "not a database" in text:
        return InvalidInputError(f"{option} {str(path)!r} is not a policyopt ledger (not an SQLite database: {text}); it was not modified")
    return InvalidInputError(f"{option} {str(path)!r} is corrupted (SQLite: {text}); it was not modified — restore it from a backup")


def designed_risks(sch: ScheduleSpec, population) -> tuple:
    """What a schedule's own numbers are under the accounting model: (ε* upper bound or None, its status, the largest
    risk over the design's horizon or None).

    ε* is eq. (30) of Zhang et al. 2024 with Δ(A), Δ(S̄) of `population`, rounded outward
    (:func:`policyopt.privacy.age_dependent.peak_risk_upper`); the horizon risk (a schedule whose ``status`` was
    ``infeasible`` and that runs its ``horizon_design``) is Theorem 3 over the design's planned releases S_n = A +
    (n − 1)·S̄ ≤ H (eq. (25), outward-rounded), or for a model-free horizon design the pure ε of those ⌈H/S̄⌉ releases by
    basic composition (Dwork & Roth 2014, Theorem 3.16).

    Returns
    -------
    (float or None, str, float or None)
    """
    from policyopt.privacy.age_dependent import compose, peak_risk, peak_risk_upper

    la, ls = float(population.log_max_tv(sch.A)), float(population.log_max_tv(sch.S_bar))
    designed = peak_risk(float(population.max_tv(sch.A)), float(population.max_tv(sch.S_bar)), sch.epsilon_c)
    designed_up = peak_risk_upper(designed.value, la, ls, sch.epsilon_c, sch.A, sch.S_bar)
    horizon_risk = None
    if sch.horizon is not None and sch.horizon_accounting == "model-free":
        from policyopt.privacy.model_free import model_free_guarantee

        # the design's ⌈H/S̄⌉ releases of ε_C: pure ε by basic composition (Dwork & Roth 2014, Thm 3.16), any model
        horizon_risk = model_free_guarantee(sch.epsilon_c, horizon=sch.horizon, delta=0.0, S_bar=sch.S_bar).epsilon_pure
    elif sch.horizon is not None and sch.A <= sch.horizon:
        # the design's releases S_n = A + (n − 1)S̄ ≤ H, each with ε_C; ε(S_n) grows with n when (31) fails
        planned = sch.A + sch.S_bar * np.arange((sch.horizon - sch.A) // sch.S_bar + 1)
        plan = compose(planned, sch.A, sch.epsilon_c, population, horizon=sch.horizon)
        horizon_risk = float(np.max(plan.risk_upper))
    return designed_up, designed.status, horizon_risk


#: Relative difference above which a schedule file's own ε* or horizon risk is taken not to be what its A, S̄, ε_C
#: give under its model (both sides are outward-rounded float64 evaluations of the same formula: they agree to ~1e-15).
DESIGN_REL_TOL = 1e-9


def schedule_discrepancies(sch: ScheduleSpec, population) -> list:
    """Where a schedule file's recorded ε* (``peak_risk``) or horizon risk (``horizon_design.horizon_risk``) is not what
    its A, S̄ and ε_C give under `population` (:func:`designed_risks`): a list of sentences, empty when it reproduces
    (relative tolerance :data:`DESIGN_REL_TOL`).  A file edited after its design (ε_C, A, S̄ or the Δ(t) it records)
    fails here.
    """
    up, _, horizon = designed_risks(sch, population)
    return recorded_discrepancies(sch, up, horizon)


def recorded_discrepancies(sch: ScheduleSpec, peak_risk, horizon_risk) -> list:
    """:func:`schedule_discrepancies` given the recomputed ε* upper bound `peak_risk` and horizon risk `horizon_risk`
    (``None``: none), e.g. a :class:`LedgerRisk`'s ``designed_peak_risk`` and ``designed_horizon_risk``."""
    up, horizon = peak_risk, horizon_risk
    out = []

    def differs(recorded, now) -> bool:
        """Whether a recomputed value `now` (nats; ``None``: none) is not the `recorded` one to :data:`DESIGN_REL_TOL`."""
        if now is None or not math.isfinite(now):
            return True
        return abs(recorded - now) > DESIGN_REL_TOL * max(abs(recorded), abs(now), 1e-300)

    if sch.designed_peak_risk is not None and differs(sch.designed_peak_risk, up):
        out.append(f"its ε* {sch.designed_peak_risk!r} nats is not what A = {sch.A}, S̄ = {sch.S_bar}, ε_C = "
                   f"{sch.epsilon_c!r} give under its model ({'no finite ε*' if up is None else repr(up)})")
    if sch.designed_horizon_risk is not None and differs(sch.designed_horizon_risk, horizon):
        out.append(f"its horizon risk {sch.designed_horizon_risk!r} nats over {sch.horizon} slots is not what A = "
                   f"{sch.A}, S̄ = {sch.S_bar}, ε_C = {sch.epsilon_c!r} give ({horizon!r})")
    return out


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
        if writer and self.path.exists() and not (os.access(self.path, os.W_OK) and os.access(self.path.parent or ".", os.W_OK)):
            raise InvalidInputError(
                f"{option} {str(self.path)!r} is read-only (the file or its directory): publishing writes the ledger and its "
                "WAL side files; make it writable, or audit it with `policyopt ledger`"
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
                    f"{self.option} {str(self.path)!r} has ledger schema {version}, written by an earlier policyopt without "
                    f"the digests of released inputs (schema {SCHEMA_VERSION}); audit it with that version, publish into a new ledger"
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
                        raise InvalidInputError(f"{self.option} {str(self.path)!r} is not in WAL mode ({mode}); not a ledger written by policyopt")
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
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted or not a ledger (SQLite: {_brief(exc)}); it was not modified") from None
        if len(sched) != 1 or "model" not in keys:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: expected one schedule and a model, found {len(sched)} schedules")
        if not all(isinstance(v, str) for v in keys.values()):
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: its meta table holds a non-text value; "
                                    "it was not modified — restore it from a backup")
        version = keys.get("schema_version")
        if version != str(SCHEMA_VERSION):
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} records schema_version {version!r} in its meta table, not {SCHEMA_VERSION} "
                "(a newer policyopt's ledger, or a corrupted one); it was not modified"
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
                f"{self.option} {str(self.path)!r} is corrupted: its schedule or model record is unreadable ({str(why)[:200]}); "
                "it was not modified — restore it from a backup"
            ) from None
        if self.schedule.origin is None:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: its schedule has no first input slot")
        try:
            self._all_rows = self._read_rows()
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: a release row is unreadable ({type(exc).__name__}: "
                f"{_brief(exc)}); it was not modified — restore it from a backup"
            ) from None
        bad = next((r for r in self._all_rows if not _row_ok(r)), None)
        if bad is not None:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: release n={bad.n} (status {bad.status!r}) lacks a value, "
                "a budget or a risk, or holds a non-number; it was not modified — restore it from a backup"
            )
        bad = next((r for r in self._all_rows if not _spending_ok(r)), None)
        if bad is not None:
            raise InvalidInputError(
                f"{self.option} {str(self.path)!r} is corrupted: release n={bad.n} (status {bad.status!r}) records ε spent = "
                f"{bad.epsilon_spent!r} nats for ε_C = {bad.epsilon_c!r} (a release spends OpenDP's map of its ε_C, at most "
                f"{MAX_EPSILON_C:g} nats; a skipped one nothing); it was not modified — restore it from a backup"
            )
        count, first, last = stats
        if count and (first != 1 or last != count):
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: releases numbered {first}..{last} but {count} rows (a gap)")
        if disorder:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: release slots or input times out of order")
        foreign = c.execute("SELECT count(*) FROM releases WHERE schedule_id != ?", (self.schedule_id,)).fetchone()[0]
        if foreign:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} is corrupted: {foreign} rows carry another schedule id")

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
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: only a new ledger opened for writing can be initialised")
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
            c.execute("INSERT INTO schedule VALUES (?, ?, ?)", (schedule.id, json.dumps(schedule.to_dict(), sort_keys=True), now))
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
                raise InvalidInputError(f"row for schedule {row.schedule_id} cannot go into the ledger of schedule {self.schedule_id}")
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            last = c.execute("SELECT n, slot, input_time FROM releases ORDER BY n DESC LIMIT 1").fetchone()
            n, slot, tau = last if last is not None else (0, None, None)
            for row in rows:
                if row.n != n + 1 or (slot is not None and (row.slot <= slot or row.input_time < tau)):
                    raise InvalidInputError(
                        f"row n={row.n} at slot {row.slot} does not continue the ledger (last n={n}, slot {slot}, input {tau})"
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
        """ε(t) of Theorem 3 (eq. 25) for the releases made, the AoI (24) and the design (30).

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
        Each release enters with its own publishing time, aging and the OpenDP-mapped budget
        ``epsilon_spent``; skipped rows are left out.  All in log space via
        :func:`policyopt.privacy.age_dependent.compose`; the risks returned are its outward-rounded
        ``risk_upper`` / ``epoch_peaks_upper`` and the designed peak is rounded up by
        :func:`policyopt.privacy.age_dependent.peak_risk_upper`.
        """
        from policyopt.privacy.age_dependent import compose

        if self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} holds no schedule yet")
        sch = self.schedule
        rows = self.rows()
        last = rows[-1].slot if rows else sch.origin
        T = last if at is None else int_param(at, "at", sch.origin)  # `at` ≥ the first input slot
        if T - sch.origin + 1 > MAX_TRAJECTORY:
            raise InvalidInputError(
                f"`at` = {T} asks for a trajectory of {T - sch.origin + 1} slots from the first input slot {sch.origin}; "
                f"at most {MAX_TRAJECTORY} slots are audited at once (ε(t) is held per slot)"
            )
        made = [r for r in rows if r.status == "released" and r.slot <= T]
        skipped = sum(1 for r in rows if r.status == "skipped" and r.slot <= T)
        times = np.arange(sch.origin, T + 1)
        if made:
            S = np.array([r.slot for r in made]) - sch.origin
            ages = np.array([r.slot - r.input_time for r in made])
            # compose evaluates Δ only up to the largest lag Theorem 3 looks up, not up to the horizon
            comp = compose(S, ages, np.array([r.epsilon_spent for r in made]), population, horizon=T - sch.origin)
            # outward-rounded trajectory: every reported risk is ≥ its exact value (issue 26)
            risk, aoi, peaks = comp.risk_upper, comp.aoi, comp.epoch_peaks_upper
        else:
            risk, aoi, peaks = np.zeros(times.size), np.full(times.size, np.nan), np.empty(0)
        designed_up, designed_status, horizon_risk = designed_risks(sch, population)
        return LedgerRisk(
            times=times, risk=np.asarray(risk), aoi=np.asarray(aoi),
            release_slots=np.array([r.slot for r in made], dtype=np.int64), epoch_peaks=np.asarray(peaks),
            peak_risk=float(np.max(peaks)) if len(peaks) else 0.0,
            designed_peak_risk=designed_up, designed_status=designed_status,
            at=int(T), released=len(made), skipped=skipped, designed_horizon_risk=horizon_risk,
        )

    def model_free(self, *, delta: float, windows=(), at: int | None = None):
        """The model-free guarantee of the releases made up to slot `at` (all by default): :func:`model_free_of_rows`
        of this ledger's rows (``None`` before the first release).

        Raises
        ------
        InvalidInputError
            If the ledger holds no schedule yet, or as :func:`model_free_of_rows`.
        """
        if self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r} holds no schedule yet")
        return model_free_of_rows(self.rows(), delta=delta, windows=windows, at=at)

    def meta(self) -> dict:
        """The ``meta`` table as a dict."""
        return {} if self.is_new else dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def trials(self) -> list:
        """The runs declared trials (:meth:`record_trial`), oldest first; ``[]`` when none (or a ledger before them).

        Raises
        ------
        InvalidInputError
            If the ``trials`` record is not a JSON list of objects (an edited ledger).
        """
        text = self.meta().get("trials")
        if text is None:
            return []
        try:
            trials = json.loads(text)
        except json.JSONDecodeError:
            trials = None
        if not isinstance(trials, list) or not all(isinstance(t, dict) for t in trials):
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: its `trials` record is not a list of trials "
                                    f"({text[:80]!r}); the ledger was edited")
        return trials

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
        if not self.writer or self.is_new:
            raise InvalidInputError(f"{self.option} {str(self.path)!r}: a trial is recorded in an initialised ledger "
                                    "opened for writing")
        trials = self.trials() + [{**trial, "recorded_at": now_utc()}]
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO meta VALUES ('trials', ?)", (json.dumps(trials, sort_keys=True),))
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            raise

    def close(self) -> None:
        """Release the lock and close the connection (WAL is checkpointed by SQLite)."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
