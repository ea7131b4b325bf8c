"""What ``policyopt sweep`` builds below the command line: one :class:`~policyopt.studies.sweep.SweepModel` per
combination of the varied parameters, with its deployment, penalty, Δ(t) source and model verdict
(:func:`build_models`), and the checks of the guarantee options (:func:`check_guarantee_options`).

The functions take `args`, the parsed ``sweep`` options (the ``schedule`` option names: ``data``, ``chain``,
``matrix``, ``states``, ``users``, ``max_age``, ...); errors name the command-line options.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import time
from dataclasses import dataclass, field

from policyopt.app.design_options import MODEL_RULES, ModelOptions
from policyopt.app.inputs import MAX_COUNT, MAX_STATES, deployment_penalty, load_deployment
from policyopt.app.report import CommandReport
from policyopt.errors import InvalidInputError, fmt

__all__ = ["build_models", "check_guarantee_options", "check_vary", "SweepOptions", "sweep_designs", "sweep_report",
           "VARY_PARAMETERS", "MAX_WORKERS"]

#: Largest ``workers`` (processes of a local Dask cluster).
MAX_WORKERS = 256

#: A Dask scheduler address: PROTOCOL://HOST:PORT (HOST a name, an IPv4 address or a bracketed IPv6 address), or an
#: in-process address inproc://HOST/PID/N.
_SCHEDULER_ADDRESS = re.compile(r"^((tcp|tls|ws|wss|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}"
                                r"|inproc://[A-Za-z0-9._-]+/[0-9]+/[0-9]+)$")

#: Parameters ``vary`` (``--vary``) accepts: name → (integer?, lower bound, what it applies to).
VARY_PARAMETERS = {
    "p": (False, None, "--chain"),
    "q": (False, None, "--chain"),
    "users": (True, 1, "every model source (with data: the deployment size I, the pilot fitted once)"),
    "states": (True, 2, "data (--data or the bundled data)"),
}


@dataclass(frozen=True)
class SweepOptions(ModelOptions):
    """The options of ``policyopt sweep`` (:func:`sweep_designs`): the model options of ``schedule``
    (:class:`~policyopt.app.design_options.DesignOptions`: ``data``, ``chain``, ``matrix``, ``states``, ``users``,
    ``value_range``, ``max_age``, ``max_interval``, ...), then the grid and where it goes.

    Attributes
    ----------
    max_penalty : sequence of float
        The bounds f̄ (> 0, strictly increasing): the innermost grid.
    vary : mapping of str to sequence, optional
        Model parameters also swept (their product, f̄ innermost): ``p``, ``q`` (a two-state `chain`), ``users``
        (deployment size I), ``states`` (data), each to its strictly increasing values.
    out : str or os.PathLike
        CSV of one row per point (JSON lines beside it, ``.jsonl``); an existing pair is resumed.
    plot : str or os.PathLike, optional
        Draw the trade-off curves into this .png, .pdf or .svg file.
    workers : int
        Points on a local Dask cluster of this many processes when > 1 (default 1: serial; at most 256).
    scheduler : str, optional
        Points on an existing Dask cluster (its address).
    tradeoff_rtol : float, optional
        Relative tolerance under which ε* counts as not lowered between neighbouring f̄ (≥ 0; default 1e-9).
    wait : bool
        Wait for another sweep writing `out` (default: refuse).

    Raises
    ------
    InvalidInputError
        No `max_penalty` or `out`, or a value of the wrong type or out of its range (naming the keyword).
    """

    COMMAND = "sweep"
    VALUED = ("max_age", "max_interval", "releases", "method", "relax", "workers", "wait")
    RULES = {
        **MODEL_RULES, "out": ("text",), "plot": ("text",), "workers": ("int", 1, MAX_WORKERS), "scheduler": ("text",),
        "tradeoff_rtol": ("float", 0.0, float("inf"), False), "wait": ("bool",),
    }

    max_penalty: tuple | None = None
    vary: dict = field(default_factory=dict)
    out: str | os.PathLike | None = None
    plot: str | os.PathLike | None = None
    workers: int = 1
    scheduler: str | None = None
    tradeoff_rtol: float | None = None
    wait: bool = False

    def __post_init__(self):
        from policyopt.studies.sweep import parse_grid

        for name in ("max_penalty", "out"):
            if getattr(self, name) is None:
                raise InvalidInputError(f"`{name}` is required")
        values = self.max_penalty
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise InvalidInputError(f"`max_penalty` must be a sequence of numbers, got {fmt(values)}")
        object.__setattr__(self, "max_penalty", parse_grid(",".join(map(_number, values)), "`max_penalty`", lower=0.0))
        if not isinstance(self.vary, dict):
            raise InvalidInputError(f"`vary` must be a mapping of parameter name to values, got {fmt(self.vary)}")
        super().__post_init__()


def _number(value) -> str:
    """A grid value as the text :func:`~policyopt.studies.sweep.parse_grid` reads (``repr``; a bool is refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"a grid value must be a number, got {fmt(value)}")
    return repr(value)


