"""policyopt: privacy-utility policy design for time-varying personal data.

Privacy is measured in nats and time in slots.  Main entry points:

* :class:`~policyopt.markov.MarkovChain`, :class:`~policyopt.markov.Population` — models and Δ(t);
* :mod:`policyopt.accounting` — Theorem 1, composition Theorem 3, peak risk Proposition 3;
* :class:`~policyopt.penalty.MSEPenalty` — utility penalty;
* :func:`~policyopt.schedule.design_schedule` — the optimal schedule with benchmarks;
* :mod:`policyopt.problems` / :mod:`policyopt.solvers` — formulations and back ends.
"""

from .accounting import compose, peak_risk, peak_risk_iteration, risk_after_aging
from .errors import (
    BackendUnavailableError,
    InfeasibleProblemError,
    InvalidInputError,
    InvalidModelError,
    PolicyOptError,
)
from .markov import GeometricEnvelope, MarkovChain, Population, two_state_chain
from .penalty import CallablePenalty, MSEPenalty, two_state_mse
from .result import Solution, Status, Termination

__version__ = "0.1.0"

__all__ = [
    "MarkovChain",
    "Population",
    "GeometricEnvelope",
    "two_state_chain",
    "risk_after_aging",
    "compose",
    "peak_risk",
    "peak_risk_iteration",
    "MSEPenalty",
    "CallablePenalty",
    "two_state_mse",
    "Solution",
    "Status",
    "Termination",
    "PolicyOptError",
    "InvalidInputError",
    "InvalidModelError",
    "InfeasibleProblemError",
    "BackendUnavailableError",
]
