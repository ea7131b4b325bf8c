"""Augmented-state Markov models: phase chains, order-k chains, hidden regimes (Δ_Z of Zhang et al. 2024, eq. (12)).

The fast Δ_Z paths are checked against a brute force written straight from the definitions (eq. (1) reversed
matrices from a stationary distribution solved by mpmath, explicit t-step products, all pairs of states — same-phase
pairs for phase chains) in high precision, so that values far below 1e-300 are compared as logarithms.
"""

from __future__ import annotations

import itertools

import mpmath as mp
import numpy as np
import pytest

from policyopt.errors import InvalidInputError, InvalidModelError
from policyopt.models.empirical import simulate_chain_states, user_streams
from policyopt.models.hidden_regime import HiddenRegimeModel, fit_hidden_regime
from policyopt.models.markov import Population
from policyopt.models.markov_model import ChainModel, MarkovModelSpec, fit_markov_model
from policyopt.models.model_fitting import dirichlet_rows, draw_user_rows
from policyopt.models.order_chain import OrderChainModel, fit_order_chain
from policyopt.models.phase_chain import PhaseChainModel, fit_phase_chain

AGES = np.arange(0, 51)


# ------------------------------------------------------------------------------------------------ brute force


def _mp_stationary(P):
    """Stationary row vector of a stochastic matrix (lists of mpf): solve π(P − I) = 0, Σπ = 1."""
    n = len(P)
    A = mp.matrix(n, n)
    for i in range(n):
        for j in range(n):
            A[i, j] = P[j][i] - (1 if i == j else 0)
    for j in range(n):
        A[n - 1, j] = mp.mpf(1)
    b = mp.matrix(n, 1)
    b[n - 1] = mp.mpf(1)
    x = mp.lu_solve(A, b)
    return [x[i] for i in range(n)]


def _mp(M):
    """Rows of a float matrix as exactly stochastic mpf rows (each divided by its sum at the working precision).

    Float rows sum to 1 only within ~1e-16; left so, the rows of P^t would differ by ~1e-16·t and swamp a Δ(t) of 1e-30.
    """
    rows = [[mp.mpf(float(v)) for v in row] for row in np.asarray(M)]
    return [[v / mp.fsum(row) for v in row] for row in rows]


def _matmul(A, B):
    n, m, p = len(A), len(B), len(B[0])
    return [[mp.fsum(A[i][k] * B[k][j] for k in range(m)) for j in range(p)] for i in range(n)]


def _max_pair_tv(M, states):
    best = mp.mpf(0)
    for i, j in itertools.combinations(states, 2):
        best = max(best, mp.fsum(abs(M[i][k] - M[j][k]) for k in range(len(M[i]))) / 2)
    return best


def _log(v):
    return -np.inf if v == 0 else float(mp.log(v))


def brute_homogeneous(PZs, ts, dps=40):
    """max over users of ln Δ(t) of homogeneous chains P_Z: reversed matrix (1), powers, all pairs (12)."""
    best = np.full(len(ts), -np.inf)
    with mp.workdps(dps):
        for PZ in PZs:
            P = _mp(PZ)
            n = len(P)
            pi = _mp_stationary(P)
            Ph = [[pi[j] * P[j][i] / pi[i] for j in range(n)] for i in range(n)]  # eq. (1)
            M = [[mp.mpf(int(i == j)) for j in range(n)] for i in range(n)]
            for t in range(max(ts) + 1):
                if t in ts:
                    k = list(ts).index(t)
                    best[k] = max(best[k], _log(_max_pair_tv(M, range(n))))
                M = _matmul(M, Ph)
    return best


def brute_phase(stacks, ts, dps=40):
    """max over users and end phases of ln Δ_Z(t) of phase chains, from explicit reversed matrices per phase."""
    best = np.full(len(ts), -np.inf)
    with mp.workdps(dps):
        for Ps in stacks:
            P = [_mp(m) for m in Ps]
            n_ph, K = len(P), len(P[0])
            M = P[0]
            for phi in range(1, n_ph):
                M = _matmul(M, P[phi])
            mu = [_mp_stationary(M)]
            for phi in range(1, n_ph):
                mu.append([mp.fsum(mu[-1][y] * P[phi - 1][y][x] for y in range(K)) for x in range(K)])
            Ph = [
                [[mu[phi - 1][y] * P[phi - 1][y][x] / mu[phi][x] for y in range(K)] for x in range(K)]
                for phi in range(n_ph)
            ]  # P̂_φ(x, y) = μ_{φ−1}(y) P_{φ−1}(y, x) / μ_φ(x)  (phase −1 is phase P − 1)
            for end in range(n_ph):
                R = [[mp.mpf(int(i == j)) for j in range(K)] for i in range(K)]
                for t in range(max(ts) + 1):
                    if t in ts:
                        k = list(ts).index(t)
                        best[k] = max(best[k], _log(_max_pair_tv(R, range(K))))  # same-phase pairs only
                    R = _matmul(R, Ph[(end - t) % n_ph])
    return best


