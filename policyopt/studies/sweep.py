"""Sensitivity sweeps: the optimal schedule over a grid of utility bounds f̄ and model parameters.

What ``policyopt sweep`` runs.  Every grid point is one call of
:func:`policyopt.studies.schedule.design_schedule`; its result becomes one row of a CSV file and one
line of a JSON-lines companion (``FILE.jsonl`` next to ``FILE.csv``), both appended and flushed
point by point, so an interrupted sweep loses no finished point and a rerun with the same
output file computes only the missing points.  Points run serially in-process or in parallel on
a Dask cluster (a local one, or an existing one by address); the models (Markov chains, Δ(t),
penalty) are built once and shipped to the workers once, and every row is a deterministic
function of its inputs, so serial and parallel sweeps write identical rows (only
``wall_time_s`` differs).

Corollary 3 of M. Zhang, E. Wei, R. Berry, J. Huang, "Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory 70(2), 2024 gives a sufficient
condition under which raising f̄ does not lower the minimal peak risk ("no trade-off").  The
sweep detects the property itself on the grid: :func:`no_tradeoff_flags` marks each interval
[f̄_i, f̄_{i+1}] on which the optimal ε* does not decrease, and :func:`no_tradeoff_ranges` merges
them into ranges.  With the exact solver ε* is a global optimum, so it is non-increasing in f̄
and "does not decrease" means "stays equal" (within a relative tolerance).

Every row states the guarantee ``policyopt schedule`` states for the same point (issue 32): the point's report
goes through :func:`policyopt.studies.guarantee.apply_guarantee` with the verdict of the sweep's model check
(:class:`ModelVerdict`, made once per fitted model by the caller, e.g. from
:func:`policyopt.studies.markov_check.design_check`), so the model-based ε* of eq. (30) is stated only under a
Markov model that passed its checks on held-out readings (or was given without data) and the model-free (ε, δ) of
each user's whole series over the horizon is in every row; where no schedule has a finite ε*, the horizon design is
Theorem 3's under a trusted model and the model-free one otherwise, as in ``schedule``.

Rows are never lost or mixed:

* **one writer per output.**  :func:`run_sweep` holds an exclusive ``fcntl.flock`` on
  ``FILE.csv.lock`` (next to the CSV) from reading the existing files to the final rewrite.  A
  second sweep on the same ``--out`` is refused at once (:class:`SweepLockedError`) or, with
  ``wait=True`` (``--wait``), blocks until the first finishes and then resumes from its rows.  The
  lock file is removed when the sweep ends (a waiter that locked the removed file retries on the new one).
* **no resume across changed inputs.**  ``FILE.meta.json`` records the sha256 of every input file
  (``--data``, ``--matrix``; the bundled data file when no model option is given) and the
  policyopt version that wrote the rows, the Δ(t) source of the models (the chains', or
  ``empirical:LEVEL`` with its horizon) and the guarantee settings (Markov model, privacy target, δ, horizon,
  ``--accept-refuted`` reason); a rerun whose inputs hash differently (an edited data
  file), whose Δ(t) source, guarantee settings or version differs is refused (:class:`SweepInputsChangedError`)
  before any row is read or written, and so is a sweep file written before the guarantee columns existed.
* **unique temporary files.**  Every rewrite goes through a ``tempfile.mkstemp`` file in the
  output's directory and ``os.replace``, so concurrent sweeps on different outputs in one
  directory never share a temporary name.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from policyopt.errors import InvalidInputError, PolicyOptError, fmt
from policyopt.models.tabulated import TabulatedPopulation, tabulate_population
from policyopt.result import result_repr
from policyopt.studies.sweep_grid import (  # noqa: F401  (re-exported: the sweep's public names)
    DEFAULT_TRADEOFF_RTOL,
    MAX_GRID_POINTS,
    no_tradeoff_flags,
    no_tradeoff_ranges,
    parse_grid,
)
from policyopt.studies.sweep_meta import (  # noqa: F401  (re-exported)
    file_sha256,
    guarantee_metadata,
    max_tv_metadata,
    sweep_guarantee_settings,
    sweep_metadata,
)

from policyopt.studies.sweep_store import (  # noqa: F401  (re-exported: the sweep's files)
    COLUMNS,
    INPUT_COLUMNS,
    MODEL_INPUTS,
    SweepInputsChangedError,
    SweepLockedError,
    SweepStore,
    cell_text,
    exclusive_lock,
    jsonl_path,
    lock_path,
    meta_path,
    point_key,
    read_sweep_csv,
)

__all__ = [
    "SweepModel",
    "ModelVerdict",
    "model_verdict",
    "given_model_verdict",
    "sweep_guarantee_settings",
    "guarantee_metadata",
    "SweepSettings",
    "SweepResult",
    "COLUMNS",
    "parse_grid",
    "solve_point",
    "solve_points",
    "run_sweep",
    "no_tradeoff_flags",
    "no_tradeoff_ranges",
    "read_sweep_csv",
    "jsonl_path",
    "lock_path",
    "meta_path",
    "file_sha256",
    "sweep_metadata",
    "max_tv_metadata",
    "SweepLockedError",
    "SweepInputsChangedError",
    "tabulate_population",
    "TabulatedPopulation",
    "MAX_GRID_POINTS",
]

#: How long to try reaching a ``--scheduler`` address before giving up (an OSError).
SCHEDULER_TIMEOUT = "30s"
#: Most points sent to a Dask worker in one task.
MAX_CHUNK = 16


@dataclass(frozen=True)
class SweepModel:
    """One model of a sweep, built once and shared by all its points (and scattered to workers).

    Attributes
    ----------
    population : policyopt.models.markov.Population
        Users' chains.
    penalty : policyopt.utility.penalty.Penalty
        The utility penalty f(t, ε_C) (the MSE of the released mean for the CLI).
    info : dict
        Model facts carried into every report (``source``, data notes); see
        :func:`policyopt.studies.schedule.design_schedule`'s `model_info`.
    inputs : dict
        The model's row inputs (:data:`MODEL_INPUTS`): ``p``, ``q`` (two-state chains given by
        ``--chain``, else ``None``), ``users`` (deployment size I), ``pilot_users`` (chains the
        Δ(t) maximum of eq. (12) runs over: the usable pilot users for data), ``states`` (K),
        ``smoothing`` (data only, else ``None``), ``value_range_lo``, ``value_range_hi`` (the
        range [LO, HI] of one reading behind the sensitivity (HI − LO)/I; declared or the
        data's own), ``source``, ``max_tv_source`` (``chain``: the chains' Δ(t), eq. (12); ``empirical:LEVEL``:
        :attr:`empirical`'s table) and ``horizon`` (H of the horizon design, slots; ``None`` for the chains).
        Missing keys are empty cells.
    empirical : policyopt.studies.empirical_design.EmpiricalDesign, optional
        Δ̃(t) estimated once from the data (``--max-tv empirical``): every point is designed against its table
        instead of the population's Δ(t), exactly as ``schedule --max-tv empirical`` (the exact solver, then, where
        no schedule has a finite ε*, the largest risk over ``empirical.horizon`` slots by Theorem 3).
    markov : policyopt.models.markov_model.FittedMarkovModel, optional
        A Markov model of the readings other than the first-order chains (``--markov-model phase|order|hmm|auto``),
        fitted once on every design reading (:func:`policyopt.studies.markov_check.fit_for_design`): every point is
        designed against its Δ_Z(t) instead of the population's, as ``schedule --markov-model`` (exact method only;
        not with `empirical`).  The population still gives the chain penalty and ``penalty_comparison``.
    guarantee : policyopt.studies.guarantee.GuaranteeSettings, optional
        δ, horizon H, w-event windows, privacy target and ``accept_refuted`` of every point of this model
        (:meth:`~policyopt.studies.guarantee.GuaranteeSettings.resolve` with this model's deployment size I).
        Default: resolved from ``inputs["users"]`` alone (δ = min(1e-6, 1/(10·I)), H = 8760 slots).
    verdict : ModelVerdict, optional
        What the model check said about the model the points' Δ(t) rests on (:func:`model_verdict`,
        :func:`given_model_verdict`).  Default: ``unchecked`` (no check was made, so only the model-free guarantee
        is stated and ``peak_risk`` is empty).
    """

    population: object
    penalty: object
    info: dict
    inputs: dict
    empirical: object = None
    markov: object = None
    guarantee: object = None
    verdict: object = None


@dataclass(frozen=True)
class ModelVerdict:
    """The model a sweep's model-based risks rest on and what its check on held-out readings said.

    The arguments of :func:`policyopt.studies.guarantee.choose_guarantee` that do not change from point to point:
    made once per fitted model in the main process and shipped to Dask workers with the model (plain data).

    Attributes
    ----------
    model : str or None
        The model named in the guarantee and its warnings (``chain``, ``order:2``, ``the given chain``, …); ``None``
        when ``auto`` found none that passed.
    verdict : {"passed", "refuted", "assumed", "unchecked"}
        ``passed``/``refuted``: the check on held-out readings; ``assumed``: a model given without data
        (``--chain``/``--matrix``); ``unchecked``: no check was made.
    why : str
        The check in a few words (its p-values and level), or why there is none.
    markov_model : str or None
        The Markov model whose Δ(t) the points are designed with (``chain`` for the fitted first-order chains, also
        when ``auto`` found none that passed; ``order:2``, ``phase:24``, …); ``None`` for a model given without
        data.  The CSV column ``markov_model``.
    """

    model: str | None
    verdict: str
    why: str
    markov_model: str | None = None

    @property
    def trusted(self) -> bool:
        """A model-based risk may be stated as a bound: the model passed its checks or was given without data."""
        return self.verdict in ("passed", "assumed")


def model_verdict(selection, *, empirical: bool = False) -> ModelVerdict:
    """The verdict of a design's model check on data, as ``policyopt schedule`` reads it.

    Parameters
    ----------
    selection : policyopt.studies.markov_check.ModelSelection
        From :func:`policyopt.studies.markov_check.design_check`.
    empirical : bool
        The design's Δ(t) is the data's band (``--max-tv empirical``): then Δ(t) needs no model, and the premise
        checked is the first-order Markov property Theorem 3's composition assumes (the Markov test alone).

    Returns
    -------
    ModelVerdict
        ``passed`` or ``refuted``.  For ``auto`` without a model that passed, ``model`` is ``None`` and ``why`` lists
        every model tried.

    References
    ----------
    Zhang et al. (2024), Theorem 3 ("if the process {X_t} is Markovian"); issue 32, item 5.
    """
    c = selection.chosen
    design_model = "chain" if c is None else str(c.model)
    if empirical:
        ok = c is not None and not c.markov_test["refuted"]
        why = (f"held-out Markov test p = {c.markov_test['p_value']:.3g}, level {c.markov_test['level']:g}"
               if c is not None else "no check")
        return ModelVerdict("chain (the first-order Markov premise of Theorem 3; Δ(t) from the data's band)",
                            "passed" if ok else "refuted", why, "chain")
    model = c.model if (c is not None and (selection.passed or selection.requested != "auto")) else None
    why = c.why() if c is not None else "no model passed"
    if selection.requested == "auto" and not selection.passed:
        why = "; ".join(f"{x.model}: {x.why()}" for x in selection.checks)
    return ModelVerdict(model, "passed" if selection.passed else "refuted", why, design_model)


def given_model_verdict(what: str = "the given chain") -> ModelVerdict:
    """The verdict of a model given without data (``--chain``/``--matrix``): ``assumed`` — its model-based risk holds
    for that model, an assumption nobody checked against data."""
    return ModelVerdict(str(what), "assumed", "no data", None)


#: The verdict of a :class:`SweepModel` built without one (no check was made).
_UNCHECKED = ModelVerdict("the model given to the sweep", "unchecked",
                          "no check on held-out readings was given (SweepModel.verdict)", None)


def _model_verdict_of(model: SweepModel) -> ModelVerdict:
    return model.verdict if model.verdict is not None else _UNCHECKED


@dataclass(frozen=True)
class SweepSettings:
    """Options shared by every point: search box, benchmark length and back end.

    Attributes
    ----------
    max_age, max_interval : int
        A_MAX and S_MAX of the search box (slots).
    releases : int
        Releases after which the noise-only benchmark's risk is reported.
    method : str
        ``exact``, ``heuristic``, ``cvxpy``, ``pyomo`` or ``all`` (see
        :func:`policyopt.studies.schedule.design_schedule`).
    relax : bool
        Continuous relaxation of A and S̄ for the (39) back ends.
    """

    max_age: int
    max_interval: int
    releases: int
    method: str = "exact"
    relax: bool = False


@dataclass(frozen=True)
class SweepResult:
    """What :func:`run_sweep` did.

    Attributes
    ----------
    rows : list of dict
        One row per grid point, in grid order, with the columns :data:`COLUMNS` (typed:
        float/int/bool/str or ``None`` for an empty cell).
    records : list of dict
        The matching JSON-lines records: ``point``, ``inputs``, ``no_tradeoff`` and
        ``report`` (the full :meth:`policyopt.studies.schedule.ScheduleReport.to_dict`).
    computed : int
        Points solved by this call.
    resumed : int
        Points taken from the existing output files.
    no_tradeoff : list of dict
        :func:`no_tradeoff_ranges` per model: ``model`` (its varied inputs), ``from``,
        ``to`` (f̄, penalty units), ``peak_risk`` (ε* at the start of the range, nats).  Only stated ε* count: a
        model whose ε* is withheld (refuted, unchecked) has no range.
    csv_path, jsonl_path : pathlib.Path
        The output files.
    """

    rows: list
    records: list
    computed: int
    resumed: int
    no_tradeoff: list
    csv_path: Path
    jsonl_path: Path

    def __repr__(self) -> str:
        """A short multi-line summary: arrays by shape and range, long mappings by their keys."""
        return result_repr(self)


def _point_inputs(model: SweepModel, max_penalty: float, settings: SweepSettings) -> dict:
    return {
        "max_penalty": float(max_penalty),
        **{k: model.inputs.get(k) for k in MODEL_INPUTS},
        "max_age": settings.max_age,
        "max_interval": settings.max_interval,
        "releases": settings.releases,
        "method": settings.method,
        "relax": bool(settings.relax),
    }


def solve_point(model: SweepModel, max_penalty: float, settings: SweepSettings) -> dict:
    """Solve one grid point: the optimal schedule of `model` under the bound f̄ = `max_penalty`, and its guarantee.

    Runs in the main process (serial sweeps) or on a Dask worker; a deterministic function of
    its arguments except for the timing fields.  The steps are those of ``policyopt schedule`` for the same point:
    :func:`policyopt.studies.schedule.design_schedule` against the model's Δ(t) (the chains', ``model.empirical``'s
    band or ``model.markov``'s Δ_Z) with the target of ``model.guarantee.privacy``; then, where no schedule has a
    finite ε*, the horizon design over ``model.guarantee.horizon`` slots — Theorem 3's
    (:func:`~policyopt.studies.guarantee.theorem3_horizon_design`; with ``model.empirical`` its own) under a trusted
    model or with ``accept_refuted``, the model-free one (:func:`~policyopt.studies.guarantee.model_free_horizon_design`)
    otherwise; then
    :func:`~policyopt.studies.guarantee.apply_guarantee` with ``model.verdict``, which adds ``model_free`` and
    ``guarantee`` and nulls ``peak_risk`` (and the no-aging benchmark's) under a refuted or unchecked model unless
    ``accept_refuted`` is set.

    Parameters
    ----------
    model : SweepModel
    max_penalty : float
        f̄ (penalty units, e.g. kWh²).
    settings : SweepSettings

    Returns
    -------
    dict
        ``row`` (the result columns of :data:`RESULT_COLUMNS`, except ``no_tradeoff``) and
        ``report`` (the ``policyopt schedule --json`` object of the point without ``model_check``, ``deployment`` and
        ``explanation``: :meth:`~policyopt.studies.schedule.ScheduleReport.to_dict` completed with
        ``empirical_max_tv`` (``model.empirical``), ``horizon_design``, ``model_free``, ``guarantee``,
        ``accepted_refuted``, ``warnings`` and ``guarantee_settings``).  ``risk_kind`` is ``peak`` when the model
        gives the row's schedule a finite infinite-horizon ε* of eq. (30) (stated in ``peak_risk`` only under a
        trusted model), ``horizon`` when no schedule has a finite ε* and the ``horizon_*`` columns hold the horizon
        design (``horizon_accounting`` ``theorem-3`` or ``model-free``), empty when neither exists.

    Raises
    ------
    PolicyOptError
        Whatever :func:`policyopt.studies.schedule.design_schedule` raises (bad method/relax, bad f̄).
    InvalidInputError
        With ``model.empirical`` or ``model.markov``: a method other than ``exact``, ``relax``, both of them, or a
        box needing Δ̃ beyond the empirical table.

    References
    ----------
    Zhang et al. (2024): problem (28), Theorem 3, Theorem 4, eq. (30); benchmarks of Section VI.  The model-free
    guarantee: :mod:`policyopt.privacy.model_free`.
    """
    from policyopt.formatting import json_clean
    from policyopt.models.markov import Population
    from policyopt.studies.guarantee import apply_guarantee, model_free_horizon_design, theorem3_horizon_design
    from policyopt.studies.schedule import design_schedule

    import time

    start = time.perf_counter()
    gs = sweep_guarantee_settings(model)
    verdict = _model_verdict_of(model)
    emp = model.empirical
    source = model.population
    if emp is not None and model.markov is not None:
        raise InvalidInputError(f"a design uses one Δ(t): the data's band ({emp.spec}) or the Markov model "
                                f"{model.markov.name}, not both")
    if emp is not None:
        if settings.method != "exact" or settings.relax:
            raise InvalidInputError(f"a design against Δ(t) from the data ({emp.spec}) uses the exact solver: method "
                                    f"'exact' without relax, got method {settings.method!r}, relax {settings.relax}")
        need = max(settings.max_age + settings.max_interval - 1, max(settings.max_age, settings.max_interval) + 1)
        if need > emp.source.horizon:
            raise InvalidInputError(f"the box A ≤ {settings.max_age}, S̄ ≤ {settings.max_interval} needs Δ̃(t) up to "
                                    f"t = {need} slots; the model's table ({emp.spec}) stops at {emp.source.horizon}")
        source = emp.source
    if model.markov is not None:
        if settings.method != "exact" or settings.relax:
            raise InvalidInputError(f"a design against the Markov model {model.markov.name} uses its exact Δ(t) table: "
                                    f"method 'exact' without relax, got method {settings.method!r}, relax {settings.relax}")
        source = model.markov
    f_bar = float(max_penalty)
    report = design_schedule(
        source,
        max_penalty=f_bar,
        A_max=settings.max_age,
        S_max=settings.max_interval,
        penalty=model.penalty,
        releases=settings.releases,
        model_info=model.info,
        method=settings.method,
        relax=settings.relax,
        chains=model.population if isinstance(model.population, Population) else None,
        privacy=gs.privacy,
        horizon=gs.horizon,
        delta=gs.delta,
        verdict=None,  # the guarantee follows the model check, after the horizon design (below)
        empirical=emp,
        horizon_design=verdict.trusted or gs.accept_refuted is not None,
    ).to_dict()
    model_peak = report["peak_risk"]  # the model's ε* of the row's schedule, before the guarantee decides on stating it
    if report["A"] is None and report.get("max_penalty") is not None and report.get("status") != "relaxed":
        # no schedule with a finite ε*: `schedule`'s rule — Theorem 3 over the horizon under a model that passed its
        # checks (or was given, or whose refutation is accepted on request), else the model-free design (the releases
        # composed, whatever the correlation)
        if not verdict.trusted and gs.accept_refuted is None:
            report["horizon_design"] = model_free_horizon_design(model.penalty, report["max_penalty"], settings.max_age,
                                                                 settings.max_interval, gs.horizon, gs.delta)
        elif report.get("horizon_design") is None:
            report["horizon_design"] = theorem3_horizon_design(source, model.penalty, report["max_penalty"],
                                                               settings.max_age, settings.max_interval, gs.horizon)
    apply_guarantee(report, model=verdict.model, verdict=verdict.verdict, why=verdict.why, horizon=gs.horizon,
                    delta=gs.delta, windows=gs.windows, accept_refuted=gs.accept_refuted)
    report["guarantee_settings"] = gs.to_dict()
    report["wall_time_s"] = time.perf_counter() - start  # the whole point: design, horizon design and guarantee
    report = json_clean(report)
    hd = report.get("horizon_design")
    g = report.get("guarantee") or {}
    mf = report.get("model_free") or {}
    na, no, m = report["benchmarks"]["no_aging"], report["benchmarks"]["noise_only"], report["model"]
    horizon_ok = hd is not None and hd["status"] == "optimal"
    risk_kind = "peak" if model_peak is not None else "horizon" if horizon_ok else None
    row = {
        "status": report["status"],
        "A": report["A"],
        "S_bar": report["S_bar"],
        "epsilon_c": report["epsilon_c"],
        "peak_risk": report["peak_risk"],
        "guarantee_kind": g.get("kind"),
        "guarantee_epsilon": g.get("epsilon"),
        "guarantee_delta": g.get("delta"),
        "model_free_epsilon": mf.get("epsilon"),
        "model_free_epsilon_pure": mf.get("epsilon_pure"),
        "model_free_delta": mf.get("delta"),
        "model_free_releases": mf.get("releases"),
        "model_free_horizon": mf.get("horizon"),
        "markov_model": verdict.markov_model,
        "model_verdict": verdict.verdict,
        "penalty": report["penalty"],
        "peak_aoi": report["peak_aoi"],
        "min_penalty": report["min_penalty"],
        "bound": report["bound"],
        "termination": report["termination"],
        "backend": report["backend"],
        "risk_kind": risk_kind,
        "horizon_status": None if hd is None else hd["status"],
        # the band's own Theorem 3 design (add_empirical_design) has no `accounting`: theorem-3, as apply_guarantee reads it
        "horizon_accounting": None if hd is None else hd.get("accounting", "theorem-3"),
        "horizon_A": None if hd is None else hd["A"],
        "horizon_S_bar": None if hd is None else hd["S_bar"],
        "horizon_epsilon_c": None if hd is None else hd["epsilon_c"],
        "horizon_risk": None if hd is None else hd["horizon_risk"],
        "horizon_releases": None if hd is None else hd["releases"],
        "no_aging_status": na["status"],
        "no_aging_S_bar": na["S_bar"],
        "no_aging_epsilon_c": na["epsilon_c"],
        "no_aging_peak_risk": na["peak_risk"],
        "no_aging_penalty": na["penalty"],
        "noise_only_epsilon_c": no["epsilon_c"],
        "noise_only_risk_after_releases": no["risk_after_releases"],
        "c": m["c"],
        "rho": m["rho"],
        "penalty_unit": m.get("penalty_unit") or None,
        "message": report["message"],
        "wall_time_s": report["wall_time_s"],
    }
    return {"row": row, "report": report}


def _serial(todo, grid, models, settings) -> Iterator:
    for i in todo:
        mi, f = grid[i]
        try:
            payload = solve_point(models[mi], f, settings)
        except PolicyOptError as exc:
            exc.point_index = i
            raise
        yield i, payload


def _dask(todo, grid, models, settings, workers, scheduler) -> Iterator:
    """Run points on Dask: a LocalCluster of `workers` processes, or the cluster at `scheduler`."""
    import logging

    from distributed import Client, LocalCluster, as_completed

    with contextlib.ExitStack() as stack:
        if scheduler is not None:
            try:
                client = stack.enter_context(Client(scheduler, timeout=SCHEDULER_TIMEOUT))
            except ValueError as exc:  # an address Dask cannot use from here (e.g. another process's inproc://)
                raise InvalidInputError(f"--scheduler {fmt(scheduler)}: {' '.join(str(exc).split())}") from None
        else:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.CRITICAL,  # a failing point is reported once, by us
                )
            )
            client = stack.enter_context(Client(cluster))
        # each distinct model travels to every worker once, not once per point
        shared = {mi: client.scatter(models[mi], broadcast=True, hash=False) for mi in sorted({grid[i][0] for i in todo})}
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        futures = {}
        for order, chunk in enumerate(_chunks(todo, grid, n_workers)):
            mi = grid[chunk[0]][0]
            fut = client.submit(
                solve_points, shared[mi], [grid[i][1] for i in chunk], settings, pure=False, priority=-order
            )
            futures[fut] = chunk
        try:
            for fut in as_completed(futures):
                chunk = futures[fut]
                try:
                    payloads = fut.result()
                except PolicyOptError as exc:
                    exc.point_index = chunk[getattr(exc, "chunk_offset", 0)]
                    raise
                except Exception as exc:  # a worker-side failure that is not an input error: one line, not a traceback
                    from importlib.metadata import version

                    __version__ = version("policyopt")
                    err = PolicyOptError(
                        f"a Dask worker failed: {type(exc).__name__}: {exc} (the workers need policyopt {__version__} "
                        "and its dependencies installed)"
                    )
                    err.point_index = chunk[0]
                    raise err from exc
                yield from zip(chunk, payloads)
        finally:
            client.cancel(list(futures))


def _chunks(todo, grid, n_workers: int) -> list:
    """Consecutive points of one model per Dask task: about 8 tasks per worker, at most MAX_CHUNK points each.

    A task costs the scheduler a few milliseconds or more on a busy machine, as much as solving a
    point of a small model; a few points per task hide that.  A chunk's rows are written when the
    whole chunk is back, so a killed Dask sweep recomputes the chunks that were in flight.
    """
    size = max(1, min(MAX_CHUNK, len(todo) // (8 * n_workers)))
    out: list = []
    for i in todo:
        if out and len(out[-1]) < size and grid[out[-1][-1]][0] == grid[i][0]:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def solve_points(model: SweepModel, max_penalties: Sequence[float], settings: SweepSettings) -> list:
    """:func:`solve_point` for several f̄ of one model (one Dask task).

    Parameters
    ----------
    model : SweepModel
    max_penalties : sequence of float
        f̄ values (penalty units).
    settings : SweepSettings

    Returns
    -------
    list of dict
        One :func:`solve_point` result per f̄, in order.

    Raises
    ------
    PolicyOptError
        The first point's error, with attribute ``chunk_offset`` = its position in `max_penalties`.
    """
    out = []
    for j, f in enumerate(max_penalties):
        try:
            out.append(solve_point(model, f, settings))
        except PolicyOptError as exc:
            exc.chunk_offset = j
            raise
    return out


def run_sweep(
    models: Sequence[SweepModel],
    max_penalties: Sequence[float],
    settings: SweepSettings,
    out,
    *,
    workers: int = 1,
    scheduler: str | None = None,
    progress: bool = False,
    tradeoff_rtol: float = DEFAULT_TRADEOFF_RTOL,
    input_files: dict | None = None,
    wait: bool = False,
) -> SweepResult:
    """Solve every (model, f̄) point, appending rows to `out` (CSV) and its ``.jsonl`` companion.

    The grid is the models (outer, in order) × `max_penalties` (inner).  Rows already in the
    output files (matched on their input columns) are kept and not recomputed; a partially
    written last line is discarded.  Every finished point is appended and flushed at once;
    at the end both files are rewritten in grid order with the ``no_tradeoff`` column filled.

    Parameters
    ----------
    models : sequence of SweepModel
        Distinct models (built once by the caller), each with its guarantee settings and model-check verdict
        (``SweepModel.guarantee``, ``SweepModel.verdict``; without a verdict a model counts as unchecked: only the
        model-free guarantee is stated).
    max_penalties : sequence of float, shape (n,)
        Strictly increasing f̄ values (penalty units), all > 0.
    settings : SweepSettings
    out : str or path-like
        ``FILE.csv``; the JSON lines go to ``FILE.jsonl``.
    workers : int
        1: serial in this process; > 1: a Dask LocalCluster with that many worker processes
        (one thread each).
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:8786``); its workers must have
        policyopt installed.  Excludes ``workers > 1``.
    progress : bool
        Show a tqdm progress bar on stderr.
    tradeoff_rtol : float
        Relative tolerance of :func:`no_tradeoff_flags`.
    input_files : dict, optional
        Option name → path of every input file the models were built from (e.g.
        ``{"--data": "readings.csv"}``); their sha256 and the policyopt version are recorded in
        ``FILE.meta.json`` and checked on resume (:func:`sweep_metadata`).
    wait : bool
        If another process holds the output's lock, wait for it (default: refuse at once).

    Returns
    -------
    SweepResult

    Raises
    ------
    InvalidInputError
        Bad grid, `workers`, both `workers` > 1 and `scheduler`, an `out` that is not a
        ``.csv`` in an existing directory, an existing file that is not a sweep file or holds
        points that are not on this grid (other options or another grid: the message shows one),
        or an error of a point (the message names the point; finished points stay in the files).
    SweepLockedError
        If another process is writing `out` and `wait` is False (an :class:`InvalidInputError`).
    SweepInputsChangedError
        If `out` holds rows computed from input files with other content (sha256), from other
        input options, with another Δ(t) source (``max_tv``: chains or ``empirical:LEVEL`` and its horizon),
        other guarantee settings (``guarantee``: Markov model, privacy target, δ, horizon, ``accept_refuted``; see
        :func:`guarantee_metadata`), or by another policyopt version, or rows without a metadata file or with one of
        an older format (an :class:`InvalidInputError`).  A CSV written before the guarantee columns is refused as an
        :class:`InvalidInputError` naming them.
    OSError
        If the files cannot be written or the scheduler cannot be reached.
    """
    models = list(models)
    if not models:
        raise InvalidInputError("a sweep needs at least one model")
    fs = [float(f) for f in max_penalties]
    if not fs or any(not (math.isfinite(f) and f > 0) for f in fs) or any(b <= a for a, b in zip(fs, fs[1:])):
        raise InvalidInputError(f"`max_penalties` must be strictly increasing positive numbers, got {fmt(fs)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"--workers must be an integer ≥ 1, got {fmt(workers)}")
    if scheduler is not None and workers > 1:
        raise InvalidInputError(f"give either --workers {workers} (a local cluster) or --scheduler {scheduler}, not both")
    if not (tradeoff_rtol >= 0):
        raise InvalidInputError(f"`tradeoff_rtol` must be ≥ 0, got {fmt(tradeoff_rtol)}")
    store = SweepStore(Path(out))
    grid = [(mi, f) for mi in range(len(models)) for f in fs]
    inputs = [_point_inputs(models[mi], f, settings) for mi, f in grid]
    keys = [point_key(x) for x in inputs]
    if len(set(keys)) != len(keys):
        raise InvalidInputError("the sweep grid has repeated points (two models with identical inputs)")
    index = {k: i for i, k in enumerate(keys)}
    meta = sweep_metadata(input_files, max_tv_metadata(models), guarantee_metadata(models))
    with exclusive_lock(store.csv_path, wait=wait):
        done = store.load()
        store.check_meta(meta, has_rows=bool(done))
        foreign = [k for k in done if k not in index]
        if foreign:
            row = done[foreign[0]][0]
            shown = ", ".join(f"{c}={cell_text(row.get(c))}" for c in INPUT_COLUMNS if cell_text(row.get(c)))
            raise InvalidInputError(
                f"--out {fmt(str(store.csv_path))} holds {len(foreign)} point(s) that are not on this sweep's grid "
                f"(first: {shown}); rerun with the same options to resume, or give another --out"
            )
        resumed = len(done)
        store.rewrite(list(done.values()))  # drop partial lines and points missing from either file
        todo = [i for i, k in enumerate(keys) if k not in done]

        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(keys), initial=resumed, unit="point", desc="sweep", dynamic_ncols=True)
        try:
            runner = _serial(todo, grid, models, settings) if workers == 1 and scheduler is None else _dask(
                todo, grid, models, settings, workers, scheduler
            )
            with store, contextlib.closing(runner) as results:
                try:
                    for i, payload in results:
                        row = {"point": i, **inputs[i], **payload["row"], "no_tradeoff": None}
                        record = {"point": i, "inputs": inputs[i], "no_tradeoff": None, "report": payload["report"]}
                        store.append(row, record)
                        done[keys[i]] = (row, record)
                        if bar is not None:
                            bar.update(1)
                except PolicyOptError as exc:
                    i = getattr(exc, "point_index", None)
                    where = "" if i is None else "point " + ", ".join(
                        f"{c}={cell_text(inputs[i][c])}" for c in ("max_penalty", "p", "q", "users", "states") if inputs[i][c] is not None
                    ) + ": "
                    raise type(exc)(f"{where}{exc} ({len(done)} finished point(s) kept in {store.csv_path})") from None
        finally:
            if bar is not None:
                bar.close()

        final_rows, final_records, ranges = [], [], []
        for mi in range(len(models)):
            ids = [i for i, (m, _) in enumerate(grid) if m == mi]
            flags = no_tradeoff_flags(fs, [done[keys[i]][0]["peak_risk"] for i in ids], rtol=tradeoff_rtol)
            # a schedule whose ε* is not stated (its model is refuted or unchecked) or infinite ((31) fails for a
            # model-free design) says nothing about Corollary 3: neither interval next to it is assessed
            unknown = [done[keys[i]][0]["A"] is not None and done[keys[i]][0]["peak_risk"] is None for i in ids]
            flags = [None if unknown[j] or (j + 1 < len(ids) and unknown[j + 1]) else flag for j, flag in enumerate(flags)]
            for i, flag in zip(ids, flags):
                row, record = done[keys[i]]
                final_rows.append({**row, "point": i, "no_tradeoff": flag})
                final_records.append({**record, "point": i, "no_tradeoff": flag})
            varied = {k: models[mi].inputs.get(k) for k in ("p", "q", "users", "states")}
            for lo, hi in no_tradeoff_ranges(fs, flags):
                risk = done[keys[ids[fs.index(lo)]]][0]["peak_risk"]
                ranges.append({"model": varied, "from": lo, "to": hi, "peak_risk": risk})
        store.rewrite(list(zip(final_rows, final_records)))
    return SweepResult(
        rows=final_rows,
        records=final_records,
        computed=len(todo),
        resumed=resumed,
        no_tradeoff=ranges,
        csv_path=store.csv_path,
        jsonl_path=store.jsonl_path,
    )

