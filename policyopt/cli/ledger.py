"""The ``policyopt ledger`` command: audit a privacy ledger written by ``policyopt publish``.

The age-dependent risk ε(t) of the releases actually made (Zhang et al. (2024), "Age-Dependent Differential Privacy",
IEEE Trans. Inf. Theory, Theorem 3, eq. (25)), its peak, the designed ε* (eq. (30)), AoI (eq. (24)), the model-free
(ε, δ) of those releases and their error bars.  The audit is :func:`policyopt.app.ledger.audit_report` (from Python
:func:`policyopt.audit_ledger`); this module parses the options (those it shares with ``publish`` are in
:mod:`policyopt.cli.options`) and prints.
"""

from __future__ import annotations

from policyopt.cli.options import (
    add_guarantee_options,
    add_ledger_model_options,
    add_markov_model_option,
    int_at_least,
    interrupted,
    probability,
)

__all__ = ["add_command", "run_ledger"]

def add_command(sub) -> None:
    """Add the ``ledger`` sub-command to the argparse subparsers `sub`.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers object of :func:`policyopt.cli.build_parser`.
    """
    led = sub.add_parser(
        "ledger",
        help="audit a privacy ledger: age-dependent risk ε(t) of the releases made, its peak, the designed peak, AoI",
        description=(
            "The age-dependent risk ε(t) (Theorem 3, eq. (25)) of the releases actually made — their own times, agings "
            "and budgets, so missed or skipped releases count — its peak so far, the designed peak ε* (eq. (30)) and "
            "AoI(t) (eq. (24)); and the model-free (ε, δ) of those releases for each user's whole series, whatever the "
            "correlation (PLD accountant of dp_accounting), stated first unless the design's Markov model passed its "
            "checks on held-out readings (or was given without data).  Zhang et al. (2024), 'Age-Dependent Differential "
            "Privacy', IEEE Trans. Inf. Theory, 2024."
        ),
    )
    led.add_argument("--ledger", metavar="FILE", required=True, help="SQLite ledger written by `policyopt publish`")
    led.add_argument("--at", type=int_at_least("--at", 0), metavar="T", help="report ε and AoI at slot T (default: the last row's slot); the trajectory from the first input slot to T "
                     "holds at most 10^7 slots (memory)")
    add_ledger_model_options(led, "default: the model recorded in the ledger",
               "audit under a --model/--states/--smoothing other than the one recorded in the ledger")
    add_guarantee_options(led, design=False, markov=False)
    add_markov_model_option(led, "default: the model recorded in the ledger; another one re-accounts the same releases, with "
                      "the verdict the design's check gave it (unchecked when the design did not check it)")
    led.add_argument("--ci-level", type=probability("--ci-level"), metavar="LEVEL",
                     help="level of the releases' error bars in this audit (default: the ledger's; the same design "
                     "readings, another level)")
    led.add_argument("--plot", metavar="FILE",
                     help="draw the releases up to --at with both error bars into FILE (.png, .pdf or .svg; needs matplotlib)")
    led.add_argument("--json", action="store_true", help="print one JSON object (with the whole trajectory) instead of text")
    led.set_defaults(handler=run_ledger)


def run_ledger(args) -> int:
    """Handler of ``policyopt ledger``: the report of :func:`policyopt.app.ledger.audit_report`, printed as text or
    JSON; exit code.

    Raises
    ------
    InvalidInputError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    from policyopt.app.ledger import Interrupted, LedgerOptions, audit_report

    try:
        report = audit_report(LedgerOptions.from_namespace(args))
    except Interrupted as exc:
        return interrupted(exc.what)
    print(report.to_json() if args.json else str(report))
    return 0
