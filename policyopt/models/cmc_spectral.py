"""The matrix-free spectral certificate of a coupled chain's joint snapshot chain (Luo et al. 2025, Section III-B,
with the spectral bound (55) of Zhang et al. 2024): the joint transition operator applied without forming the
m^s × m^s matrix, and a certified upper bound on its second singular value (deflated randomized Lanczos).

Used by :class:`policyopt.models.cmc.CouplingMarkovChain` (``spectral_certificate``); this module does not import it:
the operator takes any object with the chain's ``transitions``, ``weights``, ``n_sequences`` and ``n_states``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policyopt.errors import InvalidModelError
from policyopt.models.markov import as_slots
from policyopt.result import result_repr

__all__ = ["JointOperator", "SpectralCertificate", "certify", "SPECTRAL_FAILURE_PROBABILITY"]

#: Probability (over the seeded random start vector) that the randomized Lanczos certificate of
#: :meth:`CouplingMarkovChain.spectral_certificate` fails (Kuczyński & Woźniakowski 1992).
SPECTRAL_FAILURE_PROBABILITY = 1e-12


class JointOperator:
    """Matrix-free products with the joint transition matrix P of a CMC (any object with the chain's attributes).

    Row x of P is F[x] ⊗ G[x] with F[x] = ⊗_{j<r} M_j[x, ·] and G[x] = ⊗_{j≥r} M_j[x, ·]
    (snapshots in lexicographic order, sequence 1 most significant), so
    (P V)[x] = Σ_q (F V')[x, q] G[x, q] with V' = V reshaped (m^r, m^{s−r}), and
    Pᵀ V = Fᵀ (V ∘ G): one dense product of O((m^s)²) flops each, rows processed in blocks.
    """

    #: Largest number of floats of one temporary block.
    BLOCK = 1 << 22

    def __init__(self, cmc):
        s, m = cmc.n_sequences, cmc.n_states
        self.N = cmc.n_snapshots
        X = cmc.snapshot_grid()
        M = np.zeros((self.N, s, m))
        for j in range(s):
            for k in range(s):
                if cmc.coupling[j, k] > 0:
                    M[:, j, :] += cmc.coupling[j, k] * cmc.transitions[j, k][X[:, k], :]
        self.M = M
        self.r = max(1, s // 2)
        self.nf, self.nb = m ** self.r, m ** (s - self.r)
        cache = self.N * (self.nf + self.nb) <= self.BLOCK * 2
        self._F = self._outer(slice(None), 0, self.r) if cache else None
        self._G = self._outer(slice(None), self.r, s) if cache else None

    def _outer(self, rows, lo, hi) -> np.ndarray:
        Mr = self.M[rows]
        out = np.ones((Mr.shape[0], 1))
        for j in range(lo, hi):
            out = (out[:, :, None] * Mr[:, j, None, :]).reshape(Mr.shape[0], -1)
        return out

    def _blocks(self, c: int):
        step = max(1, self.BLOCK // (max(self.nf, self.nb) * max(c, 1)))
        for lo in range(0, self.N, step):
            rows = slice(lo, min(self.N, lo + step))
            if self._F is not None:
                yield rows, self._F[rows], self._G[rows]
            else:
                yield rows, self._outer(rows, 0, self.r), self._outer(rows, self.r, self.M.shape[1])

    def matvec(self, V) -> np.ndarray:
        """P @ V for V of shape (N,) or (N, c)."""
        V = np.asarray(V, dtype=float)
        V2 = V.reshape(self.N, -1)
        c = V2.shape[1]
        Vr = V2.reshape(self.nf, self.nb * c)
        out = np.empty((self.N, c))
        for rows, F, G in self._blocks(c):
            W = (F @ Vr).reshape(F.shape[0], self.nb, c)
            out[rows] = np.einsum("xqc,xq->xc", W, G)
        return out.reshape(V.shape)

    def rmatvec(self, V) -> np.ndarray:
        """Pᵀ @ V for V of shape (N,) or (N, c)."""
        V = np.asarray(V, dtype=float)
        V2 = V.reshape(self.N, -1)
        c = V2.shape[1]
        out = np.zeros((self.nf, self.nb * c))
        for rows, F, G in self._blocks(c):
            out += F.T @ (G[:, :, None] * V2[rows][:, None, :]).reshape(F.shape[0], -1)
        return out.reshape(V.shape)


@dataclass(frozen=True)
class SpectralCertificate:
    """Matrix-free spectral bound (55) of Zhang et al. (2024) for the joint chain of a CMC, with its certificate.

    Bound: Δ(t) ≤ min(1, c̄ · λ̄^t), Δ(t) of Zhang et al. (2024) eq. (12) on the joint chain (reversed rows),
    with λ̄ ≥ λ* = σ₂(D^{1/2} P D^{−1/2}) (D = diag π; Fill 1991 Thm 2.1 for non-reversible chains,
    as :meth:`policyopt.models.markov.MarkovChain.spectral_rate`) and c̄ ≥ max_x sqrt((1 − π(x))/π(x)).

    How it is computed (:func:`_certify`), N = m^s:

    1. π̃ by ARPACK (``scipy.sparse.linalg.eigs`` on x ↦ Pᵀx) and two power steps; residual
       r = π̃ᵀP − π̃ᵀ evaluated exactly as far as floating point goes; ũ = sqrt(π̃), Σπ̃ = 1.
    2. C̃ = D̃^{1/2} P D̃^{−1/2} − ũũᵀ and A = C̃ᵀC̃ (PSD) as LinearOperators.  Top-k eigenpairs of A by
       ``eigsh``, re-orthonormalised and Rayleigh–Ritz refined: AY = YΘ + R, θ₁ = max Θ, ρ = ‖R‖₂.
    3. μ̄ ≥ λ_max(Π A Π), Π = I − YYᵀ: Lanczos with full reorthogonalisation for ``lanczos_steps`` = K
       steps from a Gaussian start projected on range(Π); largest Ritz value θ', μ̄ = θ'/(1 − ε) with
       √ε = ln(1.648 √n' / p)/(2K − 1), n' = N − k (Kuczyński–Woźniakowski 1992, Thm 4.1:
       Pr[θ' < (1 − ε) λ_max] ≤ 1.648 √n' e^{−√ε(2K−1)} = p).  For N ≤ 256 the compression is formed
       explicitly and μ̄ is its exact largest eigenvalue (p = 0).
    4. ‖C̃‖₂² ≤ λ̄_A = (θ₁ + μ̄)/2 + sqrt(((θ₁ − μ̄)/2)² + ρ²): for x = Ya + Πx,
       xᵀAx ≤ θ₁‖a‖² + 2ρ‖a‖‖Πx‖ + μ̄‖Πx‖², the quadratic form of [[θ₁, ρ], [ρ, μ̄]] (YᵀAΠ = RᵀΠ).
    5. Stationary vector error: e = π − π̃ satisfies eᵀ(I − P) = rᵀ and Σe = 0; with g = D̃^{−1/2}e,
       gᵀũ = 0 and gᵀ(I − C̃) = (r/ũ)ᵀ, so ‖g‖₂ ≤ ‖r/ũ‖₂ / (1 − ‖C̃‖₂) (this also proves π unique and,
       if τ_x = ‖g‖₂/ũ(x) < 1, positive).  Then ``|π(x)/π̃(x) − 1|`` ≤ τ_x ≤ τ = max_x τ_x.
    6. With E = diag(sqrt(π/π̃)), D^{1/2}PD^{−1/2} = E B̃ E^{−1}; by Eckart–Young σ₂ is the distance to
       rank one, so λ* ≤ ‖E C̃ E^{−1}‖₂ ≤ sqrt((1 + τ)/(1 − τ)) · ‖C̃‖₂; λ̄ adds a rounding allowance
       of 32·N·u (u = 2^−53).  c̄ uses π(x) ≥ π̃(x) − ‖g‖₂ ũ(x).

    What is proved: steps 4–6 are exact inequalities given the computed residuals, so the bound
    holds except on an event of probability ≤ ``failure_probability`` over the seeded random
    start of step 3 (0 when N ≤ 256).  Not formally proved: floating-point rounding in the
    operator products and in Lanczos is covered by the 32·N·u allowance (well above the standard
    γ_N forward error of the products), not by an interval-arithmetic proof.  If any step fails
    (‖C̃‖ bound ≥ 1, τ ≥ 1/2) the certificate falls back to λ̄ = 1, i.e. the trivial Δ ≤ 1.

    Attributes
    ----------
    rate : float
        λ̄ in [0, 1], upper bound on λ* of the joint chain.
    log_constant : float
        ln c̄ ≥ 0.
    stationary : numpy.ndarray, shape (N,)
        π̃ (sums to 1).
    stationary_l1_error : float
        Proven bound on ‖π − π̃‖₁ (≤ ‖g‖₂); ``inf`` if not certified.
    stationary_relative_error : float
        τ (``inf`` if not certified).
    stationary_residual : float
        ‖π̃ᵀP − π̃ᵀ‖₁.
    sigma : float
        Computed ‖C̃‖₂ (sqrt θ₁), the estimate before the certificate.
    ritz_residual : float
        ρ.
    deflated_bound : float
        μ̄.
    n_ritz, lanczos_steps : int
        k and K.
    failure_probability : float
        p.
    n_snapshots : int
        N.
    """

    rate: float
    log_constant: float
    stationary: np.ndarray
    stationary_l1_error: float
    stationary_relative_error: float
    stationary_residual: float
    sigma: float
    ritz_residual: float
    deflated_bound: float
    n_ritz: int
    lanczos_steps: int
    failure_probability: float
    n_snapshots: int

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)

    def log_bound(self, t):
        """ln of min(1, c̄ λ̄^t) (≤ 0; −inf when λ̄ = 0 and t > 0).

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots.

        Returns
        -------
        float or numpy.ndarray, same shape as `t`.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        """
        ts = as_slots(t, "t").astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rate = math.log(self.rate) if self.rate > 0 else -np.inf
            term = np.where(ts == 0, 0.0, ts * log_rate)
        out = np.minimum(0.0, self.log_constant + term)  # eq. (55)
        return float(out) if out.ndim == 0 else out

    def bound(self, t):
        """Upper bound min(1, c̄ λ̄^t) on the joint chain's Δ(t), Zhang et al. (2024) eq. (55).

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots.

        Returns
        -------
        float or numpy.ndarray in [0, 1], same shape as `t`.

        Raises
        ------
        InvalidInputError
            If `t` is negative or not integral.
        """
        out = np.exp(self.log_bound(t))
        return float(out) if np.ndim(out) == 0 else out


#: Number of top eigenpairs of C̃ᵀC̃ deflated before the randomized Lanczos check.
_N_RITZ = 12
#: Lanczos steps of the randomized check.
_LANCZOS_STEPS = 60
#: Up to this many snapshots C̃ is formed column by column and its norm computed exactly.
_SMALL = 256


def _stationary(op: JointOperator) -> np.ndarray:
    """Step 1 of :func:`certify`: the joint chain's stationary vector π (N,), positive, summing to 1 (dense
    eigenvector for small N, ARPACK otherwise, then two power steps).

    Raises
    ------
    InvalidModelError
        If no positive stationary vector is found, or an entry is zero (reducible chain or below rounding level).
    """
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigs

    N = op.N
    if N <= _SMALL:
        Pd = op.matvec(np.eye(N))
        w, V = np.linalg.eig(Pd.T)
        pi = np.real(V[:, int(np.argmin(np.abs(w - 1.0)))])
    else:
        PT = LinearOperator((N, N), matvec=op.rmatvec, dtype=float)
        try:
            _, V = eigs(PT, k=1, which="LR", v0=np.full(N, 1.0 / N), tol=0)
            pi = np.real(V[:, 0])
        except ArpackNoConvergence as exc:
            pi = np.real(exc.eigenvectors[:, 0]) if exc.eigenvectors.size else np.full(N, 1.0 / N)
    pi = pi * np.sign(pi.sum())
    pi = np.clip(pi, 0.0, None)
    if not pi.sum() > 0:
        raise InvalidModelError("the joint chain's stationary vector could not be computed (no positive solution)")
    pi /= pi.sum()
    for _ in range(2):
        pi = op.rmatvec(pi)
        pi /= pi.sum()
    if not np.all(pi > 0):
        raise InvalidModelError(
            "the joint chain's stationary vector has zero entries (reducible joint chain, or a stationary "
            f"probability below rounding level: {int(np.sum(pi <= 0))} of {N} snapshots); no spectral bound"
        )
    return pi


def certify(op: JointOperator, seed: int) -> SpectralCertificate:
    """Compute the :class:`SpectralCertificate` of a joint chain given as a matrix-free operator."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    N = op.N
    rng = np.random.default_rng(seed)
    u_round = np.finfo(float).eps / 2
    pi = _stationary(op)  # 1. stationary vector
    resid = op.rmatvec(pi) - pi
    u = np.sqrt(pi)

    def _C(v):
        v = v.reshape(N, -1)
        return u[:, None] * op.matvec(v / u[:, None]) - np.outer(u, u @ v)

    def _CT(v):
        v = v.reshape(N, -1)
        return op.rmatvec(u[:, None] * v) / u[:, None] - np.outer(u, u @ v)

    def _A(v):
        shape = np.shape(v)
        return _CT(_C(np.asarray(v, dtype=float))).reshape(shape)

    # 2-4. norm of C̃
    p_fail, k, K = 0.0, 0, 0
    if N <= _SMALL:
        Cd = _C(np.eye(N))
        sv = np.linalg.svd(Cd, compute_uv=False)
        theta1, rho, mu = float(sv[0] ** 2), 0.0, 0.0
        lam_bar = theta1
    else:
        k = min(_N_RITZ, N - 2)
        Aop = LinearOperator((N, N), matvec=_A, matmat=_A, dtype=float)
        try:
            _, Y = eigsh(Aop, k=k, which="LA", v0=rng.standard_normal(N), tol=1e-14)
        except ArpackNoConvergence as exc:  # any orthonormal Y keeps the certificate valid
            Y = exc.eigenvectors if exc.eigenvectors.size else rng.standard_normal((N, k))
        Y, _ = np.linalg.qr(Y)
        AY = _A(Y)
        H = Y.T @ AY
        th, S = np.linalg.eigh((H + H.T) / 2)
        Y, AY = Y @ S, AY @ S
        R = AY - Y * th[None, :]
        theta1 = float(max(th.max(), 0.0))
        rho = float(np.linalg.norm(R, 2))
        # 3. randomized Lanczos on the compression to span(Y)⊥
        K = _LANCZOS_STEPS
        n_sub = N - Y.shape[1]
        p_fail = SPECTRAL_FAILURE_PROBABILITY
        sq_eps = math.log(1.648 * math.sqrt(n_sub) / p_fail) / (2 * K - 1)
        eps_kw = min(sq_eps ** 2, 0.999)

        def _proj(v):
            v = v - Y @ (Y.T @ v)
            return v - Y @ (Y.T @ v)

        q = _proj(rng.standard_normal(N))
        q /= np.linalg.norm(q)
        Q = [q]
        alpha, beta = [], []
        scale = max(theta1, 1e-300)
        for it in range(K):
            w = _proj(_A(Q[-1]))
            a = float(Q[-1] @ w)
            alpha.append(a)
            Qm = np.stack(Q, axis=1)
            for _ in range(2):  # full reorthogonalisation, twice is enough
                w = _proj(w - Qm @ (Qm.T @ w))
            b = float(np.linalg.norm(w))
            if it == K - 1 or b <= 1e-13 * scale:
                break
            beta.append(b)
            Q.append(w / b)
        T = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
        theta_p = float(max(np.linalg.eigvalsh(T).max(), 0.0)) + (b if b <= 1e-13 * scale else 0.0)
        mu = theta_p / (1.0 - eps_kw)
        lam_bar = (theta1 + mu) / 2 + math.sqrt(((theta1 - mu) / 2) ** 2 + rho ** 2)
    sigma_c = math.sqrt(max(lam_bar, 0.0))
    # 5-6. stationary-vector error and the rate
    allowance = 32 * N * u_round
    rate, log_c, tau, l1 = 1.0, 0.0, math.inf, math.inf
    sig = sigma_c + allowance
    if sig < 1.0:
        gnorm = float(np.linalg.norm(resid / u)) / (1.0 - sig)
        gnorm += N * u_round  # Σπ̃ = 1 only up to rounding
        tau_x = gnorm / u
        tau = float(tau_x.max())
        if tau < 0.5:
            l1 = gnorm
            rate = min(1.0, math.sqrt((1 + tau) / (1 - tau)) * sigma_c + allowance)
            p_low = float(np.min(pi - gnorm * u))
            log_c = 0.5 * math.log((1.0 - p_low) / p_low) if p_low < 0.5 else 0.0
    pi.setflags(write=False)
    return SpectralCertificate(
        rate=float(rate), log_constant=float(max(log_c, 0.0)), stationary=pi, stationary_l1_error=float(l1),
        stationary_relative_error=float(tau), stationary_residual=float(np.abs(resid).sum()),
        sigma=math.sqrt(max(theta1, 0.0)), ritz_residual=float(rho), deflated_bound=float(mu), n_ritz=int(k),
        lanczos_steps=int(K), failure_probability=float(p_fail), n_snapshots=int(N),
    )
