"""Can these readings support a design?  ``policyopt check-data`` and :func:`check_data`.

Every number is computed from the readings; nothing is fitted beyond the quantile edges.  What is checked, and why a
design needs it:

* **Span and slot length.**  The first and last slot, the slot length (given, read from date-time stamps, or the
  bundled data's) and a day of slots: the *phase period* of the readings penalty
  (:mod:`policyopt.utility.readings_penalty`, worst hour of day) when a day is a whole number ≥ 2 of slots.
* **Ragged meters.**  A meter whose first or last slot lies more than a day of slots (1 % of the span when the slot
  length is unknown) from the data's first or last slot: its series is shorter than the others, and a split of the
  time range (``backtest --train-fraction``, ``schedule --backtest``) may leave it on one side only
  (:func:`policyopt.studies.backtest.split_slot`).  Missing slots are counted inside each meter's own span.
* **Sparse rows.**  The readings are mapped to K quantile states with the quantizer ``schedule`` fits
  (:func:`policyopt.models.estimation.fit_population`: clipped into the value range, quantile edges shared by all
  users).  For every (user, state) the transitions out of that state (two readings in consecutive slots) are
  counted: the row of that user's chain rests on them, and Δ(t) estimated directly from the readings
  (:func:`policyopt.models.empirical.estimate_max_tv`, ``schedule --max-tv empirical``, ``check-model``) claims
  nothing at a lag where some row has fewer than :data:`~policyopt.models.empirical.DEFAULT_MIN_PAIRS` pairs: the
  band's upper edge is then 1 (Δ(t) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy",
  IEEE Trans. Inf. Theory 70(2), 2024, eq. (12), and Δ ≡ 1 makes Theorem 3's risk grow with every release).  The
  Δ̂(t) row at lag t counts the pairs *into* the state at lag t, which differ from the transitions out of it by at most
  the user's runs of consecutive readings (plus the slots a lag skips across a gap).  The largest K' ≤ K whose
  refitted quantizer leaves no row below that count is the suggested number of states.
* **The MSE pilot.**  The readings penalty's cross term (what no deployment size averages away) needs ≥ 2 users, and
  its block-bootstrap band (``--penalty readings-upper``) at least
  :data:`~policyopt.utility.readings_penalty.MIN_BOOTSTRAP_PERIODS` whole periods.

Time in slots.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, check_value_range
from policyopt.formatting import check_text, fmt_count, fmt_value
from policyopt.io import format_duration
from policyopt.models.empirical import DEFAULT_MIN_PAIRS
from policyopt.models.estimation import DEFAULT_MIN_ROW_TRANSITIONS, Quantizer, fit_population, validate_readings
from policyopt.utility.readings_penalty import MIN_BOOTSTRAP_PERIODS

__all__ = ["check_data", "format_data_check", "data_check_lines", "with_data_check", "readings_check", "row_counts", "suggest_states", "DAY_SECONDS", "RAGGED_SHARE",
           "FALLBACK_PERIOD", "DEFAULT_SPLIT"]

#: Seconds in a day: a day of slots is DAY_SECONDS / slot length.
DAY_SECONDS = 86_400
#: Without a slot length a meter is ragged when it starts or ends more than this share of the span away.
RAGGED_SHARE = 0.01
#: Slots per period of the MSE pilot's count when the slot length is unknown (a day of hourly slots).
FALLBACK_PERIOD = 24
#: The training fraction of ``backtest`` (``--train-fraction``) by default: the split checked for one-sided meters.
DEFAULT_SPLIT = 0.5


def row_counts(users: np.ndarray, times: np.ndarray, states: np.ndarray, n_users: int, n_states: int) -> np.ndarray:
    """Transitions out of each state per user: two readings of one user in consecutive slots, counted by the first.

    Parameters
    ----------
    users : numpy.ndarray of int, shape (N,)
        User index 0..U−1 of each reading, readings sorted by user then time.
    times : numpy.ndarray of int64, shape (N,)
        Slot of each reading.
    states : numpy.ndarray of int, shape (N,)
        Quantile state 0..K−1 of each reading.
    n_users, n_states : int
        U and K.

    Returns
    -------
    numpy.ndarray of int64, shape (U, K)
        counts[u, k] = #{readings of u in state k at slot s with a reading of u at s + 1}; the row sums of the
        transition counts :func:`~policyopt.models.estimation.fit_population` fits user u's chain to.
    """
    step = (users[1:] == users[:-1]) & (times[1:] == times[:-1] + 1)
    code = users[:-1][step].astype(np.int64) * n_states + states[:-1][step]
    return np.bincount(code, minlength=n_users * n_states).reshape(n_users, n_states).astype(np.int64)


def suggest_states(values: np.ndarray, users: np.ndarray, times: np.ndarray, n_users: int, n_states: int,
                   min_pairs: int) -> int | None:
    """The largest K' in 2..`n_states` whose quantile states leave every (user, state) row ≥ `min_pairs` transitions.

    The quantizer is refitted at each K' (:meth:`~policyopt.models.estimation.Quantizer.fit` on the clipped readings,
    as ``schedule --states K'`` fits it); a K' the readings' ties cannot split is skipped.  K' above the fewest
    transitions of a user divided by `min_pairs` cannot work and is not fitted.

    Parameters
    ----------
    values : numpy.ndarray, shape (N,)
        Readings, already clipped into the value range, sorted by user then time.
    users, times : numpy.ndarray, shape (N,)
        User index and slot of each reading.
    n_users, n_states : int
        U and the largest K' tried.
    min_pairs : int
        Transitions a row needs.

    Returns
    -------
    int or None
        K', or ``None`` when even 2 states leave a row below `min_pairs`.
    """
    step = (users[1:] == users[:-1]) & (times[1:] == times[:-1] + 1)
    per_user = np.bincount(users[:-1][step], minlength=n_users)
    top = min(int(n_states), int(per_user.min()) // int(min_pairs))
    for k in range(top, 1, -1):
        try:
            quant = Quantizer.fit(values, k)
        except InvalidInputError:  # ties: these readings cannot make k distinct quantile states
            continue
        if row_counts(users, times, quant.transform(values), n_users, k).min() >= min_pairs:
            return k
    return None


def _quantizer(data, states: int, value_range, source: str):
    """(quantizer, users left out of the fit by ``schedule``) for K = `states`: :func:`fit_population`'s own."""
    try:
        fitted = fit_population(data, states, value_range=value_range, source=source)
        return fitted.quantizer, dict(fitted.excluded)
    except InvalidModelError:  # no user has 10·K transitions: still show the states, say the fit refuses
        values = data["value"].to_numpy()
        if value_range is not None:
            values = np.clip(values, *value_range)
        return Quantizer.fit(values, states), None


