"""``policyopt publish``: run a designed schedule into a privacy ledger.

Registered in :func:`policyopt.cli.build_parser` through :func:`add_command`; ``policyopt ledger`` is
:mod:`policyopt.cli.ledger`.  The run is :func:`policyopt.app.publish.publish_report` (from Python
:func:`policyopt.publish_releases`); this module parses options and prints.
"""

from __future__ import annotations

from policyopt.cli.options import (
    add_distributed_options,
    add_guarantee_options,
    add_ledger_model_options,
    add_markov_model_option,
    int_at_least,
    interrupted,
    positive_float,
    probability,
    value_range_arg,
)

__all__ = ["add_command", "run_publish"]


def add_command(sub) -> None:
    """Add the ``publish`` sub-command to the argparse subparsers `sub` (``ledger`` is :mod:`policyopt.cli.ledger`).

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers object of :func:`policyopt.cli.build_parser`.
    """
    pub = sub.add_parser(
        "publish",
        help="release a designed schedule on a growing stream with OpenDP Laplace noise, into an SQLite privacy ledger",
        description=(
            "At each publishing time S_n = first slot + A + (n−1)·S_bar up to the last complete slot of the stream, "
            "release the mean over the users present of their readings at S_n − A, clipped to --value-range, plus "
            "Laplace noise of scale Δf/ε_C (Δf = (HI − LO)/I) drawn by OpenDP.  A slot with no reading is skipped "
            "(recorded, nothing spent).  Each release is committed to the ledger before it is written to --out; "
            "rerun as the stream grows: it resumes after the last committed release and never redraws noise.  "
            "The report states first the guarantee of the releases made that the evidence supports: their age-dependent "
            "risk ε(t) (Theorem 3) only when the design's Markov model passed its checks on held-out readings (or was "
            "given without data), else their model-free (ε, δ) for each user's whole series (PLD accountant of "
            "dp_accounting), which holds whatever the correlation.  "
            "Zhang et al. (2024), 'Age-Dependent Differential Privacy', IEEE Trans. Inf. Theory, 2024, Theorem 3, eq. (30)."
        ),
    )
    pub.add_argument("--schedule", metavar="FILE", help="JSON printed by `policyopt schedule --json`")
    pub.add_argument("--A", dest="A", type=int_at_least("--A", 0), metavar="N", help="aging A, slots, ≤ 2^62 (instead of --schedule)")
    pub.add_argument("--S-bar", dest="S_bar", type=int_at_least("--S-bar", 1), metavar="N",
                     help="inter-publish time S_bar, slots, ≤ 2^62 (instead of --schedule)")
    pub.add_argument("--epsilon-c", dest="epsilon_c", type=positive_float("--epsilon-c"), metavar="E",
                     help="budget per release ε_C, nats, ≤ 700 (beyond, the noise is below float resolution) and large enough that the "
                     "Laplace scale (HI − LO)/(I·ε_C) stays ≤ 1e300 (instead of --schedule)")
    pub.add_argument("--data", metavar="CSV_OR_PARQUET",
                     help="the stream so far: long CSV user,time,value (time in integer slots, each user's times increasing), "
                     "or a Parquet data set with those columns (a directory, a glob or a .parquet file, as `schedule` reads; "
                     "only the input slots' rows are read, by a filter on time); "
                     "default: the bundled CityLearn 2022 data (17 homes, hourly kWh, 8760 slots) as a finished stream. "
                     "With --schedule it must be the data the schedule was designed on, or that CSV grown by appended "
                     "lines (same SHA-256 of its first bytes), unless --override")
    pub.add_argument("--trial", metavar="REASON", default=None,
                     help="publish a stream with far fewer users than the schedule was designed for (a release over fewer "
                     "than half of its I users is refused otherwise: its noise variance is at least 4 times the schedule's); "
                     "REASON (one line) is recorded in the ledger with the first such release and the fewest users")
    pub.add_argument("--slot-length", metavar="DUR",
                     help="length of one slot of --data, e.g. 30min, 1h, 1d (default: read from its time stamps when they are "
                     "date-times — the most common step —, else the schedule's slot length; the bundled data: 1h)")
    pub.add_argument("--resample", metavar="DUR",
                     help="publish on slots of DUR (a multiple of the slot length): each user's mean over each DUR bin, "
                     "as pandas resample(DUR).mean() (CSV or bundled --data)")
    pub.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading, within ±1e300; readings are clipped to it (write --value-range=-1:1 for a negative LO); "
                     "default: the range --schedule declares (required with --A/--S-bar/--epsilon-c)")
    pub.add_argument("--ledger", metavar="FILE", required=True, help="SQLite privacy ledger (created on the first run)")
    pub.add_argument("--out", metavar="CSV_OR_PARQUET",
                     help="releases with their error bars: a CSV, appended after each commit, or a .parquet file, rewritten "
                     "whole at the end of each run; rebuilt from the ledger when behind")
    pub.add_argument("--through", type=int_at_least("--through", 0), metavar="T",
                     help="last complete slot (default: the stream's last slot − 1, whose readings may still be arriving)")
    pub.add_argument("--start", type=int_at_least("--start", 0), metavar="T",
                     help="first input slot of the schedule, ≤ 2^62 (default: the stream's first slot when the ledger is created)")
    pub.add_argument("--max-risk", type=positive_float("--max-risk"), metavar="R",
                     help="refuse (exit 2, nothing written) a run in which a release would have ε(S_n) > R nats")
    pub.add_argument("--max-tv", metavar="SOURCE",
                     help="with --A/--S-bar/--epsilon-c: the Δ(t) the ledger accounts with: model (the chains, default) or "
                     "empirical[:LEVEL] (the upper edge of the LEVEL, default 0.95, block-bootstrap band of Δ(t) estimated "
                     "from the model's data — --data by default — as `schedule --max-tv empirical` does, for t ≤ A + S̄; 1 "
                     "beyond); estimated when the ledger is created and recorded in it (a --schedule carries its own)")
    add_ledger_model_options(pub, "default: the model recorded in --schedule's deployment, else the bundled pilot as `policyopt schedule` "
               "designs it (3 states, fitted on 0:48 kWh); fixed by the ledger's first run",
               "publish with a --model/--states/--smoothing/--value-range that differs from the schedule's design, a "
               "--data stream that is not the design's data (nor that file grown by appended lines), or --data with "
               "--A/--S-bar/--epsilon-c and no --model")
    add_distributed_options(
        pub, "distributed reading (Parquet --data)",
        "split the Parquet --data into its input slots on a local Dask cluster of N worker processes, one file per task "
        "(the releases are then drawn one after another by this process)",
        "the same on an existing Dask cluster (its workers need policyopt, the --data files and the system's temporary "
        "folder at the same paths)")
    add_guarantee_options(pub, design=False, markov=False)
    add_markov_model_option(pub, "default: the model --schedule's design used (its deployment.model.markov_model), else chain; "
                      "fixed by the ledger's first run")
    pub.add_argument("--ci-level", type=probability("--ci-level"), metavar="LEVEL",
                     help="level of each release's error bars (default 0.95; fixed when the ledger is created): "
                     "ci_low..ci_high holds the input slot's mean with probability exactly LEVEL (Laplace quantile), "
                     "ci_current_low..ci_current_high the mean at the publication slot with probability ≥ LEVEL (noise and "
                     "the mean's change over A slots in the design's readings, union bound); post-processing, no privacy spent")
    pub.add_argument("--plot", metavar="FILE",
                     help="draw every release so far with both error bars into FILE (.png, .pdf or .svg; needs matplotlib), "
                     "over the stream's true current mean when the stream is the design's own readings (a replay)")
    pub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    pub.set_defaults(handler=run_publish)


def run_publish(args) -> int:
    """Handler of ``policyopt publish``: the report of :func:`policyopt.app.publish.publish_report`, printed as text
    or JSON; exit code.

    Raises
    ------
    InvalidInputError, RiskLimitError, LedgerLockedError
        Turned into one line on stderr and exit code 2 by :func:`policyopt.cli.main`.
    """
    from policyopt.app.ledger import Interrupted
    from policyopt.app.publish import PublishOptions, publish_report

    try:
        report = publish_report(PublishOptions.from_namespace(args))
    except Interrupted as exc:
        return interrupted(exc.what)
    print(report.to_json() if args.json else str(report))
    return 0
