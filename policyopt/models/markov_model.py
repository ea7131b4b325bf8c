r"""Markov models whose state Z_t carries what the readings remember: the common interface and the spec.

Δ(t) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory
70(2), 2024, eq. (12), is the largest total variation between two rows of a user's *reversed* t-step kernel,
maximised over users, and their composition Theorem 3 (eq. (25)) holds *if the process is Markovian*.  Quantile
states X_t of real readings are not a first-order chain (daily habits, order-2 dependence, hidden home/away
regimes), so this module and its three companions model each user by a Markov chain on an **augmented state**
Z_t with X_t = g(Z_t):

=============  ==========================================  ============================================
spec           Z_t                                         module
=============  ==========================================  ============================================
``chain``      X_t (the first-order chain, K states)       here (:class:`ChainModel`)
``phase:P``    (X_t, φ_t), public phase φ_t = t mod P      :mod:`policyopt.models.phase_chain`
``order:k``    (X_t, X_{t−1}, …, X_{t−k+1}), K^k states    :mod:`policyopt.models.order_chain`
``hmm:R``      (X_t, R_t), hidden regime R_t of R values   :mod:`policyopt.models.hidden_regime`
=============  ==========================================  ============================================

Why Theorem 3 on Z bounds the risk about X_t
--------------------------------------------
Let every release M_n(X_{S_n − A_n}) be ε_{C,n}-DP in a user's reading X (Zhang et al. 2024, Definition 12 and
eq. (22)).

1. *ε_C-DP in X is ε_C-DP in Z.*  A release sees Z only through X = g(Z): two values z, z' of Z give the output
   distributions of g(z), g(z'), whose ratio is at most e^{ε_C} (and exactly 1 when g(z) = g(z')).
2. *Z is Markov*, so Theorem 3 holds for the process Z with Δ_Z(t), eq. (12) computed from the reversed t-step
   kernel of Z: the releases are (ε_Z(t), t, S, A)-age-dependent DP with respect to Z_t, ε_Z(t) the recursion (25)
   with Δ_Z.
3. *From Z_t back to X_t.*  For any set W of output histories, W ⊥ X_t | Z_t (X_t = g(Z_t) is a function of
   Z_t), so Pr(W | X_t = x) = Σ_z Pr(W | Z_t = z) Pr(Z_t = z | X_t = x): a mixture of the Pr(W | Z_t = z) over
   z ∈ g⁻¹(x).  By Lemma 4 of Zhang et al. (2024) (a ratio of sums lies within the range of the ratios of its
   terms), Pr(W | X_t = x) / Pr(W | X_t = x') ≤ max_{z ∈ g⁻¹(x), z' ∈ g⁻¹(x')} Pr(W | Z_t = z) / Pr(W | Z_t = z')
   ≤ e^{ε_Z(t)}.  So ε_Z(t) bounds the age-dependent risk about X_t, whatever the mixture weights are.

For the **phase chain** the phase φ_t is public (a function of t), so only pairs z = (x, φ), z' = (x', φ) with the
same phase are ever compared, and Theorem 3's recursion for a time-inhomogeneous chain holds with Δ at each step
bounded by Δ_Z(t) = max over end phases φ of the largest TV between reversed t-step rows ending in phase φ.  That
maximum is non-increasing in t — a reversed (t+1)-step row is a reversed t-step row composed with a one-step
kernel, and TV contracts under a kernel — which eq. (30) and the exact solver need.  The same contraction makes
Δ_Z non-increasing for the homogeneous Z chains (order-k, hidden regime).  Like eq. (1), the reversed kernels
assume the chain is in its (periodic) stationary regime.

What every model supplies (:class:`FittedMarkovModel`): ``log_max_tv(t)`` / ``max_tv(t)`` (Δ_Z, max over users;
the shapes of :meth:`policyopt.models.markov.Population.log_max_tv`), ``spectral_rate`` and ``envelope`` (eq. (38)),
``simulate`` (observable states, one random stream per user; simulation only, never released noise) and
``log_max_tv_draws`` (draws of ln Δ_Z expressing the estimation uncertainty, for
:func:`policyopt.models.posterior.simultaneous_upper_band`).  :func:`fit_markov_model` fits any of them from a
(U, T) matrix of quantile states (:func:`policyopt.models.empirical.states_matrix`); choosing among them
(``auto``) is the caller's job.
"""

from __future__ import annotations

import abc
import functools
import importlib
import math
from dataclasses import dataclass
from functools import cached_property
import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.models.markov import GeometricEnvelope, Population, as_slots
from policyopt.models.model_fitting import (  # the helpers every model shares
    DEFAULT_SMOOTHING,
    check_fit_inputs,
    check_seed,
    check_smoothing,
    check_starts,
    check_stochastic_stack,
    check_users,
    count_codes,
    draw_user_rows,
    posterior_alpha,
    require_transitions,
    user_generators,
)

