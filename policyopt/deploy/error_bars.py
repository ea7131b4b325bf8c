"""Error bars of the releases in a ledger: (CI1) for the input slot's mean and (CI2) for the current mean.

The formulas and their assumptions are in :mod:`policyopt.utility.intervals`.  When a ledger is created the publisher
records, in its ``meta`` table under ``intervals``, the level and what (CI2) needs from the design — the
:class:`~policyopt.utility.intervals.StalenessSample` of the design's readings at age A (or why there is none: a
model without readings, such as a matrix) — so every later run, ``--out`` rebuild and ``ledger`` audit gives the
same intervals without reading the design data again, and never from the stream's readings: both intervals are
post-processing of the releases and leave the ledger's spending unchanged.
"""

from __future__ import annotations

import json
import os

import numpy as np

from policyopt.errors import InvalidInputError
from policyopt.utility.intervals import (
    DEFAULT_CI_LEVEL,
    StalenessSample,
    check_ci_level,
    current_interval,
    noise_interval,
    staleness_sample,
)

__all__ = ["INTERVAL_KEYS", "design_intervals", "release_intervals", "intervals_summary", "intervals_lines",
           "recorded_intervals", "plot_releases", "replay_truth"]

#: The per-release fields, in the order of the ``--out`` columns.
INTERVAL_KEYS = ("ci_low", "ci_high", "ci_current_low", "ci_current_high")


def design_intervals(model, schedule, *, level: float | None = None, slot_seconds: int | None = None,
                     option: str = "--model") -> dict:
    """The ``intervals`` record of a new ledger: the level, and the design's staleness sample at age A.

    Parameters
    ----------
    model : policyopt.deploy.model.ModelSpec
        The ledger's model; its readings (bundled or ``data:``) are the design's.
    schedule : policyopt.deploy.schedule_spec.ScheduleSpec
        A (the age of every release) and the value range the readings are clipped into.
    level : float, optional
        Level of both intervals (default :data:`~policyopt.utility.intervals.DEFAULT_CI_LEVEL`).
    slot_seconds : int, optional
        Slot length (a day of slots is the phase period of (CI2)).
    option : str
        Option name for messages.

    Returns
    -------
    dict
        ``level``, ``sample`` (:meth:`StalenessSample.to_dict` or ``None``) and ``why`` (``None``, or why there is
        no current-mean interval).

    Raises
    ------
    InvalidInputError
        A bad `level`; bad design readings.
    """
    lv = DEFAULT_CI_LEVEL if level is None else check_ci_level(level, "ci_level")
    if not model.fitted:
        return {"level": lv, "sample": None,
                "why": f"the model {model.describe()} has no readings to estimate the mean's change over A slots from"}
    from policyopt.io import is_parquet_source

    if model.path is not None and is_parquet_source(model.path):
        return {"level": lv, "sample": None,
                "why": "the design's readings are a Parquet data set, which publish does not read whole; the "
                       "current-mean interval needs its per-slot mean changes (not computed distributed yet)"}
    df = model.readings(option)
    try:
        sample = staleness_sample(df, int(schedule.A), value_range=schedule.value_range, slot_seconds=slot_seconds)
    except InvalidInputError as exc:
        return {"level": lv, "sample": None, "why": f"the design's readings give no {schedule.A}-slot change ({exc})"}
    return {"level": lv, "sample": sample.to_dict(), "why": None}


def recorded_intervals(meta: dict) -> dict | None:
    """The ``intervals`` record of a ledger's ``meta`` table (``None`` for a ledger written before it existed)."""
    text = meta.get("intervals")
    return None if text is None else json.loads(text)


def _at_level(record: dict | None, level: float | None) -> tuple:
    """(level, sample or None, why) of a record at `level` (default the record's)."""
    if record is None:
        lv = DEFAULT_CI_LEVEL if level is None else check_ci_level(level, "ci_level")
        return lv, None, "the ledger was created before policyopt recorded what the current-mean interval needs"
    lv = float(record["level"]) if level is None else check_ci_level(level, "ci_level")
    sample = None if record.get("sample") is None else StalenessSample.from_dict(record["sample"])
    return lv, sample, record.get("why")


