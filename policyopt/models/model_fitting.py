"""What every fitted Markov model of :mod:`policyopt.models.markov_model` shares: the checks of its inputs, transition
counts, the Dirichlet posterior draws of its rows, per-user random streams, and Δ_Z(t) of a population of Z chains.

The models (the first-order chains, ``phase``, ``order:k``, ``hmm:R``) differ in their state Z_t; these helpers do not
depend on it.  Δ_Z(t) is eq. (12) of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy",
IEEE Trans. Inf. Theory 70(2), 2024, on the Z chain (:class:`~policyopt.models.markov.Population`).
"""

from __future__ import annotations

import math

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, check_int, fmt
from policyopt.models.markov import Population

__all__ = ["check_smoothing", "check_users", "check_starts", "check_fit_inputs", "check_seed", "check_stochastic_stack",
           "count_codes", "require_transitions", "user_generators", "dirichlet_rows", "posterior_alpha",
           "draw_user_rows", "second_eigenvalue_modulus", "population_log_max_tv", "DEFAULT_SMOOTHING",
           "CHUNK_BYTES"]

#: Additive smoothing pseudo-count of the count-based models (as :func:`policyopt.models.estimation.fit_population`).
DEFAULT_SMOOTHING = 0.01
#: Bytes of dense per-user matrices held at once when Δ_Z is computed user chunk by user chunk.
CHUNK_BYTES = 128 * 2**20


def check_smoothing(smoothing) -> float:
    """The additive pseudo-count s: a finite number > 0, or :class:`InvalidInputError`.

    s > 0 keeps every augmented chain irreducible and aperiodic and is the Dirichlet prior of the posterior draws.
    """
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float, np.integer, np.floating)) or not (
        math.isfinite(float(smoothing)) and float(smoothing) > 0
    ):
        raise InvalidInputError(
            f"`smoothing` must be a finite pseudo-count > 0 (default {DEFAULT_SMOOTHING}; it keeps every state's row "
            f"defined and is the prior of the posterior draws), got {fmt(smoothing)}"
        )
    return float(smoothing)


def check_users(users, U: int) -> tuple:
    """`users` as a tuple of U distinct names (one per row of the states), or :class:`InvalidInputError`."""
    if isinstance(users, str) or users is None:
        raise InvalidInputError(f"`users` must be a sequence of {U} user names (one per row of `states`), got {fmt(users)}")
    try:
        names = tuple(str(u) for u in users)
    except TypeError:
        raise InvalidInputError(f"`users` must be a sequence of {U} user names, got {fmt(users)}") from None
    if len(names) != U:
        raise InvalidInputError(f"`users` must name the {U} rows of `states`, got {len(names)} names")
    if len(set(names)) != U:
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInputError(f"`users` must be distinct, got {dup!r} twice")
    return names


def check_starts(starts, U: int, name: str = "starts") -> np.ndarray:
    """Absolute slot of column 0 per user as int64 (U,) (default zeros), or :class:`InvalidInputError` naming `name`."""
    if starts is None:
        return np.zeros(U, dtype=np.int64)
    arr = np.asarray(starts)
    if arr.shape != (U,) or arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidInputError(
            f"`{name}` must give one integer slot per user ({U}): the absolute slot of column 0, got {fmt(starts)}"
        )
    return arr.astype(np.int64)


def check_fit_inputs(states, n_states, users, starts=None) -> tuple[np.ndarray, tuple, np.ndarray]:
    """Validate the common inputs of the fitting functions.

    Parameters
    ----------
    states : array_like, shape (U, T)
        Quantile states 0..K−1, −1 for a missing slot (see :func:`policyopt.models.empirical.states_matrix`).
    n_states : int
        K ≥ 2.
    users : sequence of str
        One distinct name per row.
    starts : array_like of int, shape (U,), optional
        Absolute slot of column 0 of each row (default 0).

    Returns
    -------
    (states, users, starts) : int64 array (U, T), tuple of str, int64 array (U,)

    Raises
    ------
    InvalidInputError
        Bad states (as :func:`~policyopt.models.empirical.states_matrix`), `users` not one distinct name per row,
        `starts` not one integer per row.
    """
    from policyopt.models.empirical import states_matrix

    x = states_matrix(states, n_states)
    U = x.shape[0]
    return x, check_users(users, U), check_starts(starts, U)