__all__ = [
    "MarkovModelSpec",
    "FittedMarkovModel",
    "ChainModel",
    "ZKernel",
    "fit_markov_model",
    "fit_readings_model",
    "MAX_ORDER",
    "MIN_REGIMES",
    "MAX_REGIMES",
    "MAX_Z_STATES",
    "FITTERS",
]

#: Largest order k of an ``order:k`` chain.
MAX_ORDER = 4
#: Fewest hidden regimes R of an ``hmm:R`` model.
MIN_REGIMES = 2
#: Most hidden regimes R of an ``hmm:R`` model.
MAX_REGIMES = 6
#: Largest number K^k of augmented states of an order-k chain (a dense (K^k)² matrix per user is built for Δ_Z).
MAX_Z_STATES = 729
#: Bytes of uniforms and simulated states held at once (besides the output) when users are simulated chunk by chunk.
SIM_CHUNK_BYTES = 512 * 2**20

_KINDS = ("chain", "phase", "order", "hmm", "auto")
#: kind -> "module:function" fitting it, imported on first use (those modules import this one, so no static import
#: back: the import graph stays acyclic, as :mod:`policyopt.registry` does for the solvers).
FITTERS = {
    "phase": "policyopt.models.phase_chain:fit_phase_chain",
    "order": "policyopt.models.order_chain:fit_order_chain",
    "hmm": "policyopt.models.hidden_regime:fit_hidden_regime",
}
_FORMS = "chain, phase[:P] (P ≥ 2 slots), order:k (k in 1..4), hmm:R (R in 2..6) or auto"


def _is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, np.integer))


def _steps(z, uniforms, cum, succ, obs, phase0, xs):  # pragma: no cover - compiled
    """The simulation's time loop: xs[s, r, u] = g(Z) after s steps of user u's Z chain in draw r.

    z (R, U) Z states at column 0 (updated in place); uniforms (T, R, U) (row 0 unused); cum (U, Q, n_z, m) cumulative
    outcome probabilities per phase (last column +inf); succ (n_z·m) the Z state after outcome j from z; obs (n_z) the
    observable X of each Z state; phase0 (U) the phase of column 0; xs (T, R, U) the output.  The outcome of a step is
    #{k < m − 1 : u ≥ cum_k}, the inverse-CDF draw (the same numbers as a vectorised count of thresholds).
    """
    T, R, U = uniforms.shape
    Q = cum.shape[1]
    m = cum.shape[3]
    for r in range(R):
        for u in range(U):
            zz = z[r, u]
            xs[0, r, u] = obs[zz]
            for s in range(1, T):
                q = (phase0[u] + s - 1) % Q  # phase of the slot left
                x = uniforms[s, r, u]
                j = 0
                while j < m - 1 and x >= cum[u, q, zz, j]:
                    j += 1
                zz = succ[zz * m + j]
                xs[s, r, u] = obs[zz]
            z[r, u] = zz


@functools.cache
def _step_kernel():
    """The compiled :func:`_steps` (numba imported and the kernel loaded from its cache on first use)."""
    from numba import njit

    return njit(cache=True, nogil=True)(_steps)