def release_intervals(rows, record: dict | None, level: float | None = None, *, cache: dict | None = None) -> list:
    """The four interval fields of each ledger row (``None`` for a skipped row, and for (CI2) when it is not formed).

    Parameters
    ----------
    rows : sequence of policyopt.deploy.ledger_row.LedgerRow
    record : dict or None
        The ledger's ``intervals`` record (:func:`recorded_intervals`).
    level : float, optional
        Another level than the recorded one (an audit); the design sample is the same.
    cache : dict, optional
        A dict the caller keeps between calls with the same `record` and `level` (the publisher's per-release
        appends to ``--out``): the design sample is read and its quantiles for each number of users are computed
        once, not at every call.  Default: a fresh one.

    Returns
    -------
    list of dict
        One dict per row with the keys :data:`INTERVAL_KEYS` (floats in the readings' unit, or ``None``).
    """
    memo = {} if cache is None else cache
    if "at_level" not in memo:
        memo["at_level"] = _at_level(record, level)
    lv, sample, _ = memo["at_level"]
    by_users = memo.setdefault("quantiles", {})
    out = []
    for r in rows:
        d = dict.fromkeys(INTERVAL_KEYS)
        if r.status == "released" and r.value is not None and r.noise_scale is not None:
            lo, hi = noise_interval(r.value, r.noise_scale, lv)
            d["ci_low"], d["ci_high"] = float(lo), float(hi)
            if sample is not None:
                if r.users not in by_users:
                    by_users[r.users] = sample.quantiles(int(r.users), lv)
                q = by_users[r.users]
                if q is not None:
                    clo, chi = current_interval(r.value, r.noise_scale, r.slot, q, lv)
                    d["ci_current_low"], d["ci_current_high"] = float(clo), float(chi)
        out.append(d)
    return out


def intervals_summary(record: dict | None, rows=(), level: float | None = None) -> dict:
    """The JSON ``intervals`` block of ``publish``/``ledger``: the level and what each interval covers.

    Returns
    -------
    dict
        ``level``; ``input`` and ``current`` (one sentence each; ``current`` ``None`` when (CI2) is not formed);
        ``current_why`` (why not, or ``None``); ``age`` (A, slots), ``phase_period`` (slots), ``pooled`` (phases
        pooled for too few design slots) and ``design_slots`` (slots behind the quantiles; all ``None`` without a
        sample).
    """
    lv, sample, why = _at_level(record, level)
    pct = f"{100 * lv:g} %"
    out = {"level": lv,
           "input": f"[ci_low, ci_high] holds the mean of the input slot's readings (clipped to the value range) with "
                    f"probability exactly {pct} over the noise (Laplace quantile; post-processing, no privacy spent)",
           "current": None, "current_why": why, "age": None, "phase_period": None, "pooled": None, "design_slots": None}
    if sample is None:
        return out
    users = sorted({int(r.users) for r in rows if r.status == "released"}) or [int(np.max(sample.users))]
    qs = [sample.quantiles(u, lv) for u in users]
    if any(q is None for q in qs):
        out["current_why"] = (f"the design's readings have {sample.phase.size} slots with a {sample.age}-slot change, "
                              f"fewer than the {int(np.ceil(4 / (1 - lv) - 1e-9))} a {pct} interval needs")
    out.update(age=sample.age, phase_period=sample.period, pooled=any(q.pooled for q in qs if q is not None),
               design_slots=min((q.slots for q in qs if q is not None), default=None))
    if out["current_why"] is None and sample.age == 0:
        out["current"] = ("[ci_current_low, ci_current_high] = [ci_low, ci_high]: with A = 0 the input slot is the "
                          "publication slot, so the current mean is the input mean")
    elif out["current_why"] is None:
        out["current"] = (
            f"[ci_current_low, ci_current_high] holds the mean at the publication slot with probability at least "
            f"{pct} if the deployment's slots are like the design's at the same hour of the day and its users like "
            f"the design's: noise at level 1 − α/2 and the mean's change over A = {sample.age} slots between its "
            f"α/4 and 1 − α/4 quantiles in the design's readings, by a union bound")
    return out