def order_z_matrix(cond, K, k):
    """P_Z of an order-k chain built by enumerating histories (independent of OrderChainModel.z_matrices)."""
    n = K**k
    PZ = np.zeros((n, n))
    for hist in itertools.product(range(K), repeat=k):  # hist = (x_t, x_{t−1}, …, x_{t−k+1})
        z = sum(h * K ** (k - 1 - i) for i, h in enumerate(hist))
        for y in range(K):
            new = (y,) + hist[:-1]
            PZ[z, sum(h * K ** (k - 1 - i) for i, h in enumerate(new))] = cond[z, y]
    return PZ


def hmm_z_matrix(A, B):
    R, K = B.shape
    PZ = np.zeros((K * R, K * R))
    for x, r, x2, r2 in itertools.product(range(K), range(R), range(K), range(R)):
        PZ[x * R + r, x2 * R + r2] = A[r, r2] * B[r2, x2]
    return PZ


def _random_stochastic(rng, shape):
    m = rng.random(shape) + 0.05
    return m / m.sum(axis=-1, keepdims=True)


def _near_rank_one(rng, shape, eta):
    """Rows (1 − η)·v + η·q: rows differ by O(η), so Δ(t) ≈ η^t underflows quickly."""
    v = _random_stochastic(rng, shape[-1:])
    return (1 - eta) * v + eta * _random_stochastic(rng, shape)


def _users(n):
    return [f"u{i}" for i in range(n)]


# ------------------------------------------------------------------------------------------------ spec parsing


@pytest.mark.parametrize(
    "text, kind, param, canonical",
    [
        ("chain", "chain", None, "chain"),
        ("phase:24", "phase", 24, "phase:24"),
        (" Phase : 168 ", "phase", 168, "phase:168"),
        ("order:1", "order", 1, "order:1"),
        ("order:4", "order", 4, "order:4"),
        ("hmm:2", "hmm", 2, "hmm:2"),
        ("HMM:6", "hmm", 6, "hmm:6"),
        ("auto", "auto", None, "auto"),
    ],
)
def test_spec_parses_every_form(text, kind, param, canonical):
    spec = MarkovModelSpec.parse(text)
    assert (spec.kind, spec.param, str(spec)) == (kind, param, canonical)
    assert MarkovModelSpec.parse(str(spec)) == spec  # round trip


def test_spec_phase_takes_the_default_period_and_spec_instances_pass_through():
    assert str(MarkovModelSpec.parse("phase", default_period=24)) == "phase:24"
    assert MarkovModelSpec.parse("phase:7", default_period=24).param == 7  # explicit P wins
    spec = MarkovModelSpec("order", 2)
    assert MarkovModelSpec.parse(spec) is spec
    assert str(MarkovModelSpec.parse(MarkovModelSpec("phase"), default_period=168)) == "phase:168"


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        ("phase", {}, r"'phase' needs a period: give phase:P .* or the slot length"),
        ("phase:1", {}, r"period P must be an integer ≥ 2"),
        ("phase:0", {}, r"period P must be an integer ≥ 2"),
        ("phase:x", {}, r"parameter after ':' must be an integer"),
        ("order", {}, r"needs the order k"),
        ("order:0", {}, r"order k must be an integer in 1\.\.4"),
        ("order:5", {}, r"order k must be an integer in 1\.\.4"),
        ("hmm", {}, r"needs the number of regimes R"),
        ("hmm:1", {}, r"regimes R must be an integer in 2\.\.6"),
        ("hmm:7", {}, r"regimes R must be an integer in 2\.\.6"),
        ("chain:2", {}, r"'chain' takes no parameter"),
        ("auto:3", {}, r"'auto' takes no parameter"),
        ("markov", {}, r"`model` 'markov' is not a model; give chain, phase\[:P\]"),
        ("", {}, r"is not a model"),
        (3, {}, r"`model` must be a string"),
        ("phase", {"default_period": 1}, r"`default_period` must be an integer ≥ 2"),
        ("chain", {"default_period": 2.5}, r"`default_period` must be an integer ≥ 2"),
    ],
)
def test_spec_errors(text, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        MarkovModelSpec.parse(text, **kwargs)


def test_spec_constructor_validates():
    with pytest.raises(InvalidInputError, match=r"`kind` must be one of chain, phase, order, hmm, auto"):
        MarkovModelSpec("ar1")
    with pytest.raises(InvalidInputError, match=r"`param` of 'order' must be an integer"):
        MarkovModelSpec("order", 2.0)


# --------------------------------------------------------------------------------- Δ_Z: fast path vs brute force


def test_chain_model_equals_population_exactly():
    import policyopt as po

    data = po.load_citylearn()
    fitted = po.fit_population(data, 3, value_range=(0, 48))
    model = ChainModel.from_fitted(fitted)
    ages = np.arange(0, 200)
    np.testing.assert_array_equal(model.log_max_tv(ages), fitted.population.log_max_tv(ages))
    assert model.log_max_tv(7) == fitted.population.log_max_tv(7)
    assert model.envelope(48) == fitted.population.envelope(48)
    assert model.n_users == 17 and model.users == fitted.users and model.name == "chain"
    np.testing.assert_array_equal(model.counts[0], fitted.counts[fitted.users[0]])


def test_order_one_equals_chain_model_exactly_and_phase_one_equals_chain():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 3, size=(4, 600))
    x[1, 50:60] = -1
    users = _users(4)
    chain = ChainModel.from_states(x, 3, users=users)
    order1 = fit_markov_model("order:1", x, 3, users=users)
    np.testing.assert_array_equal(order1.log_max_tv(AGES), chain.log_max_tv(AGES))
    phase1 = fit_phase_chain(x, 3, 1, users=users)
    np.testing.assert_allclose(phase1.log_max_tv(AGES), chain.log_max_tv(AGES), rtol=0, atol=1e-12)
    np.testing.assert_allclose(phase1.matrices[:, 0], np.stack([c.P for c in chain.population.chains]), rtol=1e-15)


