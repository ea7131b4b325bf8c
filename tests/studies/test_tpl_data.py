"""Temporal privacy leakage on an augmented chain Z (policyopt.studies.tpl_report): P_B is Z's time reversal, and the
leakage computed on Z bounds the exact leakage about X_t (the mixture argument), where the first-order chain of X
does not."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from policyopt.errors import InvalidInputError
from policyopt.models.hidden_regime import HiddenRegimeModel
from policyopt.models.order_chain import OrderChainModel
from policyopt.privacy.tpl_leakage import leakage_upper
from policyopt.studies.tpl_report import (
    MAX_TPL_Z_STATES,
    tpl_model_free,
    tpl_model_spec,
    z_state_count,
    z_temporal_matrices,
)

#: The order-2 chain of tests/_processes.py (continue_run 0.905, after_change 0.65): p(X_{t+1} | Z_t), z = 2·x_t + x_{t−1}.
ORDER2 = np.array([[[0.905, 0.095], [0.65, 0.35], [0.35, 0.65], [0.095, 0.905]]])
#: A slowly switching home/away regime, readings noisy given it (A: regime chain, B[r, x]).
HMM_A = np.array([[[0.97, 0.03], [0.05, 0.95]]])
HMM_B = np.array([[[0.9, 0.1], [0.2, 0.8]]])
BUDGETS = np.array([0.3, 0.8, 0.5, 1.2, 0.4])


def _stationary(P: np.ndarray) -> np.ndarray:
    """π by a linear solve of π(P − I) = 0, Σπ = 1 (independent of the GTH elimination the code uses)."""
    n = P.shape[0]
    M = np.vstack([(P - np.eye(n)).T, np.ones(n)])
    rhs = np.zeros(n + 1)
    rhs[-1] = 1.0
    return np.linalg.lstsq(M, rhs, rcond=None)[0]


def _models():
    order2 = OrderChainModel(ORDER2, 2, ["u"])
    hmm = HiddenRegimeModel(HMM_A, HMM_B, ["u"])
    return {"order:2": (order2, order2.observed), "hmm:2": (hmm, np.arange(4) // 2)}  # hmm: z = x·R + r


def exact_leakage(P: np.ndarray, g: np.ndarray, budgets: np.ndarray) -> np.ndarray:
    """Exact leakage about X_t of randomized-response releases of X_1..X_T (budget ε_s each), by enumeration.

    The chain Z (matrix `P`, stationary start) emits X_s = g(Z_s); release s is r_s = X_s with probability
    e^{ε_s}/(1 + e^{ε_s}), an ε_s-DP mechanism of X_s.  For every output sequence r ∈ {0,1}^T and every t,
    Pr(r | X_t = x) sums Pr(r, z_1..z_T) over all n^T hidden paths with g(z_t) = x; the leakage at t is
    max_r |ln Pr(r | X_t = 0) − ln Pr(r | X_t = 1)| (the quantity BPL/FPL/TPL bound, Cao et al. 2019, eq. (3)).
    """
    n, T = P.shape[0], budgets.size
    pi = _stationary(P)
    paths = np.array(list(itertools.product(range(n), repeat=T)))  # (n^T, T)
    w = pi[paths[:, 0]] * np.prod(P[paths[:, :-1], paths[:, 1:]], axis=1)  # Pr(z_1..z_T)
    x = g[paths]
    best = np.zeros(T)
    for r in itertools.product((0, 1), repeat=T):
        keep = np.where(x == np.array(r), np.exp(budgets), 1.0) / (1.0 + np.exp(budgets))  # randomized response
        joint = w * np.prod(keep, axis=1)
        for t in range(T):
            p = [joint[x[:, t] == v].sum() / w[x[:, t] == v].sum() for v in (0, 1)]
            best[t] = max(best[t], abs(np.log(p[0] / p[1])))
    return best


def x_chain_matrices(P: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P_B, P_F of the first-order chain of X fitted exactly to the stationary pair law of (X_t, X_{t+1})."""
    pi = _stationary(P)
    J = np.zeros((2, 2))
    for a in range(P.shape[0]):
        for b in range(P.shape[0]):
            J[g[a], g[b]] += pi[a] * P[a, b]
    return J.T / J.T.sum(axis=1, keepdims=True), J / J.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("name", ["order:2", "hmm:2"])
