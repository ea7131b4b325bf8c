"""One recorded release of the privacy ledger: its fields, the digest of its readings, and when a row is consistent.

* :class:`LedgerRow` — one row of the ledger's ``releases`` table: a scheduled publishing time S_n, ``released``
  (value, users I, sensitivity Δf, noise scale, ε spent, risks) or ``skipped`` (no reading at the input time;
  nothing spent);
* :func:`input_digest` — the SHA-256 of the readings of one input slot, independent of their order
  (:data:`EMPTY_INPUT_SHA256` for none), recorded in every row so that a rerun whose stream rewrites the history is
  told apart;
* :func:`row_types_ok` and :func:`spending_ok` — the checks a row read back from a ledger must pass: the types the
  ledger writes, and a recorded spending that is what its budget gives.

Both accountings read a row's ``epsilon_spent``: the age-dependent risk (Zhang, Wei, Berry, Huang, "Age-Dependent
Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3) and the model-free composition (C. Dwork, A. Roth,
"The Algorithmic Foundations of Differential Privacy", Found. Trends Theor. Comput. Sci., 2014, Theorem 3.16).  A
released row's ``epsilon_spent`` is OpenDP's privacy map of its Laplace measurement, in [ε_C, ε_C·(1 +
:data:`SPENT_REL_TOL`)] with ε_C ≤ :data:`~policyopt.deploy.schedule_spec.MAX_EPSILON_C`; a skipped row spends
nothing.  A row that fails either check makes the ledger corrupted.

The SQLite store of the rows is :mod:`policyopt.deploy.ledger`; their accounting :mod:`policyopt.deploy.ledger_risk`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from policyopt.deploy.model import is_number
from policyopt.deploy.schedule_spec import MAX_EPSILON_C

__all__ = ["LedgerRow", "input_digest", "EMPTY_INPUT_SHA256", "SPENT_REL_TOL", "row_types_ok", "spending_ok"]

#: Largest relative excess of a release's recorded ``epsilon_spent`` over its ``epsilon_c``: OpenDP's privacy map of the
#: Laplace measurement is ε_C raised by its outward rounding (measured ≤ 2.3e-16 relative); a row beyond this (or below
#: ε_C) does not record what its budget spends, and the ledger is refused as corrupted.
SPENT_REL_TOL = 1e-9


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


def row_types_ok(r) -> bool:
    """Whether a row read back from a ledger has the types the ledger writes.

    Parameters
    ----------
    r : LedgerRow
        One row (e.g. of :meth:`policyopt.deploy.ledger.Ledger.rows`).

    Returns
    -------
    bool
        ``True`` when n, slot, input time, users and clipped are ints (not bools), the texts are str (``reason`` str or
        ``None``), ε_C and ε spent are finite numbers, and the optional numbers are finite or ``None``; a released
        row must carry a value.
    """
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (r.n, r.slot, r.input_time, r.users, r.clipped))
    texts = all(isinstance(v, str) for v in (r.status, r.schedule_id, r.package_version, r.sampler, r.committed_at))
    if not (ints and texts and (r.reason is None or isinstance(r.reason, str))):
        return False
    if not (is_number(r.epsilon_c) and is_number(r.epsilon_spent)):
        return False
    optional = all(is_number(v, optional=True) for v in (r.sensitivity, r.noise_scale, r.prior_risk, r.risk_at_release))
    return optional and is_number(r.value, optional=r.status != "released")


def spending_ok(r) -> bool:
    """Whether a row's recorded spending is what its budget gives.

    Parameters
    ----------
    r : LedgerRow
        One row whose types passed :func:`row_types_ok`.

    Returns
    -------
    bool
        For a skipped row: it spends nothing (ε_C = spent = 0).  For a released row, whose ``epsilon_spent`` is
        OpenDP's privacy map of its Laplace measurement: ε_C ≤ spent ≤ ε_C·(1 + :data:`SPENT_REL_TOL`), with
        0 ≤ ε_C ≤ :data:`~policyopt.deploy.schedule_spec.MAX_EPSILON_C` (the publisher's limit, nats).
    """
    if r.status != "released":
        return r.epsilon_c == 0.0 and r.epsilon_spent == 0.0
    return 0.0 <= r.epsilon_c <= MAX_EPSILON_C and r.epsilon_c <= r.epsilon_spent <= r.epsilon_c * (1.0 + SPENT_REL_TOL)