def test_chain_model_matches_brute_force():
    rng = np.random.default_rng(1)
    P = _random_stochastic(rng, (2, 3, 3))
    model = ChainModel(Population.from_matrices(P), _users(2))
    np.testing.assert_allclose(model.log_max_tv(AGES), brute_homogeneous(P, list(AGES)), rtol=0, atol=1e-10)


@pytest.mark.parametrize("period, K", [(3, 3), (4, 2)])
def test_phase_chain_matches_brute_force(period, K):
    rng = np.random.default_rng(2 + period)
    Ps = _random_stochastic(rng, (2, period, K, K))
    model = PhaseChainModel(Ps, _users(2))
    got = model.log_max_tv(AGES)
    np.testing.assert_allclose(got, brute_phase(Ps, list(AGES)), rtol=0, atol=1e-10)
    assert got[0] == 0.0 and np.all(np.diff(got) <= 1e-12)  # ln Δ_Z(0) = 0, non-increasing


@pytest.mark.parametrize("K, k", [(2, 3), (3, 2)])
def test_order_chain_matches_brute_force(K, k):
    rng = np.random.default_rng(10 * K + k)
    cond = _random_stochastic(rng, (2, K**k, K))
    model = OrderChainModel(cond, k, _users(2))
    for u in range(2):
        np.testing.assert_array_equal(model.z_matrices()[u], order_z_matrix(model.conditionals[u], K, k))
    got = model.log_max_tv(AGES)
    ref = brute_homogeneous([order_z_matrix(c, K, k) for c in cond], list(AGES))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got[:k], 0.0, atol=1e-12)  # Δ_Z(t) = 1 for t < k (overlapping histories)
    assert np.all(np.diff(got) <= 1e-12)


def test_hidden_regime_matches_brute_force_on_the_full_z_chain():
    rng = np.random.default_rng(5)
    A = _random_stochastic(rng, (2, 3, 3))
    B = _random_stochastic(rng, (2, 3, 2))
    model = HiddenRegimeModel(A, B, _users(2))
    for u in range(2):
        np.testing.assert_allclose(model.z_matrices()[u], hmm_z_matrix(A[u], B[u]), rtol=1e-15)
    got = model.log_max_tv(AGES)
    ref = brute_homogeneous([hmm_z_matrix(a, b) for a, b in zip(A, B)], list(AGES))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    assert np.all(np.diff(got) <= 1e-12)


def test_underflow_far_below_1e300_compared_as_logs():
    # Rows differing by ~1e-7 make Δ_Z(50) ≈ 1e-340: a float Δ would be 0, ln Δ must stay exact.
    rng = np.random.default_rng(9)
    ages = [0, 1, 2, 10, 30, 50]
    eta = 1e-7
    P = _near_rank_one(rng, (2, 3, 3), eta)
    chain = ChainModel(Population.from_matrices(P), _users(2))
    Ps = _near_rank_one(rng, (1, 2, 2, 2), eta)
    phase = PhaseChainModel(Ps, _users(1))
    cond = _near_rank_one(rng, (1, 4, 2), eta)
    order = OrderChainModel(cond, 2, _users(1))
    A = _near_rank_one(rng, (1, 2, 2), eta)
    hmm = HiddenRegimeModel(A, _random_stochastic(rng, (1, 2, 3)), _users(1))
    cases = [  # (model, brute force, a bound on Δ_Z(50)); order:2 contracts by η only every other step
        (chain, brute_homogeneous(P, ages, dps=420), 1e-300),
        (phase, brute_phase(Ps, ages, dps=420), 1e-300),
        (order, brute_homogeneous([order_z_matrix(order.conditionals[0], 2, 2)], ages, dps=420), 1e-180),
        (hmm, brute_homogeneous([hmm_z_matrix(A[0], hmm.emissionprob[0])], ages, dps=420), 1e-300),
    ]
    for model, ref, below in cases:
        got = model.log_max_tv(ages)
        assert got[-1] < np.log(below) and np.isfinite(got[-1]), model.name
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6, err_msg=model.name)  # rounding of π, P̂ ~ 1e-16/η
        assert model.max_tv(50) == 0.0 or below > 1e-300  # the float itself underflows


