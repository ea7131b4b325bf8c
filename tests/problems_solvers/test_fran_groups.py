"""P1 of Luo et al. (2025) by the group search (formulation problems/fran_groups.py, back end solvers/fran_groups.py)
against full enumeration on the joint chain."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from policyopt.models.cmc import CouplingMarkovChain, two_binary_cmc
from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.problems.fran import FRANProblem
from policyopt.problems.fran_groups import GroupedFRANProblem, coupling_groups
from policyopt.registry import BACKENDS, get_solver
from policyopt.result import Status
from policyopt.solvers.fran_groups import GroupSearchSolver


def block_cmc(sizes, m, rng, stick=0.8):
    """Sticky random CMC whose coupling is block diagonal with the given group sizes."""
    s = sum(sizes)
    T = stick * np.eye(m) + (1 - stick) * rng.dirichlet(np.ones(m), size=(s, s, m))
    lam = np.zeros((s, s))
    o = 0
    for n in sizes:
        lam[o:o + n, o:o + n] = rng.dirichlet(np.ones(n), size=n)
        o += n
    perm = rng.permutation(s)  # groups need not be contiguous
    return CouplingMarkovChain(T[np.ix_(perm, perm)], lam[np.ix_(perm, perm)], np.arange(m, dtype=float))


CASES = [((2, 2), 2, 5, "mean"), ((2, 1), 3, 4, "sum"), ((1, 2, 1), 2, 4, "identity"), ((3, 1), 2, 4, "mean"),
         ((1, 1, 1), 2, 6, "mean"), ((2,), 2, 8, "mean")]


@pytest.mark.parametrize("sizes, m, A, query", CASES)
@pytest.mark.parametrize("bound", ["sound", "paper"])
def test_same_optimum_as_enumeration(sizes, m, A, query, bound):
    rng = np.random.default_rng(sum(sizes) * 100 + m * 10 + A)
    cmc = block_cmc(sizes, m, rng)
    assert sorted(len(g) for g in coupling_groups(cmc)) == sorted(sizes)
    d_max = float(FRANProblem(cmc, 1.0, query=query, max_age=A).table["distortion"].max())
    nontrivial = 0
    for frac in (0.3, 0.8, 1.5, 4.0):
        lbar = frac * d_max + 1e-3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = FRANProblem(cmc, lbar, query=query, max_age=A, bound=bound).solve("enumeration")
        got = GroupedFRANProblem(cmc, lbar, query=query, max_age=A, bound=bound).solve()
        assert got.status is Status.OPTIMAL and got.bound == got.objective
        assert got.objective == pytest.approx(ref.objective, rel=1e-12)
        assert got.decision["aoi"] == ref.decision["aoi"]
        assert got.decision["epsilon_c"] == pytest.approx(ref.decision["epsilon_c"], rel=1e-12)
        assert got.values["distance"] == pytest.approx(ref.values["distance"], rel=1e-12, abs=1e-15)
        assert got.values["mse"] <= lbar * (1 + 1e-9)
        nontrivial += any(got.decision["aoi"])
    assert nontrivial >= 1  # aging pays in at least one case, so the search did more than pick A = 0


@pytest.mark.slow
def test_sixty_four_sequences_in_pairs():
    # 32 coupled pairs of binary sequences (the paper's eq. (25) model per pair, random p, q, λ), A_max = 24:
    # 25^64 AoI vectors for enumeration; the group search examines 32 × 625.
    # p, q in [0.0625, 0.40625] and λ in [0.3125, 0.90625] are drawn on a grid of 1/32: binary fractions with few
    # digits keep the exact rational Δ_k of the frontier candidates cheap (the same search and checks; with 53-bit
    # uniform draws each pair's frontier cost ~10 s of Fraction arithmetic).  8 distinct pairs, each taken 4 times
    # (in shuffled places): the solver computes a sub-model's frontier once, so this costs 8 pairs' exact Δ_k; 32
    # distinct pairs are make bench's (bench_fran_groups.py, case 1).
    rng = np.random.default_rng(2026)
    distinct = [two_binary_cmc(*(rng.integers(2, 14, 2) / 32), rng.integers(10, 30) / 32) for _ in range(8)]
    pairs = [distinct[i] for i in rng.permutation(np.repeat(np.arange(8), 4))]
    s = 64
    T = np.broadcast_to(np.eye(2), (s, s, 2, 2)).copy()
    lam = np.zeros((s, s))
    for k, c in enumerate(pairs):
        sl = slice(2 * k, 2 * k + 2)
        T[sl, sl] = c.transitions
        lam[sl, sl] = c.coupling
    cmc = CouplingMarkovChain(T, lam, [0.0, 1.0])
    prob = GroupedFRANProblem(cmc, 0.02, max_age=24)
    sol = prob.solve()
    aoi = np.array(sol.decision["aoi"])
    assert sol.status is Status.OPTIMAL and aoi.shape == (64,) and aoi.max() <= 24 and aoi.any()
    # re-check the returned point independently, pair by pair on the two-sequence joint chains
    dist = max(c.aged_distance(aoi[2 * k:2 * k + 2]) for k, c in enumerate(pairs))
    D = sum(FRANProblem(c, 1.0, query="sum", max_age=24).table["distortion"][aoi[2 * k] * 25 + aoi[2 * k + 1]]
            for k, c in enumerate(pairs)) / s**2
    assert sol.values["distance"] == pytest.approx(dist, rel=1e-12)
    assert sol.values["distortion"] == pytest.approx(D, rel=1e-12)
    eps = sol.decision["epsilon_c"]
    assert D + 2 * (1 / s / eps) ** 2 <= 0.02 * (1 + 1e-9)  # (24): Δf = 1/s for the mean of 0/1 values
    assert sol.objective == pytest.approx(np.log1p(dist * np.expm1(prob.d_k * eps)), rel=1e-12)
    assert prob.d_k == 2  # the correlation degree k = 2


def test_errors():
    cmc = two_binary_cmc(0.3, 0.3, 0.5)
    with pytest.raises(InvalidInputError, match=r"`query` must be one of \('mean', 'sum', 'identity'\) .*got 'max'"):
        GroupedFRANProblem(cmc, 1.0, query="max")
    with pytest.raises(InvalidInputError, match="`bound` must be 'sound' or 'paper', got 'exact'"):
        GroupedFRANProblem(cmc, 1.0, bound="exact")
    with pytest.raises(InvalidInputError, match="`max_mse` must be a positive finite number"):
        GroupedFRANProblem(cmc, -1.0)
    with pytest.raises(InvalidInputError, match="`max_age` must be an integer ≥ 0"):
        GroupedFRANProblem(cmc, 1.0, max_age=-1)
    with pytest.raises(InvalidInputError, match="`cmc` must be a CouplingMarkovChain"):
        GroupedFRANProblem("x", 1.0)
    big = CouplingMarkovChain(np.full((2, 2), 0.5), np.full((5, 5), 0.2), n_sequences=5)
    with pytest.raises(InvalidInputError, match=r"group \[0, 1, 2, 3, 4\] of 5 coupled sequences has .* above 1048576"):
        GroupedFRANProblem(big, 1.0, max_age=24)
    flip = [[0.0, 1.0], [1.0, 0.0]]  # periodic: two independent flipping sequences
    with pytest.raises(InvalidModelError, match=r"group \[0\] has a periodic joint chain"):
        GroupedFRANProblem(CouplingMarkovChain(flip, np.eye(2), n_sequences=2), 1.0, max_age=2)
    with pytest.raises(InvalidInputError, match="`g` must be a group index in 0..0, got 3"):
        GroupSearchSolver().frontier(GroupedFRANProblem(cmc, 1.0, max_age=2), 3)
    with pytest.raises(InvalidInputError, match=r"`method` must be one of \('groups',\), got 'enumeration'"):
        GroupedFRANProblem(cmc, 1.0, max_age=2).solve("enumeration")
    with pytest.raises(InvalidInputError, match="`problem` must be a GroupedFRANProblem, got FRANProblem"):
        GroupSearchSolver().solve(FRANProblem(cmc, 1.0, max_age=2))


def test_search_is_a_registered_back_end():
    # the problem module declares the formulation; its solve() reaches the search by name through the registry
    assert BACKENDS["fran-groups"] == {"groups": "policyopt.solvers.fran_groups:GroupSearchSolver"}
    assert isinstance(get_solver("groups", "fran-groups"), GroupSearchSolver)
    import policyopt.problems.fran_groups as formulation

    assert not hasattr(formulation.GroupedFRANProblem, "search")
    assert not hasattr(formulation.GroupedFRANProblem, "frontier")
    prob = GroupedFRANProblem(block_cmc((2, 1), 2, np.random.default_rng(7)), 0.05, max_age=4)
    a, b = prob.solve(), GroupSearchSolver().solve(prob)
    assert a.decision == b.decision and a.objective == b.objective and a.values == b.values
    # the frontier of a group is the Pareto front of its (Δ_k, D) table: Δ_k strictly decreasing, D increasing
    solver = GroupSearchSolver()
    for g in range(len(prob.groups)):
        f = solver.frontier(prob, g)
        assert np.all(np.diff(f["distance"]) < 0) and np.all(np.diff(f["distortion"]) >= 0)
        assert solver.frontier(prob, g) is f  # cached per problem


def _strict_json(text):
    def bad(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=bad)


@pytest.mark.slow
def test_cli_sixty_four_sequences_max_age_24(tmp_path):
    # 64 sequences in 32 coupled pairs of the paper's eq. (25) model (p = q = 0.3 for every pair, λ = 0.5)
    s = 64
    lam = np.zeros((s, s))
    for k in range(0, s, 2):
        lam[k:k + 2, k:k + 2] = 0.5
    path = tmp_path / "cmc64.json"
    path.write_text(json.dumps({"transitions": [[0.7, 0.3], [0.3, 0.7]], "n_sequences": s, "coupling": lam.tolist(),
                                "state_values": [0.0, 1.0]}))
    exe = Path(sys.executable).with_name("policyopt")
    args = ["fran", "--model", str(path), "--max-mse", "0.02", "--max-age", "24", "--method", "groups"]
    proc = subprocess.run([str(exe), *args, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = _strict_json(proc.stdout)
    assert out["status"] == "optimal" and out["method"] == "groups" and out["n_sequences"] == 64
    assert out["groups"] == [2] * 32 and out["correlation_degree"] == 2 and out["baselines"] is None
    # every pair is the same model, so the pair optimum is the same for each (ties break to the same vector)
    pair = GroupedFRANProblem(two_binary_cmc(0.3, 0.3, 0.5), 1.0, max_age=24)
    assert len(out["aoi"]) == 64 and max(out["aoi"]) <= 24 and any(out["aoi"])
    assert out["mse"] <= 0.02 * (1 + 1e-9)
    assert out["epsilon_s"] == pytest.approx(math.log1p(out["distance"] * math.expm1(2 * out["epsilon_c"])), rel=1e-12)
    first = two_binary_cmc(0.3, 0.3, 0.5).aged_distance(out["aoi"][:2])
    assert out["distance"] >= first - 1e-15 and pair.groups[0].tolist() == [0, 1]
    bad = subprocess.run([str(exe), *args, "--query", "max"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and "`query` must be one of" in bad.stderr
