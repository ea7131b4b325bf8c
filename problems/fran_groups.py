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
  ε_C = Δf·sqrt(2d/(l̄ − D)), in D, so only each group's (Δ_k^(g), D^(g)) Pareto frontier matters.  The
  exact search over those frontiers is the back end :class:`policyopt.solvers.fran_groups.GroupSearchSolver`
  (registered as ``BACKENDS["fran-groups"]["groups"]`` in :mod:`policyopt.registry`), reached by
  :meth:`GroupedFRANProblem.solve`; this module only declares the formulation.

Groups above 4096 snapshots use the spectral upper bound of
:class:`~policyopt.problems.fran.FRANProblem` (then Δ_k is bounded, not exact, and the status is
``feasible``).  Queries max/min are not separable and are refused.
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.models.cmc import CouplingMarkovChain
from policyopt.errors import InvalidInputError, InvalidModelError, check_int, fmt
from policyopt.privacy.fran import Query, paper_leakage, sound_leakage

from policyopt.problems.fran import AOI_VECTOR_LIMIT, FRANProblem, min_feasible_epsilon

__all__ = ["GroupedFRANProblem", "coupling_groups", "GROUP_METHODS"]

#: Back ends of :meth:`GroupedFRANProblem.solve` (``policyopt.registry.BACKENDS["fran-groups"]``).
GROUP_METHODS = ("groups",)

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
        check_int(max_age, "max_age", 0, "slots")
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

    @property
    def subproblems(self) -> tuple:
        """One :class:`~policyopt.problems.fran.FRANProblem` per group (query sum or identity, sound bound),
        in the order of :attr:`groups`; their tables give each group's Δ_k and unscaled D."""
        return tuple(self._subs)

    @property
    def distortion_scale(self) -> float:
        """c with D(A_t) = c Σ_g D^(g)(A_g): 1/s² for the mean, 1 for the sum and the identity."""
        return self._scale

    def __repr__(self) -> str:
        return (f"GroupedFRANProblem(s={self.cmc.n_sequences}, groups={[len(g) for g in self.groups]}, "
                f"max_mse={self.max_mse:g}, max_age={self.max_age}, bound={self.bound!r})")

    @property
    def distance_kind(self) -> str:
        """``"exact"`` when every group's Δ_k is exact, else ``"spectral"`` (an upper bound)."""
        return "exact" if all(p.distance_kind == "exact" for p in self._subs) else "spectral"

    def min_epsilon(self, distortion):
        """Smallest ε_C meeting (24) for aging distortion D: Δf·sqrt(2d/(l̄ − D)); ``inf`` if D ≥ l̄ (nats)."""
        return min_feasible_epsilon(distortion, self.max_mse, self.sensitivity, self.output_dim)

    def leakage_from(self, distance, epsilon_c):
        """ε_S from Δ_k and ε_C with the problem's bound (nats)."""
        if self.bound == "sound":
            return sound_leakage(distance, epsilon_c, self.d_k)
        return paper_leakage(distance, epsilon_c, self.d_k, warn=False)

    def solve(self, method: str = "groups", **options):
        """Solve P1 with the exact group search, a back end of :mod:`policyopt.solvers.fran_groups`.

        Parameters
        ----------
        method : {"groups"}
            The back end (registered in ``policyopt.registry.BACKENDS["fran-groups"]``).
        **options
            Passed to the back end's ``solve``.

        Returns
        -------
        policyopt.result.Solution
            ``optimal`` when every group's Δ_k is exact, else ``feasible``; see
            :meth:`policyopt.solvers.fran_groups.GroupSearchSolver.solve`.

        Raises
        ------
        InvalidInputError
            If `method` is not a registered back end of this problem.
        """
        if method not in GROUP_METHODS:
            raise InvalidInputError(f"`method` must be one of {GROUP_METHODS}, got {fmt(method)}")
        from policyopt.registry import get_solver  # by name: a problem never imports a solver

        return get_solver(method, "fran-groups").solve(self, **options)