def test_phase_max_tv_exactly_zero_and_the_rescaling_fallback():
    # A reversed kernel with identical rows (rank one) maps every difference to exactly 0: Δ_Z = 0 from the first age
    # at which every end phase has passed through it; the propagation must then redo the stretch rescaling after
    # every step (a block became 0 while alive) and give −inf, not NaN.
    from policyopt.models.phase_chain import phase_log_max_tv

    mu = np.array([[[0.3, 0.7], [0.6, 0.4]]])  # μ_0, μ_1
    phat = np.empty((1, 2, 2, 2))
    phat[0, 0] = [[0.2, 0.8], [0.9, 0.1]]  # P̂_0 (to phase 1 = phase −1)
    phat[0, 1] = mu[0, 0]  # P̂_1: every row is μ_0 (rank one)
    ts = np.arange(0, 8)
    dev = phat - np.roll(mu, 1, axis=1)[:, :, None, :]  # Q_φ = P̂_φ − 1 μ_{φ−1} (exact here: Q_1 = 0)
    got = phase_log_max_tv(dev, mu, ts)
    np.testing.assert_array_equal(got, phase_log_max_tv(dev, mu, ts, every=1))
    assert got[0] == 0.0 and got[1] == pytest.approx(np.log(0.7), abs=1e-15)  # Δ(1) = δ(P̂_0) = |0.2 − 0.9|
    assert np.all(np.isneginf(got[2:]))


def test_log_max_tv_shapes():
    rng = np.random.default_rng(3)
    model = OrderChainModel(_random_stochastic(rng, (1, 4, 2)), 2, ["a"])
    t = np.array([[5, 0], [3, 5]])
    out = model.log_max_tv(t)
    assert out.shape == (2, 2) and out[0, 0] == out[1, 1] and out[0, 1] == 0.0
    assert isinstance(model.log_max_tv(3), float) and isinstance(model.max_tv(3), float)
    assert model.max_tv(3) == pytest.approx(np.exp(model.log_max_tv(3)), rel=1e-15)
    with pytest.raises(InvalidInputError, match=r"`t` must be non-negative integers"):
        model.log_max_tv(-1)


# ------------------------------------------------------------------------------------------------ XOR, order-2


def _xor_series(rng, T, noise):
    x = np.zeros(T, dtype=np.int64)
    x[:2] = rng.integers(0, 2, 2)
    flips = rng.random(T) < noise
    for t in range(2, T):
        x[t] = x[t - 1] ^ x[t - 2] ^ flips[t]
    return x


def test_xor_chain_is_invisible_to_the_first_order_chain_but_not_to_order_two():
    rng = np.random.default_rng(21)
    x = _xor_series(rng, 6000, 0.1)[None, :]
    chain = fit_markov_model("chain", x, 2, users=["xor"])
    order2 = fit_markov_model("order:2", x, 2, users=["xor"])
    assert chain.max_tv(1) < 0.05  # X_t is nearly independent of X_{t−1}: the chain sees no memory
    assert order2.max_tv(1) == pytest.approx(1.0, abs=1e-12)  # overlapping histories
    # The true XOR model (contexts z = 2·x_t + x_{t−1}; next = x_t ⊕ x_{t−1} with probability 0.9):
    cond = np.array([[0.9, 0.1], [0.1, 0.9], [0.1, 0.9], [0.9, 0.1]])
    true = OrderChainModel(cond[None], 2, ["xor"])
    # source: brute force on the true model's Z chain: Δ_Z(2) = 0.8 = 1 − 2·noise
    assert true.max_tv(2) == pytest.approx(0.8, abs=1e-12)
    np.testing.assert_allclose(order2.max_tv([2, 3, 4]), true.max_tv([2, 3, 4]), atol=0.03)
    np.testing.assert_allclose(order2.conditionals[0], cond, atol=0.02)


# ------------------------------------------------------------------------------------------- fitting recovers


def test_order_two_fit_recovers_the_conditionals():
    rng = np.random.default_rng(31)
    cond = _random_stochastic(rng, (1, 9, 3))
    true = OrderChainModel(cond, 2, ["a"])
    x = true.simulate([30000], 1, [np.random.default_rng(1)])[0]
    fit = fit_order_chain(x, 3, 2, users=["a"])
    np.testing.assert_allclose(fit.conditionals, cond, atol=0.03)
    np.testing.assert_allclose(fit.log_max_tv(np.arange(8)), true.log_max_tv(np.arange(8)), atol=0.15)
    assert fit.transitions == {"a": 29998}
    assert fit.row_transitions.sum() == 29998 and fit.n_parameters == 18


def test_phase_chain_fit_recovers_the_matrices_with_starts():
    rng = np.random.default_rng(41)
    Ps = _random_stochastic(rng, (1, 4, 2, 2))
    true = PhaseChainModel(Ps, ["a"], starts=[3])
    x = true.simulate([24000], 1, [np.random.default_rng(2)])[0]
    fit = fit_phase_chain(x, 2, 4, users=["a"], starts=[3])
    np.testing.assert_allclose(fit.matrices, Ps, atol=0.03)
    wrong = fit_phase_chain(x, 2, 4, users=["a"], starts=[0])  # phases shifted by 3: a different model
    assert np.max(np.abs(wrong.matrices - Ps)) > 0.1
    np.testing.assert_allclose(fit.marginals, true.marginals, atol=0.02)


