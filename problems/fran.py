"""Problem P1 of Luo et al. (2025): the FRAN design minimising the leakage under an MSE bound.

Source: Y. Luo, M. Zhang, J. Xu, J. Chen, J. Huang, "Correlated-Sequence Differential Privacy", preprint, 2025, eqs. (23)–(24), with the leakage of
Theorem 1 and the MSE (22):

    minimise over A_t ∈ {0..A_max}^s (slots, integer), ε_C > 0 (nats)
        ε_S(A_t, ε_C)                                  (23)
    subject to
        l_MSE(A_t, ε_C) = D(A_t) + d·2(Δf/ε_C)² ≤ l̄     (24)

where D(A_t) = E‖f(z) − f(x_t)‖² is the aging distortion on the stationary joint chain.
ε_S is the **sound** bound ln(1 + Δ_k(A_t)(e^{d(k)ε_C} − 1)) by default; ``bound="paper"``
uses Luo et al.'s (2025) eq. (15) (unsound, warns) and ``bound="exact"`` the exact leakage
(:func:`policyopt.privacy.fran.exact_leakage`, small systems, enumeration only).

Structure used by the solvers (all exact reductions):

* every bound increases with ε_C (the exact leakage too: Lap(b₂) is Lap(b₁) followed by the
  post-processing kernel (b₁/b₂)²δ + (1 − (b₁/b₂)²)Lap(b₂) for b₂ ≥ b₁), so for a fixed AoI vector
  the optimum is the smallest feasible ε_C = Δf·sqrt(2d/(l̄ − D(A_t))) (closed form);
* for fixed A_t the inner problem in ε_C is convex: the sound objective is
  log_sum_exp(ln(1 − Δ), ln Δ + d(k)ε_C) and (24) is 2dΔf²·ε_C^{−2} ≤ l̄ − D;
* the sound and paper objectives increase in both Δ_k and D, so an AoI vector dominated in
  (Δ_k, D) by another is never better;
* Δ_k(A_t) ≥ max_{i<j} (TV of the pair of aged entries i, j) (data processing), a cheap proven lower
  bound: :meth:`FRANProblem.search` is a branch and bound that computes the exact Δ_k only for
  vectors whose objective lower bound does not exceed the best value found; the cvxpy and
  SCIP back ends work on those candidates (:meth:`FRANProblem.candidates`).

The whole problem is not convex (integer A_t; Δ_k(A_t) has no convex extension): ``is_convex``
is False.

**Beyond the exact limit** (m^s > :data:`~policyopt.models.cmc.EXACT_SNAPSHOT_LIMIT` = 4096 snapshots, up to
:data:`~policyopt.models.cmc.SPECTRAL_SNAPSHOT_LIMIT`), ``distance="spectral"`` (chosen automatically)
replaces Δ_k(A_t) by the proven upper bound Δ̄(A_t) = spectral bound (55) of Zhang et al. (2024) on the joint
chain at min_i A^(i) (:meth:`~policyopt.models.cmc.CouplingMarkovChain.aged_distance_bound`, computed
matrix-free).  The sound objective increases in Δ_k, so the printed ε_S is still a proven upper
bound on the leakage of the returned design (up to the randomized certificate's failure
probability, :class:`~policyopt.models.cmc.SpectralCertificate`), but the design is optimal only for that
bound, not for the exact Δ_k: solvers then report status ``feasible``.  Only ``bound="sound"`` and
the linear queries (mean, sum, identity; D(A_t) from matrix-free lagged moments) are supported
there; ``paper`` and ``exact`` need the exact Δ_k and raise a clear error.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from policyopt.models.cmc import EXACT_SNAPSHOT_LIMIT, CouplingMarkovChain
from policyopt.errors import InfeasibleProblemError, InvalidInputError, check_int, fmt
from policyopt.privacy.fran import PaperBoundWarning, Query, exact_leakage, paper_leakage, sound_leakage
from policyopt.result import result_repr

__all__ = ["FRANProblem", "FRANEvaluation", "BOUNDS", "DISTANCES", "AOI_VECTOR_LIMIT", "min_feasible_epsilon"]

#: Leakage bounds P1 can minimise.
BOUNDS = ("sound", "paper", "exact")

#: How Δ_k is obtained: exact on the dense joint chain, or the matrix-free spectral upper bound.
DISTANCES = ("auto", "exact", "spectral")

#: Largest number (A_max + 1)^s of AoI vectors P1 enumerates.
AOI_VECTOR_LIMIT = 2 ** 20

_METHODS = {
    "enumeration": "EnumerationSolver",
    "cvxpy": "CvxpyInnerSolver",
    "scip": "ScipSolver",
}


def min_feasible_epsilon(distortion, max_mse: float, sensitivity, output_dim: int):
    """Smallest ε_C meeting the MSE bound (24) of Luo et al. (2025): Δf·sqrt(2d/(l̄ − D)); ``inf`` where D ≥ l̄.

    With the MSE (22), l_MSE = D + d·2(Δf/ε_C)² ≤ l̄ holds iff ε_C ≥ Δf·sqrt(2d/(l̄ − D)) (for D < l̄).
    Shared by :meth:`FRANProblem.min_epsilon` and
    :meth:`~policyopt.problems.fran_groups.GroupedFRANProblem.min_epsilon`.

    Parameters
    ----------
    distortion : float or array_like
        Aging distortion D(A_t), squared query units; any shape.
    max_mse : float
        l̄ > 0, squared query units.
    sensitivity : float
        Δf, the query's sensitivity (query units).
    output_dim : int
        d, the query's output dimension.

    Returns
    -------
    float or numpy.ndarray
        ε_C in nats: a float for a scalar `distortion`, else an array of its shape (``inf`` where D ≥ l̄).
    """
    D = np.asarray(distortion, dtype=float)
    slack = max_mse - D
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(slack > 0, sensitivity * np.sqrt(2.0 * output_dim / np.where(slack > 0, slack, 1.0)), np.inf)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class FRANEvaluation:
    """A candidate (A_t, ε_C) of P1 evaluated with numpy alone.

    Attributes
    ----------
    aoi : tuple of int
        AoI vector, slots.
    epsilon_c : float
        Laplace level, nats.
    leakage : float
        ε_S with the problem's bound, nats.
    mse : float
        l_MSE (22), squared query units.
    feasible : bool
        ``mse ≤ max_mse·(1 + 1e-9)``.
    distance : float
        Δ_k(Λ, A_t) (Definition 9), or its spectral upper bound when the problem's
        ``distance_kind`` is ``"spectral"``.
    distortion : float
        Aging part D(A_t) of the MSE.
    """

    aoi: tuple
    epsilon_c: float
    leakage: float
    mse: float
    feasible: bool
    distance: float
    distortion: float

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


class FRANProblem:
    """Problem P1 (23)–(24) of Luo et al. (2025) on a coupling Markov chain.

    Parameters
    ----------
    cmc : CouplingMarkovChain
        The model (joint chain with m^s ≤ 4096 snapshots for exact distances, up to
        :data:`~policyopt.models.cmc.SPECTRAL_SNAPSHOT_LIMIT` with the spectral bound).
    max_mse : float
        l̄ > 0, bound on l_MSE (squared query units).
    query : Query or str, keyword-only
        f (default ``"mean"``).
    max_age : int, keyword-only
        A_max ≥ 0: every A^(i) in 0..A_max slots (default 10).
    bound : {"sound", "paper", "exact"}, keyword-only
        Leakage minimised (default ``"sound"``); ``"paper"`` issues a :class:`PaperBoundWarning`.
    neighbours : {"one", "any"}, keyword-only
        Which pairs Δ_k maximises over (:meth:`CouplingMarkovChain.aged_distance`).
    distance : {"auto", "exact", "spectral"}, keyword-only
        ``"exact"``: Δ_k on the dense joint chain (m^s ≤ 4096).  ``"spectral"``: the matrix-free
        upper bound Δ_joint-spectral(min A_t) (see the module notes; sound bound and linear queries
        only; it bounds Δ_k for both kinds of `neighbours`).  ``"auto"`` (default): exact up to
        4096 snapshots, spectral above.  The choice is kept in :attr:`distance_kind`.

    Raises
    ------
    InvalidInputError
        If `max_mse` is not a positive finite number, `max_age` not an integer ≥ 0, `bound`,
        `neighbours` or `distance` unknown, the query constant, there are more than
        :data:`AOI_VECTOR_LIMIT` AoI vectors, or the spectral distance is combined with a bound
        other than ``"sound"`` or a non-linear query.
    InvalidModelError
        If the joint chain exceeds the limit of the distance kind or is reducible.

    Notes
    -----
    ``solve(method)`` with ``"enumeration"`` (all AoI vectors, closed-form ε_C), ``"cvxpy"``
    (convex inner problem per candidate AoI vector) or ``"scip"`` (Pyomo + SCIP mixed-integer
    model); the problem is never mutated (the per-vector table is computed once and cached).

    References
    ----------
    Luo et al. (2025): eqs. (9)–(10), (13)–(15), (22)–(24).

    Examples
    --------
    >>> from policyopt.models.cmc import two_binary_cmc
    >>> prob = FRANProblem(two_binary_cmc(0.3, 0.3, 0.5), 0.8, max_age=2)
    >>> prob.evaluate((2, 2), 1.0).feasible
    True
    """

    variables = ("aoi", "epsilon_c")
    integrality = {"aoi": "integer", "epsilon_c": "continuous"}
    is_convex = False
    objective = "ε_S(A_t, ε_C), the CSDP leakage bound (nats), eq. (23)"
    constraints = ("l_MSE(A_t, ε_C) ≤ l̄ (24)", "A^(i) ∈ {0..A_max}", "ε_C > 0")

    def __init__(self, cmc: CouplingMarkovChain, max_mse, *, query="mean", max_age: int = 10,
                 bound: str = "sound", neighbours: str = "one", distance: str = "auto"):
        if not isinstance(cmc, CouplingMarkovChain):
            raise InvalidInputError(f"`cmc` must be a CouplingMarkovChain, got {fmt(cmc)}")
        if isinstance(max_mse, bool) or not isinstance(max_mse, (int, float, np.integer, np.floating)) or not (
            math.isfinite(max_mse) and max_mse > 0
        ):
            raise InvalidInputError(f"`max_mse` must be a positive finite number (squared units), got {fmt(max_mse)}")
        check_int(max_age, "max_age", 0, "slots")
        if bound not in BOUNDS:
            raise InvalidInputError(f"`bound` must be one of {BOUNDS}, got {fmt(bound)}")
        if neighbours not in ("one", "any"):
            raise InvalidInputError(f"`neighbours` must be 'one' or 'any', got {fmt(neighbours)}")
        if distance not in DISTANCES:
            raise InvalidInputError(f"`distance` must be one of {DISTANCES}, got {fmt(distance)}")
        self.cmc = cmc
        self.max_mse = float(max_mse)
        self.query = query if isinstance(query, Query) else Query(query)
        self.max_age = int(max_age)
        self.bound = bound
        self.neighbours = neighbours
        n_vec = (self.max_age + 1) ** cmc.n_sequences
        if n_vec > AOI_VECTOR_LIMIT:
            raise InvalidInputError(
                f"`max_age`={self.max_age} gives (A_max + 1)^s = {self.max_age + 1}^{cmc.n_sequences} = {n_vec} AoI "
                f"vectors, above the enumeration limit {AOI_VECTOR_LIMIT}; use a smaller `max_age`, or, when the "
                "sequences form independent coupled groups, the group search (GroupedFRANProblem, `--method groups`)"
            )
        if distance == "auto":
            distance = "exact" if cmc.n_snapshots <= EXACT_SNAPSHOT_LIMIT else "spectral"
        #: "exact" or "spectral": how Δ_k of an AoI vector is obtained.
        self.distance_kind = distance
        if distance == "spectral":
            where = (f"the joint chain has m^s = {cmc.n_snapshots} snapshots, above the exact limit "
                     f"{EXACT_SNAPSHOT_LIMIT}" if cmc.n_snapshots > EXACT_SNAPSHOT_LIMIT else "distance='spectral'")
            if bound != "sound":
                raise InvalidInputError(
                    f"`bound`={bound!r} needs the exact Δ_k but {where}: only bound='sound' is available there, "
                    "with the spectral upper bound on Δ_k"
                )
            if self.query._func is not None or self.query.name not in ("mean", "sum", "identity"):
                raise InvalidInputError(
                    f"`query`={self.query.name!r} needs the exact aged joint law for its distortion but {where}: "
                    "only the linear queries mean, sum and identity are supported there"
                )
            cmc.spectral_certificate()  # validates the size limit and irreducibility early
        else:
            cmc.joint_stationary  # validates irreducibility and the size limit early
        self.sensitivity = self.query.sensitivity(cmc)
        self.d_k = self.query.k_sensitivity(cmc)
        one = cmc.state_values[np.zeros((1, cmc.n_sequences), dtype=np.int64)]
        self.output_dim = int(self.query(one).shape[1])
        if bound == "paper":
            warnings.warn("P1 with Luo et al.'s (2025) bound (15): not an upper bound of the leakage; use bound='sound'",
                          PaperBoundWarning, stacklevel=2)
        if bound == "exact" and self.output_dim != 1:
            raise InvalidInputError(f"`bound`='exact' needs a scalar query, `{self.query.name}` has d = {self.output_dim}")

    def __repr__(self) -> str:
        return (f"FRANProblem(s={self.cmc.n_sequences}, m={self.cmc.n_states}, max_mse={self.max_mse:g}, "
                f"max_age={self.max_age}, bound={self.bound!r}, distance={self.distance_kind!r})")

    # ------------------------------------------------------------- per-vector data
    @cached_property
    def table(self) -> dict:
        """Per AoI vector: ``aoi`` (K, s) int, ``distortion`` D (K,), ``distance_lb`` (K,).

        K = (A_max + 1)^s vectors in lexicographic order.  ``distance_lb`` is the proven lower
        bound max_i lb[i, A^(i)] ≤ Δ_k(A_t) of
        :meth:`~policyopt.models.cmc.CouplingMarkovChain.single_sequence_distance` (one-entry neighbours;
        also valid for ``neighbours="any"``, which is larger).  D uses lagged moments of the joint
        chain for the linear queries (sum, mean, identity) and the aged joint law otherwise.
        With ``distance_kind == "spectral"``, ``distance_lb`` holds the distance the objective uses,
        the spectral upper bound Δ̄(min A) (so the branch and bound's lower bound is exact).
        """
        cmc, s = self.cmc, self.cmc.n_sequences
        vecs = np.indices((self.max_age + 1,) * s, dtype=np.int64).reshape(s, -1).T.copy()  # lexicographic
        if self.distance_kind == "spectral":
            pass
        elif s == 1:
            lb = cmc.single_sequence_distance(self.max_age)[0, vecs[:, 0]]
        else:
            lb2 = cmc.pairwise_distance(self.max_age)
            lb = np.zeros(len(vecs))
            for i in range(s):
                for j in range(i + 1, s):
                    lb = np.maximum(lb, lb2[i, j, vecs[:, i], vecs[:, j]])
        if self.distance_kind == "spectral":
            # proven upper bound Δ̄(min A) (CouplingMarkovChain.aged_distance_bound): in this mode the
            # objective's distance itself, so its "lower bound" is exact
            lb = self._spectral_distances()[vecs.min(axis=1)]
        G = self._linear_weights()
        if G is not None:
            dstn = self._linear_distortion(vecs)
        else:
            from policyopt.privacy.fran import distortion

            dstn = np.array([distortion(cmc, self.query, v) for v in vecs])
        for a in (vecs, dstn, lb):
            a.setflags(write=False)
        return {"aoi": vecs, "distortion": dstn, "distance_lb": lb}

    def _linear_weights(self):
        """Weights G with D = Σ_ij G_ij E[(g_i(z) − g_i(x_t))(g_j(z) − g_j(x_t))] for linear queries, else None."""
        s = self.cmc.n_sequences
        if self.query._func is not None:
            return None
        return {"sum": np.ones((s, s)), "mean": np.ones((s, s)) / s ** 2, "identity": np.eye(s)}.get(self.query.name)

    @cached_property
    def _moments(self) -> np.ndarray:
        return self.cmc.lagged_moments(self.cmc.state_values, self.max_age)

    def _linear_distortion(self, vecs) -> np.ndarray:
        """D(A_t) of the linear queries from lagged moments, for AoI vectors `vecs` (n, s).

        D = Σ_ij G_ij F_ij[A_i, A_j] with F_ij[a, b] = E[z_i z_j] − E[z_i x_j] − E[x_i z_j] + E[x_i x_j]
        tabulated once per pair (i, j) over the ages 0..max(A) (lagged moments K), then gathered.
        """
        G, K, s = self._linear_weights(), self._moments, self.cmc.n_sequences
        vecs = np.asarray(vecs, dtype=np.int64)
        n_age = int(vecs.max()) + 1 if vecs.size else 1
        a = np.arange(n_age)[:, None]
        b = np.arange(n_age)[None, :]
        out = np.zeros(len(vecs))
        for i in range(s):
            for j in range(s):
                if G[i, j] == 0:
                    continue
                EZZ = np.where(a >= b, K[i, j, np.clip(a - b, 0, None)], K[j, i, np.clip(b - a, 0, None)])
                F = (EZZ - K[i, j, a] - K[j, i, b] + K[i, j, 0]) * G[i, j]
                out += F[vecs[:, i], vecs[:, j]]
        return np.maximum(0.0, out)

    def _spectral_distances(self) -> np.ndarray:
        """Δ̄(a) for a = 0..A_max: the joint chain's matrix-free spectral bound (55), shape (A_max + 1,)."""
        return np.asarray(self.cmc.spectral_certificate().bound(np.arange(self.max_age + 1)), dtype=float)

    def distance(self, index: int) -> float:
        """Δ_k of the AoI vector ``table["aoi"][index]`` (cached per index).

        Exact, or with ``distance_kind == "spectral"`` the proven upper bound Δ̄(min A) of
        :meth:`~policyopt.models.cmc.CouplingMarkovChain.aged_distance_bound`.

        Raises
        ------
        InvalidInputError
            If `index` is out of range.
        """
        n = len(self.table["aoi"])
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < n:
            raise InvalidInputError(f"`index` must be an integer in 0..{n - 1}, got {fmt(index)}")
        cache = self.__dict__.setdefault("_distance_cache", {})
        if int(index) not in cache:
            vec = self.table["aoi"][int(index)]
            if self.distance_kind == "spectral":
                cache[int(index)] = float(self._spectral_distances()[int(vec.min())])
            else:
                cache[int(index)] = self.cmc.aged_distance(vec, self.neighbours)
        return cache[int(index)]

    def search(self, bound: str | None = None) -> dict:
        """Exhaustive branch and bound over AoI vectors for the sound or paper bound.

        Vectors are visited by increasing *lower* bound of their objective (the bound evaluated
        at ``distance_lb`` and the smallest feasible ε_C, both proven); the exact Δ_k is computed
        only while that lower bound does not exceed the best objective found, so the result is
        the one full enumeration gives (same tie-break: leakage, then D, then lexicographic AoI).

        Parameters
        ----------
        bound : {"sound", "paper"}, optional
            Default: the problem's bound.

        Returns
        -------
        dict
            ``index`` (winner), ``objective`` (nats), ``epsilon_c``, ``evaluated`` (indices whose
            exact Δ_k was computed, sorted), ``n_feasible``.

        Raises
        ------
        InvalidInputError
            For ``bound="exact"`` (not a function of Δ_k).
        InfeasibleProblemError
            If no AoI vector has a finite smallest ε_C (l̄ so small that ε_C overflows a float).
        """
        bound = self.bound if bound is None else bound
        if bound not in ("sound", "paper"):
            raise InvalidInputError(f"`bound` must be 'sound' or 'paper' for the search, got {fmt(bound)}")
        if bound != "sound" and self.distance_kind == "spectral":
            raise InvalidInputError(f"`bound`={bound!r} needs the exact Δ_k; this problem uses the spectral upper "
                                    "bound on Δ_k (only 'sound' is available)")
        t = self.table
        eps = self.min_epsilon(t["distortion"])
        feas = np.flatnonzero(np.isfinite(eps))
        if feas.size == 0:  # only when the ε_C that l̄ needs overflows a float (A_t = 0 is feasible in exact arithmetic)
            raise InfeasibleProblemError(
                f"`max_mse` = {self.max_mse:g} is too small: the Laplace level ε_C it needs overflows a float for every "
                "AoI vector (no finite design)")
        lb_obj = np.asarray(self.leakage_from(t["distance_lb"][feas], eps[feas], bound), dtype=float).reshape(-1)
        order = np.argsort(lb_obj, kind="stable")
        best, visited, objs = math.inf, [], []
        for j in order:
            if lb_obj[j] > best * (1 + 1e-9) + 1e-300:
                break
            i = int(feas[j])
            obj = float(self.leakage_from(self.distance(i), eps[i], bound))
            visited.append(i)
            objs.append(obj)
            best = min(best, obj)
        visited_arr, objs_arr = np.array(visited), np.array(objs)
        k = int(np.lexsort((visited_arr, t["distortion"][visited_arr], objs_arr))[0])
        i = int(visited_arr[k])
        return {"index": i, "objective": float(objs_arr[k]), "epsilon_c": float(eps[i]),
                "evaluated": np.sort(visited_arr), "n_feasible": int(feas.size)}

    def candidates(self, bound: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """AoI vectors that can be optimal for the sound / paper bound, with their exact Δ_k.

        Those visited by :meth:`search` (every other vector has a proven objective lower bound
        above the optimum) and not dominated in (Δ_k, D) by another visited one (both bounds
        increase in Δ_k and, through the smallest feasible ε_C, in D).

        Returns
        -------
        (indices, distances) : numpy.ndarray (n,) int, numpy.ndarray (n,) float
        """
        res = self.search(bound)
        idx = res["evaluated"]
        dist = np.array([self.distance(int(i)) for i in idx])
        D = self.table["distortion"][idx]
        order = np.lexsort((dist, D))
        keep, best = [], math.inf
        for o in order:
            if dist[o] < best:
                keep.append(o)
                best = dist[o]
        keep = np.array(keep, dtype=np.int64)
        return idx[keep], dist[keep]

    def min_epsilon(self, distortion):
        """Smallest ε_C meeting (24) for aging distortion D: Δf·sqrt(2d/(l̄ − D)); ``inf`` if D ≥ l̄.

        Parameters
        ----------
        distortion : float or array_like

        Returns
        -------
        float or numpy.ndarray, nats.
        """
        return min_feasible_epsilon(distortion, self.max_mse, self.sensitivity, self.output_dim)

    def mse(self, distortion, epsilon_c):
        """l_MSE (22) = D + d·2(Δf/ε_C)² (squared query units)."""
        return np.asarray(distortion, dtype=float) + self.output_dim * 2.0 * (self.sensitivity / np.asarray(epsilon_c, dtype=float)) ** 2

    def leakage_from(self, distance, epsilon_c, bound: str | None = None):
        """ε_S from Δ_k and ε_C with the sound (default: the problem's) or paper bound, nats.

        Raises
        ------
        InvalidInputError
            If `bound` is ``"exact"`` (it needs the AoI vector: use :meth:`evaluate`).
        """
        bound = self.bound if bound is None else bound
        if bound == "sound":
            return sound_leakage(distance, epsilon_c, self.d_k)
        if bound == "paper":
            return paper_leakage(distance, epsilon_c, self.d_k, warn=False)
        raise InvalidInputError(f"`bound`={bound!r} cannot be computed from Δ_k alone; use evaluate()")

    def _check_aoi(self, aoi) -> tuple:
        arr = np.asarray(aoi)
        s = self.cmc.n_sequences
        if arr.shape != (s,) or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 0):
            raise InvalidInputError(f"`aoi` must be {s} integer ages ≥ 0 (slots), got {fmt(aoi)}")
        return tuple(int(a) for a in arr)

    def evaluate(self, aoi, epsilon_c, bound: str | None = None) -> FRANEvaluation:
        """Evaluate a candidate (A_t, ε_C) with numpy alone.

        Parameters
        ----------
        aoi : array_like of int, shape (s,)
        epsilon_c : float
            ε_C > 0, nats.
        bound : str, optional
            Override the problem's bound for this evaluation.

        Returns
        -------
        FRANEvaluation

        Raises
        ------
        InvalidInputError
            If `aoi` or `epsilon_c` is malformed; with the spectral distance, if `bound` is not
            ``"sound"`` or an age exceeds ``max_age``.
        """
        aoi = self._check_aoi(aoi)
        if isinstance(epsilon_c, bool) or not isinstance(epsilon_c, (int, float, np.integer, np.floating)) or not (
            math.isfinite(epsilon_c) and epsilon_c > 0
        ):
            raise InvalidInputError(f"`epsilon_c` must be finite and > 0 (nats), got {fmt(epsilon_c)}")
        bound = self.bound if bound is None else bound
        if self.distance_kind == "spectral":
            if bound != "sound":
                raise InvalidInputError(f"`bound`={bound!r} needs the exact Δ_k; this problem uses the spectral "
                                        "upper bound on Δ_k (only 'sound' is available)")
            if max(aoi) > self.max_age:
                raise InvalidInputError(f"`aoi` ages must be ≤ max_age={self.max_age} with the spectral distance, "
                                        f"got {fmt(list(aoi))}")
            D = float(self._linear_distortion(np.array([aoi], dtype=np.int64))[0])
            dist = float(self._spectral_distances()[min(aoi)])
            leak = float(self.leakage_from(dist, float(epsilon_c), bound))
            m = float(self.mse(D, float(epsilon_c)))
            return FRANEvaluation(aoi, float(epsilon_c), leak, m, m <= self.max_mse * (1 + 1e-9), dist, D)
        W = self.cmc.aged_joint(aoi)
        from policyopt.privacy.fran import distortion

        D = distortion(self.cmc, self.query, aoi, joint=W)
        dist = self.cmc.aged_distance(aoi, self.neighbours)
        if bound == "exact":
            leak = exact_leakage(self.cmc, self.query, aoi, float(epsilon_c))
        else:
            leak = float(self.leakage_from(dist, float(epsilon_c), bound))
        m = float(self.mse(D, float(epsilon_c)))
        return FRANEvaluation(aoi, float(epsilon_c), leak, m, m <= self.max_mse * (1 + 1e-9), dist, D)

    def solve(self, method: str = "enumeration", **options):
        """Solve P1 with a back end of ``policyopt.solvers.fran_solvers``; never mutates the problem.

        Parameters
        ----------
        method : {"enumeration", "cvxpy", "scip"}
        **options
            Passed to the back end's ``solve``.

        Returns
        -------
        policyopt.result.Solution

        Raises
        ------
        InvalidInputError
            If `method` is unknown or does not support the problem's bound.
        """
        if method not in _METHODS:
            raise InvalidInputError(f"`method` must be one of {tuple(_METHODS)}, got {fmt(method)}")
        from policyopt.registry import get_solver  # by name: a problem never imports a solver

        return get_solver(method, "fran").solve(self, **options)