def check_vary(vary: dict, args) -> dict:
    """The ``vary`` mapping ({name: values}) checked against the model options of `args`: known names, the model
    source each applies to, not also given as an option, each grid strictly increasing within its bounds (the caps
    of ``users`` and ``states``); the checked values.

    Raises
    ------
    InvalidInputError
        As above, naming ``--vary NAME`` as the command line does.
    """
    from policyopt.studies.sweep import parse_grid

    out: dict = {}
    uses_data = args.chain is None and args.matrix is None
    for name, values in vary.items():
        if name not in VARY_PARAMETERS:
            raise InvalidInputError(f"--vary {fmt(name)}: expected NAME=START:STOP:N with NAME one of "
                                    f"{', '.join(VARY_PARAMETERS)}")
        integer, lower, applies = VARY_PARAMETERS[name]
        ok = {"p": args.chain is not None, "q": args.chain is not None, "users": True, "states": uses_data}[name]
        if not ok:
            raise InvalidInputError(f"--vary {name} applies to {applies} only")
        if name in ("users", "states") and getattr(args, name) is not None:
            raise InvalidInputError(f"give either --{name} or --vary {name}=..., not both")
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise InvalidInputError(f"--vary {name} must be a sequence of numbers, got {fmt(values)}")
        cap = {"users": MAX_COUNT, "states": MAX_STATES}.get(name)  # the caps of --users / --states
        out[name] = parse_grid(",".join(map(_number, values)), f"--vary {name}", integer=integer, lower=lower,
                               upper=cap)
    return out


def sweep_designs(**options) -> CommandReport:
    """Solve the schedule problem over a grid of f̄ (and model parameters) as ``policyopt sweep`` does, resumable,
    and return its summary.

    Parameters
    ----------
    **options
        The attributes of :class:`SweepOptions`, by keyword: ``max_penalty`` (the f̄ grid) and ``out`` (the CSV) are
        required; ``vary`` ({name: values}) and the model options are ``schedule``'s.

    Returns
    -------
    CommandReport
        ``to_dict()`` is the command's ``--json`` summary (its wall time aside) and ``str()`` its text;
        ``extras["rows"]`` the CSV's rows (typed) and ``extras["records"]`` the JSON lines.

    Raises
    ------
    InvalidInputError
        An unknown keyword, a bad value, options that do not go together (named as on the command line), an `out`
        another sweep is writing.
    """
    return sweep_report(SweepOptions.from_keywords("sweep_designs", options))