def test_hmm_fit_recovers_two_regimes():
    A = np.array([[[0.97, 0.03], [0.05, 0.95]]])
    B = np.array([[[0.7, 0.25, 0.05], [0.05, 0.25, 0.7]]])  # regime 0 has the lower mean state (fit's order)
    true = HiddenRegimeModel(A, B, ["a"])
    x = true.simulate([6000], 1, [np.random.default_rng(3)])[0]
    x[0, 1000:1100] = -1  # a gap: the series is fitted as two runs
    fit = fit_markov_model("hmm:2", x, 3, users=["a"], seed=1)
    assert isinstance(fit, HiddenRegimeModel) and fit.converged == {"a": True} and fit.not_converged == ()
    np.testing.assert_allclose(fit.transmat, A, atol=0.02)
    np.testing.assert_allclose(fit.emissionprob, B, atol=0.04)
    np.testing.assert_allclose(fit.log_max_tv([1, 5, 20]), true.log_max_tv([1, 5, 20]), atol=0.25)
    assert fit.expected_transitions[0].sum() == pytest.approx(5898, abs=1e-6)  # 5900 observed slots in two runs
    assert fit.n_parameters == 2 + 4 and fit.transitions == {"a": 5898}
    assert np.isfinite(fit.log_likelihood["a"]) and fit.iterations["a"] >= 1


# ------------------------------------------------------------------------------------------------- simulation


def test_chain_simulation_is_simulate_chain_states_draw_for_draw():
    rng = np.random.default_rng(51)
    P = _random_stochastic(rng, (3, 3, 3))
    model = ChainModel(Population.from_matrices(P), ["a", "b", "c"])
    lengths, initial = np.array([40, 25, 33]), np.array([0, 2, 1])
    got = model.simulate(lengths, 5, user_streams(model.users, 7), initial=initial)
    ref = simulate_chain_states(P, lengths, initial, 5, user_streams(model.users, 7))
    np.testing.assert_array_equal(got, ref)
    assert got.shape == (5, 3, 40) and np.all(got[:, 1, 25:] == -1) and np.all(got[:, :, 0] == initial)


def test_phase_simulation_reproduces_the_per_phase_transition_frequencies():
    rng = np.random.default_rng(52)
    Ps = _random_stochastic(rng, (1, 3, 3, 3))
    model = PhaseChainModel(Ps, ["a"], starts=[2])
    sim = model.simulate([4000], 5, [np.random.default_rng(4)])[:, 0]
    phase = (2 + np.arange(3999)) % 3
    counts = np.zeros((3, 3, 3))
    for r in range(5):
        np.add.at(counts, (phase, sim[r, :-1], sim[r, 1:]), 1)
    np.testing.assert_allclose(counts / counts.sum(axis=2, keepdims=True), Ps[0], atol=0.03)
    # column 0 is drawn from the marginal of its phase
    first = model.simulate([1], 4000, [np.random.default_rng(5)])[:, 0, 0]
    np.testing.assert_allclose(np.bincount(first, minlength=3) / 4000, model.marginals[0, 2], atol=0.025)


def test_order_and_hmm_simulation_reproduce_the_model_pair_frequencies():
    rng = np.random.default_rng(53)
    order = OrderChainModel(_random_stochastic(rng, (1, 9, 3)), 2, ["a"])
    hmm = HiddenRegimeModel(_random_stochastic(rng, (1, 2, 2)) * 0.2 + 0.8 * np.eye(2), _random_stochastic(rng, (1, 2, 3)), ["a"])
    for model in (order, hmm):
        sim = model.simulate([20000], 2, [np.random.default_rng(6)])[:, 0]
        PZ = model.z_matrices()[0]
        pi = Population.from_matrices(PZ[None]).chains[0].stationary
        joint_z = pi[:, None] * PZ
        g = np.arange(PZ.shape[0]) // (PZ.shape[0] // 3) if model is order else np.arange(PZ.shape[0]) // 2
        joint = np.zeros((3, 3))
        np.add.at(joint, (g[:, None], g[None, :]), joint_z)  # Pr(X_t = x, X_{t+1} = y) of the model
        emp = np.zeros((3, 3))
        for r in range(2):
            np.add.at(emp, (sim[r, :-1], sim[r, 1:]), 1)
        np.testing.assert_allclose(emp / emp.sum(), joint, atol=0.015, err_msg=model.name)


def test_initial_state_is_respected_and_hidden_part_drawn():
    rng = np.random.default_rng(54)
    order = OrderChainModel(_random_stochastic(rng, (2, 8, 2)), 3, ["a", "b"])
    sim = order.simulate([10, 12], 3, user_streams(order.users, 1), initial=[1, 0])
    assert np.all(sim[:, 0, 0] == 1) and np.all(sim[:, 1, 0] == 0)


