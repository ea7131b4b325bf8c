"""Finite Markov chains, the reversed process and the maximal total variation distance Δ(t).

The age-dependent privacy risk of Zhang et al. is driven by Δ(t), eq. (12) of
M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024: the largest total variation distance
between two t-step rows of a user's *reversed* chain P̂ (eq. 1), maximised over
users.  This module computes Δ(t) exactly, the spectral bound (55), and the
geometric envelope Δ(t) ≤ c·ρ^t of eq. (38) that the continuous formulations
(39)–(42) need; the numerical kernels of Δ(t) are in :mod:`policyopt.models.tv_kernels`.

Time is in slots; Δ(t) is dimensionless in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.models.tv_kernels import log_max_tv_stack, reversed_deviation

__all__ = [
    "MarkovChain",
    "Population",
    "GeometricEnvelope",
    "two_state_chain",
    "as_slots",
]

ROW_SUM_TOL = 1e-9


def as_slots(t, name: str = "t") -> np.ndarray:
    """Validate a time argument (slots) and return it as an int64 array.

    Parameters
    ----------
    t : int or array_like of int
        Non-negative integer times in slots (integral floats are accepted).
    name : str
        Argument name used in error messages.

    Returns
    -------
    numpy.ndarray of int64, same shape as `t`.

    Raises
    ------
    InvalidInputError
        If `t` is not numeric, not integral, or negative.
    """
    arr = np.asarray(t)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise InvalidInputError(f"`{name}` must be non-negative integers (slots), got {fmt(t)}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InvalidInputError(f"`{name}` must be non-negative integers (slots), got {fmt(t)}")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise InvalidInputError(f"`{name}` must be non-negative integers (slots), got {fmt(t)}")
    return out


def validate_transition_matrix(P, name: str = "P") -> np.ndarray:
    """Return `P` as a float (K, K) row-stochastic array (rows sum to 1 within ``ROW_SUM_TOL``, entries ≥ 0).

    Raises
    ------
    InvalidModelError
        If `P` is not a square, finite, non-negative, row-stochastic matrix; the message names `name`.
    """
    try:
        arr = np.array(P, dtype=float)
    except (TypeError, ValueError):
        raise InvalidModelError(f"`{name}` must be a square numeric matrix, got {fmt(P)}") from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise InvalidModelError(
            f"`{name}` must be a non-empty square matrix, got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        i, j = np.argwhere(~np.isfinite(arr))[0]
        raise InvalidModelError(f"`{name}` has a non-finite entry {float(arr[i, j])!r} at row {i}, column {j}")
    if np.any(arr < 0):
        i, j = np.argwhere(arr < 0)[0]
        raise InvalidModelError(f"`{name}` has a negative entry {float(arr[i, j])!r} at row {i}, column {j}")
    sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if bad.size:
        i = int(bad[0])
        raise InvalidModelError(
            f"`{name}` is not stochastic: row {i} sums to {float(sums[i])!r}, not 1 (tolerance {ROW_SUM_TOL:g}); "
            "normalise each row"
        )
    arr = arr / sums[:, None]  # rows within the tolerance are renormalised once, so every use sees the same chain
    arr.setflags(write=False)
    return arr


def _gth_stationary(P: np.ndarray) -> np.ndarray:
    """Stationary distribution of an irreducible chain by Grassmann–Taksar–Heyman elimination.

    GTH uses only additions of non-negative numbers and divisions, so it keeps full
    relative accuracy even for nearly decomposable chains (Grassmann, Taksar & Heyman,
    Oper. Res. 33(5), 1985).
    """
    A = np.array(P, dtype=float)
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        # Censor state k: the chain watched only on states 0..k-1.
        scale = A[k, :k].sum()
        A[:k, k] /= scale
        A[:k, :k] += np.outer(A[:k, k], A[k, :k])
    x = np.zeros(n)
    x[0] = 1.0
    for k in range(1, n):
        x[k] = x[:k] @ A[:k, k]
    return x / x.sum()


def _gth_stationary_stack(P: np.ndarray) -> np.ndarray:
    """:func:`_gth_stationary` for a stack of irreducible chains, shape (U, K, K) -> (U, K).

    The same elimination, step for step, vectorised over the users.
    """
    A = np.array(P, dtype=float)
    U, n, _ = A.shape
    for k in range(n - 1, 0, -1):
        scale = A[:, k, :k].sum(axis=1)  # censor state k
        A[:, :k, k] /= scale[:, None]
        A[:, :k, :k] += A[:, :k, k][:, :, None] * A[:, k, :k][:, None, :]
    x = np.zeros((U, n))
    x[:, 0] = 1.0
    for k in range(1, n):
        x[:, k] = np.einsum("uj,uj->u", x[:, :k], A[:, :k, k])
    return x / x.sum(axis=1, keepdims=True)


def _irreducible_stack(P: np.ndarray) -> np.ndarray:
    """Irreducibility of each chain of a stack (U, K, K): the reachability closure is all-positive.

    The squarings stop once every chain's closure is all-positive (the answer can no longer change): a chain whose
    every state reaches every other within 2^k steps needs k of the ⌈log2 K⌉ (an ``order:2`` Z chain with positive
    conditionals: 2 of 8)."""
    U, n, _ = P.shape
    R = ((P > 0) | np.eye(n, dtype=bool)).astype(np.float64)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))))):  # paths of length ≤ 2^k
        if (R > 0).all():
            break
        R = np.minimum(np.matmul(R, R), 1.0)
    return (R > 0).reshape(U, -1).all(axis=1)


def _period(adjacency: np.ndarray) -> int:
    """Period of an irreducible chain: gcd of level differences along edges of a BFS tree."""
    n = adjacency.shape[0]
    level = np.full(n, -1)
    level[0] = 0
    frontier = [0]
    while frontier:
        nxt = []
        for u in frontier:
            for v in np.flatnonzero(adjacency[u]):
                if level[v] < 0:
                    level[v] = level[u] + 1
                    nxt.append(int(v))
        frontier = nxt
    rows, cols = np.nonzero(adjacency)
    g = 0
    for d in level[rows] + 1 - level[cols]:
        g = math.gcd(g, int(abs(d)))
    return g


class MarkovChain:
    """A validated finite, time-homogeneous Markov chain.

    Parameters
    ----------
    P : array_like, shape (K, K)
        Transition matrix, ``P[x, y] = Pr(x_{t+1} = y | x_t = x)``.  Entries must be
        finite and non-negative and every row must sum to 1 within 1e-9.
    state_values : array_like, shape (K,), optional
        Numeric value of each state (e.g. kWh of a quantised reading).  Defaults to
        ``0, 1, ..., K-1``.

    Raises
    ------
    InvalidModelError
        If `P` is not square, has a non-finite or negative entry, or a row whose sum is
        not 1 (the message names the row and its sum); if `state_values` has the wrong
        length or a non-finite entry.

    Notes
    -----
    Quantities that need the stationary distribution (``stationary``, ``reversed``,
    ``max_tv``, the spectral bound) require an irreducible chain and raise
    :class:`InvalidModelError` otherwise.

    References
    ----------
    Zhang et al. (2024): reversed process eq. (1), Δ(t) eq. (12),
    spectral bound (54)–(55), Lemma 3.

    Examples
    --------
    >>> chain = MarkovChain([[0.9, 0.1], [0.2, 0.8]])
    >>> chain.stationary.round(4)
    array([0.6667, 0.3333])
    >>> float(chain.max_tv(3))  # |1 - p - q|^3
    0.343
    """

    def __init__(self, P, state_values=None):
        self._P = validate_transition_matrix(P, "P")
        k = self._P.shape[0]
        if state_values is None:
            values = np.arange(k, dtype=float)
        else:
            try:
                values = np.array(state_values, dtype=float).reshape(-1)
            except (TypeError, ValueError):
                raise InvalidModelError(f"`state_values` must be numeric, got {fmt(state_values)}") from None
            if values.shape != (k,):
                raise InvalidModelError(
                    f"`state_values` must have one value per state ({k}), got {values.size}"
                )
            if not np.all(np.isfinite(values)):
                raise InvalidModelError(f"`state_values` must be finite, got {fmt(values.tolist())}")
        values.setflags(write=False)
        self._values = values

    def __repr__(self) -> str:
        return f"MarkovChain(n_states={self.n_states})"

    @property
    def P(self) -> np.ndarray:
        """Transition matrix, shape (K, K), read-only."""
        return self._P

    @property
    def state_values(self) -> np.ndarray:
        """Numeric value of each state, shape (K,), read-only."""
        return self._values

    @property
    def n_states(self) -> int:
        """Number of states K."""
        return self._P.shape[0]

    @cached_property
    def is_irreducible(self) -> bool:
        """True if every state can reach every other state."""
        if np.all(self._P > 0):  # every state reaches every other in one step (fast path: no graph search)
            return True
        from scipy.sparse.csgraph import connected_components

        n, _ = connected_components(self._P > 0, directed=True, connection="strong")
        return n == 1

    @cached_property
    def period(self) -> int:
        """Period of the chain (1 = aperiodic).

        Raises
        ------
        InvalidModelError
            If the chain is reducible (the period is then a property of each class).
        """
        self._require_irreducible("period")
        return _period(self._P > 0)

    @property
    def is_aperiodic(self) -> bool:
        """True if the chain is irreducible with period 1."""
        return self.period == 1

    def _require_irreducible(self, what: str) -> None:
        if not self.is_irreducible:
            from scipy.sparse.csgraph import connected_components

            _, labels = connected_components(self._P > 0, directed=True, connection="strong")
            raise InvalidModelError(
                f"{what} needs an irreducible chain, but `P` splits into {labels.max() + 1} "
                f"communicating classes (state labels {labels.tolist()}); smooth the estimate "
                "(additive smoothing > 0) or drop unreachable states"
            )

    @cached_property
    def stationary(self) -> np.ndarray:
        """Stationary distribution π, shape (K,), by GTH elimination (numerically stable).

        Raises
        ------
        InvalidModelError
            If the chain is reducible (π is then not unique).
        """
        self._require_irreducible("The stationary distribution")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pi = _gth_stationary(self._P)
        if not (np.all(np.isfinite(pi)) and np.all(pi > 0)):
            raise InvalidModelError(
                "the stationary distribution underflows (a transition probability is subnormal, "
                f"min positive entry {float(self._P[self._P > 0].min())!r}); smooth the estimate"
            )
        pi.setflags(write=False)
        return pi

    @cached_property
    def reversed_matrix(self) -> np.ndarray:
        """Transition matrix of the reversed process, eq. (1): P̂(x, y) = π(y) P(y, x) / π(x)."""
        pi = self.stationary
        phat = (self._P.T * pi[None, :]) / pi[:, None]  # eq. (1)
        phat /= phat.sum(axis=1, keepdims=True)  # remove rounding drift; exact rows sum to 1
        phat.setflags(write=False)
        return phat

    def reversed(self) -> "MarkovChain":
        """The reversed chain P̂ of eq. (1), with the same state values."""
        return MarkovChain(self.reversed_matrix, self._values)

    def is_reversible(self, atol: float = 1e-12) -> bool:
        """True if detailed balance π(x)P(x,y) = π(y)P(y,x) holds within `atol`."""
        flow = self.stationary[:, None] * self._P
        return bool(np.allclose(flow, flow.T, rtol=0.0, atol=atol))

    def step_matrix(self, t: int) -> np.ndarray:
        """t-step transition matrix P_t = P^t, shape (K, K)."""
        (t,) = as_slots([t], "t")
        return np.linalg.matrix_power(self._P, int(t))

    def max_tv(self, t):
        """Maximal total variation distance Δ(t) of eq. (12) for this chain.

        Computed exactly from the t-step rows of the *reversed* chain P̂ (not the forward
        rows, which differ for non-reversible chains).

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots, t ≥ 0.

        Returns
        -------
        float or numpy.ndarray
            Δ(t), same shape as `t`; Δ(0) = 1 when K ≥ 2.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        InvalidModelError
            If the chain is reducible.
        """
        return Population([self]).max_tv(t)

    def log_max_tv(self, t):
        """ln Δ(t) (−inf where Δ(t) = 0 exactly); finite even where Δ(t) underflows a float.

        See :meth:`Population.log_max_tv`.
        """
        return Population([self]).log_max_tv(t)

    @cached_property
    def spectral_rate(self) -> float:
        """Geometric rate of the spectral bound (55).

        For a reversible chain this is λ* = max(λ_1, ``|λ_{m-1}|``) of Lemma 3, the second
        largest eigenvalue modulus.  Proposition 5 (54) is proved only for reversible
        chains; for a non-reversible chain this returns the second singular value of
        D^{1/2} P D^{-1/2} (D = diag π), i.e. the square root of the second eigenvalue of
        the multiplicative reversiblization P̂P, for which Fill (Ann. Appl. Probab. 1(1),
        1991, Thm 2.1) proves the same bound.  Both coincide when P is reversible.
        """
        pi = self.stationary
        if self.n_states == 1:
            return 0.0
        root = np.sqrt(pi)
        B = root[:, None] * self._P / root[None, :]
        s = np.linalg.svd(B, compute_uv=False)
        # The SVD's error is absolute (≈ eps·‖B‖, ‖B‖ = 1): add a Weyl-type allowance so that a
        # tiny σ₂ is never underestimated (the bound (55) must stay an upper bound).
        return float(min(1.0, s[1] + 4 * self.n_states * np.finfo(float).eps))

    @property
    def lambda_star(self) -> float:
        """λ* of Lemma 3 (alias of :attr:`spectral_rate`; see there for non-reversible chains)."""
        return self.spectral_rate

    @cached_property
    def spectral_constant(self) -> float:
        """max_x sqrt((1 − π(x)) / π(x)), the constant of the spectral bound (55)."""
        pi = self.stationary
        return float(np.sqrt(np.max((1.0 - pi) / pi)))

    def spectral_bound(self, t):
        """Upper bound (55) on Δ(t): min(1, max_x sqrt((1−π(x))/π(x)) · λ*^t).

        Valid because Δ(t) ≤ 2 max_x δ(P̂_t(x,·), π) and 2 δ(P̂_t(x,·), π) ≤ sqrt((1−π(x))/π(x)) λ*^t:
        by (54) applied to P̂ = P when the chain is reversible, and by Fill's χ² bound for the
        multiplicative reversiblization (with λ* = :attr:`spectral_rate`) otherwise.

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots.

        Returns
        -------
        float or numpy.ndarray, same shape as `t`.
        """
        return Population([self]).spectral_bound(t)

    def envelope(self, horizon: int, rho: float | None = None) -> "GeometricEnvelope":
        """Geometric envelope Δ(t) ≤ c·ρ^t (eq. 38) over 0..horizon; see :meth:`Population.envelope`."""
        return Population([self]).envelope(horizon, rho)


def two_state_chain(p: float, q: float) -> MarkovChain:
    """The two-state chain of eq. (43) with state values (−1, +1).

    Parameters
    ----------
    p : float
        Pr(−1 → +1), in [0, 1].
    q : float
        Pr(+1 → −1), in [0, 1].

    Returns
    -------
    MarkovChain
        ``P = [[1-p, p], [q, 1-q]]``; its Δ(t) is ``|1 − p − q|^t`` (eq. 47) and its
        stationary distribution (q, p)/(p + q).

    Raises
    ------
    InvalidModelError
        If `p` or `q` is outside [0, 1].

    References
    ----------
    Zhang et al. (2024), Example 1, eqs. (43)–(47).
    """
    for name, v in (("p", p), ("q", q)):
        if not isinstance(v, (int, float, np.floating, np.integer)) or not 0.0 <= float(v) <= 1.0:
            raise InvalidModelError(f"`{name}` must be a probability in [0, 1], got {fmt(v)}")
    p, q = float(p), float(q)
    return MarkovChain([[1.0 - p, p], [q, 1.0 - q]], state_values=[-1.0, 1.0])


@dataclass(frozen=True)
class GeometricEnvelope:
    """Geometric envelope Δ(t) ≤ c·ρ^t of eq. (38), valid for 0 ≤ t ≤ `horizon`.

    Attributes
    ----------
    c : float
        Smallest constant c ≥ 1 with Δ(t) ≤ c ρ^t for all t in 0..horizon.
    rho : float
        Decay rate ρ in [0, 1] (default: the spectral rate λ* of Lemma 3).
    horizon : int
        Last age (slots) over which the envelope was checked against the exact Δ(t).
    """

    c: float
    rho: float
    horizon: int

    def __call__(self, t):
        """Envelope value c·ρ^t for ages `t` (slots)."""
        t = as_slots(t)
        with np.errstate(divide="ignore"):
            return self.c * np.power(self.rho, t.astype(float))


class Population:
    """A population of users, each with their own Markov chain (eq. 12's max over users).

    Parameters
    ----------
    chains : sequence of MarkovChain
        Distinct chain models.
    counts : sequence of int, optional
        Number of users following each chain (default one user per chain).  The
        number of users is I = sum(counts).
    value_unit : str, optional
        Unit of the chains' state values (e.g. ``"kWh"``; default ``""``: unitless).  Penalties built
        from the population (:class:`~policyopt.utility.penalty.MSEPenalty`) report their unit from it.

    Raises
    ------
    InvalidModelError
        If `chains` is empty or holds something that is not a :class:`MarkovChain`.
    InvalidInputError
        If `counts` does not have one positive integer per chain.
    """

    def __init__(self, chains: Sequence[MarkovChain], counts: Sequence[int] | None = None, *, value_unit: str = ""):
        if not isinstance(value_unit, str):
            raise InvalidInputError(f"`value_unit` must be a string such as 'kWh', got {fmt(value_unit)}")
        chains = list(chains)
        if not chains:
            raise InvalidModelError("`chains` must hold at least one MarkovChain, got an empty sequence")
        for c in chains:
            if not isinstance(c, MarkovChain):
                raise InvalidModelError(f"`chains` must hold MarkovChain objects, got {fmt(c)}")
        if counts is None:
            counts = [1] * len(chains)
        counts_arr = np.asarray(counts)
        if (
            counts_arr.shape != (len(chains),)
            or not np.issubdtype(counts_arr.dtype, np.integer)
            or np.any(counts_arr < 1)
        ):
            raise InvalidInputError(
                f"`counts` must give one positive integer per chain ({len(chains)}), got {fmt(counts)}"
            )
        self.chains = tuple(chains)
        self.counts = tuple(int(c) for c in counts_arr)
        self.value_unit = value_unit

    @classmethod
    def from_matrices(cls, P, counts: Sequence[int] | None = None) -> "Population":
        """A population from a stack of transition matrices, validated and prepared in bulk.

        Equivalent to ``Population([MarkovChain(p) for p in P], counts)`` followed by reading each
        chain's ``stationary`` and ``reversed_matrix``, but vectorised over the users: 10⁴
        chains of 12 states take well under a second instead of several.

        Parameters
        ----------
        P : array_like, shape (U, K, K)
            One transition matrix per chain; each as for :class:`MarkovChain` (finite,
            non-negative, rows summing to 1 within 1e-9, irreducible).
        counts : sequence of int, optional
            Number of users following each chain (default one each).

        Returns
        -------
        Population
            Its chains have their stationary distribution (GTH, eq. 1's π) and reversed
            matrix (eq. 1) already computed by the same elimination (equal to the one-by-one
            values up to rounding, ~1e-16).

        Raises
        ------
        InvalidModelError
            If `P` is not a non-empty (U, K, K) stack, or a matrix has a non-finite or negative
            entry, a row whose sum is not 1, or is reducible (the message names the chain).
        InvalidInputError
            If `counts` does not have one positive integer per chain.
        """
        try:
            arr = np.array(P, dtype=float)
        except (TypeError, ValueError):
            raise InvalidModelError(f"`P` must be a stack of square numeric matrices, got {fmt(P)}") from None
        if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1] != arr.shape[2] or arr.shape[1] == 0:
            raise InvalidModelError(f"`P` must be a non-empty stack of square matrices (U, K, K), got shape {arr.shape}")
        U, K, _ = arr.shape
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            u, i, j = np.argwhere(bad)[0]
            raise InvalidModelError(
                f"`P[{u}]` has a {'non-finite' if not np.isfinite(arr[u, i, j]) else 'negative'} entry "
                f"{float(arr[u, i, j])!r} at row {i}, column {j}"
            )
        sums = arr.sum(axis=2)
        off = np.abs(sums - 1.0) > ROW_SUM_TOL
        if off.any():
            u, i = np.argwhere(off)[0]
            raise InvalidModelError(
                f"`P[{u}]` is not stochastic: row {i} sums to {float(sums[u, i])!r}, not 1 "
                f"(tolerance {ROW_SUM_TOL:g}); normalise each row"
            )
        arr = arr / sums[:, :, None]  # as _validate_transition_matrix, chain by chain
        irreducible = _irreducible_stack(arr)
        if not irreducible.all():
            u = int(np.flatnonzero(~irreducible)[0])
            MarkovChain(arr[u])._require_irreducible(f"`P[{u}]`: the stationary distribution")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pi = _gth_stationary_stack(arr)
        if not (np.all(np.isfinite(pi)) and np.all(pi > 0)):
            u = int(np.flatnonzero(~(np.isfinite(pi) & (pi > 0)).all(axis=1))[0])
            MarkovChain(arr[u]).stationary  # noqa: B018 - raises the single-chain error
        phat = np.transpose(arr, (0, 2, 1)) * pi[:, None, :] / pi[:, :, None]  # eq. (1)
        phat /= phat.sum(axis=2, keepdims=True)
        arr.setflags(write=False)
        pi.setflags(write=False)
        phat.setflags(write=False)
        values = np.arange(K, dtype=float)
        values.setflags(write=False)
        chains = []
        for u in range(U):
            c = MarkovChain.__new__(MarkovChain)
            c._P, c._values = arr[u], values  # validated above, in bulk
            c.__dict__.update(is_irreducible=True, stationary=pi[u], reversed_matrix=phat[u])
            chains.append(c)
        return cls(chains, counts)

    def __repr__(self) -> str:
        return f"Population(n_chains={len(self.chains)}, n_users={self.n_users})"

    @property
    def n_users(self) -> int:
        """Number of users I."""
        return sum(self.counts)

    @property
    def value_range(self) -> tuple[float, float]:
        """(min, max) state value over all users' state spaces."""
        lo = min(float(c.state_values.min()) for c in self.chains)
        hi = max(float(c.state_values.max()) for c in self.chains)
        return lo, hi

    def _groups(self):
        """Chains grouped by number of states: {K: (Q = P̂ − 1π stack (U,K,K), pi stack (U,K))}."""
        groups: dict[int, list[MarkovChain]] = {}
        for c in self.chains:
            groups.setdefault(c.n_states, []).append(c)
        out = {}
        for k, cs in groups.items():
            pi = np.stack([c.stationary for c in cs])
            out[k] = (reversed_deviation(np.stack([c.P for c in cs]), pi, pi), pi)
        return out

    def max_tv(self, t):
        """Δ(t) of eq. (12): max over users and pairs of start states of the TV distance
        between t-step rows of the reversed chains.

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots (any shape, any order, repeats allowed).

        Returns
        -------
        float or numpy.ndarray
            Δ(t) with the shape of `t`.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        InvalidModelError
            If a user's chain is reducible.

        Notes
        -----
        The differences of reversed t-step rows, D_x(t) = (e_x − e_0) P̂^t, are propagated
        directly (not the rows themselves), with their invariant component along π
        removed after each product.  Subtracting two nearly equal rows would cap the
        relative accuracy of Δ(t) at about 1e-16 / Δ(t); propagating differences keeps
        it near machine precision even when Δ(t) is 1e-30, which matters because
        ε(t) ≈ Δ(t) e^{ε_C} for large ε_C (below ~1e-308 use :meth:`log_max_tv`, which does not
        underflow).  For large populations, users whose
        submultiplicative bound Δ_u(t) ≤ Δ_u(t') Δ_u(1)^{t−t'} is below another user's exact
        value are not evaluated at that t (the result is still the exact maximum).
        """
        out = np.exp(self.log_max_tv(t))
        return float(out) if np.ndim(out) == 0 else out

    def log_max_tv(self, t):
        """ln Δ(t) of eq. (12), same shape as `t`; −inf where Δ(t) is exactly 0.

        Δ(t) itself underflows a float below about 1e-308, while the risk ln(1 + Δ(e^{ε_C} − 1))
        still depends on it when ε_C ≳ 700; every accounting path of policyopt therefore
        works with ln Δ(t), which this method computes without underflow (the propagated row
        differences are rescaled after every product and the scale is kept as a logarithm).

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        InvalidModelError
            If a user's chain is reducible.
        """
        ts = as_slots(t, "t")
        flat = ts.reshape(-1)
        uniq, inverse = np.unique(flat, return_inverse=True)
        best = np.full(uniq.shape, -np.inf)
        for dev, pi in self._groups().values():
            best = np.maximum(best, log_max_tv_stack(dev, pi, uniq))
        out = best[inverse].reshape(ts.shape)
        return float(out) if out.ndim == 0 else out

    @cached_property
    def spectral_rate(self) -> float:
        """Largest λ* over users (see :attr:`MarkovChain.spectral_rate`)."""
        return max(c.spectral_rate for c in self.chains)

    def spectral_bound(self, t):
        """Bound (55) on Δ(t): min(1, max over users i and states x of sqrt((1−π_i(x))/π_i(x)) λ_{i,*}^t).

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots.

        Returns
        -------
        float or numpy.ndarray, same shape as `t`.
        """
        ts = as_slots(t, "t").astype(float)
        logs = []
        for c in self.chains:
            with np.errstate(divide="ignore", invalid="ignore"):
                log_rate = np.log(c.spectral_rate) if c.spectral_rate > 0 else -np.inf
                term = np.where(ts == 0, 0.0, ts * log_rate)
            logs.append(math.log(c.spectral_constant) + term if c.spectral_constant > 0 else np.full(ts.shape, -np.inf))
        log_bound = np.minimum(0.0, np.max(np.stack(logs), axis=0))  # eq. (55)
        out = np.exp(log_bound)
        return float(out) if out.ndim == 0 else out

    def envelope(self, horizon: int, rho: float | None = None) -> GeometricEnvelope:
        """Smallest c ≥ 1 with Δ(t) ≤ c·ρ^t (eq. 38) for all t in 0..horizon.

        Parameters
        ----------
        horizon : int
            Last age (slots) checked, ≥ 0.
        rho : float, optional
            Decay rate in [0, 1]; default the spectral rate λ* (Lemma 3).

        Returns
        -------
        GeometricEnvelope

        Raises
        ------
        InvalidInputError
            If `rho` is outside [0, 1] or so small that no finite c dominates Δ(t).
        """
        (h,) = as_slots([horizon], "horizon")
        if rho is None:
            rho = self.spectral_rate
        if not isinstance(rho, (int, float, np.floating)) or not 0.0 <= float(rho) <= 1.0:
            raise InvalidInputError(f"`rho` must be in [0, 1], got {fmt(rho)}")
        rho = float(rho)
        ts = np.arange(int(h) + 1)
        log_d = np.asarray(self.log_max_tv(ts))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rho = math.log(rho) if rho > 0 else -np.inf
            excess = np.where(np.isfinite(log_d), log_d - np.where(ts == 0, 0.0, ts * log_rho), -np.inf)
        log_c = max(0.0, float(np.max(excess)))
        c = math.exp(log_c) if log_c < 709 else math.inf
        if not math.isfinite(c):
            raise InvalidInputError(
                f"`rho`={rho!r} decays faster than Δ(t) (no finite c over horizon {int(h)}); "
                f"use a larger rho, e.g. the spectral rate {self.spectral_rate!r}"
            )
        return GeometricEnvelope(c=c, rho=rho, horizon=int(h))
