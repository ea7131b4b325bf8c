"""The MSE penalty of a partitioned data set, from reduced staleness sums (the distributed fit's penalty).

Source: M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2),
2024, eqs. (48)–(49), with the sensitivity corrected as in :class:`~policyopt.utility.penalty.MSEPenalty`.  The sums
over users are formed by :func:`policyopt.studies.distributed.fit_partitions`.
"""

from __future__ import annotations

import numpy as np

from policyopt.errors import InvalidInputError, InvalidModelError, fmt
from policyopt.models.markov import as_slots
from policyopt.utility.penalty import MSEPenalty

__all__ = ["TabulatedMSEPenalty"]


class TabulatedMSEPenalty(MSEPenalty):
    """The MSE penalty (48)–(49) of Zhang et al. from reduced staleness sums (see :class:`MSEPenalty`).

    Parameters
    ----------
    n_users : int
        I (users whose chains were estimated).
    value_range : (float, float)
        Smallest and largest state value (the sensitivity is their difference over I).
    staleness_sum : array_like, shape (n,)
        Σ_u E[(x_{u,−t} − x_{u,0})²] for t = 0..n−1 (value units squared).
    variance_sum : float
        Σ_u 2 Var_{π_u}(x_u).
    unit : str
        Unit of the penalty.

    Raises
    ------
    InvalidModelError
        If all state values are equal (sensitivity 0).
    """

    def __init__(self, n_users: int, value_range, staleness_sum, variance_sum: float, unit: str = "",
                 n_states: int = 12, n_partitions: int = 1):
        lo, hi = (float(v) for v in value_range)
        if not hi > lo:
            raise InvalidModelError(
                f"all state values equal {lo!r}: the mean has sensitivity 0 and the MSE penalty is degenerate"
            )
        self.population = None
        self.unit = unit
        self.n_users = int(n_users)
        self.users = self.n_users  # the deployment is the users read (MSEPenalty's `users`)
        self.value_range = (lo, hi)
        self.value_range_declared = False  # the data's own state values: not private (the report warns)
        self.n_states = int(n_states)
        self.n_partitions = int(n_partitions)
        self.sensitivity = (hi - lo) / self.n_users
        table = np.asarray(staleness_sum, dtype=float) / self.n_users**2  # as MSEPenalty: total / I²
        table.setflags(write=False)
        self._reduced = table
        self._limit = float(variance_sum) / self.n_users**2
        self._windows = {}  # MSEPenalty's cache of the staleness window maxima

    def with_users(self, users: int):
        """Not available: the reduced table is the penalty of the I users read.

        Raises
        ------
        InvalidInputError
            Always (name the deployment size by the data read instead).
        """
        raise InvalidInputError(f"`users` = {fmt(users)}: the distributed penalty is that of the {self.n_users} users "
                                "read; another deployment size needs the serial fit (MSEPenalty.with_users)")

    def staleness(self, t):
        """Staleness term (1/I²) Σ_i E[(x_{i,−t} − x_{i,0})²] from the reduced table.

        Raises
        ------
        InvalidInputError
            If an age is beyond the table.
        """
        ts = as_slots(t, "t")
        if ts.size and int(ts.max()) >= self._reduced.size:
            raise InvalidInputError(
                f"`t` = {int(ts.max())} is beyond the distributed staleness table (ages 0..{self._reduced.size - 1})"
            )
        out = self._reduced[ts]
        return float(out) if out.ndim == 0 else out

    @property
    def staleness_limit(self) -> float:
        """(1/I²) Σ_i 2 Var_{π_i}(x_i), as :attr:`MSEPenalty.staleness_limit`."""
        return self._limit

    @property
    def staleness_rel_error(self) -> float:
        """Relative error bound of the reduced staleness table: the per-user bound of
        :attr:`MSEPenalty.staleness_rel_error` (K states, n tabulated ages) plus the sums over users within a
        partition and over partitions (non-negative terms: at most I + P more roundings, γ_m = m·u)."""
        n = max(int(self._reduced.size), 1)
        K = self.n_states
        return 4.0 * (K * (n + 1) + K * K + 8) * 2.0**-53 + (self.n_users + self.n_partitions) * 2.0**-53