def test_per_user_streams_do_not_depend_on_the_other_users():
    rng = np.random.default_rng(61)
    x = rng.integers(0, 2, size=(2, 400))
    for spec in ("chain", "phase:5", "order:2", "hmm:2"):
        both = fit_markov_model(spec, x, 2, users=["a", "b"], starts=[0, 3])
        alone = fit_markov_model(spec, x[:1], 2, users=["a"], starts=[0])
        sim_both = both.simulate([30, 20], 4, user_streams(["a", "b"], 9))
        sim_alone = alone.simulate([30], 4, user_streams(["a"], 9))
        np.testing.assert_array_equal(sim_both[:, :1], sim_alone, err_msg=spec)
        b_alone = fit_markov_model(spec, x[1:], 2, users=["b"], starts=[3])
        d_both = both.log_max_tv_draws([1, 3, 6], 3, user_streams(["a", "b"], 5))
        d_a = alone.log_max_tv_draws([1, 3, 6], 3, user_streams(["a"], 5))
        d_b = b_alone.log_max_tv_draws([1, 3, 6], 3, user_streams(["b"], 5))
        np.testing.assert_array_equal(d_both, np.maximum(d_a, d_b), err_msg=spec)  # max over users, draw by draw


# ------------------------------------------------------------------------------------- estimation uncertainty


def test_posterior_draws_bracket_the_true_max_tv():
    # 20 data sets of 1500 slots from a known order-2 chain, 60 draws each.  The plug-in TV (a maximum of absolute
    # differences) is biased upwards where Δ is small, and so are its posterior draws: the *upper* quantile, which
    # the simultaneous band uses, covers the truth more often than nominal, the lower one less.  Measured on 100 data
    # sets: the 95 % quantile was below the true Δ_Z(2), Δ_Z(3), Δ_Z(4) in 2 %, 0 %, 0 % of them, and the central 90 %
    # interval covered Δ_Z(2) = 0.31 in 85 %.
    rng = np.random.default_rng(71)
    cond = _random_stochastic(rng, (1, 4, 2)) * 0.6 + 0.4 * np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    true = OrderChainModel(cond, 2, ["a"])
    ages = [2, 3, 4]
    truth = true.log_max_tv(ages)
    upper, central = np.zeros(3), 0
    for rep in range(20):
        x = true.simulate([1500], 1, [np.random.default_rng(100 + rep)])[0]
        draws = fit_order_chain(x, 2, 2, users=["a"]).log_max_tv_draws(ages, 60, np.random.default_rng(rep))
        lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
        upper += truth <= hi
        central += lo[0] <= truth[0] <= hi[0]
    assert np.all(upper >= 17), upper  # nominal 19 of 20
    assert central >= 13, central  # nominal 18 of 20


def test_hmm_bootstrap_draws_bracket_the_true_max_tv():
    # Parametric bootstrap (the default): 6 series of 800 slots, 20 draws each; the 95 % quantile should lie above
    # the true Δ_Z(1) = Δ_A(1) in about 95 % of the series (7.5 % misses measured on 40 series of 1500 slots).
    A = np.array([[[0.9, 0.1], [0.2, 0.8]]])
    B = np.array([[[0.8, 0.15, 0.05], [0.05, 0.15, 0.8]]])
    true = HiddenRegimeModel(A, B, ["a"])
    truth = true.log_max_tv([1, 3])
    upper, spread = np.zeros(2), []
    for rep in range(6):
        x = true.simulate([800], 1, [np.random.default_rng(200 + rep)])[0]
        fit = fit_hidden_regime(x, 3, 2, users=["a"], seed=rep)
        draws = fit.log_max_tv_draws([1, 3], 20, np.random.default_rng(rep))
        upper += truth <= np.quantile(draws, 0.95, axis=0)
        spread.append(np.ptp(draws[:, 0]))
    assert np.all(upper >= 4), upper  # Binomial(6, 0.95): P(< 4) ≈ 0.002
    assert min(spread) > 0  # the refits differ


def test_hmm_dirichlet_draws_on_expected_counts():
    A = np.array([[[0.95, 0.05], [0.1, 0.9]]])
    B = np.array([[[0.8, 0.15, 0.05], [0.05, 0.15, 0.8]]])
    x = HiddenRegimeModel(A, B, ["a"]).simulate([3000], 1, [np.random.default_rng(1)])[0]
    fit = fit_hidden_regime(x, 3, 2, users=["a"])
    draws = fit.log_max_tv_draws([0, 1, 4], 200, np.random.default_rng(2), method="dirichlet")
    assert draws.shape == (200, 3) and np.all(draws[:, 0] == 0.0)
    # centred on the fit: the draws' median Δ_Z(1) is the fitted one within the posterior spread
    assert np.median(np.exp(draws[:, 1])) == pytest.approx(fit.max_tv(1), abs=2 * np.std(np.exp(draws[:, 1])))
    with pytest.raises(InvalidInputError, match=r"`method` must be 'bootstrap' or 'dirichlet', got 'jackknife'"):
        fit.log_max_tv_draws([1], 3, np.random.default_rng(0), method="jackknife")
    with pytest.raises(InvalidInputError, match=r"the parametric bootstrap needs a fitted model"):
        HiddenRegimeModel(A, B, ["a"]).log_max_tv_draws([1], 3, np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"without expected counts: posterior draws need a fitted model"):
        HiddenRegimeModel(A, B, ["a"]).log_max_tv_draws([1], 3, np.random.default_rng(0), method="dirichlet")