def intervals_lines(summary: dict) -> list:
    """The text lines of an :func:`intervals_summary` (``error bars:`` first)."""
    lines = [f"error bars  : {summary['input']}"]
    if summary["current"] is not None:
        extra = " (phases of the day pooled: too few design slots per phase)" if summary["pooled"] else ""
        lines.append(f"              {summary['current']}{extra}")
    else:
        lines.append(f"              no current-mean interval: {summary['current_why']}")
    return lines


def plot_releases(rows, summary: dict, path, *, truth=None, title: str = "") -> None:
    """Draw the released values over their publication slots with both error bars (and the true current mean).

    Parameters
    ----------
    rows : sequence of dict
        JSON rows with ``slot``, ``status``, ``value`` and the :data:`INTERVAL_KEYS` (``publish --json``'s
        ``new_releases`` or ``ledger --json``'s ``releases``); skipped rows are left out.
    summary : dict
        :func:`intervals_summary` of the same ledger (the level, for the legend).
    path : str or Path
        Output file (.png, .pdf, .svg).
    truth : (numpy.ndarray, numpy.ndarray), optional
        Slots and the true mean of the stream's readings there, drawn only for a replay of the design's own readings
        (it is not private).
    title : str
        Figure title.

    Raises
    ------
    InvalidInputError
        No released row to draw.
    """
    from matplotlib.figure import Figure

    rel = [r for r in rows if r["status"] == "released"]
    if not rel:
        raise InvalidInputError("--plot: no release to draw yet")
    t = np.array([r["slot"] for r in rel], dtype=float)
    v = np.array([r["value"] for r in rel], dtype=float)
    pct = f"{100 * summary['level']:g} %"
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    if rel[0]["ci_current_low"] is not None:
        ax.fill_between(t, [r["ci_current_low"] for r in rel], [r["ci_current_high"] for r in rel], step="mid",
                        color="0.85", label=f"{pct} interval for the current mean (noise and staleness)")
    ax.fill_between(t, [r["ci_low"] for r in rel], [r["ci_high"] for r in rel], step="mid", color="0.6",
                    label=f"{pct} interval for the input slot's mean (exact)")
    ax.plot(t, v, ".", color="0.0", ms=2.5, label="released value")
    if truth is not None:
        ax.plot(np.asarray(truth[0], dtype=float), np.asarray(truth[1], dtype=float), "-", color="0.3", lw=0.8,
                label="true current mean (the design's own readings; not private)")
    ax.set_xlabel("publication slot")
    ax.set_ylabel("released mean")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.savefig(str(path), dpi=120)


def replay_truth(readings, rows, value_range, *, model, provenance: dict, stream):
    """The stream's true mean at the releases' slots when the stream is the design's own readings (a replay), else None.

    The design's own readings: the schedule's ``deployment.data`` (or that CSV grown by appended lines,
    :func:`policyopt.deploy.model.same_source`), the bundled data streamed under the bundled model, or a `stream` that
    is the very file of a ``data:`` model.  The true mean is not private; it is drawn only for such a replay.

    Parameters
    ----------
    readings : pandas.DataFrame or ParquetStream
        The stream (a Parquet stream is read slot by slot and gives ``None``).
    rows : sequence of LedgerRow
    value_range : (float, float)
        The releases' clipping range (the mean is of clipped readings, as released).
    model : policyopt.deploy.model.ModelSpec
        The ledger's model.
    provenance : dict
        The ledger's provenance (``design_data``).
    stream : str or None
        ``--data`` (``None``: the bundled data).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray) or None
        Slots and the mean of the clipped readings there.
    """
    from policyopt.deploy.model import same_source

    design = provenance.get("design_data")
    if design is not None:
        replay = same_source(design, stream) is None
    elif model.spec == "bundled":
        replay = stream is None
    else:
        replay = model.path is not None and stream is not None and os.path.realpath(model.path) == os.path.realpath(stream)
    if not replay or not hasattr(readings, "columns"):
        return None
    slots = sorted({r.slot for r in rows if r.status == "released"})
    sel = readings[readings["time"].isin(slots)]
    mean = sel["value"].clip(*value_range).groupby(sel["time"]).mean()
    return mean.index.to_numpy(), mean.to_numpy()