def count_codes(x: np.ndarray, n_bins: int, encode) -> np.ndarray:
    """Per-user histogram of integer codes, computed user chunk by user chunk so memory stays bounded.

    Parameters
    ----------
    x : numpy.ndarray of int64, shape (U, T)
        States (−1 missing).
    n_bins : int
        Codes lie in 0..n_bins−1.
    encode : callable
        ``encode(block, rows)`` → int64 codes of shape (U_c, W) for the users `rows` (a slice) whose states are
        `block` (U_c, T); −1 marks a window that is not counted.

    Returns
    -------
    numpy.ndarray of float64, shape (U, n_bins)
        Exact integer counts.
    """
    U, T = x.shape
    out = np.zeros((U, n_bins))
    chunk = max(1, (64 * 2**20) // max(1, 8 * n_bins + 40 * T))  # ~5 (U_c, T) int64 temporaries
    for s in range(0, U, chunk):
        rows = slice(s, min(U, s + chunk))
        c = encode(x[rows], rows)
        n = c.shape[0]
        ok = c >= 0
        flat = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], c.shape)[ok] * n_bins + c[ok]
        out[rows] = np.bincount(flat, minlength=n * n_bins).reshape(n, n_bins)
    return out


def require_transitions(per_user: np.ndarray, users: tuple, what: str) -> None:
    """Raise :class:`InvalidInputError` naming the first user whose count in `per_user` is 0 (`what`: what is counted).

    A user with nothing to fit from would get pure pseudo-count rows (uniform), whose Δ is small: that would
    understate the risk, so such a user is refused rather than fitted.
    """
    empty = np.flatnonzero(per_user == 0)
    if empty.size:
        raise InvalidInputError(
            f"user {users[int(empty[0])]!r} has no {what} to fit the model from; leave such users out "
            "(fit_population keeps only users with ≥ 10·K transitions)"
        )


# ------------------------------------------------------------------------------------- randomness and Δ helpers


def user_generators(rng, U: int, name: str = "rng") -> list:
    """One generator per user: a sequence of U Generators as given, or one Generator shared in user order.

    Parameters
    ----------
    rng : numpy.random.Generator or sequence of U numpy.random.Generator
        Simulation randomness (seeded by the caller, e.g. :func:`policyopt.models.empirical.user_streams`), never
        released noise.  With one generator per user a user's draws do not depend on the other users.
    U : int
        Number of users.

    Returns
    -------
    list of numpy.random.Generator, length U

    Raises
    ------
    InvalidInputError
        Neither a Generator nor U Generators.
    """
    if isinstance(rng, np.random.Generator):
        return [rng] * U
    if isinstance(rng, (list, tuple)) and all(isinstance(g, np.random.Generator) for g in rng):
        if len(rng) != U:
            raise InvalidInputError(f"`{name}` has {len(rng)} generators for {U} users (give one per user)")
        return list(rng)
    raise InvalidInputError(
        f"`{name}` must be a numpy.random.Generator or one per user (policyopt.models.empirical.user_streams), got {fmt(rng)}"
    )


