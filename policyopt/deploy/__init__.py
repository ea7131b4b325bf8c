"""Running a designed schedule: the publisher and its persistent privacy ledger.

What lives here
---------------
* :mod:`policyopt.deploy.ledger` — :class:`Ledger`, an SQLite database (WAL mode, versioned
  schema) with one row per scheduled release and the schedule that produced it.
* :mod:`policyopt.deploy.ledger_row` — :class:`LedgerRow`, one recorded release, the digest of its
  readings and the checks a row read back must pass.
* :mod:`policyopt.deploy.ledger_risk` — the age-dependent risk of the releases actually made (Zhang, Wei,
  Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3, eq. (25)),
  beside the designed peak (eq. (30)), and the guarantee that needs no model.
* :mod:`policyopt.deploy.schedule_spec` — :class:`ScheduleSpec`, the schedule a publisher runs, and the
  schedule JSON it is read from.
* :mod:`policyopt.deploy.model` — :class:`ModelSpec`, the model of Δ(t) the accounting uses (fitted chains
  pinned to their data, a matrix, or the Δ̃(t) table of an empirical design), and the stream-identity check.
* :mod:`policyopt.deploy.publisher` — :class:`Publisher`, which releases the clipped mean of
  the aged readings plus Laplace noise drawn by OpenDP, one SQLite transaction per release
  committed before the value reaches the output CSV.
* :mod:`policyopt.deploy.stream` — the stream it reads: a CSV in time order, or a Parquet data set slot by slot.

Layering: this package sits at the level of the studies.  It may import the privacy
accounting, the models, the utility code, :mod:`policyopt.io`, :mod:`policyopt.errors` and
:mod:`policyopt.result`, but never the command-line interface (``policyopt.cli*``).
"""

from __future__ import annotations

from policyopt.deploy.ledger import SCHEMA_VERSION, Ledger, LedgerRisk, LedgerRow
from policyopt.deploy.model import ModelSpec
from policyopt.deploy.publisher import TRIAL_FRACTION, PublishReport, Publisher, RiskLimitError, ScheduleSpec, TrialError

__all__ = [
    "Ledger",
    "LedgerRisk",
    "LedgerRow",
    "ModelSpec",
    "SCHEMA_VERSION",
    "Publisher",
    "PublishReport",
    "RiskLimitError",
    "TRIAL_FRACTION",
    "TrialError",
    "ScheduleSpec",
]