def _meters(data, first: int, last: int, day: float | None) -> tuple[list, list]:
    """(per-user facts, ragged meters): first/last slot, readings, missing slots in the user's own span."""
    g = data.groupby("user", sort=False)["time"]
    lo, hi, n = g.min(), g.max(), g.size()
    threshold = day if day is not None else RAGGED_SHARE * (last - first + 1)
    meters, ragged = [], []
    for u in lo.index:
        row = {"user": u, "first_slot": int(lo[u]), "last_slot": int(hi[u]), "readings": int(n[u]),
               "missing": int(hi[u] - lo[u] + 1 - n[u])}
        meters.append(row)
        if row["first_slot"] - first > threshold or last - row["last_slot"] > threshold:
            ragged.append(row)
    return meters, ragged


def _one_sided(meters: list, ends: np.ndarray, fraction: float) -> tuple[int | None, list]:
    """(split slot, meters with readings on one side only) of a split of the time range `ends` (first and last slot)
    at `fraction`, as ``backtest --train-fraction`` splits it (:func:`~policyopt.studies.backtest.split_slot`)."""
    from policyopt.studies.backtest import split_slot

    try:
        split = split_slot(ends, fraction)
    except InvalidInputError:  # a single slot: nothing to split
        return None, []
    return split, [m for m in meters if m["last_slot"] < split or m["first_slot"] >= split]


