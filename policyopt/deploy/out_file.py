"""The releases file of ``publish --out``: its columns, as CSV text and as a Parquet table.

Only what is public goes out (see :func:`render_out`); the same columns in both forms, the error bars
(:mod:`policyopt.deploy.error_bars`) included.
"""

from __future__ import annotations

__all__ = ["OUT_HEADER", "OLD_OUT_HEADER", "render_out", "out_table"]

#: Header of the output CSV.
OUT_HEADER = "n,slot,input_time,status,users,sensitivity,noise_scale,epsilon_spent,value,ci_low,ci_high,ci_current_low,ci_current_high"
#: The header of ``--out`` files written before the error bars (such a file is rebuilt with the new columns).
OLD_OUT_HEADER = "n,slot,input_time,status,users,sensitivity,noise_scale,epsilon_spent,value"


def _f(x) -> str:
    """A float as its shortest round-trip repr, ``""`` for ``None``."""
    return "" if x is None else repr(float(x))


def render_out(rows, intervals: dict | None = None, *, cache: dict | None = None) -> str:
    """The output CSV text for ledger rows (floats as shortest round-trip repr).

    Only what is public goes out: times, the number of users I (public by assumption, and
    implied by the stated noise scale), Δf, the scale, the ε spent, the released value and its error bars
    (:func:`policyopt.deploy.error_bars.release_intervals`: post-processing of the value).  The
    count of clipped readings stays in the ledger: it is a function of the raw data, not DP.

    Parameters
    ----------
    rows : sequence of LedgerRow
    intervals : dict, optional
        The ledger's ``intervals`` record (empty interval columns without it).
    cache : dict, optional
        Kept by the caller between calls with the same `intervals` (see
        :func:`policyopt.deploy.error_bars.release_intervals`).

    Returns
    -------
    str
        Header line plus one line per row, each ending in a newline.
    """
    from policyopt.deploy.error_bars import INTERVAL_KEYS, release_intervals

    lines = [OUT_HEADER]
    for r, ci in zip(rows, release_intervals(rows, intervals, cache=cache)):
        lines.append(",".join([str(r.n), str(r.slot), str(r.input_time), r.status, str(r.users),
                               _f(r.sensitivity), _f(r.noise_scale), _f(r.epsilon_spent), _f(r.value),
                               *(_f(ci[k]) for k in INTERVAL_KEYS)]))
    return "\n".join(lines) + "\n"


def out_table(rows, intervals: dict | None = None):
    """The ``--out`` rows as a pyarrow Table (the columns of :data:`OUT_HEADER`, typed; ``null`` where the CSV is empty).

    Parameters
    ----------
    rows : sequence of LedgerRow
    intervals : dict, optional
        The ledger's ``intervals`` record.

    Returns
    -------
    pyarrow.Table
    """
    import pyarrow as pa

    from policyopt.deploy.error_bars import INTERVAL_KEYS, release_intervals

    cis = release_intervals(rows, intervals)
    floats = ("sensitivity", "noise_scale", "epsilon_spent", "value")
    cols = {k: pa.array([getattr(r, k) for r in rows], pa.int64()) for k in ("n", "slot", "input_time")}
    cols["status"] = pa.array([r.status for r in rows], pa.string())
    cols["users"] = pa.array([r.users for r in rows], pa.int64())
    for k in floats:
        cols[k] = pa.array([None if getattr(r, k) is None else float(getattr(r, k)) for r in rows], pa.float64())
    for k in INTERVAL_KEYS:
        cols[k] = pa.array([c[k] for c in cis], pa.float64())
    assert list(cols) == OUT_HEADER.split(",")
    return pa.table(cols)
