"""policyopt: privacy-utility policy design for time-varying personal data.

Privacy is measured in nats and time in slots.  Main entry points:

* :class:`~policyopt.models.markov.MarkovChain`, :class:`~policyopt.models.markov.Population` — models and Δ(t);
* :mod:`policyopt.privacy.age_dependent` — Theorem 1, composition Theorem 3, peak risk Proposition 3;
* :class:`~policyopt.utility.penalty.MSEPenalty` — utility penalty (chain model);
  :class:`~policyopt.utility.readings_penalty.ReadingsMSEPenalty` — the MSE estimated from the readings;
* :func:`~policyopt.studies.schedule.design_schedule` — the optimal schedule with benchmarks;
* :func:`~policyopt.app.schedule.design_deployment` — ``policyopt schedule`` from Python: the whole design on data
  (model check, guarantee, posterior checks, backtest), returning the command's report (→ :class:`DeploymentReport`);
  likewise :func:`check_deployment_model` (``check-model``), :func:`backtest_deployment` (``backtest``),
  :func:`publish_releases` (``publish``), :func:`audit_ledger` (``ledger``), :func:`sweep_designs` (``sweep``),
  :func:`temporal_leakage` (``tpl``), :func:`allocate_tpl_budgets` (``tpl-budget``) and :func:`check_readings`
  (``check-data``), each returning the command's report (→ :class:`CommandReport`: ``to_dict()`` its
  ``--json`` object, ``str()`` its text);
* :mod:`policyopt.problems` / :mod:`policyopt.solvers` — formulations and back ends.

The entry points of the other tasks are exported here too (imported on first use, so that
``import policyopt`` and the command line stay fast):

* temporal privacy leakage (Cao et al. 2019): :func:`leakage`, :func:`supremum`,
  :class:`BudgetAllocationProblem`;
* discounted DP (Farokhi 2020): :func:`design_discounted` (→ :class:`DiscountedReport`, prints as
  ``policyopt discounted``), :func:`discounted_loss`, :func:`corollary_schedule`,
  :class:`DiscountedScheduleProblem`, :func:`daily_means`;
* correlated sequences (Luo et al. 2025): :func:`design_fran` (→ :class:`FRANReport`, prints as
  ``policyopt fran``), :class:`CouplingMarkovChain`, :func:`two_binary_cmc`,
  :func:`fit_cmc_from_readings`, :class:`FRANProblem`, :class:`Query`;
* sensitivity sweeps: :func:`run_sweep`, :class:`SweepModel`, :class:`SweepSettings`
  (``SweepModel(empirical=empirical_design(...))`` designs every point against Δ(t) from the data);
* the chain model against the data: :func:`check_model` (→ :class:`ModelCheckReport`, prints as
  ``policyopt check-model``), :func:`check_model_partitions` (the same check of a Parquet data set on Dask, as
  ``check-model --workers N``), :func:`estimate_max_tv` (→ :class:`EmpiricalMaxTV`, Δ(t) estimated directly),
  :func:`empirical_design` (→ :class:`EmpiricalDesign`, the Δ̃(t) table of ``--max-tv empirical``).
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
from .utility.readings_penalty import ReadingsMSEPenalty, readings_moments
from .result import Solution, Status, Termination
from .studies.schedule import ScheduleReport, design_schedule
from . import progress

__version__ = "0.1.0"

#: Entry points imported on first use: name -> module.
_LAZY = {
    "design_deployment": "policyopt.app.schedule",
    "DeploymentReport": "policyopt.app.schedule",
    "DesignOptions": "policyopt.app.design_options",
    "CommandReport": "policyopt.app.report",
    "check_deployment_model": "policyopt.app.check_model",
    "CheckModelOptions": "policyopt.app.check_model",
    "backtest_deployment": "policyopt.app.backtest",
    "BacktestOptions": "policyopt.app.backtest",
    "audit_ledger": "policyopt.app.ledger",
    "publish_releases": "policyopt.app.publish",
    "sweep_designs": "policyopt.app.sweep",
    "temporal_leakage": "policyopt.app.tpl",
    "check_readings": "policyopt.app.check_data",
    "CheckDataOptions": "policyopt.app.check_data",
    "TplOptions": "policyopt.app.tpl",
    "allocate_tpl_budgets": "policyopt.app.tpl",
    "TplBudgetOptions": "policyopt.app.tpl",
    "SweepOptions": "policyopt.app.sweep",
    "PublishOptions": "policyopt.app.publish",
    "LedgerOptions": "policyopt.app.ledger",
    "leakage": "policyopt.privacy.temporal",
    "supremum": "policyopt.privacy.temporal",
    "BudgetAllocationProblem": "policyopt.problems.tpl_budget",
    "discounted_loss": "policyopt.privacy.discounted",
    "corollary_schedule": "policyopt.privacy.discounted_schedules",
    "DiscountedScheduleProblem": "policyopt.problems.discounted",
    "daily_means": "policyopt.studies.citylearn",
    "CouplingMarkovChain": "policyopt.models.cmc",
    "two_binary_cmc": "policyopt.models.cmc",
    "fit_cmc_from_readings": "policyopt.models.cmc_fit",
    "FRANProblem": "policyopt.problems.fran",
    "Query": "policyopt.privacy.fran",
    "design_fran": "policyopt.studies.fran_report",
    "FRANReport": "policyopt.studies.fran_report",
    "design_discounted": "policyopt.studies.discounted_report",
    "DiscountedReport": "policyopt.studies.discounted_report",
    "run_sweep": "policyopt.studies.sweep",
    "SweepModel": "policyopt.studies.sweep",
    "SweepSettings": "policyopt.studies.sweep",
    "check_model": "policyopt.studies.check_model",
    "ModelCheckReport": "policyopt.studies.check_model",
    "check_model_partitions": "policyopt.studies.distributed_checks",
    "estimate_max_tv": "policyopt.models.empirical",
    "empirical_design": "policyopt.studies.empirical_design",
    "EmpiricalDesign": "policyopt.studies.empirical_design",
    "EmpiricalMaxTV": "policyopt.models.empirical",
    "ScheduleDesign": "policyopt.io.schedule_design",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'policyopt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


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
    "ReadingsMSEPenalty",
    "readings_moments",
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
    *_LAZY,
]
