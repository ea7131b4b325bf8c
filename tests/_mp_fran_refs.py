"""Independent 60-digit mpmath references for FRAN (Luo, Zhang, Xu, Chen, Huang, "Correlated-Sequence
Differential Privacy", preprint, 2025), written from the definitions, not from policyopt's code paths:

* the joint chain of a coupling Markov chain (Section III-B, eqs. 4–5): sequences move conditionally
  independently given the snapshot, Pr(y | x) = Π_j Σ_k λ_jk P^(jk)[x^(k), y^(j)], with every row of every
  P^(jk) and of λ divided by its exact sum (the chain the float inputs stand for);
* its stationary law by solving πP = π, Σπ = 1 (mpmath LU), not GTH;
* the law of the aged snapshot z = (x^(i)_{t−A^(i)})_i jointly with x_t (Algorithm 1, eq. 9) by walking
  forward slot by slot from t − max A over the pairs (recorded entries, current snapshot);
* the exact CSDP leakage (Definition 6) of f(z) + Lap(Δf/ε_C): the largest log ratio of the two Laplace
  mixture densities over one-entry neighbours x, x' (Definition 5), at every atom of either mixture
  (between atoms the ratio is monotone, beyond them constant);
* Δ_k (Definition 9) over the same neighbours, and the paper's eq. (15) value d(k)Δ_kε_C.
"""

from __future__ import annotations

import itertools

import mpmath as mp

mp.mp.dps = 60


def _normalise(rows):
    out = []
    for row in rows:
        r = [mp.mpf(float(x)) for x in row]
        tot = sum(r)
        out.append([x / tot for x in r])
    return out


class MpCMC:
    """A coupling Markov chain in mpmath: `transitions` (s, s, m, m), `coupling` (s, s), `values` (m,)."""

    def __init__(self, transitions, coupling, values):
        self.s = len(coupling)
        self.m = len(values)
        self.T = [[_normalise(transitions[j][k]) for k in range(self.s)] for j in range(self.s)]
        self.lam = _normalise(coupling)
        self.values = [mp.mpf(float(v)) for v in values]
        self.snapshots = list(itertools.product(range(self.m), repeat=self.s))  # lexicographic, sequence 1 first
        self.index = {x: i for i, x in enumerate(self.snapshots)}
        N = len(self.snapshots)
        self.P = [[mp.mpf(1)] * N for _ in range(N)]
        for a, x in enumerate(self.snapshots):
            for b, y in enumerate(self.snapshots):
                p = mp.mpf(1)
                for j in range(self.s):
                    p *= sum(self.lam[j][k] * self.T[j][k][x[k]][y[j]] for k in range(self.s))
                self.P[a][b] = p
        self.pi = self._stationary()

    def _stationary(self):
        N = len(self.snapshots)
        A = mp.matrix(N, N)
        for i in range(N):
            for j in range(N):
                A[i, j] = self.P[j][i] - (1 if i == j else 0)
        for j in range(N):
            A[N - 1, j] = 1
        x = mp.lu_solve(A, mp.matrix([0] * (N - 1) + [1]))
        return [x[i] for i in range(N)]

    def kernel(self, aoi):
        """Pr[z | x_t = x] as a dict x -> {z: probability} (z, x snapshot tuples)."""
        s, N = self.s, len(self.snapshots)
        amax = max(aoi)
        # state: dict (recorded tuple with None for not yet recorded, current snapshot index) -> probability
        state = {(tuple([None] * s), i): self.pi[i] for i in range(N)}
        for tau in range(amax, -1, -1):  # slot t − tau
            rec = {}
            for (z, i), p in state.items():
                x = self.snapshots[i]
                z2 = tuple(x[c] if aoi[c] == tau else z[c] for c in range(s))
                rec[(z2, i)] = rec.get((z2, i), 0) + p
            state = rec
            if tau > 0:
                nxt = {}
                for (z, i), p in state.items():
                    for j in range(N):
                        if self.P[i][j] != 0:
                            nxt[(z, j)] = nxt.get((z, j), 0) + p * self.P[i][j]
                state = nxt
        out = {x: {} for x in self.snapshots}
        for (z, i), p in state.items():
            x = self.snapshots[i]
            out[x][z] = out[x].get(z, 0) + p / self.pi[i]
        return out

    def neighbours(self):
        return [(x, y) for x in self.snapshots for y in self.snapshots if sum(a != b for a, b in zip(x, y)) == 1]

    def query(self, name, z):
        vals = [self.values[c] for c in z]
        return {"mean": sum(vals) / len(vals), "sum": sum(vals), "max": max(vals), "min": min(vals)}[name]

    def sensitivity(self, name):
        r = max(self.values) - min(self.values)
        return r / self.s if name == "mean" else r

    def exact_leakage(self, name, aoi, epsilon_c):
        """sup over neighbours and outputs of the log density ratio of f(z) + Lap(Δf/ε_C), nats."""
        b = self.sensitivity(name) / mp.mpf(float(epsilon_c))
        C = self.kernel(aoi)
        mix = {x: {} for x in self.snapshots}
        for x, row in C.items():
            for z, p in row.items():
                v = self.query(name, z)
                mix[x][v] = mix[x].get(v, 0) + p
        atoms = sorted({v for row in mix.values() for v in row})

        def dens(x, y):
            return sum(p * mp.e ** (-abs(y - v) / b) for v, p in mix[x].items())

        best = mp.mpf(0)
        for x, y in self.neighbours():
            for t in atoms:
                best = max(best, mp.log(dens(x, t) / dens(y, t)))
        return best

    def distance(self, aoi):
        """Δ_k over one-entry neighbours: max total variation between Pr[z | x] and Pr[z | x']."""
        C = self.kernel(aoi)
        best = mp.mpf(0)
        for x, y in self.neighbours():
            zs = set(C[x]) | set(C[y])
            best = max(best, sum(abs(C[x].get(z, 0) - C[y].get(z, 0)) for z in zs) / 2)
        return best

    def d_k(self, name, k):
        """d(k) of Definition 8 for the named queries: k for sum/mean (k ≤ s), 1 for max/min."""
        return mp.mpf(min(k, self.s)) if name in ("sum", "mean") else mp.mpf(1)
