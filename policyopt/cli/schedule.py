"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report."""

from __future__ import annotations

import json
import time

from policyopt.cli.options import (
    DEFAULT_MAX_PENALTY,
    DEFAULT_PLOT_EPOCHS,
    add_model_options,
    int_at_least,
    load_model,
    positive_float,
)
from policyopt.errors import InvalidInputError

__all__ = ["add_command", "run_schedule"]


def add_command(sub) -> None:
    """Register the ``schedule`` sub-command on the sub-parsers `sub`."""
    sched = sub.add_parser(
        "schedule",
        help="optimal aging/publishing schedule (A, S_bar, epsilon_c) minimising the peak age-dependent risk",
        description=(
            "Choose the aging A (slots), inter-publish time S_bar (slots) and per-release budget epsilon_c (nats) "
            "minimising the peak age-dependent privacy risk (Zhang et al. 2024, problem (28), Theorem 4, eq. (30)) "
            "subject to an MSE bound on the released mean.  Without a model option the bundled CityLearn 2022 "
            "data (17 homes, hourly kWh) is used."
        ),
    )
    add_model_options(sched)
    sched.add_argument("--max-penalty", type=positive_float("--max-penalty"), default=DEFAULT_MAX_PENALTY, metavar="F",
                       help=f"bound f̄ on the MSE of the released mean, squared value units (default {DEFAULT_MAX_PENALTY})")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1), default=DEFAULT_PLOT_EPOCHS, metavar="N",
                       help=f"epochs drawn by --plot (default {DEFAULT_PLOT_EPOCHS})")
    sched.set_defaults(handler=run_schedule)


def run_schedule(args) -> int:
    from policyopt.utility.penalty import MSEPenalty
    from policyopt.studies.schedule import design_schedule, format_report

    start = time.perf_counter()
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_path, require_matplotlib

        if args.relax:
            raise InvalidInputError("--plot draws integer schedules (time in whole slots); omit --relax")
        check_plot_path(args.plot, "--plot")
        require_matplotlib("--plot")
    population, info, unit = load_model(args)
    penalty = MSEPenalty(population, unit=unit)
    report = design_schedule(
        population,
        max_penalty=args.max_penalty,
        A_max=args.max_age,
        S_max=args.max_interval,
        penalty=penalty,
        releases=args.releases,
        model_info=info,
        method=args.method,
        relax=args.relax,
    )
    out = report.to_dict()
    plot_error = None
    if args.plot is not None:
        out["plot"] = None
        if out["A"] is None:
            plot_error = f"--plot: no schedule to draw (status {out['status']})"
        else:
            from policyopt.studies.plots import plot_schedule

            plot_schedule(
                out["A"], out["S_bar"], out["epsilon_c"], population, args.plot,
                epochs=args.plot_epochs, peak_risk=out["peak_risk"], title=info["source"],
            )
            out["plot"] = str(args.plot)
    out["wall_time_s"] = time.perf_counter() - start
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(format_report(out))
    if plot_error is not None:
        raise InvalidInputError(plot_error)
    return 0
