r"""Phase chains: a time-inhomogeneous first-order chain with a public phase φ_t = t mod P (``phase:P``).

A day (P = 24 hourly slots) or a week (P = 168) of habits is a transition matrix per phase, P_φ (K × K): the step
from a slot of phase φ to the next.  Z_t = (X_t, φ_t) is Markov; since the phase is public, Δ_Z compares only
states with the same phase (see :mod:`policyopt.models.markov_model` for why Theorem 3 of M. Zhang, E. Wei,
R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, then bounds the
risk about X_t).

Periodic stationary marginals
    μ_0 is the stationary distribution of the one-period product M_0 = P_0 P_1 ⋯ P_{P−1} (GTH elimination, as
    :mod:`policyopt.models.markov`), and μ_{φ+1} = μ_φ P_φ (all sums of non-negative terms: no cancellation).
Reversed one-step kernels (eq. (1) of Zhang et al. per phase)
    P̂_φ(x, y) = Pr(X_{s−1} = y | X_s = x, φ_s = φ) = μ_{φ−1}(y) P_{φ−1}(y, x) / μ_φ(x).
Δ_Z(t) (eq. (12), same-phase pairs)
    Δ_Z(t) = max over users and end phases φ of max_{x, x'} TV of rows x, x' of P̂_φ P̂_{φ−1} ⋯ P̂_{φ−t+1}.
    Computed as :mod:`policyopt.models.markov` does for one chain: the differences D_x = (e_x − e_0)·(product) are
    propagated (never the rows, whose subtraction would cap the relative accuracy at 1e-16/Δ), every step removes
    the rows' drift along the next marginal (a zero-sum row times P̂_ψ − 1μ_{ψ−1} is the same row times P̂_ψ), and
    each (user, end phase) block is rescaled by a power of two after every step with its scale kept as a logarithm,
    so ln Δ_Z stays finite far below 1e-308.  Cost: U·P·K³ flops per age step (linear in the largest age asked).

Estimation: counts n_u(φ, x, y) of x → y steps leaving a slot of phase φ (both ends observed) plus the additive
pseudo-count s (eq. (28) of Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous
Data Release under Temporal Correlations", IEEE TKDE 31(7), 2019, per phase).  With P phases a row rests on about
1/P of the transitions of a first-order chain: check :attr:`PhaseChainModel.row_transitions`.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from policyopt.errors import InvalidModelError, check_int
from policyopt.models.markov import Population
from policyopt.models.tv_kernels import (
    RESCALE_EVERY,
    RESCALE_FLOOR,
    exact_max_by_bounds,
    normalise_blocks,
    pairwise_max_tv,
    reversed_deviation,
)
from policyopt.models.markov_model import FittedMarkovModel, MarkovModelSpec, ZKernel
from policyopt.models.model_fitting import (
    DEFAULT_SMOOTHING,
    check_fit_inputs,
    check_smoothing,
    check_starts,
    check_stochastic_stack,
    count_codes,
    draw_user_rows,
    posterior_alpha,
    require_transitions,
    second_eigenvalue_modulus,
)

__all__ = ["PhaseChainModel", "fit_phase_chain", "phase_log_max_tv", "periodic_marginals"]


def periodic_marginals(matrices: np.ndarray) -> np.ndarray:
    """Periodic stationary marginals μ_φ of phase chains: μ_0 M_0 = μ_0 (GTH), μ_{φ+1} = μ_φ P_φ.

    Parameters
    ----------
    matrices : numpy.ndarray, shape (U, P, K, K)
        Row-stochastic P_φ per user (the step leaving phase φ).

    Returns
    -------
    numpy.ndarray, shape (U, P, K)
        μ_φ, each summing to 1.

    Raises
    ------
    InvalidModelError
        A one-period product that is reducible (μ_0 not unique).
    """
    U, P, K, _ = matrices.shape
    M = matrices[:, 0]
    for phi in range(1, P):
        M = np.matmul(M, matrices[:, phi])  # one-period product M_0 = P_0 P_1 ⋯ P_{P−1}
    M = M / M.sum(axis=2, keepdims=True)  # remove the rounding drift of the P − 1 products
    pop = Population.from_matrices(M)  # GTH elimination, vectorised over users
    mu = np.empty((U, P, K))
    mu[:, 0] = np.stack([c.stationary for c in pop.chains])
    for phi in range(1, P):
        m = np.einsum("ux,uxy->uy", mu[:, phi - 1], matrices[:, phi - 1])  # μ_{φ} = μ_{φ−1} P_{φ−1}
        mu[:, phi] = m / m.sum(axis=1, keepdims=True)
    return mu


def phase_log_max_tv(dev: np.ndarray, mu: np.ndarray, ts: np.ndarray, every: int = RESCALE_EVERY) -> np.ndarray:
    """ln Δ_Z(t) of phase chains, max over users and end phases, at sorted unique ages `ts`.

    Parameters
    ----------
    dev : numpy.ndarray, shape (U, P, K, K)
        Deviations Q_φ = P̂_φ − 1 μ_{φ−1} of the reversed one-step kernels P̂_φ (from a slot of phase φ to the slot
        before, phase φ − 1), computed without cancellation by
        :func:`policyopt.models.markov.reversed_deviation`.
    mu : numpy.ndarray, shape (U, P, K)
        Periodic stationary marginals μ_φ.
    ts : numpy.ndarray of int64
        Sorted unique ages (slots).
    every : int
        Steps between rescalings (see the notes).

    Returns
    -------
    numpy.ndarray, shape of `ts`
        ln Δ_Z (−inf where Δ_Z = 0 exactly); ln Δ_Z(0) = 0 for K ≥ 2.

    Notes
    -----
    The (user, end phase φ) block of differences D_x(t) = (e_x − e_0) P̂_φ P̂_{φ−1} ⋯ P̂_{φ−t+1} is propagated step by
    step; step j multiplies by S_ψ = Q_ψ − (Q_ψ 1) μ_{ψ−1}, Q_ψ = P̂_ψ − 1 μ_{ψ−1}, ψ = φ − j: on a zero-sum row this
    is P̂_ψ, and its rows sum to 0 up to rounding, so the drift of the rows along μ never accumulates (as
    :meth:`policyopt.models.markov.Population.log_max_tv`, whose invariant vector is π).  Blocks are rescaled by
    powers of two (exact) every `every` steps and before every evaluation: a step multiplies a row's ℓ1 norm by at
    most ‖S_ψ‖ ≤ 2 + 1e-15, so nothing can overflow in between; if a block ends a stretch below 2^-900 (or at
    exactly 0 while alive), the whole computation is redone rescaling after every step, so no digit is lost in the
    subnormal range.
    """
    U, P, K, _ = dev.shape
    out = np.full(ts.shape, -np.inf)
    if K == 1 or ts.size == 0:
        return out
    mu_prev = np.roll(mu, 1, axis=1)  # mu_prev[:, φ] = μ_{φ−1}, the marginal P̂_φ maps to
    step = dev - dev.sum(axis=3, keepdims=True) * mu_prev[:, :, None, :]  # S_ψ = Q_ψ − (Q_ψ 1) μ_{ψ−1}
    eye_diff = np.zeros((K - 1, K))
    eye_diff[:, 0] = -1.0
    eye_diff[np.arange(K - 1), np.arange(1, K)] = 1.0  # D_x(0) = e_x − e_0
    diff = np.broadcast_to(eye_diff, (U * P, K - 1, K)).copy()
    with np.errstate(divide="ignore"):
        log_one = np.log(pairwise_max_tv(np.matmul(eye_diff, dev.reshape(U * P, K, K)))).reshape(U, P)  # ln δ(P̂_ψ)
    log_scale = np.zeros(U * P)
    bound = np.zeros(U * P)  # upper bound on ln Δ of each block at t_cur (exact where last evaluated)
    t_cur, pending, leader = 0, 0, 0

    def rescale():
        """Scale every block by a power of two (exact), the scale kept in `log_scale`; True when a live block is
        exactly 0 or below 2^RESCALE_FLOOR (the stretch is then redone rescaling after every step)."""
        alive = np.isfinite(log_scale)
        scale = normalise_blocks(diff, log_scale)
        return bool(np.any(alive & ((scale == 0) | (scale < 2.0**RESCALE_FLOOR))))

    def log_tv(sel, floor=-np.inf):
        """ln Δ of the blocks `sel` at the current age: eq. (12) of the scaled differences plus their log scale (exact;
        `floor`, the lower bound :func:`exact_max_by_bounds` passes, is not used)."""
        with np.errstate(divide="ignore"):
            return np.log(pairwise_max_tv(diff[sel])) + log_scale[sel]  # eq. (12) for the blocks `sel`

    for k, t in enumerate(ts):
        while t_cur < int(t):
            # block φ takes its (t_cur + 1)-th factor S_{φ − t_cur}: phases φ < r use S_{φ − r + P}, the others
            # S_{φ − r} (r = t_cur mod P), two matmuls on views instead of gathering the rolled kernels
            r = t_cur % P
            d4 = diff.reshape(U, P, K - 1, K)
            new = np.empty_like(d4)
            np.matmul(d4[:, :r], step[:, P - r :], out=new[:, :r])
            np.matmul(d4[:, r:], step[:, : P - r], out=new[:, r:])
            diff = new.reshape(U * P, K - 1, K)
            bound += np.roll(log_one, r, axis=1).reshape(-1)  # Dobrushin: δ(AB) ≤ δ(A) δ(B)
            t_cur += 1
            pending += 1
            if pending >= every:
                if rescale() and every > 1:
                    return phase_log_max_tv(dev, mu, ts, every=1)  # see the notes
                pending = 0
        # Evaluate the last leader, then only the blocks whose bound reaches its value (the max is exact).
        out[k], leader = exact_max_by_bounds(log_tv, bound, leader)  # max over users and end phases
    return out


class PhaseChainModel(FittedMarkovModel):
    """Per-user phase chains: transition matrices P_φ, φ = 0..P−1, and Z_t = (X_t, φ_t), φ_t = t mod P.

    Parameters
    ----------
    matrices : array_like, shape (U, P, K, K)
        ``matrices[u, φ, x, y]`` = Pr(X_{s+1} = y | X_s = x) for a slot s of phase φ; rows sum to 1.  P = 1 is the
        first-order chain (allowed here; the spec needs P ≥ 2).
    users : sequence of str
        One name per user.
    starts : array_like of int, shape (U,), optional
        Absolute slot of column 0 of each user's series (its phase is ``starts mod P``); the default of
        :meth:`simulate`.  Default 0.
    counts : array_like, shape (U, P, K, K), optional
        Observed transition counts per phase (for the posterior draws).
    smoothing : float, optional
        The pseudo-count s of the fit.
    transitions : dict, optional
        User → transitions counted.

    Raises
    ------
    InvalidModelError
        `matrices` not a stack of row-stochastic matrices; a one-period product that is reducible; a state with
        stationary probability 0 at some phase (its reversed row is undefined: smooth the estimate).
    InvalidInputError
        `users`, `starts` or `counts` of the wrong size.

    Notes
    -----
    ``spectral_rate`` is the P-th root of the largest second eigenvalue modulus of the one-period products (the
    per-slot geometric rate).  ``log_max_tv_draws`` draws every row of every phase of every user from
    Dir(n_u(φ, x, ·) + s), the posterior whose mean is the smoothed estimate (a Bayesian statement under this prior
    and the phase-chain model: stationary across periods, first-order within a period).
    """

    kind = "phase"

    def __init__(self, matrices, users, *, starts=None, counts=None, smoothing=None, transitions=None):
        arr = check_stochastic_stack(matrices, "matrices", "(U, P, K, K)", 4)
        U, P, K, K2 = arr.shape
        if K != K2:
            raise InvalidModelError(f"`matrices` must have shape (U, P, K, K), got shape {arr.shape}")
        self._init_common(users, U, K, transitions)
        self.matrices = arr
        self.matrices.setflags(write=False)
        self.period = P
        self.starts = check_starts(starts, U)
        self._init_counts(counts, arr.shape, smoothing)
        mu = periodic_marginals(arr)
        if not np.all(mu > 0):
            u, phi, x = (int(v) for v in np.argwhere(~(mu > 0))[0])
            raise InvalidModelError(
                f"user {self.users[u]!r}: state {x} has stationary probability 0 at phase {phi}, so its reversed row "
                "is undefined; smooth the estimate (smoothing > 0)"
            )
        self.marginals = mu
        mu_prev = np.roll(mu, 1, axis=1)
        prev = np.roll(arr, 1, axis=1)  # prev[:, φ] = P_{φ−1}
        phat = np.transpose(prev, (0, 1, 3, 2)) * mu_prev[:, :, None, :] / mu[:, :, :, None]  # P̂_φ(x,y) = μ_{φ−1}(y)P_{φ−1}(y,x)/μ_φ(x)
        self.reversed_matrices = phat / phat.sum(axis=3, keepdims=True)  # remove rounding drift; exact rows sum to 1
        # Q_φ = P̂_φ − 1 μ_{φ−1} without the cancellation of that subtraction (what Δ_Z is computed from)
        self.reversed_deviations = reversed_deviation(
            prev.reshape(U * P, K, K), mu_prev.reshape(U * P, K), mu.reshape(U * P, K)
        ).reshape(U, P, K, K)
        self.marginals.setflags(write=False)
        self.reversed_matrices.setflags(write=False)
        self.reversed_deviations.setflags(write=False)

    @property
    def spec(self) -> MarkovModelSpec:
        """The model's :class:`~policyopt.models.markov_model.MarkovModelSpec`."""
        return MarkovModelSpec("phase", self.period) if self.period >= 2 else MarkovModelSpec("chain")

    @property
    def description(self) -> str:
        """One line: what Z is."""
        return (
            f"Z_t = (X_t, φ_t), φ_t = t mod {self.period}: a transition matrix per phase on the {self.n_states} "
            "quantile states (same-phase pairs compared)"
        )

    @property
    def n_parameters(self) -> int:
        """Free parameters per user: P·K(K − 1)."""
        return self.period * self.n_states * (self.n_states - 1)  # P·K rows of K − 1 free probabilities

    @property
    def row_transitions(self) -> np.ndarray | None:
        """Observed transitions out of each (phase, state), shape (U, P, K) (``None`` without counts)."""
        return None if self.counts is None else self.counts.sum(axis=3)

    def _log_max_tv_sorted(self, ts):
        U, P, K, _ = self.matrices.shape
        chunk = max(1, (64 * 2**20) // (8 * P * K * K * 6))  # bounded memory for many users
        best = np.full(ts.shape, -np.inf)
        for s in range(0, U, chunk):
            sel = slice(s, s + chunk)
            best = np.maximum(best, phase_log_max_tv(self.reversed_deviations[sel], self.marginals[sel], ts))
        return best

    @cached_property
    def spectral_rate(self) -> float:
        """Per-slot rate: P-th root of the largest second eigenvalue modulus of the one-period products, for the envelope (38)."""
        M = self.matrices[:, 0]
        for phi in range(1, self.period):
            M = np.matmul(M, self.matrices[:, phi])  # one-period product
        slem = float(np.max(second_eigenvalue_modulus(M)))
        return float(min(1.0, max(slem ** (1.0 / self.period), np.finfo(float).tiny)))  # per-slot rate

    def _default_starts(self) -> np.ndarray:
        return self.starts

    def _z_kernel(self, sel: slice) -> ZKernel:
        cum = np.cumsum(self.matrices[sel], axis=3)
        cum[..., -1] = np.inf
        K = self.n_states
        return ZKernel(
            cum=cum, successor=np.broadcast_to(np.arange(K), (K, K)), observed=np.arange(K),
            initial=np.asarray(self.marginals[sel]),
        )

    def _posterior_draw(self, gens):
        alpha = posterior_alpha(self.counts, self.smoothing, "phase chain")
        return PhaseChainModel(draw_user_rows(alpha, gens), self.users, starts=self.starts)


def fit_phase_chain(
    states, n_states: int, period: int, *, users, starts=None, smoothing: float = DEFAULT_SMOOTHING
) -> PhaseChainModel:
    """Fit one phase chain per user: per-phase transition counts + additive smoothing.

    P_{u,φ}(x, y) = (n_u(φ, x, y) + s) / Σ_y' (n_u(φ, x, y') + s), n_u(φ, x, y) the x → y steps of user u leaving a
    slot of phase φ = (starts_u + column) mod P with both ends observed (eq. (28) of Cao et al. (2019), per phase).

    Parameters
    ----------
    states : array_like of int, shape (U, T)
        States 0..K−1, −1 for missing slots.
    n_states : int
        K ≥ 2.
    period : int
        P ≥ 1 slots (1 is the first-order chain; ``phase:P`` specs need P ≥ 2).
    users : sequence of str, keyword-only
    starts : array_like of int, shape (U,), keyword-only
        Absolute slot of column 0 per user (default 0).
    smoothing : float, keyword-only
        s > 0.

    Returns
    -------
    PhaseChainModel

    Raises
    ------
    InvalidInputError
        Bad inputs or `period`; a user with no transition.
    """
    x, names, st = check_fit_inputs(states, n_states, users, starts)
    s = check_smoothing(smoothing)
    check_int(period, "period", 1, "slots")
    P, K = int(period), int(n_states)
    U, T = x.shape
    def encode(block, rows):
        """Cell code (φ·K + x)·K + y of each observed step x → y of the series `block` (users `rows`), −1 where a slot
        is missing."""
        a, b = block[:, :-1], block[:, 1:]
        phase = (st[rows, None] + np.arange(T - 1, dtype=np.int64)[None, :]) % P  # phase of the slot each step leaves
        return np.where((a >= 0) & (b >= 0), (phase * K + a) * K + b, -1)  # cell (φ, x, y)

    counts = count_codes(x, P * K * K, encode).reshape(U, P, K, K)
    per_user = counts.sum(axis=(1, 2, 3))
    require_transitions(per_user, names, "transition (two consecutive observed slots)")
    rows = counts + s
    matrices = rows / rows.sum(axis=3, keepdims=True)  # eq. (28) of Cao et al. (2019), per phase
    return PhaseChainModel(
        matrices, names, starts=st, counts=counts, smoothing=s,
        transitions={u: int(c) for u, c in zip(names, per_user)},
    )
