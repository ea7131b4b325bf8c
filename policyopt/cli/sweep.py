"""``policyopt sweep``: the optimal schedule over a grid of f̄ (and model parameters), resumable.

Registered in :func:`policyopt.cli.main.build_parser` by :func:`add_command`.  The model options are
the ``schedule`` command's (one shared definition, :func:`policyopt.cli.options.add_model_options`);
the run is :func:`policyopt.app.sweep.sweep_report` (from Python :func:`policyopt.sweep_designs`: the models by
:func:`policyopt.app.sweep.build_models`, the points by :func:`policyopt.studies.sweep.run_sweep`, the text by
:func:`policyopt.studies.sweep_text.format_summary`, the figure by :func:`policyopt.studies.plots.plot_sweep`); this
module parses the options and prints.
"""

from __future__ import annotations

import argparse

from policyopt.app.inputs import (
    MAX_COUNT,
    MAX_STATES,
)
from policyopt.app.sweep import MAX_WORKERS, VARY_PARAMETERS
from policyopt.cli.options import (
    add_guarantee_options,
    add_max_tv_options,
    add_model_options,
    int_at_least,
    non_negative_float,
)
from policyopt.errors import InvalidInputError, fmt

__all__ = ["add_command", "VARY_PARAMETERS"]



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


def _parse_vary(items) -> dict:
    """{name: values} from the --vary options (``NAME=START:STOP:N`` or ``NAME=V1,V2,...``), each grid parsed as
    :func:`policyopt.studies.sweep.parse_grid` reads it; what applies to which model is checked below the command line
    (:func:`policyopt.app.sweep.check_vary`)."""
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
        integer, lower, _ = VARY_PARAMETERS[name]
        out[name] = parse_grid(spec, f"--vary {name}", integer=integer, lower=lower)
    return out


def _cmd_sweep(args) -> int:
    """Handler of ``policyopt sweep``: the summary of :func:`policyopt.app.sweep.sweep_report`, printed as text or
    JSON; exit code."""
    import dataclasses

    from policyopt.app.sweep import SweepOptions, sweep_report

    names = {f.name for f in dataclasses.fields(SweepOptions)}
    given = {k: v for k, v in vars(args).items() if k in names and k != "vary"}
    report = sweep_report(SweepOptions(**given, vary=_parse_vary(args.vary)))
    print(report.to_json() if args.json else str(report))
    return 0
