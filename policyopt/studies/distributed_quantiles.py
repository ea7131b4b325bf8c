"""Exact quantiles of the pooled readings of a partitioned data set, without holding them in one process.

The serial path (:func:`policyopt.models.estimation.fit_population`) quantises with ``numpy.quantile`` (method
``linear``) of *all* readings: a fixed interpolation between two order statistics x_(i) and x_(i+1).  This module
finds exactly those order statistics by a radix selection on the IEEE-754 bit patterns (a float's bits, sign-adjusted,
sort as the floats do): every pass counts, per partition, the next 16 bits of the readings that share the prefix found
so far, the counts are summed, and once a prefix holds few enough readings (:data:`COLLECT_CAP`) they are collected
and sorted.  :func:`quantile_from_order_statistics` then applies numpy's own interpolation formula, so the state edges
equal the serial ones bit for bit.  The per-state counts and sums (the pooled bin means) are one more pass.  Step 1
and 2 of :mod:`policyopt.studies.distributed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["quantile_indices", "quantile_from_order_statistics", "float_keys", "keys_to_floats",
           "radix_partition_pass", "exact_order_statistics", "value_count_partition", "state_sums_partition",
           "COLLECT_CAP"]

#: Readings per selection prefix below which the radix selection collects and sorts them instead of
#: counting another 16 bits (8 bytes each: 1 Mi readings = 8 MiB on the client).
COLLECT_CAP = 1 << 20

_SIGN = np.uint64(1 << 63)
_DIGIT_BITS = 16


def quantile_indices(n: int, n_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order-statistic indices and weights of ``numpy.quantile(x, linspace(0, 1, K+1)[1:-1])`` (method linear).

    Parameters
    ----------
    n : int
        Number of readings (≥ 1).
    n_states : int
        K.

    Returns
    -------
    (previous, next, gamma) : int64 arrays and float64 array, shape (K-1,)
        The quantile is the interpolation between the sorted readings x[previous] and x[next] with
        weight gamma (numpy's virtual index (n − 1)·q, Hyndman and Fan's method 7).
    """
    q = np.linspace(0.0, 1.0, n_states + 1)[1:-1]
    virtual = (n - 1) * q
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above] = n - 1
    nxt[above] = n - 1
    below = virtual < 0
    prev[below] = 0
    nxt[below] = 0
    gamma = virtual - np.floor(virtual)
    return prev.astype(np.int64), nxt.astype(np.int64), gamma


def quantile_from_order_statistics(lower, upper, gamma) -> np.ndarray:
    """numpy's linear interpolation between order statistics (the same floating-point operations).

    Parameters
    ----------
    lower, upper : array_like of float
        x[previous] and x[next] of :func:`quantile_indices`.
    gamma : array_like of float
        Weights of :func:`quantile_indices`.

    Returns
    -------
    numpy.ndarray of float64
        lower + (upper − lower)·γ, or upper − (upper − lower)·(1 − γ) where γ ≥ 0.5 (as numpy
        computes it, so that the result equals ``numpy.quantile`` bit for bit; tested).
    """
    a = np.asarray(lower, dtype=float)
    b = np.asarray(upper, dtype=float)
    t = np.asarray(gamma, dtype=float)
    diff = b - a
    out = a + diff * t
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out


def float_keys(values) -> np.ndarray:
    """uint64 keys that sort as the float64 `values` do (−0.0 is taken as +0.0); NaN is not allowed."""
    x = np.asarray(values, dtype=np.float64) + 0.0  # −0.0 + 0.0 = +0.0
    bits = x.view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def keys_to_floats(keys) -> np.ndarray:
    """Inverse of :func:`float_keys`."""
    k = np.asarray(keys, dtype=np.uint64)
    bits = np.where(k & _SIGN, k & ~_SIGN, ~k)
    return bits.view(np.float64)


@dataclass
class _Target:
    rank: int  # rank within the current prefix group
    shift: int  # bits not yet fixed (64 = none fixed)
    prefix: int  # key >> shift
    count: int  # readings in the group
    value: float | None = None


def _group_mask(keys: np.ndarray, shift: int, prefix: int) -> np.ndarray | slice:
    if shift >= 64:
        return slice(None)
    return (keys >> np.uint64(shift)) == np.uint64(prefix)