def _split_fraction(meters: list, ends: np.ndarray) -> float | None:
    """The training fraction nearest :data:`DEFAULT_SPLIT` (in steps of 0.01, else 0.001, else 0.0001) that leaves
    every meter readings on both sides of the split; ``None`` when the meters share no slot to split at."""
    from policyopt.studies.backtest import split_slot

    lo = max(m["first_slot"] for m in meters) + 1  # split > every first slot: every meter has training readings
    hi = min(m["last_slot"] for m in meters)  # split ≤ every last slot: every meter has held-out readings
    if lo > hi or ends[1] == ends[0]:
        return None
    for steps in (100, 1000, 10_000):
        fits = [k / steps for k in range(1, steps) if lo <= split_slot(ends, k / steps) <= hi]
        if fits:
            return min(fits, key=lambda f: (abs(f - DEFAULT_SPLIT), f))
    return None


def _sparse_rows(counts: np.ndarray, names: list, quant, min_pairs: int) -> list:
    """Every (user, state) with fewer than `min_pairs` transitions out of the state, fewest first."""
    rows = [{"user": names[u], "state": int(k), "state_value": float(quant.state_values[k]), "count": int(counts[u, k])}
            for u, k in zip(*np.nonzero(counts < min_pairs))]
    return sorted(rows, key=lambda r: (r["count"], r["user"], r["state"]))


