"""Problem P1 of Luo et al. on a coupling Markov chain whose sequences form independent groups.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy"
(2025 preprint), problem P1 eqs. (23)–(24), the leakage of Theorem 1 (sound form ln(1 + Δ_k(e^{d(k)ε_C} − 1));
the paper's eq. (15) is not an upper bound) and the MSE (22).  The decomposition into groups is beyond
the paper.

P1 over s sequences has (A_max + 1)^s AoI vectors, so :class:`~policyopt.problems.fran.FRANProblem`
enumerates them (up to 2^20) and needs the joint chain on m^s snapshots.  When the coupling graph
(λ_jk > 0 or λ_kj > 0 links j and k) has several connected components ("groups") — the correlation
degree k of Luo et al. (2025) is the size of the largest one — the problem separates exactly:

* **Independence.**  No λ links two groups, so each group's snapshot evolves on its own and the
  stationary joint law is the product of the groups' stationary laws (each group's joint chain must be
  irreducible and aperiodic, so that the product chain has a unique stationary law).  The aged snapshot
  z given x_t is then the product over groups g of Pr[z_g | x_{t,g}].
* **Δ_k is a maximum.**  Two one-entry neighbours x, x' (Definition 5) differ in one group g only, and
  TV(μ_g ⊗ ν, μ'_g ⊗ ν) = TV(μ_g, μ'_g), so Δ_k(A_t) = max_g Δ_k^(g)(A_g) exactly (``neighbours="one"``).
* **D is a sum.**  For the linear queries the cross terms between groups are
  E[g_i(z_i) − g_i(x_i)] · E[g_j(z_j) − g_j(x_j)] = 0 under stationarity, so
  D(A_t) = c Σ_g D_sum^(g)(A_g) with c = 1 (sum), 1/s² (mean), and D = Σ_g D_id^(g) (identity).
* **Search.**  Both leakage bounds (sound and paper) increase in Δ_k and, through the smallest feasible
  ε_C = Δf·sqrt(2d/(l̄ − D)), in D.  So only the (Δ_k^(g), D^(g)) Pareto frontier of each group matters
  (computed with the group's exact Δ_k, pruned by its proven lower bounds), and for every threshold δ
  each group takes its smallest-D frontier point with Δ ≤ δ: the optimum is the best over the
  thresholds δ ∈ {frontier values}.  The cost is Σ_g (A_max + 1)^{s_g} instead of Π_g.

Groups above 4096 snapshots use the spectral upper bound of
:class:`~policyopt.problems.fran.FRANProblem` (then Δ_k is bounded, not exact, and the status is
``feasible``).  Queries max/min are not separable and are refused.
"""

from __future__ import annotations

import math
import time

import numpy as np

from policyopt.models.cmc import CouplingMarkovChain
from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.privacy.fran import Query, paper_leakage, sound_leakage
from policyopt.result import Solution, Status, Termination

from policyopt.problems.fran import AOI_VECTOR_LIMIT, FRANProblem

__all__ = ["GroupedFRANProblem", "coupling_groups"]

#: Queries whose aging distortion separates over independent groups, and the query each group uses.
_GROUP_QUERY = {"mean": "sum", "sum": "sum", "identity": "identity"}


def coupling_groups(cmc: CouplingMarkovChain) -> list[np.ndarray]:
    """Connected components of the coupling graph (λ_jk > 0 or λ_kj > 0), each sorted, ordered by first index.

    Parameters
    ----------
    cmc : CouplingMarkovChain

    Returns
    -------
    list of numpy.ndarray of int
        Sequence indices of each group; their sizes' maximum is ``cmc.correlation_degree``.
    """
    from scipy.sparse.csgraph import connected_components

    lam = cmc.coupling
    _, labels = connected_components((lam > 0) | (lam.T > 0), directed=False)
    groups = [np.flatnonzero(labels == g) for g in np.unique(labels)]
    return sorted(groups, key=lambda g: int(g[0]))


