"""Tabulated Δ(t): :class:`TabulatedMaxTV`, a Δ(t) source given by its table (a posterior band, the data's band, a
ledger's record, a distributed fit), and :class:`TabulatedPopulation`, a population whose Δ(t) table is computed once
(for sweeps and other repeated solves).

Sits in :mod:`policyopt.models` beside :class:`~policyopt.models.markov.Population`.
"""

from __future__ import annotations

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, check_int, fmt
from policyopt.models.markov import GeometricEnvelope, Population, as_slots

__all__ = ["TabulatedMaxTV", "TabulatedPopulation", "tabulate_population"]


class TabulatedMaxTV:
    """A Δ(t) source given by its table ln Δ(0..H): the one tabulated Δ(t) type of policyopt.

    Supplies ``n_users`` and ``log_max_tv(t)`` (the :class:`~policyopt.problems.MaxTVSource` protocol of the schedule
    problem), plus ``spectral_rate`` and ``envelope`` for reports.  Its tables: a simultaneous posterior band of the
    chains' Δ(t) (:func:`~policyopt.models.posterior.simultaneous_upper_band`, ``--robust``), the data's Δ̃(t) band
    (``--max-tv empirical``), the Δ(t) a ledger recorded, and the reduced table of a distributed fit (the maximum over
    the users of every Parquet file, with ``n_states``).

    Parameters
    ----------
    log_table : array_like, shape (H + 1,)
        ln Δ(t) for t = 0..H (nats), non-increasing, ≤ 0 (Zhang et al. 2024, eq. (12): a maximum over users).
    n_users : int
        Users of the pilot the table describes.
    rate : float
        A geometric rate ρ in [0, 1] for the envelope (eq. (38)), e.g. λ* (Lemma 3) or the largest λ* over posterior
        draws; a value above 1 by rounding counts as 1.
    beyond_one : bool, keyword-only
        Ages beyond H get Δ(t) = 1 (ln Δ = 0: nothing assumed there, as for a Δ(t) estimated from data up to
        its largest lag) instead of being refused.
    n_states : int, keyword-only, optional
        K, the states of the chains the table was computed from (reported as ``model.states``), when known.

    Raises
    ------
    InvalidModelError
        If the table is empty, positive somewhere, increases or holds NaN, or `rate` is negative or NaN.
    InvalidInputError
        If a requested age is beyond H (unless `beyond_one`).
    """

    def __init__(self, log_table, n_users: int, rate: float, *, beyond_one: bool = False, n_states: int | None = None):
        tab = np.asarray(log_table, dtype=float).reshape(-1)
        with np.errstate(invalid="ignore"):  # −inf − (−inf) = NaN between two Δ = 0 entries: not an increase
            rises = np.any(np.diff(tab) > 1e-12)
        if tab.size == 0 or np.any(tab > 1e-12) or rises or np.isnan(tab).any():
            raise InvalidModelError("`log_table` must be a non-empty, non-increasing table of ln Δ(t) ≤ 0")
        if not float(rate) >= 0.0:
            raise InvalidModelError(f"`rate` must be a number in [0, 1], got {fmt(rate)}")
        self._tab = np.minimum(tab, 0.0)
        self._tab.setflags(write=False)
        self.n_users = int(n_users)
        self.n_states = None if n_states is None else int(n_states)
        self.spectral_rate = float(min(1.0, float(rate)))
        self.beyond_one = bool(beyond_one)

    def __repr__(self) -> str:
        return f"TabulatedMaxTV(n_users={self.n_users}, horizon={self.horizon})"

    @property
    def log_max_tv_table(self) -> np.ndarray:
        """ln Δ(0..H), read-only, shape (H + 1,)."""
        return self._tab

    @property
    def horizon(self) -> int:
        """Last tabulated age H (slots)."""
        return self._tab.size - 1

    def log_max_tv(self, t):
        """ln Δ(t) from the table (0 beyond H with ``beyond_one``); same shape as `t`.

        Raises
        ------
        InvalidInputError
            If an age is negative, not integral, or beyond H (unless ``beyond_one``).
        """
        ts = as_slots(t, "t")
        if self.beyond_one:
            out = np.where(ts > self.horizon, 0.0, self._tab[np.minimum(ts, self.horizon)])
            return float(out) if out.ndim == 0 else out
        if ts.size and int(ts.max()) > self.horizon:
            raise InvalidInputError(f"`t` = {int(ts.max())} is beyond the Δ(t) table (ages 0..{self.horizon}): tabulate "
                                    "(or fit) it with a larger horizon")
        out = self._tab[ts]
        return float(out) if out.ndim == 0 else out

    def max_tv(self, t):
        """Δ(t) from the table."""
        out = np.exp(self.log_max_tv(t))
        return float(out) if np.ndim(out) == 0 else out

    def extended(self, horizon: int) -> "TabulatedMaxTV":
        """The table continued to age `horizon` by submultiplicativity: Δ(qH + r) ≤ Δ(H)^q · Δ(r).

        Δ(t) of eq. (12) is the maximum over the users u of the Dobrushin coefficient
        δ(P̂_u^t) = max_{x,x'} ½‖(e_x − e_x')P̂_u^t‖₁ of the reversed chain's t-step matrix, and
        δ(PQ) ≤ δ(P)·δ(Q).  So whenever this table bounds every user's δ(P̂_u^t) for all t ≤ H at
        once (as the simultaneous band of :func:`simultaneous_upper_band` does on its posterior
        event), δ(P̂_u^{qH+r}) ≤ δ(P̂_u^H)^q·δ(P̂_u^r) ≤ b(H)^q·b(r) bounds it beyond H on the same
        event.  Computed in logs: ln b(t) = q·ln b(H) + ln b(r), t = qH + r, 0 ≤ r < H; ages ≤ H
        keep their tabulated value.  The result is non-increasing and ≤ b(H) beyond H.

        Parameters
        ----------
        horizon : int
            Last age (slots) of the new table; at most H returns this table unchanged.

        Returns
        -------
        TabulatedMaxTV
            Same ``n_users`` and ``spectral_rate``; ``horizon`` = max(`horizon`, H).

        Raises
        ------
        InvalidInputError
            If `horizon` is not an integer ≥ 0, or H = 0 (Δ(0) = 1 alone says nothing about later ages).

        References
        ----------
        Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12);
        Dobrushin's ergodic coefficient is submultiplicative: E. Seneta, "Non-negative Matrices and Markov
        Chains", Springer, 2006, Section 4.3.
        """
        (h,) = as_slots([horizon], "horizon")
        H = self.horizon
        if int(h) <= H:
            return self
        if H == 0:
            raise InvalidInputError("a Δ(t) table with only Δ(0) cannot be extended (tabulate at least Δ(0..1))")
        t = np.arange(H + 1, int(h) + 1)
        q, r = np.divmod(t, H)
        # ln(Δ(H)^q · Δ(r)) (q ≥ 1 and both logs ≤ 0, so −inf stays −inf, never NaN)
        ext = np.minimum(q * self._tab[H] + self._tab[r], self._tab[H])
        return TabulatedMaxTV(np.concatenate([self._tab, ext]), self.n_users, self.spectral_rate,
                              n_states=self.n_states)

    def envelope(self, horizon: int, rho: float | None = None) -> GeometricEnvelope:
        """Smallest c ≥ 1 with Δ(t) ≤ c·ρ^t (eq. (38)) for t = 0..min(`horizon`, H); ρ defaults to ``spectral_rate``.

        The computation of :meth:`policyopt.models.markov.Population.envelope` on the table.

        Raises
        ------
        InvalidInputError
            As :meth:`~policyopt.models.markov.Population.envelope`: `rho` outside [0, 1], or so small that no finite
            c dominates the table.
        """
        (h,) = as_slots([horizon], "horizon")
        return Population.envelope(self, min(int(h), self.horizon), rho)