def check_data(df, *, states: int, value_range=None, slot_seconds: int | None = None,
               slot_length_source: str | None = None, source: str = "`data`") -> dict:
    """Check whether readings can support a design: span, slot, ragged meters, gaps, sparse states, MSE pilot.

    Parameters
    ----------
    df : pandas.DataFrame
        Long readings: user, time (integer slots), value (see :func:`~policyopt.models.estimation.validate_readings`).
    states : int
        K ≥ 2, the quantile states checked (as ``schedule --states K``).
    value_range : (float, float), optional
        Public range (LO, HI) the readings are clipped into before the quantile edges (data units); ``None``: the
        data's own range.
    slot_seconds : int, optional
        Length of one slot in seconds; ``None``: unknown.
    slot_length_source : str, optional
        Where it came from: ``"given"``, ``"time stamps"``, ``"bundled"`` (``None`` when unknown).
    source : str
        The data in words (first field of the result).

    Returns
    -------
    dict
        The ``policyopt check-data --json`` object (keys described in ``docs/cli.md``).

    Raises
    ------
    InvalidInputError
        Bad readings, `states` < 2 or more states than the readings' distinct values support, a bad `value_range`
        or `slot_seconds`.
    """
    started = time.perf_counter()
    if isinstance(states, bool) or not isinstance(states, (int, np.integer)) or states < 2:
        raise InvalidInputError(f"`states` must be an integer ≥ 2, got {states!r}")
    if slot_seconds is not None and (isinstance(slot_seconds, bool) or not isinstance(slot_seconds, (int, np.integer))
                                     or slot_seconds <= 0):
        raise InvalidInputError(f"`slot_seconds` must be a positive integer, got {slot_seconds!r}")
    data = validate_readings(df, source=source)
    if value_range is not None:
        value_range = check_value_range(value_range)
    quant, excluded = _quantizer(data, int(states), value_range, source)
    raw = data["value"].to_numpy()
    values = raw if value_range is None else np.clip(raw, *value_range)
    times = data["time"].to_numpy()
    uniq, user_idx = np.unique(data["user"].to_numpy(), return_inverse=True)  # the readings' (sorted) user order
    names = [str(u) for u in uniq]
    first, last = int(times.min()), int(times.max())
    span = last - first + 1
    day = None if slot_seconds is None else DAY_SECONDS / int(slot_seconds)
    phase = int(day) if day is not None and day == int(day) and day >= 2 else None
    meters, ragged = _meters(data, first, last, day)
    gaps = sum(m["missing"] for m in meters)
    counts = row_counts(user_idx, times, quant.transform(values), len(names), int(states))
    sparse = _sparse_rows(counts, names, quant, DEFAULT_MIN_PAIRS)
    suggested = suggest_states(values, user_idx, times, len(names), int(states), DEFAULT_MIN_PAIRS)
    period = phase if phase is not None else FALLBACK_PERIOD
    pilot = {"users": len(names), "periods": span // period, "band_possible": span // period >= MIN_BOOTSTRAP_PERIODS,
             "cross_term_users_ok": len(names) >= 2}
    out = {
        "data": source, "users": len(names), "readings": int(len(data)), "first_slot": first, "last_slot": last,
        "slots": span, "slot_length": None if slot_seconds is None else format_duration(int(slot_seconds)),
        "slot_seconds": None if slot_seconds is None else int(slot_seconds),
        "slot_length_source": None if slot_seconds is None else slot_length_source, "phase_period": phase,
        "ragged": ragged, "gaps": int(gaps), "gap_fraction": gaps / sum(m["last_slot"] - m["first_slot"] + 1 for m in meters),
        "states": int(states), "state_values": [float(v) for v in quant.state_values],
        "min_count": DEFAULT_MIN_ROW_TRANSITIONS, "min_pairs": DEFAULT_MIN_PAIRS, "sparse_rows": sparse,
        "suggested_states": suggested, "suggestions": [], "mse_pilot": pilot, "warnings": [],
    }
    ends = np.array([first, last], dtype=np.int64)
    split, one_sided = _one_sided(meters, ends, DEFAULT_SPLIT)
    facts = {"counts": counts, "names": names, "meters": meters, "split": split, "one_sided": one_sided,
             "fraction": _split_fraction(meters, ends) if one_sided else None, "excluded": excluded,
             "clipped": int(np.count_nonzero(values != raw)), "value_range": value_range, "day": day}
    out["suggestions"] = _suggestions(out, facts)
    out["warnings"] = _warnings(out, facts)
    out["wall_time_s"] = round(time.perf_counter() - started, 3)
    return out


def _names(rows: list, limit: int = 8) -> str:
    """User names of `rows` joined with commas, at most `limit` then "and N more"."""
    users = list(dict.fromkeys(r["user"] for r in rows))
    shown = ", ".join(users[:limit])
    return shown + (f" and {len(users) - limit} more" if len(users) > limit else "")


