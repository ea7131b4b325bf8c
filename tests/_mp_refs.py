"""Independent high-precision references (mpmath, 60 significant digits) for the outward-rounding tests.

Written from the papers' formulas, not from policyopt's code paths: no log-space tricks, no envelopes,
no Algorithm 1/5 — brute force where the papers allow it, at a precision where float rounding (≈1e-16)
is negligible against the margins under test (≥ 2⁻⁴⁰ ≈ 9e-13).

* Δ(t) of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory,
  2024, eq. (12): max over start-state pairs of the total variation distance between t-step rows of
  the reversed chain P̂ = D_π⁻¹ Pᵀ D_π (π solved in mpmath from P).
* Peak risk ε* of the same paper, eq. (30): ln(1 + Δ(A)(e^{ε_C} − 1)/(1 − Δ(S̄)e^{ε_C})).
* L(α) of Cao, Yoshikawa, Xiao, Xiong, "Quantifying Differential Privacy in Continuous Data Release
  under Temporal Correlations", IEEE TKDE, 2019, eq. (18)–(21): the linear-fractional program
  max (q·x)/(d·x) over x with e^{−α} ≤ x_j/x_k ≤ e^{α} is attained at a vertex x_j ∈ {1, e^α}, so
  L(α) = max over ordered pairs of distinct rows (q, d) and over all index sets S of
  log((q_S e^α + q_{S̄})/(d_S e^α + d_{S̄})) (S = ∅ gives 0) — enumerated, not Theorem 5's ordering.
* BPL/FPL/TPL recursions eqs. (13), (15), (10), maximised over users (3), (7), (9).
* The MSE penalty of the released mean (Zhang et al. 2024, eqs. (48)–(49) with sensitivity
  (max − min)/I): staleness (1/I²)Σ_i Σ_{x,y} π(x)P^t(x,y)(v_x − v_y)² plus 2(s/ε_C)².
"""

from __future__ import annotations

import itertools

import mpmath as mp

mp.mp.dps = 60


def mpf_matrix(P, *, normalise: bool = True):
    """mpmath matrix of the float entries of `P`, each row divided by its exact sum (a stochastic matrix).

    A float matrix's rows sum to 1 only within rounding; the chain it stands for is stochastic, and
    Δ(t) of a non-stochastic matrix carries an O(t·2⁻⁵³) artefact from the row sums.
    """
    rows = [[mp.mpf(float(x)) for x in row] for row in P]
    if normalise:
        rows = [[x / sum(row) for x in row] for row in rows]
    return mp.matrix(rows)


def stationary(P) -> list:
    """π with πP = π, Σπ = 1, solved in mpmath (P irreducible)."""
    M = mpf_matrix(P)
    K = M.rows
    A = mp.matrix(K, K)
    for i in range(K):
        for j in range(K):
            A[i, j] = M[j, i] - (1 if i == j else 0)
    for j in range(K):  # replace the last equation by Σπ = 1
        A[K - 1, j] = 1
    b = mp.matrix([0] * (K - 1) + [1])
    x = mp.lu_solve(A, b)
    return [x[i] for i in range(K)]


def max_tv(P, t: int):
    """Δ(t), eq. (12) of Zhang et al. (2024), from the reversed chain's t-step rows, to ≥ 40 significant digits.

    The rows of P̂^t agree to about −log10 Δ(t) digits, so the working precision is raised until it
    exceeds that by 40 digits (Δ(168) of a fast-mixing chain is far below 1e-60).
    """
    dps = 60
    while True:
        with mp.workdps(dps):
            value = _max_tv(P, t)
        if value > 0 and mp.log10(value) > 40 - dps:
            return +value
        if value == 0 and dps >= 4000:  # rows equal to 4000 digits: Δ(t) = 0 (e.g. p + q = 1)
            return value
        dps = int(-mp.log10(value)) + 60 if value > 0 else 2 * dps


def _max_tv(P, t: int):
    M = mpf_matrix(P)
    K = M.rows
    pi = stationary(P)
    R = mp.matrix(K, K)
    for x in range(K):
        for y in range(K):
            R[x, y] = pi[y] * M[y, x] / pi[x]
    Rt = R**t if t > 0 else mp.eye(K)
    best = mp.mpf(0)
    for x in range(K):
        for y in range(x + 1, K):
            tv = sum(abs(Rt[x, z] - Rt[y, z]) for z in range(K)) / 2
            best = max(best, tv)
    return best


def population_max_tv(chains, t: int):
    """Δ(t) of a population: the max over its users' chains."""
    return max(max_tv(P, t) for P in chains)