def test_chain_draws_follow_the_dirichlet_posterior():
    rng = np.random.default_rng(81)
    x = rng.integers(0, 2, size=(1, 300))
    model = ChainModel.from_states(x, 2, users=["a"])
    draws = model.log_max_tv_draws(np.arange(4), 400, np.random.default_rng(2))
    assert draws.shape == (400, 4) and np.all(draws[:, 0] == 0.0)
    # the draws scatter around the point estimate's Δ(1) (posterior mean of the rows = the smoothed estimate)
    assert np.median(np.exp(draws[:, 1])) == pytest.approx(model.max_tv(1), abs=0.05)


def test_chain_draws_match_posterior_log_max_tv_in_distribution():
    # The same Dir(n_x· + s) posterior as policyopt.models.posterior.posterior_log_max_tv, sampled another way
    # (log-space gamma variates instead of Generator.dirichlet): equal quantiles up to Monte Carlo error.
    import pandas as pd

    from policyopt.models.estimation import fit_population
    from policyopt.models.posterior import posterior_log_max_tv

    rng = np.random.default_rng(82)
    rows = [("a", t, v) for t, v in enumerate(np.cumsum(rng.normal(size=400)))]
    rows += [("b", t, v) for t, v in enumerate(rng.normal(size=400))]
    fitted = fit_population(pd.DataFrame(rows, columns=["user", "time", "value"]), 3)
    ages = [1, 2, 4]
    ours = ChainModel.from_fitted(fitted).log_max_tv_draws(ages, 200, np.random.default_rng(1))
    ref = posterior_log_max_tv(fitted, ages, 200, np.random.default_rng(2))
    for q in (0.1, 0.5, 0.9):
        np.testing.assert_allclose(np.quantile(np.exp(ours), q, axis=0), np.quantile(np.exp(ref), q, axis=0), atol=0.03)


