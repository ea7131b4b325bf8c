"""Back end of problem P1 of Luo et al. on independent groups: the exact search over the groups' frontiers.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy" (2025 preprint),
problem P1 eqs. (23)–(24).  The formulation, and why it separates over the connected components ("groups") of the
coupling graph, is :class:`policyopt.problems.fran_groups.GroupedFRANProblem`; this module solves it.

Search.  Both leakage bounds (sound and paper) increase in Δ_k and, through the smallest feasible
ε_C = Δf·sqrt(2d/(l̄ − D)), in D.  So only the (Δ_k^(g), D^(g)) Pareto frontier of each group matters
(computed with the group's exact Δ_k, pruned by its proven lower bounds), and for every threshold δ each
group takes its smallest-D frontier point with Δ ≤ δ: the optimum is the best over the thresholds
δ ∈ {frontier values}.  The cost is Σ_g (A_max + 1)^{s_g} instead of Π_g.

Registered as ``policyopt.registry.BACKENDS["fran-groups"]["groups"]``; reached by
``GroupedFRANProblem.solve()`` and ``policyopt fran --method groups``.
"""

from __future__ import annotations

import math
import time
import weakref

import numpy as np

from policyopt.errors import InvalidInputError, fmt
from policyopt.problems.fran_groups import GroupedFRANProblem
from policyopt.result import Solution, Status, Termination

__all__ = ["GroupSearchSolver"]


def _check_problem(problem) -> None:
    if not isinstance(problem, GroupedFRANProblem):
        raise InvalidInputError(f"`problem` must be a GroupedFRANProblem, got {fmt(problem)}")