def build_models(args, vary: dict, checks: dict | None = None, level: float | None = None) -> list:
    """One SweepModel per combination of the varied values (product, in the order given).

    With data (``--data`` or the bundled pilot) the chains are fitted once per number of states K
    and shared by every deployment size I of ``--vary users``: only the penalty (noise (HI − LO)/I,
    staleness / I) changes with I, as in ``policyopt schedule --users I``; its staleness sums are
    formed once per fit (:meth:`MSEPenalty.with_users`).  With `level` (``--max-tv empirical:LEVEL``)
    Δ(t) is estimated from the readings once per fit, as ``schedule --max-tv empirical`` does
    (:func:`~policyopt.studies.empirical_design.empirical_design`, seed 0), and shared the same way.

    The Markov model of ``--markov-model`` is checked on held-out readings once per fit, as ``schedule`` checks it
    (:func:`~policyopt.studies.markov_check.design_check`, seed 0; its
    :func:`~policyopt.studies.markov_check.check_summary` goes into `checks` under K) and, when it is not the
    first-order chain, fitted on every design reading once per fit
    (:func:`~policyopt.studies.markov_check.fit_for_design`): the points' Δ(t).  Each model carries its
    :class:`~policyopt.studies.guarantee.GuaranteeSettings` (δ from its own I) and the check's
    :class:`~policyopt.studies.sweep.ModelVerdict`; a ``--chain``/``--matrix`` model is ``assumed``.
    """
    import dataclasses

    from policyopt.app.inputs import guarantee_settings, markov_selection
    from policyopt.io import parse_chain_spec
    from policyopt.studies.sweep import SweepModel, given_model_verdict, model_verdict, tabulate_population

    base_p = base_q = None
    if args.chain is not None:
        P = parse_chain_spec(args.chain).P
        base_p, base_q = float(P[0, 1]), float(P[1, 0])
    uses_data = args.chain is None and args.matrix is None
    horizon = max(args.max_age, args.max_interval) + 1
    names = list(vary)
    fits: dict = {}  # data: K → (Deployment, tabulated population, penalty, empirical, Markov model, verdict)
    models = []
    for combo in itertools.product(*(vary[n] for n in names)):
        values = dict(zip(names, combo))
        ns = argparse.Namespace(**vars(args))
        p, q = values.get("p", base_p), values.get("q", base_q)
        if args.chain is not None and ("p" in values or "q" in values):
            ns.chain = f"two-state:p={p!r},q={q!r}"
        if "users" in values:
            ns.users = values["users"]
        if "states" in values:
            ns.states = values["states"]
        if uses_data and ns.states in fits:
            dep, population, first, empirical, markov, verdict = fits[ns.states]
            dep = dataclasses.replace(dep, users=ns.users)  # same pilot, another deployment size I
            penalty = first.with_users(dep.users)  # the staleness sums shared: computed once per fit
        else:
            dep = load_deployment(ns)
            empirical = markov = None
            verdict = given_model_verdict("the given chain" if args.chain is not None else "the given matrix")
            if level is not None:  # Δ(t) from the readings, once per fit (the states depend on K)
                from policyopt.studies.empirical_design import empirical_design

                empirical = empirical_design(dep.fitted, dep.readings, args.max_age, args.max_interval, level,
                                             horizon=args.horizon)
            # Δ(0..max(A_MAX, S_MAX) + 1) once per fitted model, shared by all its points (and workers)
            population = tabulate_population(dep.population, horizon)
            penalty = deployment_penalty(dep, population)  # the deployment's I users, as `policyopt schedule`
            if hasattr(penalty, "band"):
                penalty.band()  # the readings penalty's bootstrap once here, shared by every I and shipped with the model
            if uses_data and dep.readings is not None:  # the Markov model checked on held-out readings, once per fit
                selection, markov = markov_selection(dep, guarantee_settings(ns, dep), max_age=args.max_age,
                                                     max_interval=args.max_interval, seed=0)
                verdict = model_verdict(selection, empirical=empirical is not None)
                if checks is not None:
                    from policyopt.studies.markov_check import check_summary

                    checks[ns.states] = {"states": int(dep.fitted.quantizer.n_states), **check_summary(selection)}
            if uses_data:
                fits[ns.states] = (dep, population, penalty, empirical, markov, verdict)
        gs = guarantee_settings(ns, dep)  # δ = min(1e-6, 1/(10·I)) of this model's I unless --delta
        info = dep.info
        lo, hi = penalty.value_range
        inputs = {
            "p": p,
            "q": q,
            "users": dep.users,
            "pilot_users": population.n_users,
            "states": max(c.n_states for c in population.chains),
            "smoothing": info.get("smoothing"),
            "value_range_lo": float(lo),
            "value_range_hi": float(hi),
            # the MSE model is part of a point's identity (a resumed --out never mixes the readings and chain penalties)
            "source": info["source"] + (f"; MSE from the readings ({penalty.design}, worst of "
                                        f"{penalty.moments.phase_period} phases)" if hasattr(penalty, "moments") else ""),
            "max_tv_source": "chain" if empirical is None else empirical.spec,
            "horizon": gs.horizon if empirical is None else empirical.horizon,
        }
        models.append(SweepModel(population=population, penalty=penalty, info=info, inputs=inputs, empirical=empirical,
                                 markov=markov, guarantee=gs, verdict=verdict))
    return models


