"""A zoo of binary processes whose age-dependent risk we know exactly (as :class:`_exact_risk.BinaryHMM`), for tests.

Each factory returns a :class:`~_exact_risk.BinaryHMM` whose defaults make data that look like what the issue
measured (30 users × 8,760 hourly slots): a plain first-order chain, where Theorem 3 of Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024 (eq. (25)) holds, and five processes that
are not first-order chains in X, where it does not: an order-2 chain, the XOR chain, a slowly switching hidden
regime, a daily pattern driven by a hidden habit, and a weekly routine with flips.  Periodic processes use a public
clock: slot s has phase s mod P.

Readings are binary (LO = 0, HI = 1): 1 is "home"/"on", 0 is "away"/"off".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, fmt

from _exact_risk import BinaryHMM

__all__ = [
    "first_order_chain",
    "order2_chain",
    "xor_chain",
    "switching_regime",
    "daily_habit",
    "weekly_routine",
    "DAILY_SHAPES",
    "write_readings",
]


def _prob(value, name: str, *, open_: bool = False) -> float:
    """`value` as a probability in [0, 1] (or (0, 1) with `open_`), or :class:`InvalidInputError`."""
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    v = float(value) if ok else float("nan")
    if not (ok and ((0.0 < v < 1.0) if open_ else (0.0 <= v <= 1.0))):
        interval = "(0, 1)" if open_ else "[0, 1]"
        raise InvalidInputError(f"`{name}` must be a probability in {interval}, got {fmt(value)}")
    return v


def first_order_chain(p: float, q: float) -> BinaryHMM:
    """The two-state chain X_t with Pr(0 → 1) = p and Pr(1 → 0) = q (Zhang et al. 2024, eq. (43), states 0/1).

    Theorem 3 holds for it, with Δ(t) = |1 − p − q|^t (eq. (47)).

    Parameters
    ----------
    p, q : float
        Switching probabilities per slot, in [0, 1], not both 0 (the stationary law must be unique).

    Returns
    -------
    BinaryHMM
        H = 2 hidden states, the hidden state is X_t.

    Raises
    ------
    InvalidInputError
        If `p` or `q` is not a probability, or p = q = 0.
    """
    p, q = _prob(p, "p"), _prob(q, "q")
    if p == 0.0 and q == 0.0:
        raise InvalidInputError("`p` and `q` are both 0: the chain never moves and has no unique stationary law")
    return BinaryHMM([[1.0 - p, p], [q, 1.0 - q]], [0, 1], name=f"first-order chain p={p:g}, q={q:g}")


def order2_chain(continue_run: float = 0.905, after_change: float = 0.65) -> BinaryHMM:
    """An order-2 chain: X_t repeats X_{t−1} with a probability that depends on whether X_{t−1} = X_{t−2}.

    Pr(X_t = X_{t−1} | X_{t−1} = X_{t−2}) = `continue_run`, Pr(X_t = X_{t−1} | X_{t−1} ≠ X_{t−2}) =
    `after_change`.  The hidden state is (X_t, X_{t−1}), index 2·X_t + X_{t−1}.  The defaults give Δ(1) = 0.745 of
    X (the issue's first-order fit implies 0.743) and an exact risk ≥ of (A, S̄, ε_C) = (0, 1, 0.0283) of
    0.176 nats (the issue measured 0.180; its parameters were not recorded).

    Parameters
    ----------
    continue_run, after_change : float
        Probabilities in (0, 1).

    Returns
    -------
    BinaryHMM
        H = 4, deterministic output X_t.

    Raises
    ------
    InvalidInputError
        If a parameter is not in (0, 1).
    """
    a = _prob(continue_run, "continue_run", open_=True)
    b = _prob(after_change, "after_change", open_=True)
    P = np.zeros((4, 4))
    for x1 in (0, 1):
        for x2 in (0, 1):
            stay = a if x1 == x2 else b
            P[2 * x1 + x2, 2 * x1 + x1] += stay  # X_{t+1} = X_t
            P[2 * x1 + x2, 2 * (1 - x1) + x1] += 1.0 - stay  # X_{t+1} ≠ X_t
    return BinaryHMM(P, [0, 0, 1, 1], name=f"order-2 chain continue_run={a:g}, after_change={b:g}")


def xor_chain(noise: float = 0.1) -> BinaryHMM:
    """X_t = X_{t−1} ⊕ X_{t−2} ⊕ Bernoulli(noise): Δ(1) = Δ(2) = 0 exactly, yet the past reveals X_t.

    The stationary law is uniform on the four (X_t, X_{t−1}) pairs; X_t is independent of X_{t−1} and of X_{t−2}
    alone (so Δ(1) = Δ(2) = 0), but not of the pair, and X_t = X_{t−3} ⊕ N_{t−1} ⊕ N_t gives
    Δ(3) = (1 − 2·noise)².

    Parameters
    ----------
    noise : float
        Flip probability in (0, 1) (0 would make the chain reducible).

    Returns
    -------
    BinaryHMM
        H = 4 (index 2·X_t + X_{t−1}), deterministic output X_t.

    Raises
    ------
    InvalidInputError
        If `noise` is not in (0, 1).
    """
    n = _prob(noise, "noise", open_=True)
    P = np.zeros((4, 4))
    for a in (0, 1):
        for b in (0, 1):
            for c in (0, 1):
                P[2 * a + b, 2 * c + a] += (1.0 - n) if c == (a ^ b) else n
    return BinaryHMM(P, [0, 0, 1, 1], name=f"XOR chain noise={n:g}")


def switching_regime(switch: float = 0.002, p_home: float = 0.75, p_away: float = 0.35) -> BinaryHMM:
    """A slowly switching hidden home/away regime; readings i.i.d. Bernoulli given the regime.

    The defaults reproduce, to 3 digits, both exact risks the issue measured on its home/away process: 1.141 nats
    for (A, S̄, ε_C) = (0, 1, 0.283) and 0.632 nats for (0, 1, 0.0283).

    Parameters
    ----------
    switch : float
        Probability per slot that the regime changes, in (0, 1).
    p_home, p_away : float
        Pr(X_t = 1) in the home and away regimes, in [0, 1].

    Returns
    -------
    BinaryHMM
        H = 2 (0 = away, 1 = home) with an emission matrix.

    Raises
    ------
    InvalidInputError
        If a parameter is not a probability (or `switch` is 0 or 1).
    """
    s = _prob(switch, "switch", open_=True)
    hi, lo = _prob(p_home, "p_home"), _prob(p_away, "p_away")
    return BinaryHMM([[1.0 - s, s], [s, 1.0 - s]], [[1.0 - lo, lo], [1.0 - hi, hi]],
                     name=f"switching regime switch={s:g}, p_home={hi:g}, p_away={lo:g}")


def _habit_process(shapes: np.ndarray, switch: float, name: str) -> BinaryHMM:
    """Hidden (habit, X_t), index 2·habit + X_t; per phase φ: the habit stays w.p. 1 − switch (else a uniformly
    drawn other habit), then X_{t+1} ~ Bernoulli(shapes[habit', (φ + 1) mod P])."""
    K, P = shapes.shape
    Q = np.full((K, K), switch / (K - 1)) if K > 1 else np.ones((1, 1))
    np.fill_diagonal(Q, 1.0 - switch if K > 1 else 1.0)
    mats = []
    for phi in range(P):
        nxt = shapes[:, (phi + 1) % P]
        M = np.zeros((2 * K, 2 * K))
        for h in range(K):
            for x in (0, 1):
                for h2 in range(K):
                    M[2 * h + x, 2 * h2 + 1] = Q[h, h2] * nxt[h2]
                    M[2 * h + x, 2 * h2] = Q[h, h2] * (1.0 - nxt[h2])
        mats.append(M)
    return BinaryHMM(mats, np.tile([0, 1], K), name=name)


#: Home (1) or away (0) per hour of the day for the two habits of :func:`daily_habit`: habit 0 ("office days") is
#: away from 8:00 to 18:00, habit 1 ("home-office days") is home all day.
DAILY_SHAPES = {
    "office days": (1,) * 8 + (0,) * 10 + (1,) * 6,
    "home-office days": (1,) * 24,
}


def daily_habit(switch: float = 0.002, high: float = 0.8, low: float = 0.2) -> BinaryHMM:
    """A daily pattern (period 24, public clock) whose shape depends on a hidden habit that switches rarely.

    Two habits (:data:`DAILY_SHAPES`): Pr(X_t = 1) is `high` in the hours a habit is home and `low` otherwise;
    the habit changes with probability `switch` per slot; readings are independent given the habit and the hour.
    With the defaults the exact risk ≥ of the schedule (A, S̄, ε_C) = (0, 1, 0.283) is 1.596 nats (the issue
    measured 1.593 on its process, whose parameters were not recorded).

    Parameters
    ----------
    switch : float
        Habit switching probability per slot, in (0, 1).
    high, low : float
        Pr(X_t = 1) in home and away hours, in [0, 1].

    Returns
    -------
    BinaryHMM
        H = 4 (index 2·habit + X_t), period 24, deterministic output X_t.

    Raises
    ------
    InvalidInputError
        If a parameter is not a probability (or `switch` is 0 or 1).
    """
    s = _prob(switch, "switch", open_=True)
    hi, lo = _prob(high, "high"), _prob(low, "low")
    shapes = np.array([[hi if b else lo for b in v] for v in DAILY_SHAPES.values()])
    return _habit_process(shapes, s, f"daily habit switch={s:g}, high={hi:g}, low={lo:g}")


def weekly_routine(noise: float = 0.045, routines: int = 2, switch: float = 1e-5, seed: int = 168) -> BinaryHMM:
    """A deterministic period-168 routine with independent flips (public clock); which routine is hidden.

    Each user follows one of `routines` fixed weekly patterns (each hour of the week home or away, drawn once
    with ``np.random.default_rng(seed)``: the model's definition, not randomness in the tests), changes routine
    with probability `switch` per slot, and each reading is the pattern's value flipped independently with
    probability `noise`.  With a public clock and a *known* routine a reading would say nothing about another
    hour's; what leaks is which routine the user follows, learnt from every hour where the routines differ.
    Pooled over the hour of the week the data show Δ ≈ 0 at lags 1..167 and (1 − 2·noise)² ≈ 0.83 at 168.  With
    the defaults the exact risk ≥ of (A, S̄, ε_C) = (4, 1, 0.283) is 3.05 nats (the issue measured 3.06 on its
    process, whose parameters were not recorded); it tends to ln((1 − noise)/noise) as the routine becomes known.

    Parameters
    ----------
    noise : float
        Flip probability per reading, in (0, 1).
    routines : int
        Number of routines R ≥ 1.
    switch : float
        Probability per slot of a change of routine, in (0, 1) (keeps the hidden chain irreducible).
    seed : int
        Seed of the patterns.

    Returns
    -------
    BinaryHMM
        H = 2R (index 2·routine + X_t), period 168, deterministic output X_t.

    Raises
    ------
    InvalidInputError
        If `noise` or `switch` is not in (0, 1) or `routines` is not a positive integer.
    """
    n = _prob(noise, "noise", open_=True)
    s = _prob(switch, "switch", open_=True)
    if isinstance(routines, bool) or not isinstance(routines, (int, np.integer)) or routines < 1:
        raise InvalidInputError(f"`routines` must be a positive integer, got {fmt(routines)}")
    patterns = np.random.default_rng(seed).integers(0, 2, size=(int(routines), 168))
    shapes = np.where(patterns == 1, 1.0 - n, n)
    return _habit_process(shapes, s if routines > 1 else 0.0,
                          f"weekly routine noise={n:g}, routines={int(routines)}, switch={s:g}")


def write_readings(folder, processes, users: int, slots: int, seed: int = 1) -> dict:
    """Simulate each process once and write its readings to ``folder/NAME.csv`` (for the CLI's ``--data``).

    Parameters
    ----------
    folder : str or pathlib.Path
        An existing folder (e.g. ``tmp_path_factory.mktemp(...)``).
    processes : mapping of str to callable
        Name → a factory returning a :class:`~_exact_risk.BinaryHMM` (called once per name).
    users, slots : int
        Size of each simulated data set (users × slots).
    seed : int
        Seed of ``np.random.default_rng`` (a fresh generator per process, so each file is the same whatever the
        order or the set of processes).

    Returns
    -------
    dict of str to pathlib.Path
        Name → the CSV written (long table: user, time, value; no index column).
    """
    paths = {}
    for name, make in processes.items():
        path = Path(folder) / f"{name}.csv"
        make().simulate(users, slots, np.random.default_rng(seed)).to_csv(path, index=False)
        paths[name] = path
    return paths
