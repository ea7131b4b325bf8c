"""``policyopt sweep``: the optimal schedule over a grid of f̄ (and model parameters), resumable.

Registered in :func:`policyopt.cli.main.build_parser` by :func:`add_command`.  The model options are
the ``schedule`` command's (one shared definition, :func:`policyopt.cli.options.add_model_options`);
the work is done by :func:`policyopt.studies.sweep.run_sweep` and the figure by
:func:`policyopt.studies.plots.plot_sweep`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import time

from policyopt.progress import showing
from policyopt.app.inputs import (
    MAX_COUNT,
    MAX_STATES,
    deployment_penalty,
    load_deployment,
    max_tv_level,
)
from policyopt.cli.options import (
    add_guarantee_options,
    add_max_tv_options,
    add_model_options,
    int_at_least,
    non_negative_float,
)
from policyopt.formatting import check_text, fmt_count, fmt_upper, fmt_value
from policyopt.errors import InvalidInputError, fmt

__all__ = ["add_command", "VARY_PARAMETERS"]

#: Largest --workers (processes of a local Dask cluster).
MAX_WORKERS = 256

#: A Dask scheduler address: PROTOCOL://HOST:PORT (HOST a name, an IPv4 address or a bracketed IPv6 address), or an
#: in-process address inproc://HOST/PID/N.
_SCHEDULER_ADDRESS = re.compile(r"^((tcp|tls|ws|wss|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}"
                                r"|inproc://[A-Za-z0-9._-]+/[0-9]+/[0-9]+)$")

#: Parameters ``--vary`` accepts: name → (integer?, lower bound, what it applies to).
VARY_PARAMETERS = {
    "p": (False, None, "--chain"),
    "q": (False, None, "--chain"),
    "users": (True, 1, "every model source (with data: the deployment size I, the pilot fitted once)"),
    "states": (True, 2, "data (--data or the bundled data)"),
}


def _grid_arg(name):
    def parse(text):
        """Parse a positive f̄ grid START:STOP:N or V1,V2,... or raise ArgumentTypeError naming the option."""
        from policyopt.studies.sweep import parse_grid

        try:
            return parse_grid(text, name, lower=0.0)
        except InvalidInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_command(sub) -> None:
    """Add the ``sweep`` subcommand to the ``policyopt`` subparsers object `sub`.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        From ``parser.add_subparsers()`` in :func:`policyopt.cli.main.build_parser`.
    """
    cmd = sub.add_parser(
        "sweep",
        help="optimal schedule over a grid of utility bounds f̄ (and model parameters); resumable CSV + JSON lines",
        description=(
            "Solve the schedule problem (Zhang et al. 2024, problem (28)) at every f̄ of --max-penalty (and every value of "
            "each --vary parameter), writing one row per point to --out FILE.csv and one JSON line to FILE.jsonl as "
            "each point finishes.  Rerunning with the same --out resumes: finished points are not recomputed.  "
            "Every row states the guarantee `policyopt schedule` states for the same point: on data the Markov model "
            "(--markov-model) is checked on held-out readings once per fitted model, the model-based ε* is stated only "
            "under a model that passed, and the model-free (ε, δ) over --horizon is in every row.  "
            "Reports the f̄ ranges where raising f̄ does not lower the optimal risk (Corollary 3's 'no trade-off')."
        ),
    )
    add_model_options(cmd)
    add_max_tv_options(cmd)
    add_guarantee_options(cmd)
    cmd.add_argument("--max-penalty", type=_grid_arg("--max-penalty"), required=True, metavar="START:STOP:N",
                     help="grid of bounds f̄ on the MSE of the released mean (squared value units): N evenly spaced "
                     "values from START to STOP, or a list V1,V2,... (strictly increasing); at most 100000 points in "
                     "the whole sweep (grid × --vary)")
    cmd.add_argument("--vary", action="append", default=[], metavar="NAME=START:STOP:N",
                     help="also sweep a model parameter (repeatable; the grid is the product, f̄ innermost): "
                     "p=... or q=... (two-state --chain), users=... (deployment size I; with data the pilot is "
                     "fitted once and its chains stand for I users in equal shares), states=... (data); "
                     f"integers for users/states, at most {MAX_COUNT:.0e} users and {MAX_STATES} states as --users/--states; a list "
                     "NAME=V1,V2,... works too")
    cmd.add_argument("--out", required=True, metavar="FILE.csv",
                     help="CSV of one row per point; JSON lines go to FILE.jsonl; an existing pair is resumed")
    cmd.add_argument("--plot", metavar="FILE", help="draw the trade-off curves into FILE (.png, .pdf or .svg; needs matplotlib)")
    cmd.add_argument("--workers", type=int_at_least("--workers", 1, MAX_WORKERS), default=1, metavar="N",
                     help="N > 1: run points on a local Dask cluster of N worker processes (default 1: serial; at "
                     f"most {MAX_WORKERS})")
    cmd.add_argument("--scheduler", metavar="ADDRESS",
                     help="run points on an existing Dask cluster (e.g. tcp://host:8786; its workers need policyopt)")
    cmd.add_argument("--tradeoff-rtol", type=non_negative_float("--tradeoff-rtol"), default=None, metavar="R",
                     help="relative tolerance under which ε* counts as not lowered between neighbouring f̄ (default 1e-9)")
    cmd.add_argument("--wait", action="store_true",
                     help="if another sweep is writing --out, wait for it to finish (default: refuse with exit 2)")
    cmd.add_argument("--json", action="store_true", help="print the summary as one JSON object instead of text")
    cmd.set_defaults(handler=_cmd_sweep)


def _parse_vary(items, args) -> dict:
    """{name: values} from the --vary options, checked against the model options."""
    from policyopt.studies.sweep import parse_grid

    out: dict = {}
    for item in items:
        name, eq, spec = item.partition("=")
        name = name.strip()
        if not eq or name not in VARY_PARAMETERS:
            raise InvalidInputError(
                f"--vary {fmt(item)}: expected NAME=START:STOP:N with NAME one of {', '.join(VARY_PARAMETERS)}"
            )
        if name in out:
            raise InvalidInputError(f"--vary {name} given twice")
        integer, lower, applies = VARY_PARAMETERS[name]
        uses_data = args.chain is None and args.matrix is None
        ok = {"p": args.chain is not None, "q": args.chain is not None, "users": True, "states": uses_data}[name]
        if not ok:
            raise InvalidInputError(f"--vary {name} applies to {applies} only")
        if name in ("users", "states") and getattr(args, name) is not None:
            raise InvalidInputError(f"give either --{name} or --vary {name}=..., not both")
        cap = {"users": MAX_COUNT, "states": MAX_STATES}.get(name)  # the caps of --users / --states
        out[name] = parse_grid(spec, f"--vary {name}", integer=integer, lower=lower, upper=cap)
    return out


def _build_models(args, vary: dict, checks: dict | None = None, level: float | None = None) -> list:
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


def _check_guarantee_options(args, uses_data: bool, level: float | None) -> None:
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


def _cmd_sweep(args) -> int:
    from policyopt.studies.sweep import DEFAULT_TRADEOFF_RTOL, SweepSettings, jsonl_path, run_sweep

    start = time.perf_counter()
    jsonl_path(args.out)  # a .csv name, checked before any work
    if args.scheduler is not None and not _SCHEDULER_ADDRESS.match(args.scheduler):
        raise InvalidInputError(f"--scheduler {fmt(args.scheduler)} is not a Dask scheduler address; expected "
                                "PROTOCOL://HOST:PORT such as tcp://127.0.0.1:8786")
    if args.scheduler is not None and args.workers > 1:
        raise InvalidInputError(f"give either --workers {args.workers} (a local cluster) or --scheduler {args.scheduler}, not both")
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    from policyopt.studies.sweep import MAX_GRID_POINTS

    vary = _parse_vary(args.vary, args)
    points = len(args.max_penalty)
    for values in vary.values():
        points *= len(values)
    if points > MAX_GRID_POINTS:
        raise InvalidInputError(f"the sweep has {points} points (--max-penalty × --vary); at most {MAX_GRID_POINTS}")
    uses_data = args.chain is None and args.matrix is None
    level = max_tv_level(args, uses_data)
    _check_guarantee_options(args, uses_data, level)
    checks: dict = {}
    models = _build_models(args, vary, checks, level)
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
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        per_model = len(args.max_penalty)
        print(_format_summary(summary, [(r, models[r["point"] // per_model].verdict) for r in rows]))
    return 0


def _span(lo, hi, *, digits: int = 6) -> str:
    """``= a`` or ``from a to b`` (privacy upper bounds, rounded up)."""
    return f"= {fmt_upper(hi, digits)}" if lo == hi else f"from {fmt_upper(lo, digits)} to {fmt_upper(hi, digits)}"


def _points(n: int, total: int) -> str:
    return "every point" if n == total else fmt_count(n, "point")


def _why_not_trusted(verdicts, *, short: bool = False) -> str:
    """Why a model-based number is not stated, once per distinct model verdict (`short`: without the p-values)."""
    out = []
    for v in verdicts:
        why = " (see model check)" if short else f" ({v.why})"
        if v.model is None:
            text = f"no Markov model passed its checks{why}"
        elif v.verdict == "refuted":
            text = f"the Markov model {v.model} is refuted by the readings{why}"
        elif v.verdict == "unchecked":
            text = f"the Markov model {v.model} is not checked ({v.why})"
        else:
            text = f"the model {v.model} gives no finite risk for these schedules"
        if text not in out:
            out.append(text)
    return "; ".join(out)


def _trusted_text(verdicts) -> str:
    out = []
    for v in verdicts:
        label = v.model if str(v.model).startswith("the ") else f"the Markov model {v.model}"
        what = ("an assumption nobody checked against data" if v.verdict == "assumed" else
                f"it passed its checks on held-out readings ({v.why})")
        text = f"{label} — {what}"
        if text not in out:
            out.append(text)
    return "; ".join(out)


def _model_free_text(eps, pure, deltas, horizon: str) -> str:
    """(ε, δ) over the horizon in words: the ε range at δ and the pure ε range (privacy numbers rounded up)."""
    deltas = sorted(set(deltas))
    dtext = f"δ = {deltas[0]:.3g}" if len(deltas) == 1 else f"δ from {deltas[0]:.3g} to {deltas[-1]:.3g} (by I)"
    return (f"(ε, δ)-DP for each user's whole series over {horizon} with ε {_span(min(eps), max(eps), digits=4)} nats "
            f"at {dtext}, whatever the correlation (PLD accountant; pure ε {_span(min(pure), max(pure), digits=4)} nats "
            "by basic composition)")


def _guarantee_line(s: dict, rows: list) -> str:
    """The ``guarantee`` line, stated first: the model-free range where the rows state it (a refuted or unchecked
    model), the model-based range where they state that (a model that passed or was given), each with why."""
    total = len(rows)
    parts = []
    free = [(r, v) for r, v in rows if r["guarantee_kind"] == "model-free"]
    based = [(r, v) for r, v in rows if r["guarantee_kind"] == "model-based"]
    if free:
        hs = sorted({r["model_free_horizon"] for r, _ in free})
        htext = fmt_count(hs[0], "slot") if len(hs) == 1 else f"{hs[0]} to {fmt_count(hs[-1], 'slot')}"
        text = _model_free_text([r["guarantee_epsilon"] for r, _ in free], [r["model_free_epsilon_pure"] for r, _ in free],
                                [r["guarantee_delta"] for r, _ in free], htext)
        parts.append(f"model-free at {_points(len(free), total)}: {text}, stated because "
                     f"{_why_not_trusted([v for _, v in free])}")
    if based:
        peak = [r["guarantee_epsilon"] for r, _ in based if r["risk_kind"] == "peak"]
        over = [r["guarantee_epsilon"] for r, _ in based if r["risk_kind"] != "peak"]
        what = []
        if peak:
            what.append(f"ε* {_span(min(peak), max(peak))} nats (Zhang et al. 2024, Theorem 3, eq. (30))"
                        + (f" at {fmt_count(len(peak), 'point')}" if over else ""))
        if over:
            what.append(f"the largest risk over {fmt_count(s['horizon'], 'slot')} {_span(min(over), max(over))} nats "
                        f"(Theorem 3) at {fmt_count(len(over), 'point')} without a finite ε*")
        parts.append(f"model-based at {_points(len(based), total)}: {'; '.join(what)}; if the readings follow "
                     f"{_trusted_text([v for _, v in based])}")
    if not parts:
        return "guarantee    : none — no point of the grid has a schedule (see the status counts)"
    return "guarantee    : " + "; ".join(parts)


def _peak_risk_line(s: dict, rows: list) -> str:
    """The ``peak risk ε*`` line: the stated ε* range (a trusted model's), the refuted model's printed on request
    (``--accept-refuted``), and why ε* is not stated where it is withheld."""
    trusted = [r["peak_risk"] for r, v in rows if r["peak_risk"] is not None and v.trusted]
    accepted = [(r["peak_risk"], v) for r, v in rows if r["peak_risk"] is not None and not v.trusted]
    withheld = [v for r, v in rows if r["risk_kind"] == "peak" and r["peak_risk"] is None]
    parts = []
    if trusted:
        parts.append(f"{_span(min(trusted), max(trusted)).removeprefix('= ')} nats"
                     + ("" if len(trusted) == len(rows) else
                        f" ({'at every point with a schedule' if not (accepted or withheld) else 'at ' + fmt_count(len(trusted), 'point')})"))
    if accepted:
        e = [x for x, _ in accepted]
        acc = s.get("accepted_refuted") or [{}]
        parts.append(f"{_span(min(e), max(e)).removeprefix('= ')} nats at {fmt_count(len(accepted), 'point')} under the REFUTED model "
                     f"{', '.join(str(v.model) for v in dict.fromkeys(v for _, v in accepted))}, printed on request "
                     f"(--accept-refuted: {acc[0].get('reason')}); not a bound for these data")
    if withheld and not accepted:
        parts.append(f"not stated at {fmt_count(len(withheld), 'point')} — {_why_not_trusted(withheld, short=True)}, so no "
                     "model-based ε* is a bound for the readings (the model-free guarantee above is); --accept-refuted "
                     "REASON prints the refuted model's")
    if parts:
        return "peak risk ε* : " + "; ".join(parts)
    if s["risk_kind_counts"].get("horizon"):
        return "peak risk ε* : none — no point of the grid has a finite ε* (see horizon)"
    return "peak risk ε* : none — no point of the grid has a schedule (see the status counts)"


def _format_summary(s: dict, rows: list) -> str:
    """The text summary; `rows` pairs each CSV row with its model's :class:`~policyopt.studies.sweep.ModelVerdict`."""
    where = "serial" if s["scheduler"] is None and s["workers"] == 1 else (
        f"Dask scheduler {s['scheduler']}" if s["scheduler"] else f"local Dask cluster, {s['workers']} workers"
    )
    f = s["max_penalty"]
    lines = [
        "policyopt sweep: optimal peak risk over the utility bound f̄ (Zhang et al. 2024, problem (28))",
        _guarantee_line(s, rows),
        f"grid         : {fmt_count(len(f), 'f̄ value')}"
        + (f" from {fmt_value(f[0])} to {fmt_value(f[-1])}" if len(f) > 1 else f" ({fmt_value(f[0])})")
        + "".join(f" × {fmt_count(len(v), 'value')} of {k}" for k, v in s["varied"].items()) + f" = {fmt_count(s['points'], 'point')} ({where})",
        f"points       : {s['computed']} computed, {s['resumed']} resumed from the existing files",
        "status       : " + ", ".join(f"{k} {v}" for k, v in sorted(s["status_counts"].items())),
        _peak_risk_line(s, rows),
    ]
    if s["model_free_epsilon_min"] is not None and s["guarantee_kind_counts"].get("model-free", 0) < s["points"]:
        with_mf = [r for r, _ in rows if r["model_free_epsilon"] is not None]
        hs = sorted({r["model_free_horizon"] for r in with_mf})
        htext = fmt_count(hs[0], "slot") if len(hs) == 1 else f"{hs[0]} to {fmt_count(hs[-1], 'slot')}"
        lines.append("model free   : " + _model_free_text([r["model_free_epsilon"] for r in with_mf],
                                                          [r["model_free_epsilon_pure"] for r in with_mf],
                                                          [r["model_free_delta"] for r in with_mf], htext))
    if s["max_tv_source"] != "chain":
        lines.append(
            f"Δ(t)         : {s['max_tv_source']}: the upper edge of the data's simultaneous band for t ≤ L = "
            f"{s['empirical_max_lag']} slots, made non-increasing over the ages the box uses, 1 beyond them (as schedule "
            f"--max-tv {s['max_tv_source']})"
        )
    n = s["risk_kind_counts"].get("horizon", 0)
    if n:
        by = {}
        for r, _ in rows:
            if r["risk_kind"] == "horizon":
                by.setdefault(r["horizon_accounting"], []).append(r["horizon_risk"])
        for acc, vals in by.items():
            lo, hi = min(vals), max(vals)
            if acc == "model-free":
                lines.append(
                    f"horizon      : {fmt_count(len(vals), 'point')} without a finite ε* (condition (31) fails) and no "
                    f"trusted model: designed for the model-free (ε, δ) over {fmt_count(s['horizon'], 'slot')}, pure ε "
                    + (f"≤ {fmt_upper(hi)} nats" if lo == hi else f"from {fmt_upper(lo)} to {fmt_upper(hi)} nats")
                    + " (risk_kind horizon, horizon_accounting model-free, columns horizon_*)"
                )
            else:
                refuted = list(dict.fromkeys(str(v.model or "chain") for r, v in rows
                                             if r["risk_kind"] == "horizon" and r["horizon_accounting"] == acc
                                             and not v.trusted))
                lines.append(
                    f"horizon      : {fmt_count(len(vals), 'point')} without a finite ε* (condition (31) fails): designed "
                    f"for the largest risk over {s['horizon']} slots (Theorem 3), "
                    + (f"≤ {fmt_upper(hi)} nats" if lo == hi else f"from {fmt_upper(lo)} to {fmt_upper(hi)} nats")
                    + " (risk_kind horizon, columns horizon_*)"
                    + (f" — under the REFUTED model {', '.join(refuted)}, printed on request (--accept-refuted); not a "
                       "bound for these data" if refuted else "")
                )
    if s["no_tradeoff"]:
        for r in s["no_tradeoff"]:
            model = ", ".join(f"{k}={fmt_value(v) if isinstance(v, float) else v}" for k, v in r["model"].items()
                              if v is not None and k in s["varied"])
            lines.append(
                f"no trade-off : f̄ ∈ [{fmt_value(r['from'])}, {fmt_value(r['to'])}]{' (' + model + ')' if model else ''}: raising f̄ does "
                f"not lower ε* = {fmt_upper(r['peak_risk'])} nats (Corollary 3)"
            )
    else:
        unknown = sum(1 for r, _ in rows if r["A"] is not None and r["peak_risk"] is None)
        if unknown and s["peak_risk_min"] is None:
            lines.append("no trade-off : not assessed — no ε* is stated (see peak risk ε*)")
        elif unknown:
            lines.append(f"no trade-off : none where ε* is stated; not assessed next to the {fmt_count(unknown, 'point')} "
                         "whose ε* is not stated")
        else:
            lines.append("no trade-off : none on this grid (every step up in f̄ lowers ε*)")
    lines.append(f"files        : {s['out']} (CSV), {s['jsonl']} (JSON lines)")
    if s["plot"]:
        lines.append(f"plot         : {s['plot']}")
    for w in s["warnings"]:
        lines.append(f"warning      : {w}")
    if s.get("model_check"):
        from policyopt.studies.markov_check import model_check_line

        used = "" if s["max_tv_source"] == "chain" else (
            f"; these designs use the data's Δ̃(t) ({s['max_tv_source']}), not the chains: only the first-order Markov "
            "premise of Theorem 3 is taken from this check")
        for check in s["model_check"]:
            lines.append(f"model check  : K = {check['states']}: {model_check_line(check)}{used}")
    lines.append(f"wall time    : {s['wall_time_s']:.3f} s")
    return check_text("\n".join(lines))
