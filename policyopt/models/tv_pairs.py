"""The largest row-pair distance of Δ(t) for chains of many states, compiled, with pairs pruned by earlier values.

Δ(t) of eq. (12) of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024, is half the largest ℓ1 distance between two t-step rows of the reversed chain: a maximum over K(K − 1)/2 pairs
of K-vectors.  :func:`policyopt.models.tv_kernels.pairwise_max_tv` forms every pair's distance with numpy; for the
144-state Z chain of an ``order:2`` model that is 10,296 pairs of 144 entries per user and age, 65 % of the model's
Δ_Z (profiled on 100 users).  Two facts make most of them unnecessary:

* a pair's distance never grows with t: the difference of two rows of P̂^t is the difference at t − 1 times the
  stochastic P̂, and ‖vP̂‖₁ ≤ ‖v‖₁ (across a jump of several steps too, P̂^gap being stochastic);
* only the largest pair counts, and a lower bound on it is known: the value of the user evaluated first
  (:func:`policyopt.models.tv_kernels.exact_max_by_bounds`), raised by each pair evaluated.

So each user keeps, per pair, the natural log of the last distance computed for it (scale included), an upper bound
ever after, and a pair is evaluated only when that bound reaches the current lower bound (with a slack of 1e-9 in
the log, far above the rounding of a distance, about 1e-14).  The pair that was largest last time goes first.  A user
whose largest evaluated pair is above every bound left unevaluated gets its exact maximum; any other user gets an
upper bound on ln Δ_u, which lies below the lower bound given — all the maximum over users needs, and a valid bound
for the next ages.

Each distance is summed in the order numpy's ``add.reduce`` uses on a contiguous row (pairwise summation: blocks of
up to 128 entries by 8 interleaved partial sums, longer ones split in two at a multiple of 8, run as a post-order
program since numba's cache cannot hold a recursive function), so a pair's value is
the float :func:`~policyopt.models.tv_kernels.pairwise_max_tv` forms, bit for bit, and so is an exact maximum; the
caller takes its logarithm with numpy, as before (``tests/models/test_tv_pairs.py``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

__all__ = ["SLACK", "PairState", "max_pair_l1"]

#: Slack of the pruning comparisons in ln Δ (relative, plus absolute at |ln Δ| < 1).
SLACK = 1e-9


def _sum_program(n: int) -> np.ndarray:
    """numpy's pairwise summation of n entries (``DOUBLE_pairwise_sum``) as a post-order program, shape (ops, 3):
    rows (0, lo, m) sum the block a[lo:lo + m] (m ≤ 128, :func:`_block_sum`), rows (1, 0, 0) add the last two sums
    (left + right).  Compiled code runs it with a small stack (numba's cache cannot hold a recursive function: a
    process loading one crashed)."""

    def walk(lo, m, out):
        """Append the operations summing entries lo..lo + m − 1 to `out` (numpy's split: at a multiple of 8 near
        the middle, until a block has at most 128 entries)."""
        if m <= 128:
            out.append((0, lo, m))
            return
        m2 = m // 2
        m2 -= m2 % 8
        walk(lo, m2, out)
        walk(lo + m2, m - m2, out)
        out.append((1, 0, 0))

    ops: list = []
    walk(0, int(n), ops)
    return np.array(ops, dtype=np.int64).reshape(-1, 3)


@njit(cache=True, nogil=True, inline="always")
def _term(d, u, i, j, k):  # pragma: no cover - compiled
    """|row j − row i| at entry k of user u's difference block (i = −1: the zero row, row 0)."""
    return abs(d[u, j, k]) if i < 0 else abs(d[u, j, k] - d[u, i, k])


@njit(cache=True, nogil=True)
def _block_sum(d, u, i, j, lo, n):  # pragma: no cover - compiled
    """numpy's pairwise sum of the terms lo..lo + n − 1 (n ≤ 128): the same additions in the same order."""
    if n < 8:
        res = 0.0
        for k in range(n):
            res += _term(d, u, i, j, lo + k)
        return res
    r0 = _term(d, u, i, j, lo)
    r1 = _term(d, u, i, j, lo + 1)
    r2 = _term(d, u, i, j, lo + 2)
    r3 = _term(d, u, i, j, lo + 3)
    r4 = _term(d, u, i, j, lo + 4)
    r5 = _term(d, u, i, j, lo + 5)
    r6 = _term(d, u, i, j, lo + 6)
    r7 = _term(d, u, i, j, lo + 7)
    stop = n - (n % 8)
    k = 8
    while k < stop:
        r0 += _term(d, u, i, j, lo + k)
        r1 += _term(d, u, i, j, lo + k + 1)
        r2 += _term(d, u, i, j, lo + k + 2)
        r3 += _term(d, u, i, j, lo + k + 3)
        r4 += _term(d, u, i, j, lo + k + 4)
        r5 += _term(d, u, i, j, lo + k + 5)
        r6 += _term(d, u, i, j, lo + k + 6)
        r7 += _term(d, u, i, j, lo + k + 7)
        k += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while k < n:
        res += _term(d, u, i, j, lo + k)
        k += 1
    return res


