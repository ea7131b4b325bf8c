"""Coupling Markov chains (CMC) of several correlated sequences and their joint snapshot chain.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025, Section III-B, eqs. (4)–(5) (after Ching,
Fung & Ng, "A multivariate Markov chain model for categorical data sequences", 2002).

Conventions
-----------
* ``s`` sequences, each over ``m`` states ``0..m-1``; time in slots.
* ``transitions[j, k]`` is P^(jk), **row-stochastic** like :class:`policyopt.models.markov.MarkovChain`:
  ``P^(jk)[a, b] = Pr(x^(j)_{t+1} = b | the source drawn for j is k and x^(k)_t = a)``.  The paper
  writes (4) for column vectors, π^(j)_{n+1} = Σ_k λ_jk P^(jk) π^(k)_n, i.e. with the transposes of
  these matrices; :attr:`CouplingMarkovChain.Q` is the paper's block matrix (5) acting on the
  stacked column vector, ``Q[j-block, k-block] = λ_jk (P^(jk))ᵀ``.
* The **joint chain** lives on the m^s snapshots x = (x^(1), …, x^(s)), numbered in
  lexicographic order (sequence 1 most significant).  Its transition law is the one the CMC
  implies when the sequences move conditionally independently given the current snapshot:
  sequence j draws a source k with probability λ_jk and then moves by P^(jk) from x^(k), so
  ``Pr(x_{t+1} = y | x_t = x) = Π_j Σ_k λ_jk P^(jk)[x^(k), y^(j)]``.  Its one-slot marginals obey
  (4)–(5) exactly (tested).
* Aging by an AoI vector A = (A^(1), …, A^(s)) (Algorithm 1, eq. 9) releases
  z = (x^(1)_{t−A^(1)}, …, x^(s)_{t−A^(s)}).  :meth:`CouplingMarkovChain.aged_kernel` returns
  Pr[z | x_t] for a stationary joint chain; for a uniform AoI vector (all ages equal to a) it is
  the a-step matrix of the reversed joint chain, the object Δ(t) of Zhang et al. (2024),
  eq. (12), is built from.

Exact analysis needs the dense m^s × m^s joint chain and is limited to
:data:`EXACT_SNAPSHOT_LIMIT` snapshots; beyond it every exact joint-chain method raises
:class:`~policyopt.errors.InvalidModelError`.  Up to :data:`SPECTRAL_SNAPSHOT_LIMIT` snapshots the
spectral bound (55) of Zhang et al. (2024) on the joint chain's Δ(t) is computed **matrix-free**
(:meth:`CouplingMarkovChain.spectral_certificate`, :class:`SpectralCertificate`), and
Δ_k(Λ, A_t) ≤ Δ_joint(min_i A^(i)) turns it into a bound on the aged correlation distance
(:meth:`CouplingMarkovChain.aged_distance_bound`).  Beyond that limit only the trivial Δ_k ≤ 1
(no aging benefit, ε_S = d(k)·ε_C) is available.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.models.cmc_exact import exact_aged_distance
from policyopt.models.cmc_spectral import SPECTRAL_FAILURE_PROBABILITY, JointOperator, SpectralCertificate, certify
from policyopt.models.markov import ROW_SUM_TOL, MarkovChain, as_slots, validate_transition_matrix

__all__ = [
    "CouplingMarkovChain",
    "EXACT_SNAPSHOT_LIMIT",
    "SPECTRAL_SNAPSHOT_LIMIT",
    "SPECTRAL_FAILURE_PROBABILITY",
    "SpectralCertificate",
    "two_binary_cmc",
]

#: Largest number of joint snapshots m^s analysed exactly (dense m^s × m^s matrices).
EXACT_SNAPSHOT_LIMIT = 4096
#: Work bound (m^s)³·(max age + 1) under which :meth:`CouplingMarkovChain.aged_distance` computes Δ_k in exact
#: rational arithmetic (two binary sequences up to age 249, three up to age 30; about a second at the limit).
EXACT_RATIONAL_WORK = 16_000

#: Largest number of joint snapshots m^s for the matrix-free spectral bound (operator products
#: cost O((m^s)^2) time and O(m^s · m^{s/2}) memory each; see tests/benchmarks/bench_fran.py).
SPECTRAL_SNAPSHOT_LIMIT = 2 ** 16



class CouplingMarkovChain:
    """A validated coupling Markov chain, eqs. (4)–(5) of Luo et al. (2025).

    Parameters
    ----------
    transitions : array_like, shape (s, s, m, m)
        ``transitions[j, k]`` = P^(jk), row-stochastic (see the module notes for the
        transpose relative to the paper's column convention).  A single (m, m) matrix is
        accepted only together with ``n_sequences`` and then used for every pair (j, k).
    coupling : array_like, shape (s, s)
        Coupling weights λ_jk ≥ 0; every row sums to 1 (within 1e-9).
    state_values : array_like, shape (m,), optional
        Numeric value of each state (default ``0..m-1``); queries are evaluated on these.
    n_sequences : int, optional
        s, required only when `transitions` is one (m, m) matrix.

    Raises
    ------
    InvalidModelError
        If a P^(jk) is not square row-stochastic, shapes disagree, a λ_jk is negative or
        not finite, a row of λ does not sum to 1, or `state_values` is malformed.

    References
    ----------
    Luo et al. (2025), Section III-B, eqs. (4)–(5); Ching, Fung & Ng (2002).

    Examples
    --------
    >>> cmc = two_binary_cmc(0.3, 0.3, 0.5)
    >>> cmc.n_sequences, cmc.n_states, cmc.n_snapshots
    (2, 2, 4)
    >>> cmc.stationary.round(3).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """

    def __init__(self, transitions, coupling, state_values=None, *, n_sequences=None):
        try:
            T = np.array(transitions, dtype=float)
        except (TypeError, ValueError):
            raise InvalidModelError(f"`transitions` must be numeric, got {fmt(transitions)}") from None
        try:
            lam = np.array(coupling, dtype=float)
        except (TypeError, ValueError):
            raise InvalidModelError(f"`coupling` must be a numeric (s, s) matrix, got {fmt(coupling)}") from None
        if T.ndim == 2:
            if n_sequences is None:
                raise InvalidModelError(
                    "`transitions` is one (m, m) matrix: give `n_sequences` to use it for every pair (j, k)"
                )
            if isinstance(n_sequences, bool) or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1:
                raise InvalidModelError(f"`n_sequences` must be an integer ≥ 1, got {fmt(n_sequences)}")
            T = np.broadcast_to(T, (int(n_sequences), int(n_sequences)) + T.shape).copy()
        if T.ndim != 4 or T.shape[0] != T.shape[1] or T.shape[2] != T.shape[3] or T.shape[0] == 0:
            raise InvalidModelError(f"`transitions` must have shape (s, s, m, m), got {T.shape}")
        s, m = T.shape[0], T.shape[2]
        for j in range(s):
            for k in range(s):
                T[j, k] = validate_transition_matrix(T[j, k], f"transitions[{j}, {k}]")
        if lam.shape != (s, s):
            raise InvalidModelError(f"`coupling` must have shape ({s}, {s}) (one λ_jk per pair), got {lam.shape}")
        if not np.all(np.isfinite(lam)) or np.any(lam < 0):
            raise InvalidModelError(f"`coupling` must be finite and ≥ 0, got {fmt(lam.tolist())}")
        sums = lam.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
        if bad.size:
            raise InvalidModelError(
                f"`coupling` row {int(bad[0])} sums to {float(sums[bad[0]])!r}, not 1: the λ_jk of a sequence "
                "must sum to 1 (eq. 4)"
            )
        lam = lam / sums[:, None]
        if state_values is None:
            values = np.arange(m, dtype=float)
        else:
            try:
                values = np.array(state_values, dtype=float).reshape(-1)
            except (TypeError, ValueError):
                raise InvalidModelError(f"`state_values` must be numeric, got {fmt(state_values)}") from None
            if values.shape != (m,) or not np.all(np.isfinite(values)):
                raise InvalidModelError(f"`state_values` must be {m} finite numbers, got {fmt(state_values)}")
        for arr in (T, lam, values):
            arr.setflags(write=False)
        self._T, self._lam, self._values = T, lam, values

    def __repr__(self) -> str:
        return f"CouplingMarkovChain(n_sequences={self.n_sequences}, n_states={self.n_states})"

    # ------------------------------------------------------------------ model
    @property
    def transitions(self) -> np.ndarray:
        """P^(jk) stacked, shape (s, s, m, m), row-stochastic, read-only."""
        return self._T

    @property
    def coupling(self) -> np.ndarray:
        """Coupling weights λ, shape (s, s), rows summing to 1, read-only."""
        return self._lam

    @property
    def state_values(self) -> np.ndarray:
        """Numeric value of each state, shape (m,)."""
        return self._values

    @property
    def n_sequences(self) -> int:
        """Number of sequences s."""
        return self._T.shape[0]

    @property
    def n_states(self) -> int:
        """Number of states m of each sequence."""
        return self._T.shape[2]

    @property
    def n_snapshots(self) -> int:
        """Number of joint snapshots m^s."""
        return self.n_states ** self.n_sequences

    @cached_property
    def Q(self) -> np.ndarray:
        """The paper's block matrix Q of eq. (5), shape (s·m, s·m): π_{n+1} = Q π_n (column vectors).

        Block (j, k) is λ_jk (P^(jk))ᵀ (the transpose because P^(jk) is stored row-stochastic).
        """
        s, m = self.n_sequences, self.n_states
        Q = np.zeros((s * m, s * m))
        for j in range(s):
            for k in range(s):
                Q[j * m:(j + 1) * m, k * m:(k + 1) * m] = self._lam[j, k] * self._T[j, k].T  # eq. (5)
        Q.setflags(write=False)
        return Q

    def step_marginals(self, marginals) -> np.ndarray:
        """One step of eq. (4): π^(j)_{n+1} = Σ_k λ_jk π^(k)_n P^(jk) (row vectors).

        Parameters
        ----------
        marginals : array_like, shape (s, m)
            Per-sequence state distributions at slot n.

        Returns
        -------
        numpy.ndarray, shape (s, m)

        Raises
        ------
        InvalidInputError
            If the shape is wrong or a row is not a probability vector.
        """
        pi = np.asarray(marginals, dtype=float)
        s, m = self.n_sequences, self.n_states
        if pi.shape != (s, m) or not np.all(np.isfinite(pi)) or np.any(pi < 0) or np.any(
            np.abs(pi.sum(axis=1) - 1) > 1e-9
        ):
            raise InvalidInputError(f"`marginals` must be {s} probability vectors of length {m}, got {fmt(marginals)}")
        return (self.Q @ pi.reshape(-1)).reshape(s, m)  # eqs. (4)–(5)

    @cached_property
    def stationary(self) -> np.ndarray:
        """Stationary marginal vector π* of Q (eq. 5), shape (s, m): π* = Q π*, each block sums to 1.

        Raises
        ------
        InvalidModelError
            If the stationary vector is not unique (e.g. a reducible P^(jj)).
        """
        s, m = self.n_sequences, self.n_states
        A = np.vstack([self.Q - np.eye(s * m), np.kron(np.eye(s), np.ones((1, m)))])
        b = np.concatenate([np.zeros(s * m), np.ones(s)])
        sol, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
        if rank < s * m or np.linalg.norm(A @ sol - b) > 1e-9 or np.any(sol < -1e-12):
            raise InvalidModelError(
                "the coupling Markov chain has no unique stationary vector (Q − I has a null space of "
                f"dimension > {s} under the block normalisation); make every P^(jj) irreducible"
            )
        pi = np.clip(sol, 0.0, None).reshape(s, m)
        pi /= pi.sum(axis=1, keepdims=True)
        pi.setflags(write=False)
        return pi

    @cached_property
    def correlation_degree(self) -> int:
        """Correlation degree k (Definition 7): size of the largest group of sequences linked by coupling.

        Sequences j ≠ k are linked when λ_jk > 0 or λ_kj > 0; over time a link is correlation in
        both directions and chains of links correlate whole connected components, so k is the size
        of the largest connected component of that undirected graph (k = 1: independent sequences).
        """
        from scipy.sparse.csgraph import connected_components

        adj = (self._lam > 0) | (self._lam.T > 0)
        _, labels = connected_components(adj, directed=False)
        return int(np.bincount(labels).max())

    # ------------------------------------------------------------- joint chain
    def _require_exact(self, what: str) -> None:
        if self.n_snapshots > EXACT_SNAPSHOT_LIMIT:
            spectral = (
                f"a matrix-free spectral upper bound on Δ_k is available up to {SPECTRAL_SNAPSHOT_LIMIT} snapshots "
                "(`spectral_max_tv`, `aged_distance_bound`; `policyopt fran --bound sound`)"
                if self.n_snapshots <= SPECTRAL_SNAPSHOT_LIMIT else
                f"beyond {SPECTRAL_SNAPSHOT_LIMIT} snapshots not even the spectral bound is computed: only Δ_k ≤ 1 "
                "(no aging benefit, ε_S = d(k)·ε_C) is sound"
            )
            raise InvalidModelError(
                f"{what} needs the joint chain on m^s = {self.n_states}^{self.n_sequences} = {self.n_snapshots} "
                f"snapshots, above the exact limit {EXACT_SNAPSHOT_LIMIT} (dense m^s × m^s matrices); "
                f"{spectral}; or use fewer states or sequences, or split the sequences into independent groups"
            )

    def _require_spectral(self, what: str) -> None:
        if self.n_snapshots > SPECTRAL_SNAPSHOT_LIMIT:
            raise InvalidModelError(
                f"{what} needs the joint chain on m^s = {self.n_states}^{self.n_sequences} = {self.n_snapshots} "
                f"snapshots, above the spectral limit {SPECTRAL_SNAPSHOT_LIMIT} (matrix-free products cost "
                "O((m^s)²) each); the only sound statement is the trivial Δ_k ≤ 1 (no aging benefit: "
                "ε_S = d(k)·ε_C); use fewer states or sequences, or split them into independent groups"
            )

    def snapshot_grid(self) -> np.ndarray:
        """All m^s snapshots in joint-state order without the exact-size check, shape (m^s, s), int64, read-only.

        Used by the matrix-free operator (:class:`~policyopt.models.cmc_spectral.JointOperator`) above the exact
        limit; memory m^s · s · 8 bytes.
        """
        if "_grid_cache" not in self.__dict__:
            s, m = self.n_sequences, self.n_states
            g = np.indices((m,) * s, dtype=np.int64).reshape(s, -1).T.copy()
            g.setflags(write=False)
            self.__dict__["_grid_cache"] = g
        return self.__dict__["_grid_cache"]

    @cached_property
    def snapshots(self) -> np.ndarray:
        """All m^s snapshots in joint-state order, shape (m^s, s), int64 state indices."""
        self._require_exact("`snapshots`")
        return self.snapshot_grid()

    @cached_property
    def joint_chain(self) -> MarkovChain:
        """The joint chain on the m^s snapshots implied by the CMC (see module notes).

        Returns
        -------
        MarkovChain
            Transition matrix of shape (m^s, m^s); states numbered like :attr:`snapshots`.

        Raises
        ------
        InvalidModelError
            If m^s exceeds :data:`EXACT_SNAPSHOT_LIMIT`.
        """
        self._require_exact("the joint chain")
        X = self.snapshots
        s = self.n_sequences
        P = np.ones((self.n_snapshots, self.n_snapshots))
        for j in range(s):
            # M_j[x, b] = Σ_k λ_jk P^(jk)[x^(k), b]: sequence j's next-state law from snapshot x.
            M = sum(self._lam[j, k] * self._T[j, k][X[:, k], :] for k in range(s))
            P *= M[:, X[:, j]]
        return MarkovChain(P)

    @cached_property
    def joint_stationary(self) -> np.ndarray:
        """Stationary distribution of the joint chain, shape (m^s,).

        Raises
        ------
        InvalidModelError
            If the joint chain is reducible or m^s exceeds the exact limit.
        """
        return self.joint_chain.stationary

    def spectral_certificate(self, *, seed: int = 0) -> "SpectralCertificate":
        """Matrix-free certified spectral bound (55) of Zhang et al. (2024) for the joint chain (cached per seed).

        The joint transition P[x, y] = Π_j M_j[x, y_j], M_j[x, ·] = Σ_k λ_jk P^(jk)[x^(k), ·], is never
        stored: with the sequences split into a front and a back half, row x of P is the Kronecker
        product F[x] ⊗ G[x] of the front and back factors, so P·V = rowsum((F V) ∘ G) and
        Pᵀ·V = Fᵀ (V ∘ G) are one matrix product each (O((m^s)²) flops, O(m^s · m^{s/2}) memory).
        See :class:`SpectralCertificate` for what is computed and proved.

        Parameters
        ----------
        seed : int, keyword-only
            Seed of the random start vectors (the certificate's failure probability is over it).

        Returns
        -------
        SpectralCertificate

        Raises
        ------
        InvalidModelError
            If m^s exceeds :data:`SPECTRAL_SNAPSHOT_LIMIT`, or the computed stationary vector is not
            positive (reducible joint chain or a stationary probability below rounding level).

        References
        ----------
        Zhang et al. (2024) eq. (55) and Lemma 3; Fill, Ann. Appl. Probab. 1(1), 1991, Thm 2.1; Kuczyński &
        Woźniakowski, SIAM J. Matrix Anal. Appl. 13(4), 1992, Thm 4.1.
        """
        self._require_spectral("the spectral bound")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise InvalidInputError(f"`seed` must be an integer, got {fmt(seed)}")
        cache = self.__dict__.setdefault("_certificates", {})
        if int(seed) not in cache:
            cache[int(seed)] = certify(JointOperator(self), int(seed))
        return cache[int(seed)]

    def spectral_max_tv(self, t, *, method: str = "auto"):
        """Spectral upper bound (55) of Zhang et al. (2024) on the joint chain's Δ(t) (eq. 12): cheap for large t.

        Parameters
        ----------
        t : int or array_like of int
            Age in slots (uniform AoI vector).
        method : {"auto", "dense", "matrix-free"}, keyword-only
            ``"dense"``: :meth:`MarkovChain.spectral_bound` of :attr:`joint_chain` (SVD of the dense
            m^s × m^s matrix; m^s ≤ :data:`EXACT_SNAPSHOT_LIMIT`).  ``"matrix-free"``:
            :meth:`spectral_certificate` (m^s ≤ :data:`SPECTRAL_SNAPSHOT_LIMIT`; holds up to the
            certificate's failure probability, see :class:`SpectralCertificate`).  ``"auto"`` (default):
            dense up to 1024 snapshots, matrix-free above.

        Returns
        -------
        float or numpy.ndarray
            ≥ the exact Δ(t) of the joint chain (= ``aged_distance([t]*s, neighbours="any")``), in [0, 1].

        Raises
        ------
        InvalidInputError
            If `method` is unknown or `t` is negative / not integral.
        InvalidModelError
            If m^s exceeds the limit of the method.
        """
        if method not in ("auto", "dense", "matrix-free"):
            raise InvalidInputError(f"`method` must be 'auto', 'dense' or 'matrix-free', got {fmt(method)}")
        if method == "dense" or (method == "auto" and self.n_snapshots <= 1024):
            return self.joint_chain.spectral_bound(t)
        return self.spectral_certificate().bound(t)

    def aged_distance_bound(self, aoi, *, kind: str = "spectral"):
        """Upper bound on Δ_k(Λ, A_t) (Definition 9) from the joint chain at the youngest age.

        Δ_k(Λ, A_t) ≤ Δ_joint(min_i A^(i)), where Δ_joint(a) is the joint chain's Δ(a) of Zhang et al. (2024)
        eq. (12) (all pairs of snapshots), for both ``neighbours="one"`` and ``"any"``.

        Proof.  Let a = min_i A^(i) and b = max_i A^(i).  The aged snapshot z has entries
        x^(i)_{t−A^(i)}, so z = φ(W) for the window W = (x_{t−b}, …, x_{t−a}) and a fixed map φ.
        Under the stationary chain the reversed process (x_t, x_{t−1}, …) is Markov with kernel P̂
        (eq. 1 of Zhang et al. (2024)), hence Pr[W = w | x_t = x] = P̂^a(x, w_a) · K(w_a, w), where
        K(w_a, ·) = Pr[x_{t−a−1..t−b} | x_{t−a} = w_a] does not depend on x (Markov property).  So the
        law of z given x_t = x is P̂^a(x, ·) followed by the common kernel K and the map φ, and the
        total variation distance cannot grow under a common kernel (data processing):
        TV(Pr[z | x], Pr[z | x']) ≤ TV(P̂^a(x, ·), P̂^a(x', ·)) ≤ Δ_joint(a) for every pair x, x'.  ∎
        (For a = 0 the bound is the trivial Δ_joint(0) = 1.)

        Parameters
        ----------
        aoi : int or array_like of int, shape (s,)
            AoI vector A_t, slots.
        kind : {"spectral", "joint"}, keyword-only
            ``"spectral"`` (default): :meth:`spectral_max_tv` at min A (any size up to
            :data:`SPECTRAL_SNAPSHOT_LIMIT`).  ``"joint"``: the exact Δ_joint(min A) (small systems).

        Returns
        -------
        float in [0, 1].

        Raises
        ------
        InvalidInputError
            If `aoi` is malformed or `kind` unknown.
        InvalidModelError
            If m^s exceeds the limit of `kind`.
        """
        if kind not in ("spectral", "joint"):
            raise InvalidInputError(f"`kind` must be 'spectral' or 'joint', got {fmt(kind)}")
        ages = _ages(aoi, self.n_sequences)
        a = min(ages)
        if kind == "joint":
            return float(self.joint_chain.max_tv(a))
        return float(self.spectral_max_tv(a))

    def _check_aoi(self, aoi) -> tuple[int, ...]:
        return _ages(aoi, self.n_sequences)

    def _power(self, n: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_powers", {0: None})
        if n not in cache:
            cache[n] = np.linalg.matrix_power(self.joint_chain.P, n)
        return cache[n]

    def aged_joint(self, aoi) -> np.ndarray:
        """Joint law W[z, x] = Pr[aged snapshot z, current snapshot x_t = x], shape (m^s, m^s).

        The chain is stationary; z = (x^(1)_{t−A^(1)}, …, x^(s)_{t−A^(s)}) (Algorithm 1, eq. 9).
        Computed forward in time from t − max A, recording each sequence's state when its age is
        reached (rows grow from m^r to m^s as r sequences are recorded).

        Parameters
        ----------
        aoi : int or array_like of int, shape (s,)
            AoI vector A_t in slots (an int means the same age for every sequence).

        Returns
        -------
        numpy.ndarray, shape (m^s, m^s); sums to 1.

        Raises
        ------
        InvalidInputError
            If `aoi` has the wrong length or a negative / non-integral age.
        InvalidModelError
            If m^s exceeds the exact limit or the joint chain is reducible.
        """
        ages = self._check_aoi(aoi)
        pi = self.joint_stationary
        X = self.snapshots
        m, s, N = self.n_states, self.n_sequences, self.n_snapshots
        W = pi[None, :].copy()
        order: list[int] = []
        levels = sorted(set(ages), reverse=True)
        for idx, a in enumerate(levels):
            for c in [i for i in range(s) if ages[i] == a]:
                E = (X[:, c][None, :] == np.arange(m)[:, None]).astype(float)  # E[b, x] = 1[x^(c) = b]
                W = (W[:, None, :] * E[None, :, :]).reshape(-1, N)
                order.append(c)
            nxt = levels[idx + 1] if idx + 1 < len(levels) else 0
            if a - nxt > 0:
                W = W @ self._power(a - nxt)  # Chapman–Kolmogorov forward to slot t − nxt
        # rows are indexed by z in recording order; permute to sequence order 1..s
        W = W.reshape((m,) * s + (N,))
        W = np.transpose(W, np.argsort(order).tolist() + [s]).reshape(N, N)
        return W

    def aged_kernel(self, aoi) -> np.ndarray:
        """Pr[z | x_t], shape (m^s, m^s): row x is the law of the aged snapshot given x_t = x.

        For a uniform AoI vector (every age = a) this equals the a-step matrix of the reversed
        joint chain (eq. 1 of Zhang et al. (2024)).  See :meth:`aged_joint` for parameters and errors.
        """
        W = self.aged_joint(aoi)
        C = (W / self.joint_stationary[None, :]).T
        C /= C.sum(axis=1, keepdims=True)
        return C

    def neighbour_pairs(self) -> np.ndarray:
        """Ordered pairs (x, x') of snapshots differing in exactly one sequence (Definition 5).

        Returns
        -------
        numpy.ndarray, shape (m^s · s · (m − 1), 2), joint-state indices.
        """
        X = self.snapshots
        m, s = self.n_states, self.n_sequences
        weights = m ** np.arange(s - 1, -1, -1)
        idx = np.arange(self.n_snapshots)
        out = []
        for i in range(s):
            for shift in range(1, m):
                other = idx + ((X[:, i] + shift) % m - X[:, i]) * weights[i]
                out.append(np.stack([idx, other], axis=1))
        return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)

    def aged_distance(self, aoi, neighbours: str = "one") -> float:
        """Aged correlation distance Δ_k(Λ, A_t) of Definition 9 (eq. 14), exactly on the joint chain.

        Parameters
        ----------
        aoi : int or array_like of int, shape (s,)
            AoI vector in slots.
        neighbours : {"one", "any"}
            ``"one"`` (default): max total variation between Pr[z | x_t] and Pr[z | x'_t] over
            t-neighbouring snapshots that differ in exactly one sequence (Definition 5) — the
            quantity the leakage proof needs.  ``"any"``: max over *all* pairs of snapshots, the
            literal reading of (14) for a fully correlated group (k = s); for a uniform AoI vector
            it equals the joint chain's Δ(t) = ``joint_chain.max_tv(t)`` (eq. 12 of Zhang et al. (2024)).
            ``"any"`` ≥ ``"one"``; both make the sound bound valid.

        Returns
        -------
        float in [0, 1].

        Raises
        ------
        InvalidInputError
            If `neighbours` is not one of the two names, or `aoi` is bad.
        InvalidModelError
            If m^s exceeds the exact limit.
        """
        if neighbours not in ("one", "any"):
            raise InvalidInputError(f"`neighbours` must be 'one' or 'any', got {fmt(neighbours)}")
        ages = self._check_aoi(aoi)
        if self.n_snapshots ** 3 * (max(ages) + 1) <= EXACT_RATIONAL_WORK:
            # exact rational arithmetic: a tiny Δ_k is a difference of nearly equal rows, which floats
            # get wrong by ~u absolutely (issue 26: 1.4 % below the exact value at Δ_k ≈ 1e-16)
            return exact_aged_distance(self, ages, neighbours)
        if neighbours == "any" and len(set(ages)) == 1:
            return float(self.joint_chain.max_tv(ages[0]))
        C = self.aged_kernel(ages)
        return self._one_entry_tv(C) if neighbours == "one" else _max_pair_tv(C, None)

    def _one_entry_tv(self, C: np.ndarray) -> float:
        """Max TV between rows of C (indexed by snapshots) over pairs differing in one sequence."""
        m, s = self.n_states, self.n_sequences
        T = C.reshape((m,) * s + (C.shape[1],))
        best = 0.0
        for i in range(s):
            for a in range(m):
                for b in range(a + 1, m):
                    diff = np.take(T, a, axis=i) - np.take(T, b, axis=i)
                    best = max(best, float(0.5 * np.abs(diff).sum(axis=-1).max()))
        return min(1.0, best)

    def single_sequence_distance(self, max_age: int) -> np.ndarray:
        """Lower bounds on Δ_k: lb[i, a] = max over one-entry neighbours of TV(Pr[x^(i)_{t−a} | x_t]).

        The law of the aged snapshot's i-th entry is a function of the aged snapshot, so by the
        data-processing inequality Δ_k(A_t) ≥ max_i lb[i, A^(i)] for every AoI vector.  Each row
        is a column block of a power of the reversed joint chain (cheap: N × m per sequence).

        Parameters
        ----------
        max_age : int
            Largest age a, slots.

        Returns
        -------
        numpy.ndarray, shape (s, max_age + 1).

        Raises
        ------
        InvalidModelError
            If m^s exceeds the exact limit.
        """
        (max_age,) = as_slots([max_age], "max_age")
        X = self.snapshots
        m, s = self.n_states, self.n_sequences
        R = self.joint_chain.reversed_matrix
        M = np.concatenate([(X[:, i][:, None] == np.arange(m)[None, :]).astype(float) for i in range(s)], axis=1)
        pairs = self.neighbour_pairs()
        out = np.zeros((s, int(max_age) + 1))
        for a in range(int(max_age) + 1):
            if a:
                M = R @ M
            diff = 0.5 * np.abs(M[pairs[:, 0]] - M[pairs[:, 1]])
            out[:, a] = diff.reshape(len(pairs), s, m).sum(axis=2).max(axis=0)
        return np.minimum(out, 1.0)

    def pairwise_distance(self, max_age: int) -> np.ndarray:
        """Lower bounds on Δ_k from pairs of aged entries: lb[i, j, a, b] (i ≠ j), ≥ the single-entry bounds.

        lb[i, j, a, b] = max over one-entry neighbours x, x' of the total variation between the laws
        of (x^(i)_{t−a}, x^(j)_{t−b}) given x_t = x and given x'.  By the data-processing inequality
        Δ_k(A_t) ≥ max_{i≠j} lb[i, j, A^(i), A^(j)].  Each law is computed forward from the older entry
        (m² rows), so the cost is O(s² A_max² m² (m^s)²).

        Parameters
        ----------
        max_age : int
            Largest age, slots.

        Returns
        -------
        numpy.ndarray, shape (s, s, max_age + 1, max_age + 1); the diagonal i = j holds the
        single-entry bounds of :meth:`single_sequence_distance`.

        Raises
        ------
        InvalidModelError
            If m^s exceeds the exact limit.
        """
        (A,) = as_slots([max_age], "max_age")
        A = int(A)
        X = self.snapshots
        m, s, N = self.n_states, self.n_sequences, self.n_snapshots
        pi, P = self.joint_stationary, self.joint_chain.P
        E = [(X[:, i][None, :] == np.arange(m)[:, None]).astype(float) for i in range(s)]  # (m, N)
        pairs = self.neighbour_pairs()
        single = self.single_sequence_distance(A)
        out = np.zeros((s, s, A + 1, A + 1))
        for i in range(s):
            out[i, i] = single[i][:, None]
        # P^b for b = 0..A, stacked once, so that the newer entry's ages b are evaluated together per (old, gap, new)
        # (a Python loop over (A + 1)²/2 pairs took ~50 s at A = 1000, issue 26)
        powers = np.empty((A + 1, N, N))
        powers[0] = np.eye(N)
        for b in range(1, A + 1):
            powers[b] = powers[b - 1] @ P
        for old in range(s):
            V = E[old] * pi[None, :]  # law of (x^(old) at the older slot, current state)
            for gap in range(A + 1):
                if gap:
                    V = V @ P
                for new in range(s):
                    if new == old or (gap == 0 and new < old):
                        continue
                    W = (V[:, None, :] * E[new][None, :, :]).reshape(m * m, N)
                    nb = A + 1 - gap
                    Wb = np.matmul(W[None, :, :], powers[:nb]) / pi[None, None, :]  # (b, m², N): laws given x_t
                    tv = 0.5 * np.abs(Wb[:, :, pairs[:, 0]] - Wb[:, :, pairs[:, 1]]).sum(axis=1).max(axis=1)
                    b = np.arange(nb)
                    out[old, new, b + gap, b] = out[new, old, b, b + gap] = np.minimum(1.0, tv)
        return out

    def lagged_moments(self, weights, max_lag: int) -> np.ndarray:
        """K[i, j, L] = E[g_i(x_t) g_j(x_{t+L})] with g_i(x) = weights[x^(i)], stationary joint chain.

        Exact (dense joint chain) up to :data:`EXACT_SNAPSHOT_LIMIT` snapshots; above it (up to
        :data:`SPECTRAL_SNAPSHOT_LIMIT`) matrix-free with the certified approximate stationary vector
        π̃ of :meth:`spectral_certificate`, whose error obeys ‖π − π̃‖₁ ≤
        ``stationary_l1_error``, so every entry is within ``stationary_l1_error``·max|g|² of the
        exact value (the MSE is utility, not privacy).

        Parameters
        ----------
        weights : array_like, shape (m,)
            Value of each state.
        max_lag : int
            Largest lag L, slots.

        Returns
        -------
        numpy.ndarray, shape (s, s, max_lag + 1).

        Raises
        ------
        InvalidModelError
            If m^s exceeds :data:`SPECTRAL_SNAPSHOT_LIMIT`.
        """
        v = np.asarray(weights, dtype=float)
        if self.n_snapshots <= EXACT_SNAPSHOT_LIMIT:
            pi, P = self.joint_stationary, self.joint_chain.P
            apply = P.__matmul__
        else:
            cert = self.spectral_certificate()
            pi, apply = cert.stationary, JointOperator(self).matvec
        G = v[self.snapshot_grid()]  # (N, s)
        H = G.copy()
        out = np.zeros((self.n_sequences, self.n_sequences, int(max_lag) + 1))
        for L in range(int(max_lag) + 1):
            if L:
                H = apply(H)  # H[:, j] = E[g_j(x_{t+L}) | x_t]
            out[:, :, L] = (G * pi[:, None]).T @ H
        return out


def _ages(aoi, s: int) -> tuple[int, ...]:
    """Validate an AoI vector (an int means the same age for all s sequences)."""
    arr = np.asarray(aoi)
    if arr.ndim == 0:
        arr = np.full(s, arr)
    if arr.shape != (s,):
        raise InvalidInputError(f"`aoi` must hold one age per sequence ({s}), got {fmt(aoi)}")
    return tuple(int(a) for a in as_slots(arr, "aoi"))


def _max_pair_tv(C: np.ndarray, pairs=None, chunk: int = 4096) -> float:
    """Max over row pairs of the total variation distance (all pairs if `pairs` is None)."""
    best = 0.0
    if pairs is None:
        for i in range(C.shape[0]):
            best = max(best, float(0.5 * np.abs(C[i + 1:] - C[i]).sum(axis=1).max(initial=0.0)))
        return min(1.0, best)
    for lo in range(0, len(pairs), chunk):
        p = pairs[lo:lo + chunk]
        best = max(best, float(0.5 * np.abs(C[p[:, 0]] - C[p[:, 1]]).sum(axis=1).max(initial=0.0)))
    return min(1.0, best)


def two_binary_cmc(p: float, q: float, lam: float) -> CouplingMarkovChain:
    """The two-sequence binary CMC of Luo et al.'s (2025) numerical study (Section VII-A, eq. 25).

    Parameters
    ----------
    p, q : float
        P^(jk) = [[1 − p, p], [q, 1 − q]] for every pair (j, k) (the paper uses p = q = 0.3).
    lam : float
        Self-coupling λ = λ_11 = λ_22 in [0, 1]; λ_12 = λ_21 = 1 − λ.

    Returns
    -------
    CouplingMarkovChain
        s = 2, m = 2, states valued 0 and 1.

    Raises
    ------
    InvalidModelError
        If `p`, `q` or `lam` lies outside [0, 1].
    """
    for name, v in (("p", p), ("q", q), ("lam", lam)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not (0 <= v <= 1):
            raise InvalidModelError(f"`{name}` must be a probability in [0, 1], got {fmt(v)}")
    P = [[1 - p, p], [q, 1 - q]]
    return CouplingMarkovChain(P, [[lam, 1 - lam], [1 - lam, lam]], [0.0, 1.0], n_sequences=2)
