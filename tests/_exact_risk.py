"""A certified lower bound on the age-dependent risk of a schedule, for binary processes given as HMMs (tests only).

The age-dependent risk at slot t (Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf.
Theory 70(2), 2024, Definition 10, eq. (23)) is the supremum over output histories W of
``|ln Pr(W | X_t = 1) − ln Pr(W | X_t = 0)|`` for one user's binary reading X_t (LO = 0, HI = 1), given the releases
n with S_n ≤ t of the mean of I users' readings X_{S_n − A} plus Laplace noise of scale Δf/ε_C, Δf = 1/I.

Tail outputs
------------
For an output o_n above every possible mean, the Laplace density ∝ exp(−ε_C·|o_n − m|/Δf) with m = Σ_j x_j / I is
∝ exp(+ε_C Σ_j x_{j, S_n − A}); below every possible mean it is ∝ exp(−ε_C Σ_j x_{j, S_n − A}).  The density
factorises over users, so the other (independent) users cancel in the ratio, and for a sign pattern
σ ∈ {+1, −1}^N (which tail each release's output lies in)

    L_σ(x) = E[∏_n exp(σ_n ε_C X_{S_n − A}) | X_t = x],      risk(t) ≥ D_σ := |ln L_σ(1) − ln L_σ(0)|.

Every σ gives a valid lower bound (the tail outputs have positive density, and the sup over W is at least the
value on them).  :func:`tail_risk` evaluates D_σ by one scaled forward pass over the hidden states and searches σ;
:func:`brute_force_tail_risk` enumerates hidden paths and every σ on tiny cases to check it.

Theorem 3 of Zhang et al. (eq. (25)) and its peak (30) are upper bounds for first-order Markov processes only; for
the processes of ``tests/_processes.py`` the lower bound here exceeds them, which is what
:func:`printed_bound_violations` reports for a ``policyopt schedule --json`` object.

Numerics
--------
The forward vector is renormalised at every slot (compiled loops, numba ``cache=True``, imported on first use); the
tilt exp(σ ε_C x) is applied as exp(σ ε_C x − max(σ ε_C, 0)) so no factor exceeds 1, and the running normaliser
cancels between x = 1 and x = 0 (the forward pass is common up to slot t), so

    D_σ = ln Σ_h π_t(h) B(h, 1) e^{θ_t} − ln Σ_h π_t(h) B(h, 0) − ln Pr(X_t = 1) + ln Pr(X_t = 0)

with π_t the normalised tilted forward vector at t and θ_t the tilt of slot t (0 unless A = 0).  ε_C = 50 and
T = 10⁴ slots work.  Hidden-state mass below 10⁻³⁰⁸ of the current total would be dropped by the float format (a
state penalised by e^{−2ε_C} per slot for hundreds of slots and reachable from no other state; none of the zoo's
processes has one, and the brute force checks ε_C = 50 on tiny cases).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Integral, Real

import numpy as np
import pandas as pd

from policyopt.errors import InvalidInputError, fmt

__all__ = [
    "BinaryHMM",
    "TailRisk",
    "tail_risk",
    "tail_log_ratio",
    "brute_force_tail_risk",
    "printed_bound_violations",
]

# Rows × slots × hidden states stored by one forward–backward chunk (float64): about 32 MB.
_CHUNK_CELLS = 4_000_000
# Brute force limits: hidden paths kept at once, and releases (2^N × 2^N sign/input table).
_MAX_PATHS = 1 << 22
_MAX_BRUTE_RELEASES = 11


# ----------------------------------------------------------------------------------------------------------------
# the process
# ----------------------------------------------------------------------------------------------------------------


def _gth(M: np.ndarray) -> np.ndarray:
    """Stationary law of an irreducible stochastic matrix by Grassmann–Taksar–Heyman elimination (no subtractions).

    Raises
    ------
    InvalidInputError
        If an elimination pivot is 0 (the matrix is reducible: no unique stationary law).
    """
    A = np.array(M, dtype=float)
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        s = A[k, :k].sum()
        if not s > 0:
            raise InvalidInputError(
                "`transition` has no unique stationary law (the hidden chain over one period is reducible); "
                "pass `initial`, the law of the hidden state at slot 0"
            )
        A[:k, :k] += np.outer(A[:k, k], A[k, :k]) / s
    pi = np.zeros(n)
    pi[0] = 1.0
    for k in range(1, n):
        pi[k] = pi[:k] @ A[:k, k] / A[k, :k].sum()
    return pi / pi.sum()


def _as_int(value, name: str, low: int, what: str) -> int:
    """`value` as an int ≥ `low`, or :class:`InvalidInputError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)) or int(value) < low:
        raise InvalidInputError(f"`{name}` must be an integer ≥ {low} ({what}), got {fmt(value)}")
    return int(value)


def _as_epsilon(value, name: str = "epsilon_c") -> float:
    """`value` as a finite float ≥ 0 (nats), or :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)) or not (
        math.isfinite(float(value)) and float(value) >= 0
    ):
        raise InvalidInputError(f"`{name}` must be a finite number ≥ 0 (nats), got {fmt(value)}")
    return float(value)


@dataclass(frozen=True, eq=False)
class BinaryHMM:
    """A binary process X_t observed through a hidden Markov chain h_t, with an optional public periodic clock.

    h_{t+1} is drawn from ``transition[t mod P][h_t, ·]`` (P = the number of matrices given; P = 1 for a
    homogeneous chain), and X_t ∈ {0, 1} from ``emission[h_t, ·]``.  The phase φ_t = t mod P is public (the slot
    index of the data is the clock).  Slot 0 has phase 0.

    Parameters
    ----------
    transition : array_like, shape (H, H), or sequence of P arrays of shape (H, H)
        Row-stochastic transition matrices; ``transition[φ]`` moves the hidden state from a slot of phase φ to the
        next slot.
    output : array_like, shape (H,) with values in {0, 1}, or shape (H, 2)
        The reading of each hidden state (deterministic), or an emission matrix whose row h is
        (Pr(X = 0 | h), Pr(X = 1 | h)).
    initial : array_like, shape (H,), optional
        Law of h_0.  Default: the periodic-stationary law (the stationary law of
        ``transition[0] @ … @ transition[P − 1]``, by GTH elimination), so that the law of h_t depends only on the
        phase of t.
    name : str, optional
        A label for messages.

    Attributes
    ----------
    n_states : int
        H.
    period : int
        P (1 for a homogeneous chain).
    transitions : numpy.ndarray, shape (P, H, H)
    emission : numpy.ndarray, shape (H, 2)
    phase_laws : numpy.ndarray, shape (P, H)
        Law of h_t at phase φ = t mod P when the process starts from its periodic-stationary law (or from
        `initial` propagated over one period, when `initial` is given).

    Raises
    ------
    InvalidInputError
        If a matrix is not square and row-stochastic, the shapes disagree, a deterministic output is not 0/1, an
        emission row is not a law, `initial` is not a law over H states, or (with `initial` omitted) the chain over
        one period has no unique stationary law.

    Notes
    -----
    Simulation (:meth:`simulate`) is the only use of randomness; the risk computations are exact.
    """

    transition: object
    output: object
    initial: object = None
    name: str = ""
    transitions: np.ndarray = field(init=False, repr=False)
    emission: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        raw = self.transition
        try:
            arr = np.asarray(raw, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"`transition` must be an (H, H) row-stochastic matrix or a list of them, got {fmt(raw)}"
            ) from None
        if arr.ndim == 2:
            arr = arr[None]
        if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise InvalidInputError(
                f"`transition` must be an (H, H) row-stochastic matrix or a list of them, got shape "
                f"{fmt(np.shape(raw))}"
            )
        if not np.all(np.isfinite(arr)) or np.any(arr < 0) or not np.allclose(arr.sum(axis=2), 1.0, atol=1e-12):
            raise InvalidInputError(
                f"`transition` rows must be non-negative and sum to 1, got row sums {fmt(arr.sum(axis=2).tolist())}"
            )
        arr = arr / arr.sum(axis=2, keepdims=True)
        H = arr.shape[1]
        out = np.asarray(self.output, dtype=float)
        if out.shape == (H,):
            if not np.all((out == 0) | (out == 1)):
                raise InvalidInputError(
                    f"`output` must be 0/1 per hidden state (or an (H, 2) emission matrix), got {fmt(self.output)}"
                )
            emission = np.stack([1.0 - out, out], axis=1)
        elif out.shape == (H, 2):
            if not np.all(np.isfinite(out)) or np.any(out < 0) or not np.allclose(out.sum(axis=1), 1.0, atol=1e-12):
                raise InvalidInputError(
                    f"`output` emission rows (Pr(X=0|h), Pr(X=1|h)) must be non-negative and sum to 1, got "
                    f"{fmt(self.output)}"
                )
            emission = out / out.sum(axis=1, keepdims=True)
        else:
            raise InvalidInputError(
                f"`output` must have shape ({H},) (0/1 per hidden state) or ({H}, 2) (emission matrix), got shape "
                f"{fmt(out.shape)}"
            )
        if self.initial is not None:
            init = np.asarray(self.initial, dtype=float)
            if init.shape != (H,) or np.any(init < 0) or not np.isclose(init.sum(), 1.0, atol=1e-12):
                raise InvalidInputError(
                    f"`initial` must be a probability vector over the {H} hidden states, got {fmt(self.initial)}"
                )
        arr.setflags(write=False)
        emission.setflags(write=False)
        object.__setattr__(self, "transitions", arr)
        object.__setattr__(self, "emission", emission)
        _ = self.phase_laws  # validate stationarity now

    def __repr__(self) -> str:
        """``BinaryHMM(name, H=…, P=…)``."""
        return f"BinaryHMM({self.name or 'unnamed'}, H={self.n_states}, P={self.period})"

    @property
    def n_states(self) -> int:
        """Number of hidden states H."""
        return int(self.transitions.shape[1])

    @property
    def period(self) -> int:
        """Period P of the public clock (1: homogeneous)."""
        return int(self.transitions.shape[0])

    @cached_property
    def phase_laws(self) -> np.ndarray:
        """Law of h_t at each phase, shape (P, H) (see the class docstring)."""
        P, H = self.period, self.n_states
        if self.initial is None:
            M = np.eye(H)
            for k in range(P):
                M = M @ self.transitions[k]
            mu0 = _gth(M)
        else:
            mu0 = np.asarray(self.initial, dtype=float) / float(np.sum(self.initial))
        laws = np.empty((P, H))
        laws[0] = mu0
        for k in range(1, P):
            laws[k] = laws[k - 1] @ self.transitions[k - 1]
        laws.setflags(write=False)
        return laws

    def marginal_laws(self, n: int) -> np.ndarray:
        """Law of h_s for s = 0..n−1 from the initial law, shape (n, H)."""
        n = _as_int(n, "n", 1, "slots")
        out = np.empty((n, self.n_states))
        mu = self.phase_laws[0].copy()
        for s in range(n):
            out[s] = mu
            mu = mu @ self.transitions[s % self.period]
        return out

    def _stationary(self) -> bool:
        """True when the phase laws are invariant over one period (the process is periodic-stationary)."""
        back = self.phase_laws[-1] @ self.transitions[self.period - 1]
        return bool(np.allclose(back, self.phase_laws[0], rtol=0, atol=1e-12))

    def simulate(self, users: int, slots: int, rng: np.random.Generator) -> pd.DataFrame:
        """Simulate independent users in policyopt's long CSV layout (simulation only: the one use of randomness).

        Parameters
        ----------
        users : int
            Number of independent users U ≥ 1, named ``u000``, ``u001``, … (at least three digits).
        slots : int
            Slots 0..slots − 1 per user (slot s has phase s mod P).
        rng : numpy.random.Generator
            A seeded generator, e.g. ``np.random.default_rng(2026)``.

        Returns
        -------
        pandas.DataFrame
            Columns ``user`` (str), ``time`` (int64 slot), ``value`` (float64, 0.0 or 1.0); U·slots rows ordered
            by user then time.

        Raises
        ------
        InvalidInputError
            If `users` or `slots` is not a positive integer or `rng` is not a ``numpy.random.Generator``.
        """
        U = _as_int(users, "users", 1, "users")
        T = _as_int(slots, "slots", 1, "slots")
        if not isinstance(rng, np.random.Generator):
            raise InvalidInputError(
                f"`rng` must be a numpy.random.Generator (np.random.default_rng(seed)), got {fmt(rng)}"
            )
        H, P = self.n_states, self.period
        cum_init = np.cumsum(self.phase_laws[0])
        cum_trans = np.cumsum(self.transitions, axis=2)
        p_one = self.emission[:, 1]
        h = np.minimum(np.searchsorted(cum_init, rng.random(U), side="right"), H - 1)
        x = np.empty((U, T))
        for s in range(T):
            x[:, s] = rng.random(U) < p_one[h]
            u = rng.random(U)
            h = np.minimum((u[:, None] >= cum_trans[s % P][h]).sum(axis=1), H - 1)
        width = max(3, len(str(U - 1)))
        names = np.array([f"u{k:0{width}d}" for k in range(U)])
        return pd.DataFrame({
            "user": np.repeat(names, T),
            "time": np.tile(np.arange(T, dtype=np.int64), U),
            "value": x.reshape(-1),
        })

    def max_tv_x(self, t):
        """The true Δ(t) of the observable X (eq. (12) of Zhang et al. 2024) at the periodic-stationary law.

        Δ(t) = max over the phase φ of s and over the pair of rows of the reversed kernel Pr(X_{s−t} = · | X_s),
        which for binary X is |Pr(X_{s−t} = 1 | X_s = 1) − Pr(X_{s−t} = 1 | X_s = 0)|.  A phase at which one value
        of X_s has probability 0 has no pair of rows and contributes 0; Δ(0) = 1 whenever X is not constant.

        This is what a data-driven Δ(t) band estimates when the data are pooled over the phase (for a periodic
        process a pooled estimate averages the phases and may be far smaller).

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots, ≥ 0.

        Returns
        -------
        float or numpy.ndarray
            Δ(t) in [0, 1], same shape as `t`.

        Raises
        ------
        InvalidInputError
            If `t` is not a non-negative integer (array), or the process was given an `initial` law that is not
            periodic-stationary (Δ is then not a function of the age alone).

        References
        ----------
        Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12).
        """
        arr = np.asarray(t)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 0):
            raise InvalidInputError(f"`t` must be non-negative integers (slots), got {fmt(t)}")
        if not self._stationary():
            raise InvalidInputError(
                f"`initial` = {fmt(self.initial)} is not periodic-stationary; Δ(t) of eq. (12) is defined at the "
                "stationary law (omit `initial`)"
            )
        P = self.period
        tmax = int(arr.max()) if arr.size else 0
        laws = self.phase_laws  # (P, H): law of h_s at each phase of s
        B1 = self.emission[:, 1]
        p1 = laws @ B1  # Pr(X_s = 1) per phase of s
        valid = (p1 > 0) & (p1 < 1)
        table = np.zeros(tmax + 1)
        table[0] = 1.0 if np.any(valid) else 0.0
        # c[φ](h) = E[1{X_s = 1} | h_{s−k} = h] − Pr(X_s = 1) for s of phase φ, propagated k steps back; centred, so
        # it keeps its relative accuracy as it decays (the rows of a transition matrix fix constants)
        c = B1[None, :] - p1[:, None]
        phases = np.arange(P)
        for k in range(1, tmax + 1):
            back = (phases - k) % P  # h_{s−k} → h_{s−k+1} uses the matrix of phase (φ − k) mod P
            c = np.einsum("pij,pj->pi", self.transitions[back], c)
            c -= np.einsum("pi,pi->p", laws[back], c)[:, None]  # E[c(h_{s−k})] = 0 exactly: remove rounding drift
            # Pr(X_{s−k} = 1, X_s = 1) − Pr(X_{s−k} = 1)·Pr(X_s = 1)
            cov = np.einsum("pi,i,pi->p", laws[back], B1, c)
            with np.errstate(divide="ignore", invalid="ignore"):
                # eq. (12) for binary X: |Pr(X_{s−k} = 1 | X_s = 1) − Pr(X_{s−k} = 1 | X_s = 0)| = |cov|/(p1(1 − p1))
                diff = np.where(valid, np.abs(cov) / (p1 * (1.0 - p1)), 0.0)
            table[k] = float(np.clip(diff.max(), 0.0, 1.0))
        out = table[arr]
        return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------------------------------------------
# the schedule
# ----------------------------------------------------------------------------------------------------------------


def _validate_schedule(process, A, S_bar, epsilon_c, first_publication):
    if not isinstance(process, BinaryHMM):
        raise InvalidInputError(f"`process` must be a BinaryHMM, got {fmt(process)}")
    A = _as_int(A, "A", 0, "slots of aging")
    S_bar = _as_int(S_bar, "S_bar", 1, "slots between releases")
    eps = _as_epsilon(epsilon_c)
    if first_publication is None:
        first = A
    else:
        first = _as_int(first_publication, "first_publication", 0, "slot of the first release")
        if first < A:
            raise InvalidInputError(
                f"`first_publication` = {first} is before slot A = {A}: the first release would read slot "
                f"{first - A} < 0; use first_publication ≥ A"
            )
    return A, S_bar, eps, first


def _releases(first: int, S_bar: int, t: int) -> np.ndarray:
    """Publication slots S_n = first + (n − 1)·S̄ ≤ t."""
    if t < first:
        return np.empty(0, dtype=np.int64)
    return np.arange(first, t + 1, S_bar, dtype=np.int64)


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


# ----------------------------------------------------------------------------------------------------------------
# the scaled forward (and backward) pass, batched over rows (evaluation slot × sign pattern)
# ----------------------------------------------------------------------------------------------------------------


def _forward_kernel(trans, B0, B1, mu0, theta, ends, log1, log0):
    """Scaled forward pass per row r up to its slot t = ends[r] (compiled with numba; nothing is raised).

    log1[r] = ln Σ_h π_t(h) B(h, 1) e^{θ_t} and log0[r] = ln Σ_h π_t(h) B(h, 0), π_t the tilted forward vector at t
    renormalised at every slot (the normaliser is common to both and cancels in D).
    """
    R = theta.shape[0]
    P = trans.shape[0]
    H = mu0.shape[0]
    pi = np.empty(H)
    a = np.empty(H)
    for r in range(R):
        t = ends[r]
        for h in range(H):
            pi[h] = mu0[h]
        for s in range(t):
            th = theta[r, s]
            tot = 0.0
            if th != 0.0:
                tp = max(th, 0.0)
                e0 = np.exp(-tp)
                e1 = np.exp(th - tp)
                for h in range(H):
                    a[h] = pi[h] * (B0[h] * e0 + B1[h] * e1)  # α_s(h)·E[e^{θ_s X_s} | h_s = h], scaled ≤ 1
                    tot += a[h]
            else:
                for h in range(H):
                    a[h] = pi[h]
                    tot += a[h]
            if tot > 0.0:
                for h in range(H):
                    a[h] /= tot  # per-step rescaling
            M = trans[s % P]
            for j in range(H):
                acc = 0.0
                for h in range(H):
                    acc += a[h] * M[h, j]
                pi[j] = acc  # predictive law of h_{s+1}
        th = theta[r, t]
        s1 = 0.0
        s0 = 0.0
        for h in range(H):
            s1 += pi[h] * B1[h]
            s0 += pi[h] * B0[h]
        log1[r] = np.log(s1) + th
        log0[r] = np.log(s0)


def _forward_backward_kernel(trans, B0, B1, mu0, theta, ends, grad):
    """grad[r, s] = E_θ[X_s | X_t = 1] − E_θ[X_s | X_t = 0] for s < t = ends[r], 1 at s = t (numba; nothing raised).

    E_θ is the path law tilted by ∏_s e^{θ(s) X_s}: the derivative of ln L(1) − ln L(0) in θ(s).
    """
    R = theta.shape[0]
    P = trans.shape[0]
    H = mu0.shape[0]
    T1 = theta.shape[1]
    pis = np.empty((T1, H))
    a = np.empty(H)
    beta = np.empty((2, H))
    g = np.empty((2, H))
    w0 = np.empty(H)
    w1 = np.empty(H)
    for r in range(R):
        t = ends[r]
        for h in range(H):
            pis[0, h] = mu0[h]
        for s in range(t):  # forward, storing the predictive vectors π_s
            th = theta[r, s]
            tp = max(th, 0.0)
            e0 = np.exp(-tp)
            e1 = np.exp(th - tp)
            tot = 0.0
            for h in range(H):
                a[h] = pis[s, h] * (B0[h] * e0 + B1[h] * e1)
                tot += a[h]
            if tot > 0.0:
                for h in range(H):
                    a[h] /= tot
            M = trans[s % P]
            for j in range(H):
                acc = 0.0
                for h in range(H):
                    acc += a[h] * M[h, j]
                pis[s + 1, j] = acc
        for s in range(t, T1):
            grad[r, s] = 0.0
        grad[r, t] = 1.0  # ∂/∂θ_t of θ_t·1 − θ_t·0
        for s in range(t, -1, -1):  # backward for the end conditions X_t = 0 and X_t = 1
            th = theta[r, s]
            tp = max(th, 0.0)
            e0 = np.exp(-tp)
            e1 = np.exp(th - tp)
            for h in range(H):
                w0[h] = B0[h] * e0
                w1[h] = B1[h] * e1
            if s == t:
                for h in range(H):
                    beta[0, h] = w0[h]  # β_t for X_t = 0: B(h, 0)
                    beta[1, h] = w1[h]  # β_t for X_t = 1: B(h, 1) e^{θ_t}
            else:
                M = trans[s % P]
                for x in range(2):
                    for h in range(H):
                        acc = 0.0
                        for j in range(H):
                            acc += M[h, j] * beta[x, j]
                        g[x, h] = acc  # (P_s β_{s+1})(h)
                post1 = 0.0
                post0 = 0.0
                for x in range(2):
                    num = 0.0
                    den = 0.0
                    for h in range(H):
                        num += pis[s, h] * w1[h] * g[x, h]
                        den += pis[s, h] * (w0[h] + w1[h]) * g[x, h]
                    val = num / den if den > 0.0 else 0.0  # E_θ[X_s | X_t = x]
                    if x == 1:
                        post1 = val
                    else:
                        post0 = val
                grad[r, s] = post1 - post0
                for x in range(2):
                    for h in range(H):
                        beta[x, h] = (w0[h] + w1[h]) * g[x, h]  # β_s = f_s ⊙ P_s β_{s+1}
            for x in range(2):
                tot = 0.0
                for h in range(H):
                    tot += beta[x, h]
                if tot > 0.0:
                    for h in range(H):
                        beta[x, h] /= tot


@functools.cache
def _kernels():
    """The compiled kernels (numba imported, and the kernels loaded from their cache, on first use)."""
    from numba import njit

    return (njit(cache=True, nogil=True)(_forward_kernel), njit(cache=True, nogil=True)(_forward_backward_kernel))


def _log_marginal_ratio(process, ends):
    """ln Pr(X_t = 1) − ln Pr(X_t = 0) per end slot t (untilted), and whether both values are possible."""
    laws = process.marginal_laws(int(ends.max()) + 1)[ends]
    p1 = laws @ process.emission[:, 1]
    p0 = laws @ process.emission[:, 0]
    ok = (p1 > 0) & (p0 > 0)
    with np.errstate(divide="ignore"):
        return np.where(ok, np.log(p1) - np.log(p0), 0.0), ok


def _args(process):
    return (np.ascontiguousarray(process.transitions), np.ascontiguousarray(process.emission[:, 0]),
            np.ascontiguousarray(process.emission[:, 1]), np.ascontiguousarray(process.phase_laws[0]))


def _forward_log_ratio(process, theta, ends):
    """D_r = ln L_σ(1) − ln L_σ(0) for each row r (tilts θ_r(s) = σ_n ε_C at the input slots, 0 elsewhere).

    Parameters
    ----------
    theta : numpy.ndarray, shape (R, T1)
        Tilts (nats) per row and slot; T1 > max(ends).
    ends : numpy.ndarray of int64, shape (R,)
        Evaluation slot t_r of each row.
    """
    R = theta.shape[0]
    log1, log0 = np.empty(R), np.empty(R)
    with np.errstate(divide="ignore"):
        _kernels()[0](*_args(process), np.ascontiguousarray(theta), ends.astype(np.int64), log1, log0)
    lmr, ok = _log_marginal_ratio(process, ends)
    with np.errstate(invalid="ignore"):
        return np.where(ok, log1 - log0 - lmr, 0.0)  # ln L_σ(1) − ln L_σ(0); L_σ(x)·Pr(X_t = x) = forward sum


def _forward_backward(process, theta, ends):
    """D_r and the gradient G_r(s) = ∂D_r/∂θ_r(s) = E_θ[X_s | X_t = 1] − E_θ[X_s | X_t = 0], shape (R, T1)."""
    D = _forward_log_ratio(process, theta, ends)
    G = np.zeros(theta.shape)
    _kernels()[1](*_args(process), np.ascontiguousarray(theta), ends.astype(np.int64), G)
    _, ok = _log_marginal_ratio(process, ends)
    G[~ok] = 0.0
    return D, G


def _chunks(n_rows: int, T1: int, H: int):
    step = max(1, _CHUNK_CELLS // max(1, T1 * H))
    for lo in range(0, n_rows, step):
        yield slice(lo, min(n_rows, lo + step))


def _theta(inputs_list, sigmas, eps, T1):
    theta = np.zeros((len(inputs_list), T1))
    for r, (inp, sg) in enumerate(zip(inputs_list, sigmas)):
        theta[r, inp] = eps * sg  # tilt σ_n ε_C at input slot S_n − A
    return theta


def _eval(process, inputs_list, sigmas, ends, eps):
    T1 = int(ends.max()) + 1
    out = np.empty(len(ends))
    for sl in _chunks(len(ends), T1, 1):
        idx = range(sl.start, sl.stop)
        th = _theta([inputs_list[i] for i in idx], [sigmas[i] for i in idx], eps, T1)
        out[sl] = _forward_log_ratio(process, th, ends[sl])
    return out


def _eval_grad(process, inputs_list, sigmas, ends, eps):
    T1 = int(ends.max()) + 1
    D = np.empty(len(ends))
    grads = []
    for sl in _chunks(len(ends), T1, 2):
        idx = list(range(sl.start, sl.stop))
        th = _theta([inputs_list[i] for i in idx], [sigmas[i] for i in idx], eps, T1)
        d, G = _forward_backward(process, th, ends[sl])
        D[sl] = d
        grads.extend(G[k, inputs_list[i]] for k, i in enumerate(idx))
    return D, grads


def _sign(g, current):
    """sign(g) with ties (g = 0) keeping `current`."""
    return np.where(g > 0, 1, np.where(g < 0, -1, current)).astype(np.int8)


@dataclass(frozen=True, eq=False)
class TailRisk:
    """Lower bound on the age-dependent risk from tail outputs (see the module docstring).

    Attributes
    ----------
    value : float
        max over the evaluation slots of max over the sign patterns searched of |ln L_σ(1) − ln L_σ(0)|, nats.
        A certified lower bound on the risk of Definition 10 (eq. (23)) at slot `t` (up to floating-point rounding
        of about 1e-12 relative).
    t : int
        Evaluation slot (slots) where `value` is attained.
    pattern : numpy.ndarray of int8, shape (N,)
        The best σ found at `t`: σ_n = +1 (output in the upper tail) or −1 (lower tail) for the releases n = 1..N
        with S_n ≤ t, in release order.
    search : str
        Which candidate gave `pattern`: ``"all +1"``, ``"all -1"``, ``"matched"``, ``"matched, negated"``,
        ``"sign of gradient, iteration k"``, ``"local search"`` or ``"exhaustive"``.
    log_ratio : float
        ln L_σ(1) − ln L_σ(0) for `pattern` (signed), nats; ``value = |log_ratio|``.
    releases : numpy.ndarray of int64, shape (N,)
        Publication slots S_n ≤ t.
    inputs : numpy.ndarray of int64, shape (N,)
        Input slots S_n − A.
    t_eval : numpy.ndarray of int64, shape (K,)
        Every evaluation slot.
    values : numpy.ndarray, shape (K,)
        The lower bound at each evaluation slot, nats.
    """

    value: float
    t: int
    pattern: np.ndarray
    search: str
    log_ratio: float
    releases: np.ndarray
    inputs: np.ndarray
    t_eval: np.ndarray
    values: np.ndarray

    def __repr__(self) -> str:
        """One line: value, slot, number of releases and how σ was found."""
        return (f"TailRisk(value={self.value:.6g} nats at t={self.t}, releases={self.releases.size}, "
                f"search={self.search!r})")


def _default_t_eval(process, S_bar, first, horizon):
    """Publication slots in the last window of the run: W = lcm(P, S̄) slots (S̄ for a homogeneous process)."""
    W = _lcm(process.period, S_bar)
    pubs = _releases(first, S_bar, horizon - 1)
    pubs = pubs[pubs > horizon - 1 - W]
    return pubs if pubs.size else np.array([horizon - 1], dtype=np.int64)


def tail_log_ratio(process: BinaryHMM, A: int, S_bar: int, epsilon_c: float, pattern, *, t: int,
                   first_publication: int | None = None):
    """ln L_σ(1) − ln L_σ(0) at slot `t` for given sign patterns σ, by the scaled forward pass.

    Parameters
    ----------
    process : BinaryHMM
    A, S_bar : int
        Aging and inter-publish time, slots.
    epsilon_c : float
        Laplace budget per release ε_C ≥ 0, nats.
    pattern : array_like of ±1, shape (N,) or (M, N)
        σ_n for the N releases S_n = first_publication + (n − 1)·S̄ ≤ t (one pattern per row).
    t : int
        Evaluation slot.
    first_publication : int, optional
        S_1 (default A).

    Returns
    -------
    float or numpy.ndarray of shape (M,)
        Signed log ratio(s), nats (0 when one value of X_t has probability 0 or no release precedes t).

    Raises
    ------
    InvalidInputError
        On a bad schedule, `t`, or a `pattern` whose last axis is not N or whose entries are not ±1.
    """
    A, S_bar, eps, first = _validate_schedule(process, A, S_bar, epsilon_c, first_publication)
    t = _as_int(t, "t", 0, "slot")
    inputs = _releases(first, S_bar, t) - A
    sig = np.asarray(pattern)
    rows = np.atleast_2d(sig) if sig.ndim <= 1 else sig
    if sig.ndim > 2 or rows.shape[1] != inputs.size or not np.all(np.isin(rows, (-1, 1))):
        raise InvalidInputError(
            f"`pattern` must hold one ±1 per release ({inputs.size} releases up to slot {t}), got {fmt(pattern)}"
        )
    if inputs.size == 0:
        out = np.zeros(rows.shape[0])
    else:
        out = _eval(process, [inputs] * rows.shape[0], list(rows.astype(np.int8)), np.full(rows.shape[0], t), eps)
    return float(out[0]) if sig.ndim <= 1 else out


def tail_risk(process: BinaryHMM, A: int, S_bar: int, epsilon_c: float, *, horizon: int, t_eval=None,
              first_publication: int | None = None, max_iter: int = 12, local_search: bool | None = None) -> TailRisk:
    """A certified lower bound on the age-dependent risk of the schedule (A, S̄, ε_C) for a binary HMM.

    Releases at S_n = first_publication + (n − 1)·S̄ ≤ t read the inputs X_{S_n − A}.  For each evaluation slot t
    the sign pattern σ (which Laplace tail each release's output lies in) is searched among: all +1, all −1, the
    *matched* pattern σ_n = sign(E[X_{S_n − A} | X_t = 1] − E[X_{S_n − A} | X_t = 0]) from one forward–backward
    pass, its negation, then the sign-of-gradient iteration σ ← ±sign(∇_θ D) at the tilted law (the gradient of
    D = ln L(1) − ln L(0) in the tilt θ_n = σ_n ε_C is E_θ[X_n | X_t = 1] − E_θ[X_n | X_t = 0]; flipping the
    coordinates where it disagrees with σ increases D to first order), up to `max_iter` times in each direction,
    and, on small cases, a best-improvement local search over single flips.  Any σ gives a valid lower bound;
    the best found is returned.

    Parameters
    ----------
    process : BinaryHMM
    A : int
        Aging, slots (≥ 0).
    S_bar : int
        Inter-publish time, slots (≥ 1).
    epsilon_c : float
        Laplace budget per release ε_C ≥ 0 (nats); Δf = 1/I for binary readings.
    horizon : int
        Length of the run in slots (slots 0..horizon − 1).
    t_eval : int or array_like of int, optional
        Evaluation slots in [0, horizon − 1].  Default: the publication slots in the last lcm(P, S̄) slots of
        the run (the last epoch for a homogeneous process, every phase of the last period for a periodic one),
        so that the value is the steady-state peak.
    first_publication : int, optional
        S_1 ≥ A (default A: the first slot whose input slot S_1 − A = 0 exists).
    max_iter : int
        Sign-of-gradient iterations per direction (≥ 0).
    local_search : bool, optional
        Run the single-flip local search (default: when an evaluation slot has ≤ 40 releases and the evaluation
        slots are ≤ 400).

    Returns
    -------
    TailRisk

    Raises
    ------
    InvalidInputError
        If `process` is not a BinaryHMM, `A` < 0, `S_bar` < 1, `epsilon_c` is negative or not finite,
        `horizon` < 1, an evaluation slot is outside [0, horizon − 1], `first_publication` < A, or `max_iter` < 0.

    References
    ----------
    Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, Definition 10
    (eq. (23)), Definition 9 (eq. (22)).
    """
    A, S_bar, eps, first = _validate_schedule(process, A, S_bar, epsilon_c, first_publication)
    horizon = _as_int(horizon, "horizon", 1, "slots")
    max_iter = _as_int(max_iter, "max_iter", 0, "iterations")
    if t_eval is None:
        ends = _default_t_eval(process, S_bar, first, horizon)
    else:
        arr = np.atleast_1d(np.asarray(t_eval))
        if (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 1 or arr.size == 0
                or np.any(arr < 0) or np.any(arr > horizon - 1)):
            raise InvalidInputError(
                f"`t_eval` must be slots in [0, horizon − 1] = [0, {horizon - 1}], got {fmt(t_eval)}"
            )
        ends = np.unique(arr.astype(np.int64))
    inputs_all = [_releases(first, S_bar, int(t)) - A for t in ends]
    values = np.zeros(ends.size)
    best = [(0.0, 0.0, np.ones(inp.size, dtype=np.int8), "all +1" if inp.size else "no release")
            for inp in inputs_all]
    live = [k for k, inp in enumerate(inputs_all) if inp.size and eps > 0]
    if live:
        best = _search(process, [inputs_all[k] for k in live], ends[live], eps, max_iter, local_search, best, live)
    for k in range(ends.size):
        values[k] = best[k][0]
    k = int(np.argmax(values))
    t = int(ends[k])
    return TailRisk(value=float(values[k]), t=t, pattern=best[k][2], search=best[k][3], log_ratio=float(best[k][1]),
                    releases=_releases(first, S_bar, t), inputs=_releases(first, S_bar, t) - A,
                    t_eval=ends, values=values)


def _search(process, inputs_list, ends, eps, max_iter, local_search, best, live):
    """The σ search for each live evaluation slot; returns `best` updated: (|D|, D, σ, label) per slot."""
    K = len(ends)
    best = list(best)

    def offer(k, D, sig, label):
        if abs(D) > best[live[k]][0]:
            best[live[k]] = (float(abs(D)), float(D), np.asarray(sig, dtype=np.int8).copy(), label)

    plus = [np.ones(inp.size, dtype=np.int8) for inp in inputs_list]
    D_all = _eval(process, inputs_list + inputs_list, plus + [-s for s in plus], np.concatenate([ends, ends]), eps)
    for k in range(K):
        offer(k, D_all[k], plus[k], "all +1")
        offer(k, D_all[K + k], -plus[k], "all -1")
    # matched pattern: the gradient at θ = 0 (one forward–backward pass)
    _, G0 = _eval_grad(process, inputs_list, [np.zeros(inp.size, dtype=np.int8) for inp in inputs_list], ends, eps)
    matched = [_sign(g, 1) for g in G0]
    # sign-of-gradient iterations in both directions (maximise D, then −D), starting from ±matched
    rows_k = list(range(K)) * 2
    dirs = [1] * K + [-1] * K
    sig = matched + [-m for m in matched]
    active = list(range(2 * K))
    for it in range(max_iter + 1):
        if not active:
            break
        D, G = _eval_grad(process, [inputs_list[rows_k[r]] for r in active], [sig[r] for r in active],
                          ends[[rows_k[r] for r in active]], eps)
        still = []
        for j, r in enumerate(active):
            if it == 0:
                label = "matched" if dirs[r] > 0 else "matched, negated"
            else:
                label = f"sign of gradient, iteration {it}"
            offer(rows_k[r], D[j], sig[r], label)
            new = _sign(dirs[r] * G[j], sig[r])
            if not np.array_equal(new, sig[r]):
                sig[r] = new
                still.append(r)
        active = still
    n_max = max(inp.size for inp in inputs_list)
    if local_search is None:
        local_search = n_max <= 40 and K <= 400
    if local_search:
        _local_search(process, inputs_list, ends, eps, best, live, offer)
    return best


def _local_search(process, inputs_list, ends, eps, best, live, offer):
    """Best-improvement ascent of |D| over single flips of σ, from the best pattern of each slot."""
    K = len(ends)
    current = [best[live[k]][2].copy() for k in range(K)]
    score = [best[live[k]][0] for k in range(K)]
    active = list(range(K))
    for _ in range(4 * max(inp.size for inp in inputs_list)):
        if not active:
            break
        rows, sigs, owner = [], [], []
        for k in active:
            for n in range(current[k].size):
                s = current[k].copy()
                s[n] = -s[n]
                rows.append(k)
                sigs.append(s)
                owner.append(k)
        D = _eval(process, [inputs_list[k] for k in rows], sigs, ends[rows], eps)
        still = []
        for k in active:
            idx = [j for j, o in enumerate(owner) if o == k]
            j = max(idx, key=lambda j: abs(D[j]))
            if abs(D[j]) > score[k] * (1 + 1e-13) + 1e-300:
                current[k], score[k] = sigs[j], abs(D[j])
                offer(k, D[j], sigs[j], "local search")
                still.append(k)
        active = still


# ----------------------------------------------------------------------------------------------------------------
# brute force
# ----------------------------------------------------------------------------------------------------------------


def brute_force_tail_risk(process: BinaryHMM, A: int, S_bar: int, epsilon_c: float, *, t: int,
                          first_publication: int | None = None) -> TailRisk:
    """The tail lower bound at slot `t` by enumerating every hidden path and every sign pattern (tiny cases).

    Every hidden path h_0..h_t of positive probability is enumerated (no merging), with the readings at the
    input slots and at t (emissions expanded per path), giving the exact joint law of (X_{S_1 − A}, …,
    X_{S_N − A}, X_t); then for every σ ∈ {±1}^N, ln L_σ(x) = logsumexp over the inputs of
    ln Pr(inputs | X_t = x) + ε_C Σ_n σ_n x_n.  Independent of the forward pass: no tilt is propagated and no
    vector is rescaled.

    Parameters
    ----------
    process : BinaryHMM
    A, S_bar : int
        Aging and inter-publish time, slots.
    epsilon_c : float
        ε_C ≥ 0, nats.
    t : int
        Evaluation slot; the paths cover slots 0..t.
    first_publication : int, optional
        S_1 (default A).

    Returns
    -------
    TailRisk
        With ``search="exhaustive"``; ``values`` holds the signed log ratio D_σ of every σ, σ in the order of
        ``itertools.product((1, -1), repeat=N)`` (``t_eval`` = [t]; ``value`` is max |D_σ|).

    Raises
    ------
    InvalidInputError
        If the schedule is bad, more than 2²² paths would be kept (use T ≤ 14 with H ≤ 4 and sparse transitions,
        or a shorter t), or there are more than 11 releases up to t.
    """
    import itertools

    A, S_bar, eps, first = _validate_schedule(process, A, S_bar, epsilon_c, first_publication)
    t = _as_int(t, "t", 0, "slot")
    releases = _releases(first, S_bar, t)
    inputs = releases - A
    N = inputs.size
    if N > _MAX_BRUTE_RELEASES:
        raise InvalidInputError(
            f"`t` = {t} gives {N} releases; the brute force enumerates 2^N sign patterns and accepts at most "
            f"{_MAX_BRUTE_RELEASES}: use a smaller t or a larger S_bar"
        )
    H, P = process.n_states, process.period
    with np.errstate(divide="ignore"):
        logT = np.log(process.transitions)
        logB = np.log(process.emission)
        log_mu = np.log(process.phase_laws[0])
    # state: hidden state, log probability, bits of the readings at the input slots so far
    h = np.flatnonzero(np.isfinite(log_mu))
    lp = log_mu[h]
    bits = np.zeros(h.size, dtype=np.int64)
    xt = np.zeros(h.size, dtype=np.int64)
    pos = {int(s): n for n, s in enumerate(inputs)}
    succ = np.isfinite(logT).sum(axis=2)  # (P, H): successors of positive probability
    readings = np.isfinite(logB).sum(axis=1)  # (H,): readings of positive probability

    def check(count, slot):
        if count > _MAX_PATHS:
            raise InvalidInputError(
                f"`t` = {t}: more than {_MAX_PATHS} hidden paths of positive probability by slot {slot}; the brute "
                "force is for tiny cases (T ≤ 14, H ≤ 4): use a smaller t"
            )

    for s in range(t + 1):
        if s in pos or s == t:  # expand the reading X_s
            check(int(readings[h].sum()), s)
            x = np.repeat(np.array([[0, 1]]), h.size, axis=0).reshape(-1)
            h, lp, bits, xt = (np.repeat(h, 2), np.repeat(lp, 2), np.repeat(bits, 2), np.repeat(xt, 2))
            lp = lp + logB[h, x]  # Pr(X_s = x | h_s)
            keep = np.isfinite(lp)
            h, lp, bits, xt, x = h[keep], lp[keep], bits[keep], xt[keep], x[keep]
            if s in pos:
                bits = bits | (x << pos[s])
            if s == t:
                xt = x
        if s == t:
            break
        check(int(succ[s % P][h].sum()), s + 1)
        nxt = np.tile(np.arange(H), h.size)
        h2 = np.repeat(h, H)
        lp = np.repeat(lp, H) + logT[s % P][h2, nxt]  # Pr(h_{s+1} | h_s), phase s mod P
        keep = np.isfinite(lp)
        h, lp, bits, xt = nxt[keep], lp[keep], np.repeat(bits, H)[keep], np.repeat(xt, H)[keep]
    # joint law of (input bits, X_t) by summing path probabilities
    m = lp.max()
    w = np.exp(lp - m)
    joint = np.zeros((2, 1 << N))
    np.add.at(joint, (xt, bits), w)
    with np.errstate(divide="ignore"):
        log_joint = np.log(joint) + m  # ln Pr(inputs, X_t = x)
    log_px = np.logaddexp.reduce(log_joint, axis=1)  # ln Pr(X_t = x)
    patterns = np.array(list(itertools.product((1, -1), repeat=N)), dtype=np.int8).reshape(-1, N)
    xbits = ((np.arange(1 << N)[:, None] >> np.arange(N)[None, :]) & 1).astype(float)  # (2^N, N)
    expo = eps * (patterns.astype(float) @ xbits.T)  # ε_C Σ_n σ_n x_n, (patterns, inputs)
    if not (np.isfinite(log_px).all()):
        D = np.zeros(patterns.shape[0])
    else:
        lL1 = np.logaddexp.reduce(expo + log_joint[1][None, :], axis=1) - log_px[1]  # ln L_σ(1)
        lL0 = np.logaddexp.reduce(expo + log_joint[0][None, :], axis=1) - log_px[0]  # ln L_σ(0)
        D = lL1 - lL0
    if N == 0 or eps == 0:
        D = np.zeros(patterns.shape[0])
    j = int(np.argmax(np.abs(D)))
    return TailRisk(value=float(abs(D[j])), t=t, pattern=patterns[j], search="exhaustive", log_ratio=float(D[j]),
                    releases=releases, inputs=inputs, t_eval=np.array([t], dtype=np.int64), values=D)


# ----------------------------------------------------------------------------------------------------------------
# checking a report
# ----------------------------------------------------------------------------------------------------------------


def _num(x):
    return None if x is None else float(x)


def _below(bound: float, exact: float) -> bool:
    """True when a stated upper bound is below the exact lower bound beyond floating-point noise (1e-9 relative)."""
    return bound < exact - 1e-9 * max(1.0, abs(exact))


def printed_bound_violations(report: dict, process: BinaryHMM, *, horizon: int) -> list[str]:
    """A message for every privacy upper bound of a ``policyopt schedule --json`` object below the exact lower bound.

    Checked (each when present and not null):

    * ``peak_risk`` (ε*, nats) of the schedule (``A``, ``S_bar``, ``epsilon_c``) against :func:`tail_risk` at the
      steady-state peak of a run of `horizon` slots (default evaluation slots);
    * ``guarantee.epsilon`` when ``guarantee.kind == "model-based"`` (an ε* like ``peak_risk``, δ = 0), the same
      way (over ``guarantee.horizon`` slots when that is stated, else `horizon`); a model-free guarantee (δ > 0)
      is not comparable with a pure lower bound and is skipped;
    * ``model_free.epsilon_pure`` (pure ε over ``model_free.horizon`` slots, at ``model_free.epsilon_c`` or the
      schedule's ε_C) against the lower bound at the last slot of a run of that many slots;
    * ``horizon_design.horizon_risk`` (the largest risk over ``horizon_design.horizon`` slots of the schedule
      ``horizon_design.A``, ``S_bar``, ``epsilon_c``) against the lower bound at the publication slots of the last
      period/epoch of such a run.

    A bound is reported when it is below the lower bound by more than 1e-9 relative (floating-point noise).

    Parameters
    ----------
    report : dict
        The parsed JSON object.
    process : BinaryHMM
        The process the report's data were simulated from.
    horizon : int
        Run length (slots) for the steady-state peak of ``peak_risk`` and a model-based ``guarantee``.

    Returns
    -------
    list of str
        One message per violated bound (empty when none).

    Raises
    ------
    InvalidInputError
        If `report` is not a dict or lacks the schedule fields ``A``, ``S_bar``, ``epsilon_c``.
    """
    if not isinstance(report, dict):
        raise InvalidInputError(f"`report` must be a dict (a parsed `policyopt schedule --json`), got {fmt(report)}")
    missing = [k for k in ("A", "S_bar", "epsilon_c") if report.get(k) is None]
    if missing:
        raise InvalidInputError(
            f"`report` lacks the schedule field(s) {', '.join(missing)}; got keys {fmt(sorted(report))}"
        )
    horizon = _as_int(horizon, "horizon", 1, "slots")
    A, S_bar, eps = int(report["A"]), int(report["S_bar"]), float(report["epsilon_c"])
    out: list[str] = []
    sched = f"(A = {A}, S̄ = {S_bar}, ε_C = {eps!r})"
    steady = None

    def steady_peak():
        nonlocal steady
        if steady is None:
            steady = tail_risk(process, A, S_bar, eps, horizon=horizon)
        return steady

    def describe(r: TailRisk) -> str:
        return f"{r.value:.6g} nats (slot {r.t}, {r.releases.size} releases, σ: {r.search})"

    peak = _num(report.get("peak_risk"))
    if peak is not None:
        r = steady_peak()
        if _below(peak, r.value):
            out.append(f"peak_risk = {peak!r} nats is below the exact risk ≥ {describe(r)} of {sched} on {process!r}")
    guarantee = report.get("guarantee") or {}
    if guarantee.get("kind") == "model-based" and _num(guarantee.get("epsilon")) is not None:
        g = float(guarantee["epsilon"])
        gh = guarantee.get("horizon")
        r = steady_peak() if gh is None else tail_risk(process, A, S_bar, eps, horizon=_as_int(
            int(gh), "guarantee.horizon", 1, "slots"))
        if _below(g, r.value):
            out.append(f"guarantee.epsilon = {g!r} nats (model-based) is below the exact risk ≥ {describe(r)} of "
                       f"{sched} on {process!r}")
    mf = report.get("model_free") or {}
    if _num(mf.get("epsilon_pure")) is not None and mf.get("horizon") is not None:
        h = _as_int(int(mf["horizon"]), "model_free.horizon", 1, "slots")
        e = float(mf["epsilon_c"]) if mf.get("epsilon_c") is not None else eps
        r = tail_risk(process, A, S_bar, e, horizon=h, t_eval=[h - 1])
        if _below(float(mf["epsilon_pure"]), r.value):
            out.append(f"model_free.epsilon_pure = {float(mf['epsilon_pure'])!r} nats over {h} slots is below the "
                       f"exact risk ≥ {describe(r)} at the last slot of (A = {A}, S̄ = {S_bar}, ε_C = {e!r}) on "
                       f"{process!r}")
    hd = report.get("horizon_design") or {}
    if _num(hd.get("horizon_risk")) is not None and all(hd.get(k) is not None for k in ("A", "S_bar", "epsilon_c")):
        h = int(hd["horizon"]) if hd.get("horizon") is not None else horizon
        a2, s2, e2 = int(hd["A"]), int(hd["S_bar"]), float(hd["epsilon_c"])
        r = tail_risk(process, a2, s2, e2, horizon=h)
        if _below(float(hd["horizon_risk"]), r.value):
            out.append(f"horizon_design.horizon_risk = {float(hd['horizon_risk'])!r} nats over {h} slots is below "
                       f"the exact risk ≥ {describe(r)} of (A = {a2}, S̄ = {s2}, ε_C = {e2!r}) on {process!r}")
    return out