def dirichlet_rows(alpha: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """One Dirichlet draw of every row of `alpha`, computed in log space (no 0/0 for tiny pseudo-counts).

    A Gamma(α) variate is drawn as Y·U^{1/α}, Y ~ Gamma(α + 1), U ~ Uniform(0, 1) (the boosting identity of
    G. Marsaglia, W. W. Tsang, ACM Trans. Math. Softw. 26(3), 2000), kept as ln Y + ln U / α, and each row is
    normalised by a log-sum-exp.  Plain Gamma(0.01) variates underflow to 0 about once in a thousand, and a row whose
    variates all underflow would be 0/0.  Probabilities below the smallest normal float are raised to it and the row
    renormalised, so every drawn chain stays irreducible (as :func:`policyopt.models.posterior.posterior_populations`).

    Parameters
    ----------
    alpha : numpy.ndarray, shape (..., K)
        Dirichlet parameters > 0 (counts + pseudo-count).
    gen : numpy.random.Generator
        Simulation randomness, never released noise.  Consumes ``standard_gamma`` of ``alpha.shape``, then
        ``random(alpha.shape)``.

    Returns
    -------
    numpy.ndarray, shape of `alpha`
        Rows summing to 1.
    """
    return _rows_from_variates(gen.standard_gamma(alpha + 1.0), gen.random(alpha.shape), alpha)


def _rows_from_variates(y: np.ndarray, u: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """:func:`dirichlet_rows` from its variates Y ~ Gamma(α + 1) and U ~ Uniform(0, 1), any leading shape."""
    with np.errstate(divide="ignore"):
        log_g = np.log(y) + np.log(u) / alpha  # ln Gamma(α) variate = ln Y + ln U / α (Marsaglia–Tsang boost)
    log_g -= log_g.max(axis=-1, keepdims=True)
    p = np.exp(log_g)
    p /= p.sum(axis=-1, keepdims=True)
    p = np.maximum(p, np.finfo(float).tiny)
    return p / p.sum(axis=-1, keepdims=True)


def second_eigenvalue_modulus(P: np.ndarray) -> np.ndarray:
    """Second largest eigenvalue modulus ``|λ₂|`` of each stochastic matrix of a stack (U, n, n) -> (U,).

    The largest modulus is 1 (the eigenvalue 1 of a stochastic matrix); ``|λ₂|`` is the asymptotic geometric rate of
    Δ(t) of an irreducible aperiodic chain.  A rounding allowance n·ε is added (eigenvalues of non-normal matrices
    are perturbed by more than ε), and the result is kept in [0, 1].
    """
    U, n, _ = P.shape
    if n == 1:
        return np.zeros(U)
    mods = np.sort(np.abs(np.linalg.eigvals(P)), axis=1)
    return np.minimum(1.0, mods[:, -2] + n * np.finfo(float).eps)


def population_log_max_tv(build, n_users: int, n_z: int, ts: np.ndarray) -> np.ndarray:
    """max over users of ln Δ (eq. (12)) of homogeneous Z chains, built and evaluated user chunk by user chunk.

    Parameters
    ----------
    build : callable
        ``build(slice)`` → (U_c, n_z, n_z) transition matrices of those users' Z chains.
    n_users : int
    n_z : int
        Number of states of each Z chain.
    ts : numpy.ndarray of int64
        Sorted unique ages (slots).

    Returns
    -------
    numpy.ndarray, shape of `ts`
        ln Δ_Z(ts): :meth:`policyopt.models.markov.Population.log_max_tv` of each chunk, maximised over chunks
        (a user's value does not depend on its chunk), so at most about :data:`CHUNK_BYTES` of matrices are held.

    Raises
    ------
    InvalidModelError
        A reducible Z chain.
    """
    chunk = max(1, CHUNK_BYTES // (12 * 8 * n_z * n_z))  # ~12 (n_z, n_z) arrays per user inside Population
    best = np.full(ts.shape, -np.inf)
    for s in range(0, n_users, chunk):
        pop = Population.from_matrices(build(slice(s, min(n_users, s + chunk))))
        best = np.maximum(best, np.asarray(pop.log_max_tv(ts), dtype=float).reshape(ts.shape))
    return best


def check_stochastic_stack(P, name: str, shape_text: str, ndim: int) -> np.ndarray:
    """A float `ndim`-array of row-stochastic rows (last axis sums to 1 within 1e-9, entries ≥ 0), renormalised.

    Raises
    ------
    InvalidModelError
        Not numeric, wrong number of axes or an empty axis (the message shows `shape_text`), a negative or
        non-finite entry, or a row whose sum is not 1.
    """
    from policyopt.models.markov import ROW_SUM_TOL

    try:
        arr = np.array(P, dtype=float)
    except (TypeError, ValueError):
        raise InvalidModelError(f"`{name}` must be numeric {shape_text}, got {fmt(P)}") from None
    if arr.ndim != ndim or 0 in arr.shape:
        raise InvalidModelError(f"`{name}` must have shape {shape_text}, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        raise InvalidModelError(f"`{name}` has a negative or non-finite entry {float(arr[where])!r} at {where}")
    sums = arr.sum(axis=-1)
    off = np.abs(sums - 1.0) > ROW_SUM_TOL
    if off.any():
        where = tuple(int(v) for v in np.argwhere(off)[0])
        raise InvalidModelError(f"`{name}` row {where} sums to {float(sums[where])!r}, not 1; normalise each row")
    return arr / sums[..., None]


def posterior_alpha(counts, smoothing, what: str) -> np.ndarray:
    """Dirichlet parameters counts + s of every row (the posterior whose mean is the smoothed estimate).

    Raises
    ------
    InvalidInputError
        No counts (a model built from parameters; `what` names it) or a smoothing that is not > 0.
    """
    if counts is None:
        raise InvalidInputError(
            f"this {what} was built from given parameters, without counts: posterior draws need a fitted model "
            "(fit_markov_model)"
        )
    if smoothing is None or not smoothing > 0:
        raise InvalidInputError(
            "the Dirichlet posterior needs a positive smoothing pseudo-count (its prior); the model was fitted with "
            f"`smoothing`={smoothing!r}"
        )
    return counts + smoothing  # Dir(n_x· + s) per row: the posterior whose mean is the smoothed estimate


def draw_user_rows(alpha: np.ndarray, gens: list) -> np.ndarray:
    """One :func:`dirichlet_rows` draw per user: ``alpha[u]`` with ``gens[u]``; shape of `alpha` (U, ..., K).

    Each generator is consumed as :func:`dirichlet_rows` consumes it (so the draws of a user do not depend on the
    other users); only the variates are drawn user by user, the arithmetic is done once for all users (the rows are
    bit for bit those of the user-by-user call).
    """
    a1 = alpha + 1.0
    y, u = np.empty(alpha.shape), np.empty(alpha.shape)
    for i, g in enumerate(gens):
        y[i] = g.standard_gamma(a1[i])
        u[i] = g.random(alpha.shape[1:])
    return _rows_from_variates(y, u, alpha)


def check_seed(seed) -> int:
    """An integer seed ≥ 0, or :class:`InvalidInputError`."""
    check_int(seed, "seed", 0)
    return int(seed)
