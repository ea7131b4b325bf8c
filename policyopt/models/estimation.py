"""Estimating users' Markov chains from readings.

Readings (e.g. hourly kWh) are quantised into K states with quantile edges shared by
all users, transitions between consecutive slots are counted per user, and each user's
transition matrix is the maximum-likelihood estimate with additive (Laplace) smoothing,
eq. (28) of Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019:
p̂_jk = (n_jk + s) / Σ_u (n_ju + s).

With a public value range [LO, HI] the readings are clipped into it *before* anything is
estimated (quantile edges and state values come from the clipped readings), so that the
sensitivity of a released mean, (HI − LO)/I, does not depend on the data.  A row of a
user's matrix estimated from few observed transitions is mostly pseudo-count; such
(user, state) pairs are listed by :meth:`FittedModel.sparse_states`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, check_int, check_value_range, fmt
from policyopt.models.markov import MarkovChain, Population
from policyopt.result import result_repr

__all__ = ["Quantizer", "FittedModel", "fit_population", "validate_readings", "readings_states", "readings_states_starts",
           "DEFAULT_MIN_ROW_TRANSITIONS"]

#: Observed transitions out of a state below which a user's row counts as sparse.
DEFAULT_MIN_ROW_TRANSITIONS = 30
#: Quantile states K of a chain fitted to data when none is given.
DEFAULT_STATES = 12
#: Additive smoothing pseudo-count of a fitted chain when none is given.
DEFAULT_SMOOTHING = 0.01


@dataclass(frozen=True)
class Quantizer:
    """Maps readings to K states with shared quantile edges.

    Attributes
    ----------
    edges : numpy.ndarray, shape (K-1,)
        Inner bin edges (reading units); state k holds readings in [edges[k-1], edges[k]).
    state_values : numpy.ndarray, shape (K,)
        Value of each state: the mean of the pooled training readings in its bin.
    """

    edges: np.ndarray
    state_values: np.ndarray

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

    @property
    def n_states(self) -> int:
        """Number of states K."""
        return self.state_values.size

    @classmethod
    def fit(cls, values, n_states: int) -> "Quantizer":
        """Quantile edges of the pooled `values` for `n_states` equally likely bins.

        Raises
        ------
        InvalidInputError
            If `n_states` < 2, or ties in the data make some bins empty (the message says
            how many distinct bins the data support).
        """
        check_int(n_states, "n_states", 2)
        x = np.asarray(values, dtype=float).reshape(-1)
        edges = np.quantile(x, np.linspace(0.0, 1.0, n_states + 1)[1:-1])
        states = np.searchsorted(edges, x, side="right")
        counts = np.bincount(states, minlength=n_states)
        if np.any(counts == 0) or np.any(np.diff(edges) <= 0):
            # readings with ties (discrete values, e.g. 0/1): edges between distinct values instead
            edges = _tie_edges(x, n_states)
            states = np.searchsorted(edges, x, side="right") if edges is not None else states
            counts = np.bincount(states, minlength=n_states)
        if edges is None or np.any(counts == 0) or np.any(np.diff(edges) <= 0):
            distinct = int(np.unique(x).size)
            raise InvalidInputError(
                f"`n_states`={n_states} quantile bins are not all distinct for these readings (ties): they hold only "
                + (f"{distinct} distinct values; use at most {distinct} states" if distinct >= 2 else
                   "one distinct value, so no states can be told apart")
            )
        sums = np.bincount(states, weights=x, minlength=n_states)
        edges.setflags(write=False)
        vals = sums / counts
        vals.setflags(write=False)
        return cls(edges=edges, state_values=vals)

    def transform(self, values) -> np.ndarray:
        """State index (0..K-1) of each reading; same shape as `values`."""
        return np.searchsorted(self.edges, np.asarray(values, dtype=float), side="right")


def _tie_edges(x: np.ndarray, n_states: int) -> np.ndarray | None:
    """Inner edges for readings with ties: each placed halfway between two distinct values, at the split whose
    cumulative share of readings is nearest to the quantile k/K (shares of equal values are never split); ``None``
    when fewer than K distinct values exist."""
    vals, cnt = np.unique(x, return_counts=True)
    if vals.size < n_states:
        return None
    cum = np.cumsum(cnt)[:-1] / x.size  # share of readings ≤ vals[i], for a split after vals[i]
    edges, last = [], -1
    for k in range(1, n_states):
        free = n_states - 1 - k  # splits still to place after this one
        lo, hi = last + 1, vals.size - 2 - free
        i = lo + int(np.argmin(np.abs(cum[lo : hi + 1] - k / n_states)))
        edges.append(0.5 * (vals[i] + vals[i + 1]))
        last = i
    return np.asarray(edges, dtype=float)


@dataclass(frozen=True)
class FittedModel:
    """Chains estimated from data.

    Attributes
    ----------
    population : Population
        One chain per kept user (count 1 each).
    quantizer : Quantizer
        Edges and state values, to map new readings.
    users : tuple of str
        Kept users, in the order of ``population.chains``.
    excluded : dict
        User → reason, for users left out (too few transitions).
    transitions : dict
        User → number of transitions counted.
    smoothing : float
        Pseudo-count s added to every cell.
    counts : dict
        Kept user → transition counts, shape (K, K), ``counts[x, y]`` = number of x → y steps.
    value_range : (float, float) or None
        Public range (LO, HI) the readings were clipped into before estimation; ``None`` when no
        range was declared (the state values then come from the raw data).
    clipped : int
        Number of readings that clipping changed (0 without `value_range`).
    """

    population: Population
    quantizer: Quantizer
    users: tuple
    excluded: dict = field(default_factory=dict)
    transitions: dict = field(default_factory=dict)
    smoothing: float = 0.0
    counts: dict = field(default_factory=dict)
    value_range: tuple | None = None
    clipped: int = 0

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

    def row_transitions(self) -> dict:
        """Observed transitions out of each state, per kept user.

        Returns
        -------
        dict
            User → numpy.ndarray of int, shape (K,): entry x is Σ_y ``counts[user][x, y]``.
        """
        return {u: self.counts[u].sum(axis=1).astype(np.int64) for u in self.users}

    def sparse_states(self, min_row_transitions: int = DEFAULT_MIN_ROW_TRANSITIONS) -> list:
        """(user, state) pairs whose row was estimated from fewer than `min_row_transitions` transitions.

        Such a row is dominated by the smoothing pseudo-count (a row with 0 observations is pure
        pseudo-count), so Δ(t) computed from it reflects the smoothing, not the data.

        Parameters
        ----------
        min_row_transitions : int
            Threshold (≥ 1) on the observed transitions out of a state.

        Returns
        -------
        list of dict
            One ``{"user", "state", "transitions"}`` per sparse row, users in order, states ascending.

        Raises
        ------
        InvalidInputError
            If `min_row_transitions` is not an integer ≥ 1.
        """
        check_int(min_row_transitions, "min_row_transitions", 1)
        out = []
        for user, rows in self.row_transitions().items():
            for x in np.flatnonzero(rows < min_row_transitions):
                out.append({"user": user, "state": int(x), "transitions": int(rows[x])})
        return out

    def temporal_matrices(self) -> tuple[list, list]:
        """Backward and forward transition matrices of every kept user, for temporal privacy leakage.

        P_F[j, k] = Pr(l^{t+1} = k | l^t = j) is the smoothed MLE (eq. 28 of Cao et al. (2019)); P_B[j, k] =
        Pr(l^{t−1} = k | l^t = j) under the empirical joint distribution of consecutive
        states, (n_kj + s) / Σ_k' (n_k'j + s), with the same pseudo-count s.

        Returns
        -------
        (P_B, P_F) : two lists of numpy.ndarray, shape (K, K) each, in the order of ``users``
        """
        s = self.smoothing
        P_B, P_F = [], []
        for user, chain in zip(self.users, self.population.chains):
            back = self.counts[user].T + s  # row j: counts of k → j
            P_B.append(back / back.sum(axis=1, keepdims=True))
            P_F.append(np.array(chain.P))
        return P_B, P_F


def _py(v):
    """Plain Python scalar for messages (numpy scalars repr as np.float64(...))."""
    return v.item() if hasattr(v, "item") else v


class _Shown(str):
    """A field read as text, shown in messages without quotes (as it appears in the file)."""

    def __repr__(self) -> str:
        return str(self)


def _field(v):
    v = _py(v)
    return _Shown(v) if isinstance(v, str) else v


#: Largest magnitude of a reading accepted by :func:`validate_readings` (squares and sums of squares stay finite).
MAX_ABS_READING = 1e100


def _integer_times(column, source: str) -> np.ndarray:
    """Times as exact int64: integers are parsed as integers (never through float, which merges times ≥ 2^53);
    integral floats such as ``3.0`` are accepted below 2^53, where float is exact."""
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    if column.dtype.kind in "iu":
        return column.to_numpy(dtype=np.int64)
    out = np.empty(len(column), dtype=np.int64)
    for i, raw in enumerate(column.tolist()):
        text = str(raw).strip()
        try:
            t = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                f = float("nan")
            if not (np.isfinite(f) and f == np.round(f) and abs(f) < 2.0**53):
                raise InvalidInputError(f"{source} line {i + 2}: `time` {_field(raw)!r} is not an integer slot") from None
            t = int(f)
        if not lo <= t <= hi:
            raise InvalidInputError(f"{source} line {i + 2}: `time` {_field(raw)!r} is outside the 64-bit integer range")
        out[i] = t
    return out


def sort_readings(df):
    """`df` (columns user, time, value) sorted by user, then time (stable), with a fresh index."""
    return df.sort_values(["user", "time"], kind="stable").reset_index(drop=True)


def validate_readings(df, *, source: str = "`data`", sort: bool = True):
    """Check a long table of readings (columns user, time, value) and return a clean copy.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``user`` (any hashable), ``time`` (integer slots) and ``value`` (finite numbers).
    source : str
        How to name the input in messages (e.g. the CSV path).
    sort : bool
        Sort by user and time (default); ``False`` keeps the rows in their input order (a stream's order
        check needs it).

    Returns
    -------
    pandas.DataFrame
        Columns user (str), time (int64, parsed exactly), value (float64), sorted by user and time
        unless ``sort=False``.

    Raises
    ------
    InvalidInputError
        Missing columns; a non-numeric, NaN or infinite value or a non-integer time (with the
        CSV line number, counting the header as line 1); a repeated (user, time) pair.
    """
    import pandas as pd

    missing = [c for c in ("user", "time", "value") if c not in df.columns]
    if missing:
        raise InvalidInputError(f"{source} must have columns user,time,value; missing {missing} (found {list(df.columns)})")
    extra = [c for c in df.columns if c not in ("user", "time", "value")]
    if extra:
        raise InvalidInputError(f"{source} has unexpected columns {extra}; expected exactly user,time,value")
    value = pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(value)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(
            f"{source} line {i + 2}: `value` {_field(df['value'].iloc[i])!r} is not a finite number (NaN readings are not allowed)"
        )
    big = np.abs(value) > MAX_ABS_READING
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise InvalidInputError(
            f"{source} line {i + 2}: `value` {_field(df['value'].iloc[i])!r} exceeds ±{MAX_ABS_READING:g} in magnitude "
            "(squared errors of such readings overflow; rescale the unit)"
        )
    time = _integer_times(df["time"], source)
    user = df["user"]
    empty = user.isna().to_numpy() | (user.astype(str).str.strip() == "").to_numpy()
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise InvalidInputError(f"{source} line {i + 2}: `user` is empty")
    out = pd.DataFrame({"user": user.astype(str), "time": time, "value": value})
    dup = out.duplicated(["user", "time"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InvalidInputError(
            f"{source} line {i + 2}: user {out['user'].iloc[i]!r} has a second reading at time {int(out['time'].iloc[i])}"
        )
    return sort_readings(out) if sort else out


def fit_population(
    df,
    n_states: int = DEFAULT_STATES,
    *,
    smoothing: float = DEFAULT_SMOOTHING,
    min_transitions: int | None = None,
    quantizer: Quantizer | None = None,
    source: str = "`data`",
    unit: str | None = None,
    value_range=None,
) -> FittedModel:
    """Estimate one Markov chain per user from a long table of readings.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns user, time (integer slots), value (see :func:`validate_readings`).
    n_states : int
        Number of quantile states K (≥ 2), edges shared by all users.
    smoothing : float
        Additive pseudo-count s ≥ 0 per cell (eq. 28 of Cao et al. (2019)).  The default 0.01 keeps the
        estimate close to the MLE while making every chain irreducible and aperiodic; a
        large s pulls rows towards uniform, which mixes faster and *lowers* Δ(t), so it
        should stay small when the model is used to bound privacy risk.
    min_transitions : int, optional
        Users with fewer transitions (pairs of readings in consecutive slots) are left out
        and reported in ``FittedModel.excluded``.  Default 10·K.
    quantizer : Quantizer, optional
        Reuse the edges and state values of an earlier fit (e.g. to map new data onto the
        same states); `n_states` is then ignored.
    source : str
        Name of the input for messages.
    unit : str, optional
        Unit of the readings (e.g. ``"kWh"``), carried into ``population.value_unit`` so that
        penalties built from the population know theirs (kWh² for the MSE of a kWh mean).  Default:
        ``df.attrs["unit"]`` when the table has one (:func:`policyopt.data.load_citylearn` sets
        ``"kWh"``), else ``""``.
    value_range : (float, float), optional
        Public range (LO, HI) of a reading, LO < HI (reading units).  Every reading is clipped
        into [LO, HI] before the quantile edges, state values and counts are computed, so the
        state values lie in the range and a released mean has sensitivity (HI − LO)/I.  Default:
        no clipping (the range then comes from the data, which is not differentially private).

    Returns
    -------
    FittedModel

    Raises
    ------
    InvalidInputError
        Bad readings (see :func:`validate_readings`), bad `n_states`, `smoothing` or `value_range`.
    InvalidModelError
        If no user has enough transitions, or (with ``smoothing=0``) a chain is reducible.
    """
    if not isinstance(smoothing, (int, float)) or not (np.isfinite(smoothing) and smoothing >= 0):
        raise InvalidInputError(f"`smoothing` must be a finite number ≥ 0, got {fmt(smoothing)}")
    if unit is None:
        attrs = getattr(df, "attrs", None)
        unit = attrs.get("unit", "") if isinstance(attrs, dict) else ""
    if not isinstance(unit, str):
        raise InvalidInputError(f"`unit` must be a string such as 'kWh', got {fmt(unit)}")
    data = validate_readings(df, source=source)
    clipped = 0
    if value_range is not None:
        lo, hi = check_value_range(value_range)
        raw = data["value"].to_numpy()
        clipped = int(np.count_nonzero((raw < lo) | (raw > hi)))
        data["value"] = np.clip(raw, lo, hi)
        value_range = (lo, hi)
    if quantizer is not None and not isinstance(quantizer, Quantizer):
        raise InvalidInputError(f"`quantizer` must be a Quantizer, got {fmt(quantizer)}")
    quant = Quantizer.fit(data["value"].to_numpy(), n_states) if quantizer is None else quantizer
    k = quant.n_states
    threshold = 10 * k if min_transitions is None else int(min_transitions)
    states = quant.transform(data["value"].to_numpy())
    users = data["user"].to_numpy()
    times = data["time"].to_numpy()
    same_user = users[1:] == users[:-1]
    consecutive = same_user & (times[1:] == times[:-1] + 1)
    src, dst, who = states[:-1][consecutive], states[1:][consecutive], users[:-1][consecutive]

    chains, kept, excluded, n_trans, kept_counts = [], [], {}, {}, {}
    for user in dict.fromkeys(users):  # first-appearance order (sorted)
        mask = who == user
        n = int(mask.sum())
        n_trans[user] = n
        if n < threshold:
            excluded[user] = f"{n} transitions < {threshold} needed"
            continue
        counts = np.zeros((k, k))
        np.add.at(counts, (src[mask], dst[mask]), 1.0)
        rows = counts + smoothing
        totals = rows.sum(axis=1, keepdims=True)
        if np.any(totals == 0):
            r = int(np.flatnonzero(totals[:, 0] == 0)[0])
            excluded[user] = f"state {r} never left (no transitions from it) and smoothing is 0"
            continue
        P = rows / totals  # eq. (28) of Cao et al. (2019)
        chain = MarkovChain(P, quant.state_values)
        if not chain.is_irreducible:
            excluded[user] = "estimated chain is reducible (use smoothing > 0)"
            continue
        chains.append(chain)
        kept.append(user)
        kept_counts[user] = counts
    if not chains:
        raise InvalidModelError(
            f"no user in {source} has at least {threshold} transitions between consecutive slots "
            f"(found {max(n_trans.values()) if n_trans else 0} at most); supply longer series or fewer states"
        )
    return FittedModel(
        population=Population(chains, value_unit=unit),
        quantizer=quant,
        users=tuple(kept),
        excluded=excluded,
        transitions=n_trans,
        smoothing=float(smoothing),
        counts=kept_counts,
        value_range=value_range,
        clipped=clipped,
    )


def readings_states(df, quantizer, users) -> np.ndarray:
    """States of each user's consecutive slots, −1 where a slot has no reading.

    Parameters
    ----------
    df : pandas.DataFrame
        Validated readings (user, time, value), already clipped to the public range if there is one.
    quantizer : policyopt.models.estimation.Quantizer
        Maps readings to states.
    users : sequence of str
        Users, in the order of the rows returned; slot 0 of a row is that user's first time in `df`.

    Returns
    -------
    numpy.ndarray of int64, shape (len(users), longest span)

    Raises
    ------
    InvalidInputError
        If a user's span has more than ten times as many slots as readings plus 1000 (the series would be
        mostly gaps; resample the data onto a regular slot grid first).
    """
    groups = {u: g for u, g in df.groupby("user", sort=False)}
    rows = []
    for u in users:
        g = groups[u]
        t = g["time"].to_numpy(dtype=np.int64)
        span = int(t.max() - t.min()) + 1
        if span > 10 * t.size + 1000:
            raise InvalidInputError(
                f"user {u!r} has {t.size} readings spread over {span} slots: the series is mostly gaps; "
                "put the readings on a regular slot grid"
            )
        x = np.full(span, -1, dtype=np.int64)
        x[t - t.min()] = quantizer.transform(g["value"].to_numpy())
        rows.append(x)
    T = max(r.size for r in rows)
    out = np.full((len(rows), T), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : r.size] = r
    return out


def readings_states_starts(df, quantizer, users) -> tuple[np.ndarray, np.ndarray]:
    """(states, starts) of `users` in `df`: :func:`readings_states` and each user's first slot there (column 0).

    Returns
    -------
    states : numpy.ndarray of int64, shape (len(users), longest span)
    starts : numpy.ndarray of int64, shape (len(users),)
        Absolute slot of column 0 per user (the phase of a phase chain counts from it).

    Raises
    ------
    InvalidInputError
        As :func:`readings_states`.
    """
    starts = df.groupby("user", sort=False)["time"].min()
    return readings_states(df, quantizer, users), np.array([int(starts[u]) for u in users], dtype=np.int64)