# --------------------------------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class MarkovModelSpec:
    """Which augmented-state Markov model to fit: ``chain``, ``phase:P``, ``order:k``, ``hmm:R`` or ``auto``.

    Attributes
    ----------
    kind : str
        ``"chain"`` (first-order chain on the K quantile states), ``"phase"`` (per-phase transition matrices,
        period P slots), ``"order"`` (order-k chain), ``"hmm"`` (hidden-regime model with R regimes) or ``"auto"``
        (model selection, done by the caller).
    param : int or None
        P ≥ 2 for ``phase`` (``None``: the period is still to be taken from the slot length), the order k in 1..4
        for ``order``, the number of regimes R in 2..6 for ``hmm``; ``None`` for ``chain`` and ``auto``.

    Raises
    ------
    InvalidInputError
        An unknown `kind`, or a `param` the kind does not accept (the message says what would be).

    Examples
    --------
    >>> str(MarkovModelSpec.parse("phase", default_period=24))
    'phase:24'
    >>> MarkovModelSpec.parse(" HMM:3 ")
    MarkovModelSpec(kind='hmm', param=3)
    """

    kind: str
    param: int | None = None

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise InvalidInputError(f"`kind` must be one of {', '.join(_KINDS)}, got {fmt(self.kind)}")
        p = self.param
        if p is not None and not _is_int(p):
            raise InvalidInputError(f"`param` of {self.kind!r} must be an integer, got {fmt(p)}")
        if self.kind in ("chain", "auto") and p is not None:
            raise InvalidInputError(f"`model` {self.kind!r} takes no parameter, got {self.kind}:{p}")
        if self.kind == "phase" and p is not None and p < 2:
            raise InvalidInputError(
                f"`model` phase:{p}: the period P must be an integer ≥ 2 slots (e.g. phase:24 for a day of hourly "
                "slots); a period of 1 is the plain 'chain'"
            )
        if self.kind == "order" and (p is None or not 1 <= p <= MAX_ORDER):
            raise InvalidInputError(
                f"`model` order:{'' if p is None else p}: the order k must be an integer in 1..{MAX_ORDER} (e.g. order:2)"
            )
        if self.kind == "hmm" and (p is None or not MIN_REGIMES <= p <= MAX_REGIMES):
            raise InvalidInputError(
                f"`model` hmm:{'' if p is None else p}: the number of regimes R must be an integer in "
                f"{MIN_REGIMES}..{MAX_REGIMES} (e.g. hmm:2)"
            )
        if p is not None:
            object.__setattr__(self, "param", int(p))

    @classmethod
    def parse(cls, text, *, default_period=None) -> "MarkovModelSpec":
        """Parse ``chain | phase[:P] | order:k | hmm:R | auto`` (case and surrounding blanks ignored).

        Parameters
        ----------
        text : str or MarkovModelSpec
            The model, e.g. ``"phase:24"``; a spec is returned as is (``phase`` without P resolved).
        default_period : int, optional
            Period P (slots) of ``phase`` given without one, e.g. the slots in a day (24 for hourly slots).

        Returns
        -------
        MarkovModelSpec

        Raises
        ------
        InvalidInputError
            An unknown model or a bad parameter (P ≥ 2, k in 1..4, R in 2..6); ``phase`` without P and without
            `default_period` (the message says to give P or the slot length); a bad `default_period`.
        """
        if default_period is not None and (not _is_int(default_period) or default_period < 2):
            raise InvalidInputError(
                f"`default_period` must be an integer ≥ 2 (slots in a period, e.g. 24 for a day of hourly slots), "
                f"got {fmt(default_period)}"
            )
        if isinstance(text, MarkovModelSpec):
            spec = text
        else:
            if not isinstance(text, str):
                raise InvalidInputError(f"`model` must be a string such as 'order:2' ({_FORMS}), got {fmt(text)}")
            head, sep, tail = text.strip().lower().partition(":")
            head, tail = head.strip(), tail.strip()
            if head not in _KINDS:
                raise InvalidInputError(f"`model` {text!r} is not a model; give {_FORMS}")
            if not sep:
                param = None
            else:
                try:
                    param = int(tail)
                except ValueError:
                    raise InvalidInputError(
                        f"`model` {text!r}: the parameter after ':' must be an integer; give {_FORMS}"
                    ) from None
            if head in ("order", "hmm") and param is None:
                what = "the order k (e.g. order:2)" if head == "order" else "the number of regimes R (e.g. hmm:2)"
                raise InvalidInputError(f"`model` {text!r} needs {what}")
            spec = cls(head, param)
        if spec.kind == "phase" and spec.param is None:
            if default_period is None:
                raise InvalidInputError(
                    "`model` 'phase' needs a period: give phase:P (P ≥ 2 slots, e.g. phase:24 for a day of hourly "
                    "slots) or the slot length, from which the period of a day is taken"
                )
            spec = cls("phase", int(default_period))
        return spec

    def __str__(self) -> str:
        """Canonical name, e.g. ``phase:24``."""
        return self.kind if self.param is None else f"{self.kind}:{self.param}"


# ----------------------------------------------------------------------------------------------- the interface


@dataclass(frozen=True)
class ZKernel:
    """The Z chain of a block of users in the form :meth:`FittedMarkovModel.simulate` uses.

    Attributes
    ----------
    cum : numpy.ndarray, shape (U, Q, n_z, m)
        Cumulative probabilities of the m outcomes of a step from Z state z at phase q (Q = 1 for a homogeneous
        chain; the step from a slot of phase q to the next); the last column is +inf.
    successor : numpy.ndarray of int64, shape (n_z, m)
        Z state after outcome j from z.
    observed : numpy.ndarray of int64, shape (n_z,)
        X = g(z).
    initial : numpy.ndarray, shape (U, Q, n_z)
        Stationary (periodic: at phase q) distribution of Z, for the first slot.
    """

    cum: np.ndarray
    successor: np.ndarray
    observed: np.ndarray
    initial: np.ndarray