def test_dirichlet_rows_survive_tiny_pseudo_counts():
    gen = np.random.default_rng(0)
    alpha = np.full((2000, 3), 0.01)
    p = dirichlet_rows(alpha, gen)
    assert np.all(np.isfinite(p)) and np.all(p > 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(p.mean(axis=0), [1 / 3] * 3, atol=0.04)  # E[p] = α / Σα
    big = dirichlet_rows(np.array([[300.0, 100.0]]).repeat(4000, axis=0), gen)
    assert big[:, 0].mean() == pytest.approx(0.75, abs=0.005)
    assert big[:, 0].var() == pytest.approx(0.75 * 0.25 / 401, rel=0.1)  # Var of a Beta(300, 100)


def test_draw_user_rows_is_each_users_own_draw():
    # the batched draw consumes every user's generator as a draw of that user alone, bit for bit, so the posterior
    # draws of the held-out check do not depend on how the users are grouped into partitions
    from policyopt.models.empirical import user_streams

    rng = np.random.default_rng(3)
    for shape in [(40, 12, 12), (9, 24, 4, 4), (3, 1, 2)]:
        alpha = rng.gamma(0.3, size=shape) + rng.choice([0.01, 0.5, 3.0], size=shape)
        who = tuple(f"m{i}" for i in range(shape[0]))
        batched = draw_user_rows(alpha, user_streams(who, 7, stream=4))
        alone = [dirichlet_rows(alpha[i], g) for i, g in enumerate(user_streams(who, 7, stream=4))]
        assert batched.shape == shape
        assert all(np.array_equal(batched[i], alone[i]) for i in range(shape[0]))


# --------------------------------------------------------------------------------------- interface and errors


def test_every_model_reports_its_identity_and_envelope():
    rng = np.random.default_rng(91)
    x = rng.integers(0, 3, size=(2, 500))
    expected = {"chain": 6, "phase:4": 24, "order:2": 18, "hmm:2": 2 + 4}
    for spec, n_par in expected.items():
        m = fit_markov_model(spec, x, 3, users=["a", "b"])
        assert m.name == spec and m.n_parameters == n_par and m.n_users == 2 and m.users == ("a", "b")
        assert m.n_states == 3 and m.description.startswith("Z_t = ")
        assert 0 < m.spectral_rate <= 1
        env = m.envelope(30)
        ts = np.arange(31)
        assert np.all(m.max_tv(ts) <= env(ts) * (1 + 1e-12))
        assert m.log_max_tv(0) == 0.0 and np.all(np.diff(m.log_max_tv(ts)) <= 1e-12)
        assert repr(m).startswith(type(m).__name__ + f"(name='{spec}'")


def test_fit_errors():
    x = np.random.default_rng(0).integers(0, 3, size=(2, 50))
    with pytest.raises(InvalidInputError, match=r"`spec` 'auto' selects among models, which the caller does"):
        fit_markov_model("auto", x, 3, users=["a", "b"])
    with pytest.raises(InvalidInputError, match=r"'phase' needs a period"):
        fit_markov_model("phase", x, 3, users=["a", "b"])
    assert fit_markov_model("phase", x, 3, users=["a", "b"], default_period=5).name == "phase:5"
    with pytest.raises(InvalidInputError, match=r"`order`=3 with `n_states`=10 gives K\^k = 1000 .* use fewer states \(`n_states` ≤ 9"):
        fit_markov_model("order:3", np.zeros((1, 20), dtype=np.int64), 10, users=["a"])
    with pytest.raises(InvalidInputError, match=r"`smoothing` must be a finite pseudo-count > 0"):
        fit_markov_model("order:2", x, 3, users=["a", "b"], smoothing=0)
    with pytest.raises(InvalidInputError, match=r"`users` must name the 2 rows of `states`, got 3 names"):
        fit_markov_model("chain", x, 3, users=["a", "b", "c"])
    with pytest.raises(InvalidInputError, match=r"`users` must be distinct, got 'a' twice"):
        fit_markov_model("chain", x, 3, users=["a", "a"])
    with pytest.raises(InvalidInputError, match=r"`starts` must give one integer slot per user \(2\)"):
        fit_markov_model("phase:3", x, 3, users=["a", "b"], starts=[0.5, 1])
    with pytest.raises(InvalidInputError, match=r"`states` user 0 slot 0 is 3, outside 0\.\.2"):
        fit_markov_model("chain", x + 1, 3, users=["a", "b"])
    sparse = np.full((2, 50), -1)
    sparse[0] = 1
    sparse[1, ::2] = 0
    with pytest.raises(InvalidInputError, match=r"user 'b' has no transition \(two consecutive observed slots\)"):
        fit_markov_model("chain", sparse, 3, users=["a", "b"])
    with pytest.raises(InvalidInputError, match=r"user 'b' has no window of 3 consecutive observed slots"):
        fit_markov_model("order:2", sparse, 3, users=["a", "b"])
    with pytest.raises(InvalidInputError, match=r"user 'b' has no pair of consecutive observed slots"):
        fit_markov_model("hmm:2", sparse, 3, users=["a", "b"])
    with pytest.raises(InvalidInputError, match=r"`n_regimes` must be an integer in 2\.\.6, got 7"):
        fit_hidden_regime(x, 3, 7, users=["a", "b"])
    with pytest.raises(InvalidInputError, match=r"`seed` must be an integer ≥ 0, got -1"):
        fit_markov_model("hmm:2", x, 3, users=["a", "b"], seed=-1)
    with pytest.raises(InvalidInputError, match=r"`period` must be an integer ≥ 1"):
        fit_phase_chain(x, 3, 0, users=["a", "b"])


def test_model_and_call_errors():
    rng = np.random.default_rng(0)
    model = OrderChainModel(_random_stochastic(rng, (1, 4, 2)), 2, ["a"])
    with pytest.raises(InvalidInputError, match=r"posterior draws need a fitted model"):
        model.log_max_tv_draws([1], 3, np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"`draws` must be an integer ≥ 2"):
        fit_order_chain(rng.integers(0, 2, (1, 40)), 2, 2, users=["a"]).log_max_tv_draws([1], 1, np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"`rng` has 2 generators for 1 users"):
        model.simulate([5], 1, user_streams(["a", "b"], 0))
    with pytest.raises(InvalidInputError, match=r"`rng` must be a numpy.random.Generator or one per user"):
        model.simulate([5], 1, 42)
    with pytest.raises(InvalidInputError, match=r"`lengths` must give one integer ≥ 1 per user \(1\)"):
        model.simulate([0], 1, np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"`draws` must be an integer ≥ 1"):
        model.simulate([5], 0, np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"`initial` must give one state in 0\.\.1 per user"):
        model.simulate([5], 1, np.random.default_rng(0), initial=[2])
    with pytest.raises(InvalidInputError, match=r"`rho` must be in \[0, 1\]"):
        model.envelope(10, rho=1.5)
    with pytest.raises(InvalidModelError, match=r"`conditionals` row \(0, 1\) sums to 0\.5, not 1"):
        OrderChainModel(np.array([[[0.5, 0.5], [0.25, 0.25], [0.5, 0.5], [0.5, 0.5]]]), 2, ["a"])
    with pytest.raises(InvalidModelError, match=r"`conditionals` must have shape \(U, K\^k, K\) = \(U, 4, 2\)"):
        OrderChainModel(_random_stochastic(rng, (1, 8, 2)), 2, ["a"])
    with pytest.raises(InvalidModelError, match=r"state 1 has stationary probability 0 at phase 1"):
        PhaseChainModel(np.array([[[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]]]), ["a"])
    with pytest.raises(InvalidModelError, match=r"regime 1 gives state 0 probability 0"):
        HiddenRegimeModel(np.full((1, 2, 2), 0.5), np.array([[[0.5, 0.5], [0.0, 1.0]]]), ["a"])
    with pytest.raises(InvalidInputError, match=r"the number of regimes R must be in 2\.\.6, got 7"):
        HiddenRegimeModel(np.full((1, 7, 7), 1 / 7), np.full((1, 7, 2), 0.5), ["a"])
    with pytest.raises(InvalidInputError, match=r"`fitted` must be a FittedModel"):
        ChainModel.from_fitted(model)
