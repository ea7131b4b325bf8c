"""policyopt: privacy-utility policy design for time-varying personal data.

Privacy is measured in nats and time in slots.  Main entry points:

* :class:`~policyopt.models.markov.MarkovChain`, :class:`~policyopt.models.markov.Population` — models and Δ(t);
* :mod:`policyopt.privacy.age_dependent` — Theorem 1, composition Theorem 3, peak risk Proposition 3;
* :class:`~policyopt.utility.penalty.MSEPenalty` — utility penalty;
* :func:`~policyopt.studies.schedule.design_schedule` — the optimal schedule with benchmarks;
* :mod:`policyopt.problems` / :mod:`policyopt.solvers` — formulations and back ends.
"""

from .data import load_citylearn
from .models.estimation import fit_population
from .privacy.age_dependent import compose, peak_risk, peak_risk_iteration, risk_after_aging
from .errors import (
    BackendUnavailableError,
    InfeasibleProblemError,
    InvalidInputError,
    InvalidModelError,
    PolicyOptError,
)
from .models.markov import GeometricEnvelope, MarkovChain, Population, two_state_chain
from .utility.penalty import CallablePenalty, MSEPenalty, two_state_mse
from .result import Solution, Status, Termination
from .studies.schedule import ScheduleReport, design_schedule

__version__ = "0.1.0"

__all__ = [
    "load_citylearn",
    "fit_population",
    "design_schedule",
    "ScheduleReport",
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
