"""A population whose Δ(t) table is computed once (for sweeps and other repeated solves).

Sits in :mod:`policyopt.models` beside :class:`~policyopt.models.markov.Population`, which it extends.
"""

from __future__ import annotations

from policyopt.errors import check_int
from policyopt.models.markov import Population

__all__ = ["TabulatedPopulation", "tabulate_population"]


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
        import numpy as np

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
    import numpy as np

    check_int(horizon, "horizon", 0, "slots")
    out = TabulatedPopulation(population.chains, population.counts, value_unit=getattr(population, "value_unit", ""))
    out.__dict__["log_max_tv_table"] = np.asarray(population.log_max_tv(np.arange(int(horizon) + 1)), dtype=float)
    out.spectral_rate  # noqa: B018 - cache λ* before the object is shipped to workers
    return out