def check_guarantee_options(args, uses_data: bool, level: float | None) -> None:
    """Refuse guarantee options that cannot apply, before any fit: a ``--markov-model`` other than ``chain`` without
    readings, with ``--max-tv empirical`` or a method other than exact; ``--privacy model-free`` without the exact
    method; a malformed ``--markov-model``.

    Raises
    ------
    InvalidInputError
        As above; the message names the option and shows the value.
    """
    spec = args.markov_model
    if spec is not None:
        from policyopt.app.inputs import slot_seconds
        from policyopt.models.markov_model import MarkovModelSpec
        from policyopt.studies.markov_check import periods_from_slot

        try:
            MarkovModelSpec.parse(spec, default_period=periods_from_slot(slot_seconds(args))[0])
        except InvalidInputError as exc:  # the option's name for the argument's (`model` ...)
            msg = str(exc)
            raise InvalidInputError("--markov-model " + msg.removeprefix("`model` ") if msg.startswith("`model` ")
                                    else f"--markov-model {fmt(spec)}: {msg}") from None
    if spec is not None and spec != "chain":
        if not uses_data:
            raise InvalidInputError(f"--markov-model {spec} is fitted to readings: give --data (or use the bundled "
                                    "data), not --chain/--matrix")
        if level is not None:
            raise InvalidInputError(f"--max-tv {args.max_tv} applies to the first-order chains; omit it with "
                                    f"--markov-model {spec}")
        if args.method != "exact" or args.relax:
            raise InvalidInputError(f"--markov-model {spec} designs with the exact Δ(t) table: use --method exact "
                                    "without --relax")
    if args.privacy == "model-free" and (args.method != "exact" or args.relax):
        raise InvalidInputError("--privacy model-free designs by exact enumeration over --horizon: use --method exact "
                                "without --relax")