class FittedMarkovModel(abc.ABC):
    """A fitted Markov model on an augmented state Z_t with X_t = g(Z_t), one per user (see the module docstring).

    Subclasses: :class:`ChainModel`, :class:`~policyopt.models.phase_chain.PhaseChainModel`,
    :class:`~policyopt.models.order_chain.OrderChainModel`, :class:`~policyopt.models.hidden_regime.HiddenRegimeModel`.

    Attributes
    ----------
    users : tuple of str
        The users, in the order of every per-user array.
    n_states : int
        K, the number of observable (quantile) states.
    transitions : dict or None
        User → number of transitions (pairs, or for ``order:k`` windows of k + 1 consecutive observed slots) the fit
        counted; ``None`` for a model built from given parameters.
    """

    kind: str = ""

    users: tuple
    n_states: int
    transitions: dict | None

    def _init_common(self, users, U: int, n_states: int, transitions=None) -> None:
        self.users = check_users(users, U)
        self.n_states = int(n_states)
        self.transitions = None if transitions is None else dict(transitions)

    def _init_counts(self, counts, shape: tuple, smoothing=None) -> None:
        """Set ``counts`` (float, checked to have `shape`, or None) and ``smoothing`` (float or None) of a count fit.

        Parameters
        ----------
        counts : array_like or None
            Observed transition counts (posterior draws), shape `shape`, e.g. (U, K, K); None: built from parameters.
        shape : tuple of int
            The shape `counts` must have.
        smoothing : float, optional
            The pseudo-count s of the fit.

        Raises
        ------
        InvalidInputError
            `counts` not of shape `shape`.
        """
        if counts is not None:
            counts = np.asarray(counts, dtype=float)
            if counts.shape != shape:
                raise InvalidInputError(f"`counts` must have shape {shape}, got {counts.shape}")
        self.counts = counts
        self.smoothing = None if smoothing is None else float(smoothing)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, n_users={self.n_users}, n_states={self.n_states})"

    # -- identity
    @property
    def n_users(self) -> int:
        """Number of users I (each with its own Z chain)."""
        return len(self.users)

    @property
    @abc.abstractmethod
    def spec(self) -> MarkovModelSpec:
        """The model's :class:`MarkovModelSpec`."""

    @property
    def name(self) -> str:
        """Canonical spec, e.g. ``"phase:24"``."""
        return str(self.spec)

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """One line: what Z is."""

    @property
    @abc.abstractmethod
    def n_parameters(self) -> int:
        """Free parameters of one user's model (the whole model has ``n_users`` times as many)."""

    # -- Δ_Z
    @abc.abstractmethod
    def _log_max_tv_sorted(self, ts: np.ndarray) -> np.ndarray:
        """ln Δ_Z at sorted unique ages `ts` (int64), max over users."""

    def log_max_tv(self, t):
        """ln Δ_Z(t) of eq. (12) for the Z chains, max over users; same shape as `t`, −inf where Δ_Z(t) = 0.

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots (any shape, order, repeats).

        Returns
        -------
        float or numpy.ndarray
            As :meth:`policyopt.models.markov.Population.log_max_tv`; ln Δ_Z(0) = 0.  Computed without underflow
            (propagated row differences, rescaled by powers of two), and at most 0: a Z state that determines the
            next one's observable part (``order:k``: Δ_Z(1) = 1) can round a few ulps above ln 1, which eq. (25)'s
            evaluation (:func:`policyopt.privacy.age_dependent.compose`) refuses.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        """
        ts = as_slots(t, "t")
        uniq, inverse = np.unique(ts.reshape(-1), return_inverse=True)
        out = np.minimum(np.asarray(self._log_max_tv_sorted(uniq), dtype=float), 0.0)[inverse].reshape(ts.shape)
        return float(out) if out.ndim == 0 else out

    def max_tv(self, t):
        """Δ_Z(t) of eq. (12), max over users; same shape as `t` (see :meth:`log_max_tv`; underflows below 1e-308)."""
        out = np.exp(self.log_max_tv(t))
        return float(out) if np.ndim(out) == 0 else out

    @property
    @abc.abstractmethod
    def spectral_rate(self) -> float:
        """A geometric rate ρ in (0, 1] for the envelope Δ_Z(t) ≤ c·ρ^t (eq. (38))."""

    def envelope(self, horizon: int, rho: float | None = None) -> GeometricEnvelope:
        """Smallest c ≥ 1 with Δ_Z(t) ≤ c·ρ^t (eq. (38)) for all t in 0..horizon (as :meth:`Population.envelope`).

        Parameters
        ----------
        horizon : int
            Last age (slots) checked, ≥ 0.
        rho : float, optional
            Decay rate in [0, 1]; default :attr:`spectral_rate`.

        Returns
        -------
        GeometricEnvelope

        Raises
        ------
        InvalidInputError
            If `rho` is outside [0, 1] or decays so fast that no finite c dominates Δ_Z over the horizon.
        """
        (h,) = as_slots([horizon], "horizon")
        if rho is None:
            rho = self.spectral_rate
        if isinstance(rho, bool) or not isinstance(rho, (int, float, np.floating)) or not 0.0 <= float(rho) <= 1.0:
            raise InvalidInputError(f"`rho` must be in [0, 1], got {fmt(rho)}")
        rho = float(rho)
        ts = np.arange(int(h) + 1)
        log_d = np.asarray(self.log_max_tv(ts), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rho = math.log(rho) if rho > 0 else -np.inf
            excess = np.where(np.isfinite(log_d), log_d - np.where(ts == 0, 0.0, ts * log_rho), -np.inf)  # eq. (38)
        log_c = max(0.0, float(np.max(excess)))
        if not log_c < 709:
            raise InvalidInputError(
                f"`rho`={rho!r} decays faster than Δ_Z(t) (no finite c over horizon {int(h)}); "
                f"use a larger rho, e.g. the spectral rate {self.spectral_rate!r}"
            )
        return GeometricEnvelope(c=math.exp(log_c), rho=rho, horizon=int(h))

    # -- simulation
    @abc.abstractmethod
    def _z_kernel(self, sel: slice) -> ZKernel:
        """The Z chains of users `sel` for the simulator."""

    def _default_starts(self) -> np.ndarray:
        return np.zeros(self.n_users, dtype=np.int64)

    def simulate(self, lengths, draws: int, rng, *, starts=None, initial=None) -> np.ndarray:
        """Simulate every user's observable states X_t = g(Z_t): `draws` independent series per user.

        Parameters
        ----------
        lengths : array_like of int, shape (U,)
            Slots to simulate per user (≥ 1); the output is padded with −1 up to the longest.
        draws : int
            R ≥ 1.
        rng : sequence of U numpy.random.Generator, or one Generator
            Simulation randomness (seeded; :func:`policyopt.models.empirical.user_streams`), never released noise.
            User u's series use only ``rng[u]``: first R uniforms for Z at column 0 (only when they are needed:
            `initial` not given, or Z has a hidden part), then ``random((R, lengths[u] − 1))`` for the steps, so they
            do not depend on which other users are simulated.  One shared Generator is used user after user.
        starts : array_like of int, shape (U,), keyword-only
            Absolute slot of column 0 per user (its phase is ``starts mod P``); default: the fit's starts for a phase
            chain, 0 otherwise.  Ignored by homogeneous models (validated all the same).
        initial : array_like of int, shape (U,), keyword-only
            Observable state X at column 0 per user; the hidden part of Z (earlier states, regime) is then drawn
            from the stationary law of Z given X.  Default: Z at column 0 drawn from its (periodic) stationary law.

        Returns
        -------
        numpy.ndarray of int64, shape (R, U, max(lengths))
            States 0..K−1, −1 beyond each user's length.  For a first-order chain with `initial` this is
            :func:`policyopt.models.empirical.simulate_chain_states` draw for draw.

        Raises
        ------
        InvalidInputError
            Bad `lengths`, `draws`, `rng`, `starts` or `initial`.
        """
        U = self.n_users
        n = np.asarray(lengths)
        if n.shape != (U,) or n.dtype == bool or not np.issubdtype(n.dtype, np.integer) or np.any(n < 1):
            raise InvalidInputError(f"`lengths` must give one integer ≥ 1 per user ({U}), got {fmt(lengths)}")
        n = n.astype(np.int64)
        if not _is_int(draws) or draws < 1:
            raise InvalidInputError(f"`draws` must be an integer ≥ 1, got {fmt(draws)}")
        R = int(draws)
        gens = user_generators(rng, U)
        st = self._default_starts() if starts is None else check_starts(starts, U)
        x0 = None
        if initial is not None:
            x0 = np.asarray(initial)
            if (
                x0.shape != (U,) or x0.dtype == bool or not np.issubdtype(x0.dtype, np.integer)
                or np.any(x0 < 0) or np.any(x0 >= self.n_states)
            ):
                raise InvalidInputError(
                    f"`initial` must give one state in 0..{self.n_states - 1} per user ({U}), got {fmt(initial)}"
                )
            x0 = x0.astype(np.int64)
        T = int(n.max())
        out = np.full((R, U, T), -1, dtype=np.int64)
        probe = self._z_kernel(slice(0, 1))
        per_user = 8 * (T * R * 3 + probe.cum[0].size + probe.initial[0].size)  # uniforms, states, output block
        chunk = max(1, SIM_CHUNK_BYTES // per_user)
        for s0 in range(0, U, chunk):
            s1 = min(U, s0 + chunk)
            out[:, s0:s1] = self._simulate_block(
                self._z_kernel(slice(s0, s1)), n[s0:s1], R, gens[s0:s1], st[s0:s1], None if x0 is None else x0[s0:s1]
            )
        return out

    def _simulate_block(self, kern: ZKernel, n, R, gens, starts, x0) -> np.ndarray:
        Uc, Q, nz, m = kern.cum.shape
        T = int(n.max())
        K = self.n_states
        obs = kern.observed
        z = np.empty((R, Uc), dtype=np.int64)
        uniforms = np.zeros((T, R, Uc))
        hidden = nz > K
        for j, g in enumerate(gens):
            q0 = int(starts[j] % Q)
            if x0 is None or hidden:
                dist = np.array(kern.initial[j, q0], dtype=float)
                if x0 is not None:
                    dist = np.where(obs == x0[j], dist, 0.0)  # the stationary law of Z given X (every model has π_Z > 0)
                c = np.cumsum(dist / dist.sum())
                c[int(np.flatnonzero(dist > 0)[-1]) :] = np.inf  # a uniform always lands on a state of positive mass
                z[:, j] = np.searchsorted(c, g.random(R), side="right")
            else:
                z[:, j] = int(np.flatnonzero(obs == x0[j])[0])
            if n[j] > 1:
                uniforms[1 : n[j], :, j] = g.random((R, int(n[j]) - 1)).T
        xs = np.empty((T, R, Uc), dtype=np.int64)
        succ = np.ascontiguousarray(kern.successor, dtype=np.int64).ravel()  # successor of z after outcome j: [z·m + j]
        cum = np.ascontiguousarray(kern.cum, dtype=np.float64)
        phase0 = np.ascontiguousarray(np.asarray(starts, dtype=np.int64) % Q)
        _step_kernel()(z, uniforms, cum, succ, np.ascontiguousarray(obs, dtype=np.int64), phase0, xs)
        out = xs.transpose(1, 2, 0).copy()
        out[:, np.arange(T)[None, :] >= n[:, None]] = -1
        return out

    # -- estimation uncertainty
    @abc.abstractmethod
    def _posterior_draw(self, gens: list) -> "FittedMarkovModel":
        """One plausible model: every user's parameters drawn from their posterior with ``gens[u]``."""

    def posterior_draw(self, rng) -> "FittedMarkovModel":
        """One plausible model: every user's parameters drawn from the fit's posterior (Dirichlet on each row's counts
        plus the smoothing; for hidden regimes on the E-step's expected counts), e.g. to simulate a posterior
        predictive data set.  Simulation only, never released noise.

        Parameters
        ----------
        rng : numpy.random.Generator or sequence of U Generators
            As :meth:`log_max_tv_draws`.

        Returns
        -------
        FittedMarkovModel
            Of the same kind and users.

        Raises
        ------
        InvalidInputError
            Bad `rng`; a model without counts (built from parameters).
        """
        return self._posterior_draw(user_generators(rng, self.n_users))

    def log_max_tv_draws(self, ages, draws: int, rng) -> np.ndarray:
        """Draws of ln Δ_Z at `ages` expressing the estimation uncertainty (for :func:`simultaneous_upper_band`).

        Draw d is ln Δ_Z (max over users) of a model whose every user's parameters are drawn from their posterior;
        what that posterior is (and what it ignores) is stated by each model class.  Simulation only, never released
        noise.

        Parameters
        ----------
        ages : array_like of int, shape (n,)
            Ages (slots).
        draws : int
            M ≥ 2.
        rng : numpy.random.Generator or sequence of U Generators
            Seeded simulation randomness; with one Generator per user (:func:`~policyopt.models.empirical.user_streams`)
            user u's parameters in every draw use only its own stream, so the draws of a union of user groups are the
            draw-by-draw maxima of the groups' draws.

        Returns
        -------
        numpy.ndarray, shape (M, n)

        Raises
        ------
        InvalidInputError
            Bad `ages`, `draws` or `rng`; a model without counts (built from parameters) or fitted with smoothing 0.
        """
        from policyopt.models.posterior import check_draws

        ts = as_slots(ages, "ages").reshape(-1)
        m = check_draws(draws)
        gens = user_generators(rng, self.n_users)
        out = np.empty((m, ts.size))
        for d in range(m):
            out[d] = np.asarray(self._posterior_draw(gens).log_max_tv(ts), dtype=float).reshape(-1)
        return out


# ------------------------------------------------------------------------------------------------- ChainModel


class ChainModel(FittedMarkovModel):
    """The first-order chain (Z_t = X_t) in the common interface: the chains of a :class:`Population`.

    Parameters
    ----------
    population : Population
        One chain per user (count 1 each), all with K states.
    users : sequence of str
        One name per chain.
    counts : array_like, shape (U, K, K), optional
        Observed transition counts (``counts[u, x, y]`` = x → y steps), for the posterior draws.
    smoothing : float, optional
        The pseudo-count s of the fit.
    transitions : dict, optional
        User → transitions counted.

    Raises
    ------
    InvalidInputError
        `population` not a Population of one chain per user with equal K; `counts` of the wrong shape.

    Notes
    -----
    ``log_max_tv`` is :meth:`Population.log_max_tv` of the same population, bit for bit.  ``spectral_rate`` is
    :attr:`Population.spectral_rate` (the largest λ* over users, Zhang et al. 2024, Lemma 3), so that the envelope
    equals :meth:`Population.envelope`.  ``log_max_tv_draws`` draws every row of every user from Dir(n_x· + s), as
    :func:`policyopt.models.posterior.posterior_log_max_tv` (a Bayesian statement under this prior and the first-order
    model; sampled in log space, see :func:`~policyopt.models.model_fitting.dirichlet_rows`).
    """

    kind = "chain"

    def __init__(self, population: Population, users, *, counts=None, smoothing=None, transitions=None):
        if not isinstance(population, Population) or any(c != 1 for c in population.counts):
            raise InvalidInputError(f"`population` must be a Population with one chain per user, got {fmt(population)}")
        ks = {c.n_states for c in population.chains}
        if len(ks) != 1:
            raise InvalidInputError(f"`population` chains must all have the same number of states, got {sorted(ks)}")
        K = ks.pop()
        U = len(population.chains)
        self._init_common(users, U, K, transitions)
        self.population = population
        self._init_counts(counts, (U, K, K), smoothing)

    @classmethod
    def from_fitted(cls, fitted) -> "ChainModel":
        """The chains of :func:`policyopt.models.estimation.fit_population` (its population, users and counts).

        Raises
        ------
        InvalidInputError
            If `fitted` is not a :class:`~policyopt.models.estimation.FittedModel`.
        """
        from policyopt.models.estimation import FittedModel

        if not isinstance(fitted, FittedModel):
            raise InvalidInputError(f"`fitted` must be a FittedModel (from fit_population), got {fmt(fitted)}")
        counts = np.stack([np.asarray(fitted.counts[u], dtype=float) for u in fitted.users])
        return cls(
            fitted.population, fitted.users, counts=counts, smoothing=fitted.smoothing,
            transitions={u: fitted.transitions[u] for u in fitted.users},
        )

    @classmethod
    def from_states(cls, states, n_states: int, *, users, smoothing: float = DEFAULT_SMOOTHING) -> "ChainModel":
        """Fit one first-order chain per user from a (U, T) states matrix: counts + additive smoothing.

        P_u(x, y) = (n_u(x, y) + s) / Σ_y' (n_u(x, y') + s), eq. (28) of Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong,
        "Quantifying Differential Privacy in Continuous Data Release under Temporal Correlations", IEEE TKDE 31(7),
        2019 (as :func:`~policyopt.models.estimation.fit_population`); a transition with a missing end is not counted.

        Parameters
        ----------
        states : array_like, shape (U, T)
            States 0..K−1, −1 for missing slots.
        n_states : int
            K ≥ 2.
        users : sequence of str, keyword-only
        smoothing : float, keyword-only
            s > 0.

        Returns
        -------
        ChainModel

        Raises
        ------
        InvalidInputError
            Bad inputs; a user with no transition.
        """
        x, names, _ = check_fit_inputs(states, n_states, users)
        s = check_smoothing(smoothing)
        K = int(n_states)
        def encode(block, rows):
            """Codes x·K + y of the transitions x → y of `block` (users × slots), −1 across a missing slot."""
            a, b = block[:, :-1], block[:, 1:]
            return np.where((a >= 0) & (b >= 0), a * K + b, -1)  # cell (x, y) of a transition x → y

        counts = count_codes(x, K * K, encode).reshape(-1, K, K)
        per_user = counts.sum(axis=(1, 2))
        require_transitions(per_user, names, "transition (two consecutive observed slots)")
        rows = counts + s
        P = rows / rows.sum(axis=2, keepdims=True)  # eq. (28) of Cao et al. (2019)
        P = check_stochastic_stack(P, "P", "(U, K, K)", 3)  # renormalised as the other models' rows, bit for bit
        return cls(
            Population.from_matrices(P), names, counts=counts, smoothing=s,
            transitions={u: int(c) for u, c in zip(names, per_user)},
        )

    @property
    def spec(self) -> MarkovModelSpec:
        """The model's :class:`~policyopt.models.markov_model.MarkovModelSpec`."""
        return MarkovModelSpec("chain")

    @property
    def description(self) -> str:
        """One line: what Z is."""
        return f"Z_t = X_t: first-order chain on the {self.n_states} quantile states"

    @property
    def n_parameters(self) -> int:
        """Free parameters per user: K(K − 1)."""
        return self.n_states * (self.n_states - 1)  # K rows of K − 1 free probabilities

    @property
    def row_transitions(self) -> np.ndarray | None:
        """Observed transitions out of each state, shape (U, K) (``None`` without counts)."""
        return None if self.counts is None else self.counts.sum(axis=2)

    def log_max_tv(self, t):
        """ln Δ(t) of eq. (12): :meth:`Population.log_max_tv` of the chains, exactly."""
        return self.population.log_max_tv(t)

    def _log_max_tv_sorted(self, ts):
        return np.asarray(self.population.log_max_tv(ts), dtype=float)

    @cached_property
    def spectral_rate(self) -> float:
        """Largest λ* over users (:attr:`Population.spectral_rate`, Zhang et al. 2024, Lemma 3), for the envelope (38)."""
        return float(self.population.spectral_rate)

    def _z_kernel(self, sel: slice) -> ZKernel:
        chains = self.population.chains[sel]
        P = np.stack([c.P for c in chains])
        cum = np.cumsum(P, axis=2)
        cum[:, :, -1] = np.inf
        K = self.n_states
        return ZKernel(
            cum=cum[:, None], successor=np.broadcast_to(np.arange(K), (K, K)), observed=np.arange(K),
            initial=np.stack([c.stationary for c in chains])[:, None],
        )

    def _posterior_draw(self, gens):
        alpha = posterior_alpha(self.counts, self.smoothing, "chain model")
        return ChainModel(Population.from_matrices(draw_user_rows(alpha, gens)), self.users)


# -------------------------------------------------------------------------------------------- fit dispatcher


def fit_markov_model(
    spec,
    states,
    n_states: int,
    *,
    users,
    starts=None,
    smoothing: float = DEFAULT_SMOOTHING,
    seed: int = 0,
    default_period: int | None = None,
) -> FittedMarkovModel:
    """Fit one augmented-state Markov model per user from a (U, T) matrix of quantile states.

    Parameters
    ----------
    spec : str or MarkovModelSpec
        ``chain``, ``phase[:P]``, ``order:k`` or ``hmm:R`` (not ``auto``: model selection is the caller's).
    states : array_like of int, shape (U, T)
        States 0..K−1, −1 for a missing slot (:func:`policyopt.models.empirical.states_matrix`); transitions with a
        missing end are not counted.
    n_states : int
        K ≥ 2.
    users : sequence of str, keyword-only
        One distinct name per row (keys the HMM restarts' seeds, so a user's fit does not depend on the others).
    starts : array_like of int, shape (U,), keyword-only
        Absolute slot of column 0 per row, for the phase (default 0); kept by phase chains for :meth:`simulate`.
    smoothing : float, keyword-only
        Additive pseudo-count s > 0 (default 0.01): counts + s for ``chain``/``phase``/``order`` (eq. (28) of Cao
        et al. 2019); the Dirichlet prior 1 + s of the HMM's EM.
    seed : int, keyword-only
        Seed of the HMM restarts (other kinds are deterministic).
    default_period : int, keyword-only
        P for ``phase`` given without one (e.g. 24 for hourly slots).

    Returns
    -------
    FittedMarkovModel
        :class:`ChainModel`, :class:`~policyopt.models.phase_chain.PhaseChainModel`,
        :class:`~policyopt.models.order_chain.OrderChainModel` or
        :class:`~policyopt.models.hidden_regime.HiddenRegimeModel`.

    Raises
    ------
    InvalidInputError
        A bad spec (or ``auto``), states, users, starts, smoothing or seed; K^k > 729 for ``order:k``; a user with no
        transition.
    """
    sp = MarkovModelSpec.parse(spec, default_period=default_period)
    if sp.kind == "auto":
        raise InvalidInputError(
            "`spec` 'auto' selects among models, which the caller does: fit each candidate "
            "('chain', 'phase:P', 'order:k', 'hmm:R') and choose"
        )
    x, names, st = check_fit_inputs(states, n_states, users, starts)
    check_seed(seed)
    if sp.kind == "chain":
        return ChainModel.from_states(x, n_states, users=names, smoothing=smoothing)
    module, func = FITTERS[sp.kind].split(":")
    fit = getattr(importlib.import_module(module), func)  # by name: the model modules import this one
    if sp.kind == "phase":
        return fit(x, n_states, sp.param, users=names, starts=st, smoothing=smoothing)
    if sp.kind == "order":
        return fit(x, n_states, sp.param, users=names, smoothing=smoothing)
    return fit(x, n_states, sp.param, users=names, smoothing=smoothing, seed=seed)


def fit_readings_model(spec, readings, quantizer, users, *, value_range=None, smoothing: float = DEFAULT_SMOOTHING,
                       seed: int = 0, default_period: int | None = None) -> FittedMarkovModel:
    """:func:`fit_markov_model` on readings: each user's readings put on `quantizer`'s states, gaps −1.

    The Δ(t) source of a design under ``--markov-model`` (fitted on every design reading after its held-out check),
    and the model ``publish`` and ``ledger`` account with for that design (refitted on the pinned design data, so the
    same readings, quantizer, smoothing and seed give the same Δ_Z).

    Parameters
    ----------
    spec : str or MarkovModelSpec
        As :func:`fit_markov_model`.
    readings : pandas.DataFrame
        Long readings: user, time (integer slots), value.
    quantizer : policyopt.models.estimation.Quantizer
        The quantile states (those of the first-order chains fitted on the same readings).
    users : sequence of str
        The users to fit, in order; users without readings in `readings` are left out.
    value_range : (float, float), optional
        Public range the readings are clipped into first (as the chains' fit does).
    smoothing, seed, default_period
        As :func:`fit_markov_model`.

    Returns
    -------
    FittedMarkovModel

    Raises
    ------
    InvalidInputError
        Bad readings (:func:`policyopt.models.estimation.validate_readings`), or as :func:`fit_markov_model`.
    """
    from policyopt.models.estimation import readings_states_starts, validate_readings

    df = validate_readings(readings, source="`readings`")
    if value_range is not None:
        df["value"] = np.clip(df["value"].to_numpy(), *value_range)
    present = set(df["user"].unique())
    kept = [u for u in users if u in present]
    states, starts = readings_states_starts(df, quantizer, kept)
    return fit_markov_model(spec, states, int(quantizer.n_states), users=tuple(kept), starts=starts,
                            smoothing=smoothing, seed=seed, default_period=default_period)