@njit(cache=True, nogil=True)
def _distance(d, u, i, j, program, stack):  # pragma: no cover - compiled
    """ℓ1 distance of rows i and j of user u's block (i = −1: row 0), summed as numpy sums the row of |differences|:
    the post-order `program` of :func:`_sum_program` with the value stack `stack`."""
    top = 0
    for q in range(program.shape[0]):
        if program[q, 0] == 0:
            stack[top] = _block_sum(d, u, i, j, program[q, 1], program[q, 2])
            top += 1
        else:
            top -= 1
            stack[top - 1] = stack[top - 1] + stack[top]
    return stack[0]


@njit(cache=True, nogil=True)
def _kernel(d, users, log_scale, pair_log, lead, floor, slack, program, l1, upper):  # pragma: no cover - compiled
    """See :func:`max_pair_l1`.  Pair p: (−1, j) for p = j < M, then (i, j), 0 ≤ i < j < M, in order."""
    M = d.shape[1]
    stack = np.empty(program.shape[0])
    for q in range(users.size):
        u = users[q]
        ls = log_scale[u]
        target = floor
        best = -1.0
        v_best = -np.inf
        left = -np.inf  # the largest bound among the pairs not evaluated
        p0 = lead[u]
        for step in range(-1, M * (M + 1) // 2):
            p = p0 if step < 0 else step
            if step >= 0 and p == p0:
                continue
            b = pair_log[u, p]
            if b < target - slack * (1.0 + abs(target)):
                if b > left:
                    left = b
                continue
            if p < M:
                i, j = -1, p
            else:  # invert p = M + i·(2M − i − 1)/2 + (j − i − 1)
                r = p - M
                i = 0
                while r >= M - 1 - i:
                    r -= M - 1 - i
                    i += 1
                j = i + 1 + r
            s = _distance(d, u, i, j, program, stack)
            if not s < np.inf:  # NaN or inf: the caller falls back to numpy
                best = np.nan
                break
            v = math.log(0.5 * s) + ls if s > 0.0 else -np.inf
            pair_log[u, p] = v
            if s > best:
                best = s
                v_best = v
                lead[u] = p
                if v > target:
                    target = v
        if best != best:
            l1[q] = np.nan
            upper[q] = np.nan
        elif left < v_best - slack * (1.0 + abs(v_best)) or (left == -np.inf and best >= 0.0):
            l1[q] = best
            upper[q] = v_best
        else:
            l1[q] = np.nan
            upper[q] = max(v_best, left)


@functools.lru_cache(maxsize=16)
def _program(n: int) -> np.ndarray:
    """:func:`_sum_program` of n, once per n."""
    return _sum_program(n)


class PairState:
    """Per user and pair, ln of the last distance computed (an upper bound ever after), and the last largest pair.

    Parameters
    ----------
    n_users : int
        U, the users of the difference blocks.
    n_rows : int
        M = K − 1, the rows of one user's block (row x − row 0).
    """

    def __init__(self, n_users: int, n_rows: int):
        self.pair_log = np.full((int(n_users), int(n_rows) * (int(n_rows) + 1) // 2), np.inf)
        self.lead = np.zeros(int(n_users), dtype=np.int64)


def max_pair_l1(diff: np.ndarray, users: np.ndarray, log_scale: np.ndarray, state: PairState,
                floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The largest pair distance of `users`' blocks, exact where it can reach `floor`, else a bound on ln Δ_u.

    Parameters
    ----------
    diff : numpy.ndarray, shape (U, M, K), C-contiguous float64
        Scaled row differences ``diff[u, x − 1] = row_x − row_0`` (finite).
    users : numpy.ndarray of int64
        The users evaluated (indices into `diff`).
    log_scale : numpy.ndarray, shape (U,)
        ln of each block's scale: ln Δ_u = ln(largest distance / 2) + log_scale[u].
    state : PairState
        The users' pair bounds, updated in place.
    floor : float
        A lower bound on the maximum over users of ln Δ_u (−inf: none).

    Returns
    -------
    (l1, upper) : numpy.ndarray, shape (len(users),) each
        ``l1[q]``: user q's largest ℓ1 distance where it is exact (the float numpy's pair loop gives); NaN where some
        pair left unevaluated has a bound above every pair evaluated (the user then lies below `floor`, up to the
        slack), with ``upper[q]`` an upper bound on ln Δ_u there.  ``upper[q]`` is NaN when user q's block holds a
        non-finite entry (the caller then uses the numpy loop, which propagates it).
    """
    n = users.size
    l1, upper = np.empty(n), np.empty(n)
    _kernel(diff, users, log_scale, state.pair_log, state.lead, float(floor), SLACK, _program(diff.shape[2]), l1, upper)
    return l1, upper