class TabulatedPopulation(Population):
    """A :class:`~policyopt.models.markov.Population` with a precomputed ln Δ(0..horizon) table.

    Built by :func:`tabulate_population`; behaves exactly like the population it copies.
    """

    def log_max_tv(self, t):
        """ln Δ(t) of eq. (12): a table lookup for t = 0..n (n ≤ horizon), else computed.

        Parameters
        ----------
        t : int or array_like of int
            Ages in slots.

        Returns
        -------
        float or numpy.ndarray
            As :meth:`policyopt.models.markov.Population.log_max_tv`.

        Raises
        ------
        InvalidInputError, InvalidModelError
            As :meth:`policyopt.models.markov.Population.log_max_tv`.
        """
        ts = np.asarray(t)
        table = self.__dict__.get("log_max_tv_table")
        if (
            table is not None
            and ts.ndim == 1
            and 0 < ts.size <= table.size
            and np.issubdtype(ts.dtype, np.integer)
            and np.array_equal(ts, np.arange(ts.size))
        ):
            return table[: ts.size].copy()
        return super().log_max_tv(t)


def tabulate_population(population: Population, horizon: int) -> TabulatedPopulation:
    """A copy of `population` whose Δ(0..horizon) table is computed once and then looked up.

    Every point of a sweep asks its model for ln Δ(t), t = 0..n (the schedule problem's table
    and the envelope (38)); computing it once per model instead of twice per point is most of
    a sweep's run time.  Requests for exactly the consecutive ages 0..n with n ≤ `horizon` are
    answered from the table, which holds the very values :meth:`Population.log_max_tv` returns
    for such a request (its propagation is sequential in t, so the value at t does not depend
    on n); any other request is computed as before.  The table (and λ*) travel with the object
    when it is pickled to Dask workers.

    Parameters
    ----------
    population : policyopt.models.markov.Population
    horizon : int
        Largest age tabulated (slots), e.g. max(A_MAX, S_MAX) + 1.

    Returns
    -------
    TabulatedPopulation
        Same chains and counts, with the table.

    Raises
    ------
    InvalidInputError
        If `horizon` is negative or not an integer.
    InvalidModelError
        If a chain is reducible (from computing Δ(t)).

    References
    ----------
    Zhang et al. (2024), eq. (12) (Δ(t)) and (38) (envelope).
    """

    check_int(horizon, "horizon", 0, "slots")
    out = TabulatedPopulation(population.chains, population.counts, value_unit=getattr(population, "value_unit", ""))
    out.__dict__["log_max_tv_table"] = np.asarray(population.log_max_tv(np.arange(int(horizon) + 1)), dtype=float)
    out.spectral_rate  # noqa: B018 - cache λ* before the object is shipped to workers
    return out