def test_p_b_is_the_time_reversal_of_z_under_its_stationary_law(name):
    model, _ = _models()[name]
    P_B, P_F = z_temporal_matrices(model)
    PZ = model.z_matrices()[0]
    np.testing.assert_array_equal(P_F[0], PZ)
    pi = _stationary(PZ)
    # Pr(Z_{t−1} = z', Z_t = z) both ways: π(z) P_B[z, z'] = π(z') P_F[z', z] (Zhang et al. 2024, eq. (1))
    np.testing.assert_allclose(pi[:, None] * P_B[0], (pi[:, None] * PZ).T, atol=1e-15)
    np.testing.assert_allclose(P_B[0].sum(axis=1), 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["order:2", "hmm:2"])
def test_the_leakage_on_z_bounds_the_exact_leakage_about_x_where_the_x_chain_does_not(name):
    model, g = _models()[name]
    P_B, P_F = z_temporal_matrices(model)
    exact = exact_leakage(P_F[0], g, BUDGETS)
    on_z = leakage_upper(P_B, P_F, BUDGETS).tpl
    assert np.all(exact <= on_z)  # the mixture argument: leakage about X_t ≤ leakage about Z_t
    xb, xf = x_chain_matrices(P_F[0], g)
    on_x = leakage_upper(xb, xf, BUDGETS).tpl
    # a first-order chain of X forgets what X remembers: Cao et al.'s bound for it is exceeded at the first release
    # (exact 1.774 vs 1.512 for the order-2 chain, 1.384 vs 0.894 for the hidden regime)
    assert exact[0] > on_x[0] + 0.2


def test_an_order_k_chain_leaks_as_much_as_basic_composition_on_z():
    # Z_t = (X_t, X_{t−1}): rows of P_B (and of P_F) differing in a reading have disjoint supports, so L(α) = α (Cao et
    # al. 2019, eq. (24) with q⁺ = 1, d⁺ = 0) and TPL_t = Σ ε at every t
    model, _ = _models()["order:2"]
    res = leakage_upper(*z_temporal_matrices(model), BUDGETS)
    np.testing.assert_allclose(res.tpl, BUDGETS.sum(), rtol=1e-12)
    assert np.all(res.tpl >= BUDGETS.sum() * (1 - 1e-15))


def test_sizes_of_z_and_what_is_refused():
    assert [z_state_count(s, 3) for s in ("chain", "order:2", "order:4", "hmm:2")] == [3, 9, 81, 6]
    assert tpl_model_spec(" Order:2 ", 3) == "order:2" and tpl_model_spec("auto", 12) == "auto"
    assert tpl_model_spec("hmm:6", 12) == "hmm:6"  # 72 ≤ 81 states
    with pytest.raises(InvalidInputError, match=r"--markov-model phase:24: a phase chain is time-inhomogeneous"):
        tpl_model_spec("phase:24", 3)
    with pytest.raises(InvalidInputError, match=r"--markov-model order:2 with 12 states gives an augmented chain Z of "
                       rf"144 states; .* beyond {MAX_TPL_Z_STATES} states: use --states 9 or fewer, or a lower order"):
        tpl_model_spec("order:2", 12)
    with pytest.raises(InvalidInputError, match=r"--markov-model hmm:4 with 40 states .* use --states 20 or fewer"):
        tpl_model_spec("hmm:4", 40)
    with pytest.raises(InvalidInputError, match=r"--markov-model 'order:7': `model` order:7: the order k must be"):
        tpl_model_spec("order:7", 2)
    with pytest.raises(InvalidInputError, match=r"`spec` must be chain, order:k or hmm:R for the leakage, got 'auto'"):
        z_state_count("auto", 3)
    with pytest.raises(InvalidInputError, match=r"`model` must be an order-k or hidden-regime model"):
        z_temporal_matrices(object())


def test_model_free_of_budgets_is_the_composition_of_the_releases():
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    budgets = [0.5, 0.25, 0.25, 1.0]
    mf = tpl_model_free(budgets, delta=1e-6, windows=(2, 24))
    assert mf["releases"] == 4 and mf["horizon"] == 4 and mf["epsilon_c"] == 1.0
    assert mf["epsilon_pure"] == 2.0  # Σ ε_t, exact in binary
    assert [w["w"] for w in mf["w_event"]] == [2] and mf["w_event"][0]["epsilon_pure"] == 1.25  # w = 24 ≥ T left out
    acc = PLDAccountant()  # dp_accounting directly, its default grid
    acc.compose(dp_accounting.ComposedDpEvent([dp_accounting.LaplaceDpEvent(1.0 / e) for e in budgets]))
    direct = acc.get_epsilon(1e-6)
    assert direct <= mf["epsilon"] <= min(direct * 1.001, 2.0)