def _suggestions(out: dict, f: dict) -> list:
    """Concrete changes, each one sentence, from the checks of :func:`check_data` (``out``) and their facts (`f`)."""
    s, K, mp = [], out["states"], out["min_pairs"]
    if out["sparse_rows"]:
        worst = out["sparse_rows"][0]
        if out["suggested_states"] is not None:
            s.append(f"use --states {out['suggested_states']}: the most quantile states at which every (user, state) row "
                     f"has ≥ {mp} transitions (at {K} states user {worst['user']} leaves state {worst['state']} only "
                     f"{fmt_count(worst['count'], 'time')})")
        m = next(m for m in f["meters"] if m["user"] == worst["user"])
        own = m["last_slot"] - m["first_slot"] + 1
        if worst["count"] > 0:
            more = math.ceil((mp - worst["count"]) * own / worst["count"])
            s.append(f"a longer series: at its rate so far ({worst['count']} in {fmt_count(own, 'slot')}), user "
                     f"{worst['user']} needs about {fmt_count(more, 'more slot')} to leave state {worst['state']} {mp} "
                     f"times at {K} states")
        else:
            s.append(f"a longer series: user {worst['user']} never leaves state {worst['state']} in its "
                     f"{fmt_count(own, 'slot')} at {K} states")
        total = dict(zip(f["names"], f["counts"].sum(axis=1).tolist()))
        short = [m for m in f["meters"] if total[m["user"]] < 2 * mp]
        if out["suggested_states"] is None and short:
            s.append(f"drop or lengthen the meters with fewer than {2 * mp} transitions ({_names(short)}): no number of "
                     f"states gives them two rows of {mp}")
    if out["ragged"]:
        where = "; ".join(f"{r['user']}: slots {r['first_slot']}..{r['last_slot']}" for r in out["ragged"][:8])
        s.append(f"drop or fix the ragged meters ({where}; the data span slots {out['first_slot']}..{out['last_slot']}): "
                 "their shorter series give fewer pairs and a time split may leave them on one side")
    if out["phase_period"] is not None and out["slot_length_source"] not in ("bundled", "time stamps"):
        s.append(f"give schedule --slot-length {out['slot_length']} too (or --phase-period {out['phase_period']}, a day "
                 "of slots, to sweep and backtest): the readings penalty then bounds the worst time of day (integer slots "
                 "without a slot length have no phase)")
    elif out["slot_seconds"] is None:
        s.append("give --slot-length (e.g. 30min, 1h): with it a day of slots is known, for --phase-period and the "
                 "ragged-meter check")
    if f["one_sided"]:
        split = f["split"]
        who = "; ".join(f"{m['user']} (" + (f"last reading at slot {m['last_slot']}: no held-out readings"
                                             if m["last_slot"] < split else
                                             f"first reading at slot {m['first_slot']}: no training readings") + ")"
                        for m in f["one_sided"][:8])
        if f["fraction"] is not None:
            s.append(f"backtest --train-fraction {f['fraction']:g} (schedule --backtest {f['fraction']:g}): the default "
                     f"{DEFAULT_SPLIT:g} splits at slot {split}, which leaves {who}; {f['fraction']:g} gives every meter "
                     "readings on both sides")
        else:
            s.append(f"no training fraction gives every meter readings on both sides of a backtest split (the meters "
                     f"share no slot); the default {DEFAULT_SPLIT:g} splits at slot {split}, which leaves {who}")
    return s


def _warnings(out: dict, f: dict) -> list:
    """What is wrong with the readings for a design, each one sentence (empty when nothing is)."""
    w, K, mp, mc = [], out["states"], out["min_pairs"], out["min_count"]
    if f["value_range"] is None:
        w.append("no --value-range: the states and the MSE use the data's own range, which is not private; declare the "
                 "public range of one reading")
    elif f["clipped"]:
        lo, hi = f["value_range"]
        w.append(f"{fmt_count(f['clipped'], 'reading')} outside {fmt_value(lo)}:{fmt_value(hi)} clipped into it")
    if out["sparse_rows"]:
        chain = sum(r["count"] < mc for r in out["sparse_rows"])
        w.append(f"{fmt_count(len(out['sparse_rows']), '(user, state) row')} with fewer than {mp} transitions at {K} "
                 f"states ({_names(out['sparse_rows'])}): Δ(t) estimated from the readings makes no claim at a lag where "
                 f"such a row has fewer than {mp} pairs (schedule --max-tv empirical then uses Δ = 1)"
                 + (f"; {chain} of them below {mc}, where schedule's chains are mostly pseudo-count" if chain else ""))
    if f["excluded"] is None:
        w.append(f"no user has {10 * K} transitions (10·K): schedule --states {K} refuses these readings")
    elif f["excluded"]:
        w.append(f"schedule --states {K} leaves out {_names([{'user': u} for u in f['excluded']])} "
                 f"(fewer than {10 * K} transitions)")
    mostly = [m for m in f["meters"] if m["last_slot"] - m["first_slot"] + 1 > 10 * m["readings"] + 1000]
    if mostly:
        w.append(f"mostly gaps ({_names(mostly)}): a span over ten times the readings plus 1000 slots, which the "
                 "Δ(t) estimate and the model check refuse; put the readings on a regular slot grid")
    if out["ragged"]:
        how = ("a day of slots" if f["day"] is not None else f"{100 * RAGGED_SHARE:g} % of the span")
        w.append(f"{fmt_count(len(out['ragged']), 'ragged meter')} ({_names(out['ragged'])}): the first or last reading "
                 f"lies more than {how} from the data's first or last slot")
    if f["one_sided"]:
        w.append(f"a backtest split at {DEFAULT_SPLIT:g} (slot {f['split']}) leaves {_names(f['one_sided'])} with readings "
                 "on one side only: left out of the replay")
    p = out["mse_pilot"]
    if not p["cross_term_users_ok"]:
        w.append("one user: the readings penalty's cross term (users moving together) cannot be estimated")
    if not p["band_possible"]:
        w.append(f"{fmt_count(p['periods'], 'whole period')}: the readings penalty's bootstrap band (--penalty "
                 f"readings-upper) needs ≥ {MIN_BOOTSTRAP_PERIODS}")
    return w


