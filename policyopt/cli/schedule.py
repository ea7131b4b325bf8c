"""``policyopt schedule``: the optimal aging/publishing schedule (A, S_bar, epsilon_c) and its report.

The command parses and prints; the design is :func:`policyopt.design_deployment` (:mod:`policyopt.app.schedule`),
whose report's ``to_dict()`` is the ``--json`` object and ``str()`` the text.
"""

from __future__ import annotations

from policyopt.app.inputs import (
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_CREDIBLE,
    DEFAULT_DRAWS,
    DEFAULT_PLOT_EPOCHS,
    DEFAULT_SEED,
    MAX_DRAWS,
    MAX_PLOT_EPOCHS,
)
from policyopt.cli.options import (
    add_bound_options,
    add_distributed_options,
    add_guarantee_options,
    add_max_tv_options,
    add_model_options,
    int_at_least,
    probability,
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
            "subject to an MSE bound on the released mean of a deployment of I users.  Without a model option the "
            "bundled CityLearn 2022 pilot (17 homes, hourly kWh) designs a documented deployment: "
            f"I = {BUNDLED_USERS} homes, readings in {BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh.  "
            "With data, f̄ bounds the MSE of the released value against the current mean of the I users' readings, in the "
            "readings' unit squared (kWh^2 for the bundled pilot), estimated from the readings (--penalty readings)."
        ),
    )
    add_model_options(sched)
    add_bound_options(sched)
    sched.add_argument("--min-row-transitions", type=int_at_least("--min-row-transitions", 1), default=None, metavar="N",
                       help="a (user, state) row observed fewer times is sparse: listed in model.sparse_states, and a "
                       "warning is given when it sets Δ(t) at the chosen A or S_bar (data only; default 30)")
    sched.add_argument("--credible", type=probability("--credible"), default=None, metavar="LEVEL",
                       help=f"posterior check of the chosen schedule: median and upper LEVEL quantile of ε* over Dirichlet "
                       f"posterior draws of the chains (of the Z chain of a --markov-model; a parametric bootstrap for "
                       f"hmm:R), a Bayesian credible statement, not a proof (data only; default {DEFAULT_CREDIBLE})")
    sched.add_argument("--robust", type=probability("--robust"), default=None, metavar="LEVEL",
                       help="design against a simultaneous posterior upper band of Δ(t) (t ≤ max(A_MAX, S_MAX) + 1) that "
                       "holds for the whole curve with posterior probability LEVEL; with a --markov-model, the band of "
                       "its Δ_Z(t) (data only; exact method)")
    sched.add_argument("--draws", type=int_at_least("--draws", 2, MAX_DRAWS), default=None, metavar="M",
                       help=f"posterior draws (simulated pilots) for --credible and --robust (default {DEFAULT_DRAWS}; at most "
                       f"{MAX_DRAWS}, about 4 ms each for the bundled pilot; with --markov-model hmm:R each is one EM "
                       "refit per user)")
    sched.add_argument("--seed", type=int_at_least("--seed", 0), default=None, metavar="N",
                       help=f"seed of the simulation generator for the posterior draws (default {DEFAULT_SEED}; "
                       "simulation only, never released noise)")
    sched.add_argument("--slot-length", metavar="DUR", default=None,
                       help="length of one slot of --data, e.g. 30min, 1h (recorded in the JSON's deployment for "
                       "`publish`; the bundled data: 1h)")
    add_max_tv_options(sched)
    add_guarantee_options(sched)
    sched.add_argument("--backtest", type=probability("--backtest"), default=None, metavar="F",
                       help="design on the first fraction F of the readings' time range only, then replay the design on "
                       "the rest as `policyopt backtest --schedule` does (realised MSE of the deployment against f̄, "
                       "and Δ(t) at A and S_bar against the held-out data): a `backtest` line and JSON object "
                       "(data or the bundled year; not with --workers)")
    sched.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    sched.add_argument("--plot", metavar="FILE", help="draw ε(t) and AoI(t) of the chosen schedule over a few epochs "
                       "into FILE (.png, .pdf or .svg; needs matplotlib, the 'plot' extra)")
    sched.add_argument("--plot-epochs", type=int_at_least("--plot-epochs", 1, MAX_PLOT_EPOCHS), default=None, metavar="N",
                       help=f"epochs drawn by --plot (default: the fewest, at least {DEFAULT_PLOT_EPOCHS}, whose last "
                       f"in-epoch peak reaches 95%% of ε*; at most {MAX_PLOT_EPOCHS}; only with --plot)")
    add_distributed_options(sched)
    sched.set_defaults(handler=run_schedule)



def run_schedule(args) -> int:
    """Handler of ``policyopt schedule``: design the deployment (:func:`policyopt.design_deployment` of the parsed
    options), print its text or JSON; exit code 0 (2 after the report when ``--plot`` had no schedule to draw)."""
    from policyopt.app.design_options import DesignOptions
    from policyopt.app.schedule import design_from_options

    report = design_from_options(DesignOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    if report.plot_error is not None:
        raise InvalidInputError(report.plot_error)
    return 0