class GroupSearchSolver:
    """Exact search of P1 (Luo et al. 2025, eqs. 23–24) over the (Δ_k, D) frontiers of independent groups.

    A fresh instance per solve (``policyopt.registry.get_solver("groups", "fran-groups")``); it caches each
    group's frontier for the problems it has seen (once per distinct group sub-model) and never mutates a problem.
    """

    name = "groups"
    BACKEND = "numpy"
    BOUNDS = ("sound", "paper")

    def __init__(self):
        self._frontiers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # problem -> {sub-model: frontier}

    def frontier(self, problem: GroupedFRANProblem, g: int) -> dict:
        """(Δ_k, D) Pareto frontier of group `g` of `problem`: ``index`` (into the group's table), ``aoi`` (n, s_g),
        ``distance`` (decreasing), ``distortion`` (increasing, already scaled to the full query), ``n_exact``.

        Vectors are visited by increasing D; the exact Δ_k of a vector is computed only when its proven
        lower bound is below the smallest Δ_k found so far (otherwise a vector with no larger D and no
        larger Δ_k exists, and it can never be better).

        Raises
        ------
        InvalidInputError
            If `problem` is not a GroupedFRANProblem or `g` is not a group index.
        """
        _check_problem(problem)
        subs = problem.subproblems
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < len(subs):
            raise InvalidInputError(f"`g` must be a group index in 0..{len(subs) - 1}, got {fmt(g)}")
        # Groups with the same sub-model (transitions, coupling, state values; the rest is the problem's) have the
        # same table and frontier: computed once (a deployment of identical pairs costs one pair's exact Δ_k).
        sub = subs[g].cmc
        key = tuple((a.shape, a.dtype.str, a.tobytes()) for a in
                    (np.asarray(sub.transitions), np.asarray(sub.coupling), np.asarray(sub.state_values)))
        cache = self._frontiers.setdefault(problem, {})
        if key not in cache:
            prob = subs[g]
            t = prob.table
            D = t["distortion"] * problem.distortion_scale
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
            cache[key] = {"index": keep_arr, "aoi": t["aoi"][keep_arr], "distance": np.array(dist),
                          "distortion": D[keep_arr], "n_exact": n_exact}
        return cache[key]

    def search(self, problem: GroupedFRANProblem) -> dict:
        """Exact optimum of P1 over the product of the groups' frontiers of `problem`.

        Returns
        -------
        dict
            ``aoi`` (tuple, length s), ``epsilon_c``, ``objective`` (nats), ``distance`` (Δ_k, the max over
            groups), ``distortion`` (D), ``n_thresholds``, ``n_exact`` (exact Δ_k computed), ``n_vectors``
            (Σ_g (A_max + 1)^{s_g} examined).  Ties: smallest leakage, then smallest D, then the smallest
            threshold.

        Raises
        ------
        InvalidInputError
            If `problem` is not a GroupedFRANProblem.
        """
        _check_problem(problem)
        fronts = [self.frontier(problem, g) for g in range(len(problem.subproblems))]
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
        eps = problem.min_epsilon(D)
        feas = ok & np.isfinite(eps)
        if not feas.any():  # pragma: no cover - A_t = 0 has D = 0 < l̄
            raise AssertionError("P1 has no feasible AoI vector; A_t = 0 always is")
        obj = np.full(thresholds.size, np.inf)
        obj[feas] = np.asarray(problem.leakage_from(delta[feas], eps[feas]), dtype=float)
        j = int(np.lexsort((np.arange(thresholds.size), D, obj))[0])
        aoi = np.empty(problem.cmc.n_sequences, dtype=np.int64)
        for g, k, f in zip(problem.groups, picks, fronts):
            aoi[g] = f["aoi"][int(k[j])]
        return {"aoi": tuple(int(a) for a in aoi), "epsilon_c": float(eps[j]), "objective": float(obj[j]),
                "distance": float(delta[j]), "distortion": float(D[j]), "n_thresholds": int(thresholds.size),
                "n_exact": int(sum(f["n_exact"] for f in fronts)),
                "n_vectors": int(sum((problem.max_age + 1) ** len(g) for g in problem.groups))}

    def solve(self, problem: GroupedFRANProblem) -> Solution:
        """Solve P1 by the group search; ``optimal`` when every group's Δ_k is exact, else ``feasible``.

        Parameters
        ----------
        problem : GroupedFRANProblem

        Returns
        -------
        policyopt.result.Solution
            ``decision``: ``aoi`` (list, slots) and ``epsilon_c`` (nats); ``objective`` ε_S (nats);
            ``values``: ``mse``, ``max_mse``, ``distance``, ``distortion``, ``d_k``, ``sensitivity``,
            ``groups`` (sizes), ``n_vectors``, ``n_exact``.

        Raises
        ------
        InvalidInputError
            If `problem` is not a GroupedFRANProblem.
        """
        start = time.perf_counter()
        res = self.search(problem)
        mse = res["distortion"] + problem.output_dim * 2.0 * (problem.sensitivity / res["epsilon_c"]) ** 2
        if not mse <= problem.max_mse * (1 + 1e-9):  # pragma: no cover - the closed-form ε_C meets (24)
            raise AssertionError(f"group search returned an infeasible point: MSE {mse!r} > {problem.max_mse!r}")
        exact = problem.distance_kind == "exact"
        sizes = [len(g) for g in problem.groups]
        msg = (f"exact search over {len(sizes)} independent groups of sizes {sizes}: per-group (Δ_k, D) frontiers "
               f"({res['n_vectors']} group AoI vectors, exact Δ_k for {res['n_exact']}), "
               f"{res['n_thresholds']} thresholds on max Δ_k")
        if not exact:
            msg = "Δ_k of some groups is the spectral upper bound, not exact: optimal for that bound only; " + msg
        return Solution(
            status=Status.OPTIMAL if exact else Status.FEASIBLE, termination=Termination.COMPLETED,
            decision={"aoi": list(res["aoi"]), "epsilon_c": res["epsilon_c"]}, objective=res["objective"],
            bound=res["objective"] if exact else None, method=self.name, backend="numpy", backend_version=np.__version__,
            wall_time_s=time.perf_counter() - start, message=msg,
            values={"mse": float(mse), "max_mse": problem.max_mse, "distance": res["distance"],
                    "distortion": res["distortion"], "d_k": problem.d_k, "sensitivity": problem.sensitivity,
                    "bound_kind": problem.bound, "distance_kind": problem.distance_kind, "groups": sizes,
                    "n_vectors": res["n_vectors"], "n_exact": res["n_exact"]},
            kkt=None,
        )