def format_data_check(d: dict) -> str:
    """The text of ``policyopt check-data`` from :func:`check_data`'s result: a line per check, then suggestions.

    Raises
    ------
    ValueError
        If the text contradicts itself (:func:`policyopt.formatting.check_text`; a bug).
    """
    known = d["slot_length_source"] in ("bundled", "time stamps")
    default = (": the default --phase-period of schedule, sweep, backtest" if known
               else f": --phase-period {d['phase_period']} of schedule (its default with --slot-length)")
    slot = (f"{d['slot_length']} ({d['slot_length_source']}); a day is {fmt_count(d['phase_period'], 'slot')}{default}"
            if d["phase_period"] is not None else
            f"{d['slot_length']} ({d['slot_length_source']}); a day is not a whole number ≥ 2 of slots"
            if d["slot_length"] is not None else "unknown (give --slot-length)")
    ragged = "; ".join(f"{r['user']} slots {r['first_slot']}..{r['last_slot']}, {fmt_count(r['readings'], 'reading')}, "
                       f"{r['missing']} missing" for r in d["ragged"]) or "none"
    sparse = ", ".join(f"{r['user']} state {r['state']} ({fmt_value(r['state_value'], 4)}): {r['count']}"
                       for r in d["sparse_rows"][:10])
    more = f" and {len(d['sparse_rows']) - 10} more" if len(d["sparse_rows"]) > 10 else ""
    p = d["mse_pilot"]
    unit = "days" if d["phase_period"] is not None else f"spans of {FALLBACK_PERIOD} slots"
    lines = [
        "policyopt check-data: can these readings support a design? (span, gaps, ragged meters, sparse states)",
        f"data        : {d['data']}",
        f"readings    : {fmt_count(d['readings'], 'reading')} of {fmt_count(d['users'], 'user')}, slots "
        f"{d['first_slot']}..{d['last_slot']} ({fmt_count(d['slots'], 'slot')})",
        f"slot length : {slot}",
        f"ragged      : {ragged}",
        f"gaps        : {fmt_count(d['gaps'], 'slot')} without a reading inside the users' spans "
        f"({fmt_value(100 * d['gap_fraction'], 3)} %)",
        f"states      : {d['states']} quantile states, values " + ", ".join(fmt_value(v, 4) for v in d["state_values"]),
        "sparse rows : " + (f"{fmt_count(len(d['sparse_rows']), '(user, state) row')} with fewer than {d['min_pairs']} transitions "
                             f"(Δ(t) from the readings needs {d['min_pairs']}, schedule's chains {d['min_count']}): "
                             f"{sparse}{more}" if d["sparse_rows"] else
                             f"none: every (user, state) row has ≥ {d['min_pairs']} transitions"),
        "suggested   : " + (f"--states {d['suggested_states']} (the most states with no sparse row)"
                            if d["suggested_states"] is not None else "no number of states ≥ 2 leaves no sparse row"),
        f"MSE pilot   : {fmt_count(p['users'], 'user')} (the cross term needs ≥ 2: "
        f"{'yes' if p['cross_term_users_ok'] else 'no'}), {p['periods']} whole {unit} (the bootstrap band of --penalty "
        f"readings-upper needs ≥ {MIN_BOOTSTRAP_PERIODS}: {'yes' if p['band_possible'] else 'no'})",
    ]
    lines += [f"suggestion  : {s}" for s in d["suggestions"]] or ["suggestion  : none: the readings support a design"]
    lines += [f"warning     : {w}" for w in d["warnings"]]
    lines.append(f"wall time   : {d['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))


def data_check_lines(d: dict) -> list[str]:
    """The data-check section that opens the text of ``schedule``, ``check-model`` and ``backtest`` on ``--data``: one
    ``data check`` line (readings, span, slot length, ragged meters, gaps, sparse (user, state) rows and the states
    that leave none) and a ``data advice`` line per suggestion of :func:`check_data`'s result `d` (the command's JSON
    ``data_check``; ``policyopt check-data`` prints the whole of it)."""
    slot = ("slot length unknown" if d["slot_length"] is None else
            f"slots of {d['slot_length']} ({d['slot_length_source']})"
            + ("" if d["phase_period"] is None else f", a day of {fmt_count(d['phase_period'], 'slot')}"))
    ragged = (f"{fmt_count(len(d['ragged']), 'ragged meter')} ({_names(d['ragged'])})" if d["ragged"]
              else "no ragged meter")
    sparse = (f"{fmt_count(len(d['sparse_rows']), '(user, state) row')} with fewer than {d['min_pairs']} transitions at "
              f"{d['states']} states" if d["sparse_rows"] else f"no (user, state) row under {d['min_pairs']} transitions "
              f"at {d['states']} states")
    states = ("" if not d["sparse_rows"] else
              f"; --states {d['suggested_states']} leaves none" if d["suggested_states"] is not None else
              "; no number of states leaves none")
    lines = [f"data check  : {fmt_count(d['readings'], 'reading')} of {fmt_count(d['users'], 'user')} over "
             f"{fmt_count(d['slots'], 'slot')}, {slot}; {ragged}; {fmt_count(d['gaps'], 'slot')} missing inside the "
             f"meters' spans; {sparse}{states} (policyopt check-data for the whole check)"]
    return lines + [f"data advice : {s}" for s in d["suggestions"]]


def with_data_check(text: str, out: dict) -> str:
    """`text` (a command's report) with the lines of :func:`data_check_lines` after its title and the guarantee it
    states first (``guarantee`` and ``model free`` lines: every data run states its guarantee first) when `out` (the
    command's JSON) has a ``data_check``; else `text` unchanged."""
    if not out.get("data_check"):
        return text
    lines = text.split("\n")
    at = 1
    while at < len(lines) and lines[at].startswith(("guarantee   :", "model free  :")):
        at += 1
    return "\n".join(lines[:at] + data_check_lines(out["data_check"]) + lines[at:])


def readings_check(df, *, states: int, value_range=None, slot_seconds: int | None = None,
                   slot_length_given: bool = False, time_stamps: bool = False, source: str = "`data`") -> dict:
    """:func:`check_data` of the readings a command was given with ``--data``, as the JSON-ready ``data_check`` of
    its report (the slot length's source named ``given`` or ``time stamps``)."""
    from policyopt.formatting import json_clean

    how = "given" if slot_length_given and slot_seconds is not None else "time stamps" if time_stamps else None
    return json_clean(check_data(df, states=states, value_range=value_range, slot_seconds=slot_seconds,
                                 slot_length_source=how, source=source))