def radix_partition_pass(path, option: str, requests: list) -> list:
    """One selection pass over one partition: per request (shift, prefix, collect), the keys or a 16-bit histogram.

    Parameters
    ----------
    path : str or Path
        Parquet partition (only its ``value`` column is read).
    option : str
        Option name for messages.
    requests : list of (int, int, bool)
        Groups of keys with ``key >> shift == prefix``; ``collect`` True returns their keys, else
        the counts of their next 16 bits (65,536 int64).

    Returns
    -------
    list of numpy.ndarray, one per request.
    """
    from policyopt.io import read_parquet_partition

    keys = float_keys(read_parquet_partition(path, option, columns=("value",))["value"])
    out = []
    for shift, prefix, collect in requests:
        sel = keys[_group_mask(keys, shift, prefix)]
        if collect:
            out.append(sel)
        else:
            digit = (sel >> np.uint64(shift - _DIGIT_BITS)) & np.uint64((1 << _DIGIT_BITS) - 1)
            out.append(np.bincount(digit.astype(np.int64), minlength=1 << _DIGIT_BITS))
    return out


def exact_order_statistics(run_pass, n: int, ranks, *, collect_cap: int = COLLECT_CAP) -> np.ndarray:
    """Exact order statistics x_(r) (0-based ranks) of readings spread over partitions, by radix selection.

    Parameters
    ----------
    run_pass : callable
        ``run_pass(requests)`` runs :func:`radix_partition_pass` on every partition and returns the
        per-request results reduced over partitions (histograms summed, collected keys concatenated).
    n : int
        Total number of readings.
    ranks : array_like of int
        0-based ranks in the sorted readings.
    collect_cap : int
        Largest number of keys collected in one pass (all groups together).

    Returns
    -------
    numpy.ndarray of float64, one value per rank.

    Notes
    -----
    Each pass fixes 16 more bits of every target's key (at most four passes) unless the group is
    small enough to collect; the answer is exact, not an approximation.
    """
    targets = {int(r): _Target(rank=int(r), shift=64, prefix=0, count=int(n)) for r in ranks}
    while True:
        open_groups: dict[tuple[int, int], int] = {}
        for t in targets.values():
            if t.value is None:
                if t.shift == 0:  # every bit fixed: the group is one value
                    t.value = float(keys_to_floats(np.array([t.prefix], dtype=np.uint64))[0])
                else:
                    open_groups[(t.shift, t.prefix)] = t.count
        if not open_groups:
            break
        budget = collect_cap
        requests = []
        for (shift, prefix), count in sorted(open_groups.items(), key=lambda kv: kv[1]):
            collect = count <= budget
            if collect:
                budget -= count
            requests.append((shift, prefix, collect))
        results = run_pass(requests)
        by_group = {(s, p): (c, r) for (s, p, c), r in zip(requests, results)}
        for t in targets.values():
            if t.value is not None:
                continue
            collect, res = by_group[(t.shift, t.prefix)]
            if collect:
                keys = np.sort(res)
                t.value = float(keys_to_floats(keys[t.rank : t.rank + 1])[0])
                continue
            cum = np.cumsum(res)
            b = int(np.searchsorted(cum, t.rank, side="right"))
            below = int(cum[b - 1]) if b > 0 else 0
            t.rank -= below
            t.count = int(res[b])
            t.shift -= _DIGIT_BITS
            t.prefix = (t.prefix << _DIGIT_BITS) | b
    return np.array([targets[int(r)].value for r in ranks], dtype=float)


def value_count_partition(path, option: str) -> int:
    """Number of readings in one partition (its ``value`` column is read and checked)."""
    from policyopt.io import read_parquet_partition

    return int(read_parquet_partition(path, option, columns=("value",))["value"].size)


def state_sums_partition(path, option: str, edges) -> tuple[np.ndarray, np.ndarray]:
    """Per state (``searchsorted(edges, x, 'right')``): number of readings and their sum, for one partition."""
    from policyopt.io import read_parquet_partition

    x = read_parquet_partition(path, option, columns=("value",))["value"]
    k = len(edges) + 1
    states = np.searchsorted(np.asarray(edges, dtype=float), x, side="right")
    return np.bincount(states, minlength=k), np.bincount(states, weights=x, minlength=k)
