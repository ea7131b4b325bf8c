"""``policyopt tpl``: backward, forward and total temporal privacy leakage of a budget sequence (Cao et al. 2019).

The report is :func:`policyopt.app.tpl.leakage_report` (from Python :func:`policyopt.temporal_leakage`); this module
parses the options (those ``tpl-budget`` shares too: :func:`policyopt.cli.options.add_tpl_source`) and prints.
"""

from __future__ import annotations

from policyopt.app.tpl import MAX_BUDGET, MAX_HORIZON
from policyopt.cli.options import add_tpl_source, int_at_least, positive_float

__all__ = ["add_command"]


def add_command(sub) -> None:
    """Register the ``tpl`` sub-command on the sub-parsers `sub` (``tpl-budget`` is :mod:`policyopt.cli.tpl_budget`)."""
    tpl = sub.add_parser(
        "tpl",
        help="backward, forward and total temporal privacy leakage (BPL/FPL/TPL) of a budget sequence",
        description="BPL, FPL and TPL per step (Cao et al. 2019, eqs. (11), (13), (15)) and their suprema (Theorem 11). "
        "Without --pb/--pf the matrices are estimated per home from the data (bundled data by default) under "
        "--markov-model, which is checked on held-out readings first: the leakage is stated as a bound only under a "
        "model that passed; otherwise the report leads with the guarantee that needs no model, the T releases "
        "composed ((ε, δ) by the PLD accountant, pure Σ ε_t).",
    )
    add_tpl_source(tpl)
    tpl.add_argument("--epsilon", type=positive_float("--epsilon", MAX_BUDGET), metavar="E",
                     help=f"constant budget per step, nats (at most {MAX_BUDGET:g})")
    tpl.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), metavar="T",
                     help=f"number of steps (with --epsilon; at most {MAX_HORIZON})")
    tpl.add_argument("--budgets", metavar="FILE",
                     help=f"budgets ε_1..ε_T, comma/newline separated (each in [0, {MAX_BUDGET:g}] nats, at most "
                     f"{MAX_HORIZON} of them)")
    tpl.set_defaults(handler=_cmd_tpl)


def _cmd_tpl(args) -> int:
    """Handler of ``policyopt tpl``: the report of :func:`policyopt.app.tpl.leakage_report`, printed; exit code."""
    from policyopt.app.tpl import TplOptions, leakage_report

    report = leakage_report(TplOptions.from_namespace(args))
    print(report.to_json() if args.json else str(report))
    return 0
