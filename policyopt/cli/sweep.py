"""``policyopt sweep``: the optimal schedule over a grid of f̄ (and model parameters), resumable.

Registered in :func:`policyopt.cli.main.build_parser` by :func:`add_command`.  The model options are
the ``schedule`` command's (one shared definition, :func:`policyopt.cli.options.add_model_options`);
the models are built by :func:`policyopt.app.sweep.build_models`, the work is done by
:func:`policyopt.studies.sweep.run_sweep`, the text by :func:`policyopt.studies.sweep_text.format_summary` and the
figure by :func:`policyopt.studies.plots.plot_sweep`.
"""

from __future__ import annotations

import argparse
import json
import re
import time

from policyopt.progress import showing
from policyopt.app.inputs import (
    MAX_COUNT,
    MAX_STATES,
    max_tv_level,
)
from policyopt.app.sweep import build_models, check_guarantee_options
from policyopt.cli.options import (
    add_guarantee_options,
    add_max_tv_options,
    add_model_options,
    int_at_least,
    non_negative_float,
)
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
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)
    from policyopt.studies.sweep import MAX_GRID_POINTS

    vary = _parse_vary(args.vary, args)
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
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        from policyopt.studies.sweep_text import format_summary

        per_model = len(args.max_penalty)
        print(format_summary(summary, [(r, models[r["point"] // per_model].verdict) for r in rows]))
    return 0
