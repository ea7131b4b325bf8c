"""The per-count baseline of :meth:`policyopt.utility.failure_rate.FailureRatePenalty.value` (tests and benchmark).

``PerCountFailureRate`` evaluates f_MLE of Zhang, Wei, Berry, Huang, "Age-Dependent Differential Privacy", IEEE
Trans. Inf. Theory, 2024, eqs. (50)–(51) the way main did at 89ab31f, before the O(I) recurrences: per age, the
interval algebra over all I + 1 counts (:meth:`~policyopt.utility.failure_rate.FailureRatePenalty.conditional_value`,
O(I²) per point), averaged over the prior of K_0 or read at the given X_0.  The recurrence test compares the fast path
against it and the benchmark times both in the same run.
"""

from __future__ import annotations

import numpy as np

from policyopt.utility.failure_rate import FailureRatePenalty


class PerCountFailureRate(FailureRatePenalty):
    """The evaluation path of main before the recurrences: per age, the interval algebra over all I + 1 counts."""

    def value(self, t, epsilon_c):
        """f_MLE(t, ε_C) of eq. (51) from :meth:`conditional_value`, once per distinct age and budget.

        Parameters
        ----------
        t : int or array_like of int
            Ages (slots, ≥ 0).
        epsilon_c : float or array_like
            Budgets (nats, > 0; ``inf`` for the noiseless limit), broadcast against `t`.

        Returns
        -------
        float or numpy.ndarray
            Probability of a wrong decision, the broadcast shape of the inputs.

        Raises
        ------
        InvalidInputError
            As :meth:`conditional_value`.
        """
        ts, e = np.broadcast_arrays(np.asarray(t), np.asarray(epsilon_c, dtype=float))
        out = np.empty(ts.shape)
        ft, fe, fo = ts.reshape(-1), e.reshape(-1), out.reshape(-1)
        for tv in np.unique(ft):
            sel = ft == tv
            ue, inv = np.unique(fe[sel], return_inverse=True)
            given = self.conditional_value(int(tv), ue)
            fo[sel] = (given[:, self.x0] if self.x0 is not None else given @ np.exp(self._log_prior))[inv]
        return float(out) if out.ndim == 0 else out