class GroupedFRANProblem:
    """Problem P1 (23)–(24) of Luo et al. (2025) solved group by group on a CMC with independent groups.

    Parameters
    ----------
    cmc : CouplingMarkovChain
        Any number of sequences; each group of the coupling graph needs m^{s_g} ≤ 65536 snapshots
        and at most 2^20 AoI vectors (A_max + 1)^{s_g}.
    max_mse : float
        l̄ > 0, bound on l_MSE (22), squared query units.
    query : {"mean", "sum", "identity"}, keyword-only
        Linear query f (default ``"mean"``).
    max_age : int, keyword-only
        A_max ≥ 0 (slots).
    bound : {"sound", "paper"}, keyword-only
        Leakage minimised (default ``"sound"``; ``"paper"`` is Luo et al.'s (2025) unsound eq. (15)).

    Raises
    ------
    InvalidInputError
        If `max_mse`, `max_age`, `query` or `bound` is invalid, or a group has more than 2^20 AoI vectors.
    InvalidModelError
        If a group's joint chain is reducible or periodic, or above the spectral snapshot limit.

    References
    ----------
    Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", 2025 preprint:
    eqs. (9)–(10), (13)–(15), (22)–(24); Definition 5 (one-entry neighbours), Definition 9 (Δ_k).
    """

    def __init__(self, cmc: CouplingMarkovChain, max_mse, *, query: str = "mean", max_age: int = 10,
                 bound: str = "sound"):
        if not isinstance(cmc, CouplingMarkovChain):
            raise InvalidInputError(f"`cmc` must be a CouplingMarkovChain, got {fmt(cmc)}")
        if query not in _GROUP_QUERY:
            raise InvalidInputError(f"`query` must be one of {tuple(_GROUP_QUERY)} (separable over groups), got {fmt(query)}")
        if bound not in ("sound", "paper"):
            raise InvalidInputError(f"`bound` must be 'sound' or 'paper', got {fmt(bound)}")
        if isinstance(max_mse, bool) or not isinstance(max_mse, (int, float, np.integer, np.floating)) or not (
            math.isfinite(max_mse) and max_mse > 0
        ):
            raise InvalidInputError(f"`max_mse` must be a positive finite number (squared units), got {fmt(max_mse)}")
        if isinstance(max_age, bool) or not isinstance(max_age, (int, np.integer)) or max_age < 0:
            raise InvalidInputError(f"`max_age` must be an integer ≥ 0 (slots), got {fmt(max_age)}")
        self.cmc, self.max_mse, self.max_age, self.bound = cmc, float(max_mse), int(max_age), bound
        self.query = Query(query)
        s = cmc.n_sequences
        self.groups = coupling_groups(cmc)
        for g in self.groups:
            n_vec = (self.max_age + 1) ** len(g)
            if n_vec > AOI_VECTOR_LIMIT:
                raise InvalidInputError(
                    f"group {g.tolist()} of {len(g)} coupled sequences has (A_max + 1)^{len(g)} = {n_vec} AoI vectors "
                    f"with `max_age`={self.max_age}, above {AOI_VECTOR_LIMIT}; use a smaller `max_age`"
                )
        self.sensitivity = self.query.sensitivity(cmc)
        self.d_k = self.query.k_sensitivity(cmc)
        self.output_dim = s if query == "identity" else 1
        self._scale = 1.0 / s**2 if query == "mean" else 1.0
        self._subs = []
        for g in self.groups:
            sub = CouplingMarkovChain(cmc.transitions[np.ix_(g, g)], cmc.coupling[np.ix_(g, g)], cmc.state_values)
            prob = FRANProblem(sub, self.max_mse, query=_GROUP_QUERY[query], max_age=self.max_age, bound="sound")
            if len(self.groups) > 1 and prob.distance_kind == "exact" and not sub.joint_chain.is_aperiodic:
                raise InvalidModelError(
                    f"group {g.tolist()} has a periodic joint chain: the product over groups then has no unique "
                    "stationary law; P1 needs aperiodic groups"
                )
            self._subs.append(prob)

    def __repr__(self) -> str:
        return (f"GroupedFRANProblem(s={self.cmc.n_sequences}, groups={[len(g) for g in self.groups]}, "
                f"max_mse={self.max_mse:g}, max_age={self.max_age}, bound={self.bound!r})")

    @property
    def distance_kind(self) -> str:
        """``"exact"`` when every group's Δ_k is exact, else ``"spectral"`` (an upper bound)."""
        return "exact" if all(p.distance_kind == "exact" for p in self._subs) else "spectral"

    def min_epsilon(self, distortion):
        """Smallest ε_C meeting (24) for aging distortion D: Δf·sqrt(2d/(l̄ − D)); ``inf`` if D ≥ l̄ (nats)."""
        D = np.asarray(distortion, dtype=float)
        slack = self.max_mse - D
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(slack > 0, self.sensitivity * np.sqrt(2.0 * self.output_dim / np.where(slack > 0, slack, 1.0)), np.inf)
        return float(out) if out.ndim == 0 else out

    def leakage_from(self, distance, epsilon_c):
        """ε_S from Δ_k and ε_C with the problem's bound (nats)."""
        if self.bound == "sound":
            return sound_leakage(distance, epsilon_c, self.d_k)
        return paper_leakage(distance, epsilon_c, self.d_k, warn=False)

    def frontier(self, g: int) -> dict:
        """(Δ_k, D) Pareto frontier of group `g`: ``index`` (into the group's table), ``aoi`` (n, s_g),
        ``distance`` (decreasing), ``distortion`` (increasing, already scaled to the full query), ``n_exact``.

        Vectors are visited by increasing D; the exact Δ_k of a vector is computed only when its proven
        lower bound is below the smallest Δ_k found so far (otherwise a vector with no larger D and no
        larger Δ_k exists, and it can never be better).

        Raises
        ------
        InvalidInputError
            If `g` is not a group index.
        """
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < len(self._subs):
            raise InvalidInputError(f"`g` must be a group index in 0..{len(self._subs) - 1}, got {fmt(g)}")
        cache = self.__dict__.setdefault("_frontiers", {})
        if g not in cache:
            prob = self._subs[g]
            t = prob.table
            D = t["distortion"] * self._scale
            lb = t["distance_lb"]
            order = np.lexsort((np.arange(D.size), lb, D))
            keep, dist, best, n_exact = [], [], math.inf, 0
            rest = order
            while rest.size:
                i = int(rest[0])
                d = prob.distance(i)
                n_exact += 1
                rest = rest[1:]
                if d < best:
                    keep.append(i)
                    dist.append(d)
                    best = d
                    rest = rest[lb[rest] < best]  # the others are dominated by vector i
            keep_arr = np.array(keep, dtype=np.int64)
            cache[g] = {"index": keep_arr, "aoi": t["aoi"][keep_arr], "distance": np.array(dist),
                        "distortion": D[keep_arr], "n_exact": n_exact}
        return cache[g]

    def search(self) -> dict:
        """Exact optimum of P1 over the product of the groups' frontiers.

        Returns
        -------
        dict
            ``aoi`` (tuple, length s), ``epsilon_c``, ``objective`` (nats), ``distance`` (Δ_k, the max over
            groups), ``distortion`` (D), ``n_thresholds``, ``n_exact`` (exact Δ_k computed), ``n_vectors``
            (Σ_g (A_max + 1)^{s_g} examined).  Ties: smallest leakage, then smallest D, then the smallest
            threshold.
        """
        fronts = [self.frontier(g) for g in range(len(self._subs))]
        thresholds = np.unique(np.concatenate([f["distance"] for f in fronts]))
        picks = []
        for f in fronts:  # first frontier point with Δ ≤ δ (Δ decreasing along the frontier)
            k = np.searchsorted(-f["distance"], -thresholds, side="left")
            picks.append(k)
        ok = np.all([k < len(f["distance"]) for k, f in zip(picks, fronts)], axis=0)
        D = np.zeros(thresholds.size)
        delta = np.zeros(thresholds.size)
        for k, f in zip(picks, fronts):
            kk = np.minimum(k, len(f["distance"]) - 1)
            D += f["distortion"][kk]
            delta = np.maximum(delta, f["distance"][kk])
        eps = self.min_epsilon(D)
        feas = ok & np.isfinite(eps)
        if not feas.any():  # pragma: no cover - A_t = 0 has D = 0 < l̄
            raise AssertionError("P1 has no feasible AoI vector; A_t = 0 always is")
        obj = np.full(thresholds.size, np.inf)
        obj[feas] = np.asarray(self.leakage_from(delta[feas], eps[feas]), dtype=float)
        j = int(np.lexsort((np.arange(thresholds.size), D, obj))[0])
        aoi = np.empty(self.cmc.n_sequences, dtype=np.int64)
        for g, k, f in zip(self.groups, picks, fronts):
            aoi[g] = f["aoi"][int(k[j])]
        return {"aoi": tuple(int(a) for a in aoi), "epsilon_c": float(eps[j]), "objective": float(obj[j]),
                "distance": float(delta[j]), "distortion": float(D[j]), "n_thresholds": int(thresholds.size),
                "n_exact": int(sum(f["n_exact"] for f in fronts)),
                "n_vectors": int(sum((self.max_age + 1) ** len(g) for g in self.groups))}

    def solve(self) -> Solution:
        """Solve P1 by the group search; ``optimal`` when every group's Δ_k is exact, else ``feasible``.

        Returns
        -------
        policyopt.result.Solution
            ``decision``: ``aoi`` (list, slots) and ``epsilon_c`` (nats); ``objective`` ε_S (nats);
            ``values``: ``mse``, ``max_mse``, ``distance``, ``distortion``, ``d_k``, ``sensitivity``,
            ``groups`` (sizes), ``n_vectors``, ``n_exact``.
        """
        start = time.perf_counter()
        res = self.search()
        mse = res["distortion"] + self.output_dim * 2.0 * (self.sensitivity / res["epsilon_c"]) ** 2
        if not mse <= self.max_mse * (1 + 1e-9):  # pragma: no cover - the closed-form ε_C meets (24)
            raise AssertionError(f"group search returned an infeasible point: MSE {mse!r} > {self.max_mse!r}")
        exact = self.distance_kind == "exact"
        sizes = [len(g) for g in self.groups]
        msg = (f"exact search over {len(sizes)} independent groups of sizes {sizes}: per-group (Δ_k, D) frontiers "
               f"({res['n_vectors']} group AoI vectors, exact Δ_k for {res['n_exact']}), "
               f"{res['n_thresholds']} thresholds on max Δ_k")
        if not exact:
            msg = "Δ_k of some groups is the spectral upper bound, not exact: optimal for that bound only; " + msg
        return Solution(
            status=Status.OPTIMAL if exact else Status.FEASIBLE, termination=Termination.COMPLETED,
            decision={"aoi": list(res["aoi"]), "epsilon_c": res["epsilon_c"]}, objective=res["objective"],
            bound=res["objective"] if exact else None, method="groups", backend="numpy", backend_version=np.__version__,
            wall_time_s=time.perf_counter() - start, message=msg,
            values={"mse": float(mse), "max_mse": self.max_mse, "distance": res["distance"],
                    "distortion": res["distortion"], "d_k": self.d_k, "sensitivity": self.sensitivity,
                    "bound_kind": self.bound, "distance_kind": self.distance_kind, "groups": sizes,
                    "n_vectors": res["n_vectors"], "n_exact": res["n_exact"]},
            kkt=None,
        )
