"""``policyopt tpl-budget``: budgets ε_1..ε_T that guarantee a target α-DP_T under temporal correlations (Cao et al.
2019, Algorithms 7 and 8, or the utility-optimal allocation).

The report is :func:`policyopt.app.tpl.budget_report` (from Python :func:`policyopt.allocate_tpl_budgets`); this
module parses the options (the model options are ``tpl``'s: :func:`policyopt.cli.options.add_tpl_source`) and prints.
"""

from __future__ import annotations

from policyopt.app.tpl import BUDGET_METHODS, MAX_BUDGET, MAX_BUDGET_HORIZON, MAX_OPTIMAL_HORIZON, MIN_ALPHA
from policyopt.cli.options import add_tpl_source, int_at_least, positive_float

__all__ = ["add_command"]


def add_command(sub) -> None:
    """Register the ``tpl-budget`` sub-command on the sub-parsers `sub`."""
    bud = sub.add_parser(
        "tpl-budget",
        help="budgets ε_1..ε_T that guarantee a target α-DP_T under temporal correlations",
        description="Allocate per-step budgets so that TPL_t ≤ α at every step (Cao et al. 2019, Algorithms 7 and 8; "
        "'optimal' minimises the total Laplace noise variance globally with SCIP).  On data the α-DP_T of the budgets "
        "holds only under a --markov-model that passed its checks on held-out readings; the model-free (ε, δ) of the "
        "budgets is always given.",
    )
    add_tpl_source(bud)
    bud.add_argument("--alpha", type=positive_float("--alpha", MAX_BUDGET, MIN_ALPHA), required=True, metavar="A",
                     help=f"target α of α-DP_T, nats (from {MIN_ALPHA:g} to {MAX_BUDGET:g})")
    bud.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_BUDGET_HORIZON), required=True, metavar="T",
                     help=f"number of steps (at most {MAX_BUDGET_HORIZON}: the allocation re-runs the BPL/FPL recursions of "
                     "every user, about 20 s at the limit for the bundled homes, whose slowly mixing chains approach "
                     f"their fixed point over 10^5 steps; {MAX_OPTIMAL_HORIZON} with --method optimal)")
    bud.add_argument("--method", choices=BUDGET_METHODS, default="quantification",
                     help="Algorithm 7 (upper-bound), Algorithm 8 (quantification, default) or the utility-optimal allocation")
    bud.set_defaults(handler=_cmd_tpl_budget)


def _cmd_tpl_budget(args) -> int:
    """Handler of ``policyopt tpl-budget``: the report of :func:`policyopt.app.tpl.budget_report`, printed; exit
    code."""
    from policyopt.app.tpl import TplBudgetOptions, budget_report

    report = budget_report(TplBudgetOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    return 0