def peak_risk(dA, dS, eps):
    """ε* of eq. (30), or +inf when condition (31) Δ(S̄)e^{ε_C} < 1 fails."""
    eps = mp.mpf(eps)
    r = dS * mp.e**eps
    if r >= 1:
        return mp.inf
    return mp.log1p(dA * mp.expm1(eps) / (1 - r))


def loss(P, alpha):
    """L(α), eqs. (18)–(21) of Cao et al. (2019), by enumerating every vertex of the box (20)."""
    M = mpf_matrix(P)
    n = M.rows
    ea = mp.e ** mp.mpf(alpha)
    best = mp.mpf(0)
    for i, j in itertools.permutations(range(n), 2):
        q = [M[i, k] for k in range(n)]
        d = [M[j, k] for k in range(n)]
        for r in range(1, n + 1):
            for S in itertools.combinations(range(n), r):
                num = sum(q[k] * (ea if k in S else 1) for k in range(n))
                den = sum(d[k] * (ea if k in S else 1) for k in range(n))
                if den == 0:
                    if num > 0:
                        return mp.inf
                    continue
                best = max(best, mp.log(num / den))
    return best


def _run(P, budgets):
    out, prev = [], mp.mpf(0)
    for t, e in enumerate(budgets):
        prev = (loss(P, prev) if (t and P is not None) else 0) + mp.mpf(float(e))
        out.append(prev)
    return out


def leakage(P_B, P_F, budgets):
    """(bpl, fpl, tpl) lists per step (max over users), eqs. (13), (15), (10), (3), (7), (9).

    `P_B`, `P_F`: a matrix, None (L ≡ 0) or a list of them (one per user, equal lengths).
    """
    def users(P):
        is_list = isinstance(P, list) and P and (P[0] is None or len(getattr(P[0], "shape", ())) == 2)
        return list(P) if is_list else [P]

    ub, uf = users(P_B), users(P_F)
    U = max(len(ub), len(uf))
    ub = ub * U if len(ub) == 1 else ub
    uf = uf * U if len(uf) == 1 else uf
    eps = [mp.mpf(float(e)) for e in budgets]
    T = len(eps)
    bpl = [_run(P, eps) for P in ub]
    fpl = [_run(P, eps[::-1])[::-1] for P in uf]
    tpl = [max(bpl[u][t] + fpl[u][t] - eps[t] for u in range(U)) for t in range(T)]
    return ([max(b[t] for b in bpl) for t in range(T)], [max(f[t] for f in fpl) for t in range(T)], tpl)


def staleness(chains, counts, values, t: int):
    """(1/I²) Σ_users Σ_{x,y} π(x)P^t(x,y)(v_x − v_y)², the staleness term of the MSE penalty."""
    I = sum(counts)
    total = mp.mpf(0)
    for P, c, v in zip(chains, counts, values):
        M = mpf_matrix(P)
        K = M.rows
        pi = stationary(P)
        Pt = M**t if t > 0 else mp.eye(K)
        vv = [mp.mpf(float(x)) for x in v]
        total += c * sum(pi[x] * Pt[x, y] * (vv[x] - vv[y]) ** 2 for x in range(K) for y in range(K))
    return total / I**2


def schedule_penalty(chains, counts, values, A: int, S_bar: int, eps):
    """Peak MSE of the schedule (A, S̄, ε_C): max over ages A..A+S̄−1 of staleness + 2(s/ε_C)²."""
    I = sum(counts)
    lo = min(min(float(x) for x in v) for v in values)
    hi = max(max(float(x) for x in v) for v in values)
    s = (mp.mpf(hi) - mp.mpf(lo)) / I
    stale = max(staleness(chains, counts, values, a) for a in range(A, A + S_bar))
    return stale + 2 * (s / mp.mpf(float(eps))) ** 2


def supremum(P, eps):
    """sup_t BPL_t for the constant budget ε (Cao et al. 2019, Theorem 11): the fixed point α = L(α) + ε
    that the increasing recursion (13) converges to, by bisection on the sign of L(α) + ε − α
    (positive below it, negative above); ``mp.inf`` if no sign change up to 2⁶⁰·(1 + ε)."""
    eps = mp.mpf(float(eps))
    lo, hi = eps, 2 * eps + 1
    for _ in range(60):
        if loss(P, hi) + eps - hi < 0:
            break
        lo, hi = hi, 2 * hi
    else:
        return mp.inf
    for _ in range(230):
        mid = (lo + hi) / 2
        if loss(P, mid) + eps - mid >= 0:
            lo = mid
        else:
            hi = mid
    return hi
