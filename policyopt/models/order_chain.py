r"""Order-k chains: Z_t = (X_t, X_{t−1}, …, X_{t−k+1}) on K^k states (``order:k``).

An order-k chain has p(x_{t+1} | x_t, …, x_{t−k+1}); on the augmented state of the last k readings it is a
homogeneous first-order chain, with transitions (x_t, …, x_{t−k+1}) → (x_{t+1}, x_t, …, x_{t−k+2}) of probability
p(x_{t+1} | context) and all other entries 0.  Δ_Z(t) is then eq. (12) of M. Zhang, E. Wei, R. Berry, J. Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024, for that chain, computed exactly by
:meth:`policyopt.models.markov.Population.log_max_tv` on its dense K^k × K^k matrix (why it bounds the risk about
X_t: :mod:`policyopt.models.markov_model`).

Consequences worth knowing: for t < k two histories that differ in their oldest reading x_{s−k+1} have reversed
t-step rows with disjoint supports (the row still contains that reading), so **Δ_Z(t) = 1 for t = 0..k−1**
whatever the data; Δ_Z decays only from t = k on.

State encoding: z = Σ_{i=0}^{k−1} x_{t−i} K^{k−1−i} (x_t the most significant digit), so the observable state is
z // K^{k−1} and the successor of z after x_{t+1} = j is j·K^{k−1} + z // K.

Estimation: counts n_u(z, y) of windows of k + 1 consecutive observed slots (context z, next y) plus the additive
pseudo-count s (eq. (28) of Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous
Data Release under Temporal Correlations", IEEE TKDE 31(7), 2019, per context).  Memory and time grow as K^{2k}
(a dense matrix per user) and K^{3k} (one age step): K^k is capped at 729.  Since Δ_Z(1) = 1 for k ≥ 2, the
submultiplicative pruning of :meth:`Population.log_max_tv` (Δ(t + 1) ≤ Δ(t)·Δ(1)) skips no user, so every user's
K^k-state row differences are propagated and compared at every age: the cost is linear in users × ages × K^{3k}
(about 0.5 s for 17 users and ages 0..48 at K = 3, k = 4; 28 s for 1000 users).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.models.markov import Population
from policyopt.models.markov_model import MAX_ORDER, MAX_Z_STATES, FittedMarkovModel, MarkovModelSpec, ZKernel
from policyopt.models.model_fitting import (
    CHUNK_BYTES,
    DEFAULT_SMOOTHING,
    check_fit_inputs,
    check_smoothing,
    check_stochastic_stack,
    count_codes,
    draw_user_rows,
    population_log_max_tv,
    posterior_alpha,
    require_transitions,
    second_eigenvalue_modulus,
)

__all__ = ["OrderChainModel", "fit_order_chain", "check_order"]


def check_order(order, n_states) -> tuple[int, int]:
    """Validate the order k (1..4) and K^k ≤ 729; returns (k, K^k).

    Raises
    ------
    InvalidInputError
        `order` not in 1..4, or K^k > 729 (the message names `order` and `n_states` and suggests fewer states).
    """
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= MAX_ORDER:
        raise InvalidInputError(f"`order` must be an integer in 1..{MAX_ORDER}, got {fmt(order)}")
    k, K = int(order), int(n_states)
    n = K**k
    if n > MAX_Z_STATES:
        fewer = int(np.floor(MAX_Z_STATES ** (1.0 / k) + 1e-9))
        raise InvalidInputError(
            f"`order`={k} with `n_states`={K} gives K^k = {n} augmented states, more than {MAX_Z_STATES} (Δ_Z needs a "
            f"dense (K^k)² matrix per user); use fewer states (`n_states` ≤ {fewer} at order {k}) or a lower order"
        )
    return k, n


class OrderChainModel(FittedMarkovModel):
    """Per-user order-k chains as first-order chains on Z_t = (X_t, …, X_{t−k+1}).

    Parameters
    ----------
    conditionals : array_like, shape (U, K^k, K)
        ``conditionals[u, z, y]`` = p(X_{t+1} = y | Z_t = z), z encoded as in the module docstring; rows sum to 1.
    order : int
        k in 1..4 (K^k ≤ 729).
    users : sequence of str
    counts : array_like, shape (U, K^k, K), optional
        Observed (context, next) counts, for the posterior draws.
    smoothing : float, optional
        The pseudo-count s of the fit.
    transitions : dict, optional
        User → windows counted.

    Raises
    ------
    InvalidModelError
        `conditionals` not row-stochastic of shape (U, K^k, K) for some K ≥ 2.
    InvalidInputError
        A bad `order` or K^k > 729; `users` or `counts` of the wrong size.

    Notes
    -----
    Δ_Z by :func:`~policyopt.models.model_fitting.population_log_max_tv` (users in chunks of bounded memory); a
    reducible Z chain (possible only with zero conditionals) raises :class:`InvalidModelError` there.
    ``spectral_rate``: the largest second eigenvalue modulus of the users' Z matrices (the singular-value rate of
    :attr:`MarkovChain.spectral_rate` is 1 for k ≥ 2: a step back and forth keeps the overlapping readings).
    ``log_max_tv_draws``: every context row of every user from Dir(n_u(z, ·) + s) (a Bayesian statement under this
    prior and the order-k model).
    """

    kind = "order"

    def __init__(self, conditionals, order, users, *, counts=None, smoothing=None, transitions=None):
        arr = check_stochastic_stack(conditionals, "conditionals", "(U, K^k, K)", 3)
        U, n, K = arr.shape
        if K < 2:
            raise InvalidModelError(f"`conditionals` must have K ≥ 2 states (last axis), got shape {arr.shape}")
        k, nz = check_order(order, K)
        if n != nz:
            raise InvalidModelError(f"`conditionals` must have shape (U, K^k, K) = (U, {nz}, {K}), got shape {arr.shape}")
        self._init_common(users, U, K, transitions)
        self.order = k
        self.conditionals = arr
        self.conditionals.setflags(write=False)
        self._init_counts(counts, arr.shape, smoothing)

    @property
    def n_z(self) -> int:
        """Number of augmented states K^k."""
        return self.conditionals.shape[1]

    @property
    def spec(self) -> MarkovModelSpec:
        """The model's :class:`~policyopt.models.markov_model.MarkovModelSpec`."""
        return MarkovModelSpec("order", self.order)

    @property
    def description(self) -> str:
        """One line: what Z is."""
        z = ", ".join(["X_t"] + [f"X_{{t−{i}}}" for i in range(1, self.order)])
        return f"Z_t = ({z}): order-{self.order} chain, {self.n_z} augmented states over {self.n_states} quantile states"

    @property
    def n_parameters(self) -> int:
        """Free parameters per user: K^k (K − 1)."""
        return self.n_z * (self.n_states - 1)  # K^k context rows of K − 1 free probabilities

    @property
    def row_transitions(self) -> np.ndarray | None:
        """Observed windows out of each context z, shape (U, K^k) (``None`` without counts)."""
        return None if self.counts is None else self.counts.sum(axis=2)

    @cached_property
    def successor(self) -> np.ndarray:
        """Z state after X_{t+1} = j from z, shape (K^k, K): j·K^{k−1} + z // K."""
        K, n = self.n_states, self.n_z
        z = np.arange(n, dtype=np.int64)
        return np.arange(K, dtype=np.int64)[None, :] * (n // K) + (z // K)[:, None]

    @cached_property
    def observed(self) -> np.ndarray:
        """X_t = g(z) = z // K^{k−1}, shape (K^k,)."""
        return np.arange(self.n_z, dtype=np.int64) // (self.n_z // self.n_states)

    def z_matrices(self, sel: slice = slice(None)) -> np.ndarray:
        """Dense Z transition matrices of users `sel`, shape (U_sel, K^k, K^k).

        P_Z[z, j·K^{k−1} + z // K] = p(j | z), all other entries 0.
        """
        cond = self.conditionals[sel]
        Uc, n, K = cond.shape
        out = np.zeros((Uc, n, n))
        rows = np.broadcast_to(np.arange(n)[:, None], (n, K))
        out[:, rows, self.successor] = cond  # (x_t..x_{t−k+1}) → (j, x_t..x_{t−k+2}) with p(j | context)
        return out

    def _log_max_tv_sorted(self, ts):
        return population_log_max_tv(self.z_matrices, self.n_users, self.n_z, ts)

    @cached_property
    def spectral_rate(self) -> float:
        """Largest second eigenvalue modulus of the users' Z matrices, for the envelope (38)."""
        chunk = max(1, CHUNK_BYTES // (4 * 8 * self.n_z * self.n_z))
        slem = 0.0
        for s in range(0, self.n_users, chunk):
            slem = max(slem, float(np.max(second_eigenvalue_modulus(self.z_matrices(slice(s, s + chunk))))))
        return float(min(1.0, max(slem, np.finfo(float).tiny)))

    def _z_kernel(self, sel: slice) -> ZKernel:
        cond = self.conditionals[sel]
        cum = np.cumsum(cond, axis=2)
        cum[..., -1] = np.inf
        pop = Population.from_matrices(self.z_matrices(sel))  # π_Z by GTH elimination
        return ZKernel(
            cum=cum[:, None], successor=self.successor, observed=self.observed,
            initial=np.stack([c.stationary for c in pop.chains])[:, None],
        )

    def _posterior_draw(self, gens):
        alpha = posterior_alpha(self.counts, self.smoothing, "order-k chain")
        return OrderChainModel(draw_user_rows(alpha, gens), self.order, self.users)


def fit_order_chain(states, n_states: int, order: int, *, users, smoothing: float = DEFAULT_SMOOTHING) -> OrderChainModel:
    """Fit one order-k chain per user: (context, next) counts of k + 1 consecutive observed slots + smoothing.

    p_u(y | z) = (n_u(z, y) + s) / Σ_y' (n_u(z, y') + s) (eq. (28) of Cao et al. (2019), per context z).

    Parameters
    ----------
    states : array_like of int, shape (U, T)
        States 0..K−1, −1 for missing slots; a window with a missing slot is not counted.
    n_states : int
        K ≥ 2.
    order : int
        k in 1..4 with K^k ≤ 729.
    users : sequence of str, keyword-only
    smoothing : float, keyword-only
        s > 0.

    Returns
    -------
    OrderChainModel

    Raises
    ------
    InvalidInputError
        Bad inputs; K^k > 729 (names `order` and `n_states`); a user with no window of k + 1 observed slots.
    """
    x, names, _ = check_fit_inputs(states, n_states, users)
    s = check_smoothing(smoothing)
    k, n = check_order(order, n_states)
    K = int(n_states)
    U, T = x.shape
    W = max(0, T - k)

    def encode(block, rows):
        """Cell codes z·K + y (int64, shape (users in `block`, W)) of each window (context z of the k states before,
        next state y), −1 where a slot of the window is missing; `rows` (the block's user indices) is unused."""
        ok = np.ones((block.shape[0], W), dtype=bool)
        code = np.zeros((block.shape[0], W), dtype=np.int64)
        for j in range(k + 1):  # window columns c_0..c_k; z = Σ_{j<k} x[c_j] K^j (x_t = c_{k−1} most significant)
            col = block[:, j : j + W]
            ok &= col >= 0
            if j < k:
                code += np.maximum(col, 0) * K**j
        return np.where(ok, code * K + np.maximum(block[:, k : k + W], 0), -1)  # cell (context z, next y)

    counts = count_codes(x, n * K, encode).reshape(U, n, K)
    per_user = counts.sum(axis=(1, 2))
    require_transitions(per_user, names, f"window of {k + 1} consecutive observed slots")
    rows = counts + s
    cond = rows / rows.sum(axis=2, keepdims=True)  # eq. (28) of Cao et al. (2019), per context
    return OrderChainModel(cond, k, names, counts=counts, smoothing=s, transitions={u: int(c) for u, c in zip(names, per_user)})