def sweep_report(args) -> CommandReport:
    """``policyopt sweep`` of parsed options (`args`: :class:`SweepOptions` or the command line's namespace with
    ``vary`` already a mapping, :func:`check_vary`): every point solved (or resumed from ``out``) and the summary
    the command prints.

    Raises
    ------
    InvalidInputError
        Bad options (naming the command-line option), a grid over :data:`~policyopt.studies.sweep.MAX_GRID_POINTS`,
        an ``out`` another sweep is writing (without ``wait``), and the errors of the models' fits.
    """
    from policyopt.app.inputs import max_tv_level
    from policyopt.progress import showing
    from policyopt.studies.sweep import DEFAULT_TRADEOFF_RTOL, SweepSettings, jsonl_path, run_sweep

    start = time.perf_counter()
    jsonl_path(args.out)  # a .csv name, checked before any work
    if args.scheduler is not None and not _SCHEDULER_ADDRESS.match(args.scheduler):
        raise InvalidInputError(f"--scheduler {fmt(args.scheduler)} is not a Dask scheduler address; expected "
                                "PROTOCOL://HOST:PORT such as tcp://127.0.0.1:8786")
    if args.scheduler is not None and args.workers > 1:
        raise InvalidInputError(f"give either --workers {args.workers} (a local cluster) or --scheduler {args.scheduler}, not both")
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
    from policyopt.studies.sweep import MAX_GRID_POINTS

    vary = check_vary(args.vary, args)
    points = len(args.max_penalty)
    for values in vary.values():
        points *= len(values)
    if points > MAX_GRID_POINTS:
        raise InvalidInputError(f"the sweep has {points} points (--max-penalty × --vary); at most {MAX_GRID_POINTS}")
    uses_data = args.chain is None and args.matrix is None
    level = max_tv_level(args, uses_data)
    check_guarantee_options(args, uses_data, level)
    checks: dict = {}
    models = build_models(args, vary, checks, level)
    settings = SweepSettings(
        max_age=args.max_age, max_interval=args.max_interval, releases=args.releases, method=args.method, relax=args.relax
    )
    rtol = DEFAULT_TRADEOFF_RTOL if args.tradeoff_rtol is None else args.tradeoff_rtol
    input_files = {"--data": args.data, "--matrix": args.matrix}
    if args.data is None and args.chain is None and args.matrix is None:
        from policyopt.data import CITYLEARN_PATH

        input_files["bundled data"] = CITYLEARN_PATH
    result = run_sweep(
        models,
        args.max_penalty,
        settings,
        args.out,
        workers=args.workers,
        scheduler=args.scheduler,
        progress=showing(),
        tradeoff_rtol=rtol,
        input_files=input_files,
        wait=args.wait,
    )
    if args.plot is not None:
        from policyopt.studies.plots import plot_sweep

        plot_sweep(result.rows, args.plot)
    rows = result.rows
    statuses: dict = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    risks = [r["peak_risk"] for r in rows if r["peak_risk"] is not None]
    horizon_risks = [r["horizon_risk"] for r in rows if r["risk_kind"] == "horizon"]
    kinds: dict = {}
    guarantee_kinds: dict = {}
    for r in rows:
        if r["risk_kind"] is not None:
            kinds[r["risk_kind"]] = kinds.get(r["risk_kind"], 0) + 1
        if r["guarantee_kind"] is not None:
            guarantee_kinds[r["guarantee_kind"]] = guarantee_kinds.get(r["guarantee_kind"], 0) + 1
    mf = [r["model_free_epsilon"] for r in rows if r["model_free_epsilon"] is not None]
    mf_pure = [r["model_free_epsilon_pure"] for r in rows if r["model_free_epsilon_pure"] is not None]
    warnings, accepted, settings_seen = [], [], []
    for rec in result.records:
        rep = rec["report"]
        warnings += [w for w in rep.get("warnings") or [] if w not in warnings]
        if rep.get("accepted_refuted") and rep["accepted_refuted"] not in accepted:
            accepted.append(rep["accepted_refuted"])
    for m in models:
        if m.guarantee.to_dict() not in settings_seen:
            settings_seen.append(m.guarantee.to_dict())
    emp = models[0].empirical
    summary = {
        "out": str(result.csv_path),
        "jsonl": str(result.jsonl_path),
        "points": len(rows),
        "computed": result.computed,
        "resumed": result.resumed,
        "models": len(models),
        "varied": vary,
        "max_penalty": list(args.max_penalty),
        "status_counts": statuses,
        "guarantee_kind_counts": guarantee_kinds,
        "model_free_epsilon_min": min(mf) if mf else None,
        "model_free_epsilon_max": max(mf) if mf else None,
        "model_free_epsilon_pure_min": min(mf_pure) if mf_pure else None,
        "model_free_epsilon_pure_max": max(mf_pure) if mf_pure else None,
        "peak_risk_min": min(risks) if risks else None,
        "peak_risk_max": max(risks) if risks else None,
        "peak_risk_withheld": sum(1 for r in rows if r["risk_kind"] == "peak" and r["peak_risk"] is None),
        "no_tradeoff": result.no_tradeoff,
        "max_tv_source": "chain" if emp is None else emp.spec,
        "horizon": models[0].inputs["horizon"],
        "empirical_max_lag": None if emp is None else emp.estimate.max_lag,
        "risk_kind_counts": kinds,
        "horizon_risk_min": min(horizon_risks) if horizon_risks else None,
        "horizon_risk_max": max(horizon_risks) if horizon_risks else None,
        "guarantee_settings": settings_seen,
        "accepted_refuted": accepted or None,
        "warnings": warnings,
        "tradeoff_rtol": rtol,
        "workers": args.workers,
        "scheduler": args.scheduler,
        "plot": args.plot,
        "model_check": [checks[k] for k in checks] or None,
        "wall_time_s": time.perf_counter() - start,
    }
    from policyopt.studies.sweep_text import format_summary

    per_model = len(args.max_penalty)
    text = format_summary(summary, [(r, models[r["point"] // per_model].verdict) for r in rows])
    return CommandReport("sweep", summary, text, extras={"rows": rows, "records": result.records})
