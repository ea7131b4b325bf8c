"""Temporal privacy leakage (BPL / FPL / TPL) of continuous releases under Markov correlations.

Source: Y. Cao, M. Yoshikawa, Y. Xiao, L. Xiong, "Quantifying Differential Privacy in Continuous Data Release under
Temporal Correlations", IEEE Trans. Knowl. Data Eng. 31(7), 2019.  Privacy is in nats, time in steps.

This module gathers the public names; each part lives in a module named for it:

* :mod:`policyopt.privacy.tpl_loss` — the privacy loss function L(α) of eq. (24) (:class:`LossFunction`,
  Theorem 5 / Algorithm 1, the piecewise form of Theorems 8–10 / Algorithms 2–5, the LP (19)–(21));
* :mod:`policyopt.privacy.tpl_envelope` — the row-pair geometry L is built from: Theorem 5's sorted prefixes,
  Algorithm 2's tables, the candidate chain and Algorithm 4's upper envelope on [0, ∞);
* :mod:`policyopt.privacy.tpl_leakage` — the recursions BPL / FPL / TPL (eqs. (10)–(16)), their proven
  rounding margin and the text of ``policyopt tpl``;
* :mod:`policyopt.privacy.tpl_supremum` — the supremum of BPL / FPL under a constant budget (Theorem 11);
* :mod:`policyopt.privacy.tpl_prune`, :mod:`policyopt.privacy.tpl_kernels` — pruning of row pairs and the
  compiled loops for large chains.

Each module's docstring lists the errors of the paper it corrects.
"""

from policyopt.privacy.tpl_leakage import (
    TemporalLeakage,
    format_leakage,
    leakage,
    leakage_rounding_error,
    leakage_upper,
    paired_users,
    window_leakage,
)
from policyopt.privacy.tpl_loss import LossFunction, scalar_piecewise
from policyopt.privacy.tpl_supremum import Supremum, supremum, supremum_upper

__all__ = [
    "format_leakage",
    "paired_users",
    "LossFunction",
    "TemporalLeakage",
    "leakage",
    "leakage_upper",
    "leakage_rounding_error",
    "window_leakage",
    "Supremum",
    "supremum",
    "supremum_upper",
    "scalar_piecewise",
]
