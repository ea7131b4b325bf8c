"""Options shared by the sub-commands: one-line argparse errors, validated numbers, the option groups.

What the options mean (loading the deployment, its penalty, the defaults and limits) lives below the command line,
in :mod:`policyopt.app.inputs`; this module only declares and parses them.  It imports the layers below lazily,
inside functions, so ``policyopt --help`` starts fast.
"""

from __future__ import annotations

import argparse
import math
import sys

# The defaults and limits are defined once, below the command line (the help texts state them).
from policyopt.app.inputs import (
    BUNDLED_PHASE_PERIOD,
    BUNDLED_STATES,
    BUNDLED_USERS,
    BUNDLED_VALUE_RANGE,
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_INTERVAL,
    DEFAULT_PENALTY_LEVEL,
    DEFAULT_RELEASES,
    DEFAULT_SMOOTHING,
    DEFAULT_STATES,
    DEFAULT_USERS,
    MAX_AGE_LIMIT,
    MAX_COUNT,
    MAX_HORIZON,
    MAX_LOCAL_WORKERS,
    MAX_STATES,
    MAX_TABLE_CELLS,
    PENALTY_CHOICES,
)

__all__ = [
    "OneLineParser",
    "positive_float",
    "int_at_least",
    "non_negative_float",
    "value_range_arg",
    "probability",
    "delta_arg",
    "add_model_options",
    "add_penalty_options",
    "add_bound_options",
    "add_max_tv_options",
    "add_guarantee_options",
    "add_tpl_source",
    "add_distributed_options",
    "add_ledger_model_options",
    "add_markov_model_option",
    "check_plot",
    "interrupted",
    "error_line",
    "silence_stdout",
]


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors on one line with exit code 2."""

    def error(self, message):  # noqa: D401 - argparse API
        """Print the usage error on one line and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive_float(name, upper=None, lower=None):
    """argparse type: a positive finite float, optionally within [`lower`, `upper`] (stated in the option's help)."""

    def parse(text):
        """Parse a positive finite float or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{name} must be a positive finite number, got {text!r}")
        if upper is not None and value > upper:
            raise argparse.ArgumentTypeError(f"{name} must be ≤ {upper:g}, got {text!r}")
        if lower is not None and value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower:g}, got {text!r}")
        return value

    return parse


def int_at_least(name, lower, upper=None):
    """argparse type: an integer ≥ `lower` and, if given, ≤ `upper` (checked before anything is allocated)."""

    def parse(text):
        """Parse an integer in [lower, upper] or raise ArgumentTypeError naming the option."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < lower:
            raise argparse.ArgumentTypeError(f"{name} must be ≥ {lower}, got {text!r}")
        if upper is not None and value > upper:
            raise argparse.ArgumentTypeError(f"{name} must be ≤ {upper}, got {text!r}")
        return value

    return parse


def non_negative_float(name):
    """An argparse ``type`` accepting a finite float ≥ 0; errors name the option `name`."""
    def parse(text):
        """Parse a finite float ≥ 0 or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number ≥ 0, got {text!r}")
        return value

    return parse


def value_range_arg(name):
    """An argparse ``type`` for ``LO:HI`` (finite, LO < HI, data units); errors name the option `name`."""
    def parse(text):
        """Parse LO:HI (two finite numbers, LO < HI) or raise ArgumentTypeError naming the option."""
        lo, sep, hi = str(text).partition(":")
        try:
            if not sep:
                raise ValueError
            a, b = float(lo), float(hi)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be LO:HI (two numbers), got {text!r}") from None
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise argparse.ArgumentTypeError(f"{name} must be LO:HI with finite LO < HI, got {text!r}")
        return (a, b)

    return parse


def probability(name, what: str = "a probability strictly between 0 and 1"):
    """An argparse ``type`` for a level in (0, 1) (e.g. --credible, --robust); errors name the option `name` and say
    it must be `what`."""
    def parse(text):
        """Parse a number strictly between 0 and 1 or raise ArgumentTypeError naming the option."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (0.0 < value < 1.0):
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {text!r}")
        return value

    return parse


def add_model_options(cmd) -> None:
    """Model and search options shared by ``schedule`` and ``sweep`` (one definition for both).

    Adds the model source (``--data`` | ``--chain`` | ``--matrix``), ``--states``, ``--users``,
    ``--value-range``, ``--max-age``, ``--max-interval``, ``--releases``, ``--smoothing``, ``--method`` and
    ``--relax``; each command adds its own ``--max-penalty`` (a value or a grid).
    """
    src = cmd.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="CSV_OR_PARQUET", help="long CSV with header user,time,value (time in integer "
                     "slots), or Parquet with those columns: a .parquet file, a directory or a glob of files")
    src.add_argument("--chain", metavar="SPEC", help="two-state:p=P,q=Q (states valued -1/+1), eq. (43)")
    src.add_argument("--matrix", metavar="FILE", help="CSV/NPY transition matrix, K×K or (K+1)×K with state values first")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES} for --data, {BUNDLED_STATES} for the bundled "
                     f"pilot; at most {MAX_STATES})")
    cmd.add_argument("--users", type=int_at_least("--users", 1, MAX_COUNT), metavar="I",
                     help=f"deployment size: users whose mean is released (default {BUNDLED_USERS} for the bundled pilot, "
                     f"the usable pilot users for --data, {DEFAULT_USERS} for --chain/--matrix); with data, the I users "
                     f"follow the pilot's chains in equal shares; at most {MAX_COUNT:.0e}")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (data units): readings are clipped into it before estimation and "
                     "the sensitivity of the mean is (HI-LO)/I (default for the bundled pilot: "
                     f"{BUNDLED_VALUE_RANGE[0]:g}:{BUNDLED_VALUE_RANGE[1]:g} kWh; otherwise the data's own range, "
                     "which is not private)")
    cmd.add_argument("--max-age", type=int_at_least("--max-age", 0, MAX_AGE_LIMIT), default=DEFAULT_MAX_AGE,
                     metavar="A_MAX", help=f"largest aging A considered, slots (default {DEFAULT_MAX_AGE}, at most "
                     f"{MAX_AGE_LIMIT}; (A_MAX + 1)·S_MAX at most {MAX_TABLE_CELLS:.0e})")
    cmd.add_argument("--max-interval", type=int_at_least("--max-interval", 1, MAX_AGE_LIMIT), default=DEFAULT_MAX_INTERVAL,
                     metavar="S_MAX", help=f"largest inter-publish time S_bar considered, slots (default "
                     f"{DEFAULT_MAX_INTERVAL}, at most {MAX_AGE_LIMIT})")
    cmd.add_argument("--releases", type=int_at_least("--releases", 1, MAX_COUNT), default=DEFAULT_RELEASES, metavar="N",
                     help=f"releases after which the noise-only benchmark's risk is reported (default {DEFAULT_RELEASES}, "
                     f"at most {MAX_COUNT:.0e})")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help=f"additive smoothing pseudo-count for estimated chains (default {DEFAULT_SMOOTHING})")
    cmd.add_argument("--method", choices=("exact", "heuristic", "cvxpy", "pyomo", "all"), default="exact",
                     help="exact: problem (28) with the exact Δ(t), integer (default); heuristic/cvxpy/pyomo: problem (39) "
                     "with the envelope Δ(t) ≤ c·ρ^t; all: every back end side by side")
    cmd.add_argument("--relax", action="store_true",
                     help="continuous relaxation of A and S_bar for the (39) back ends (cvxpy needs it)")
    add_penalty_options(cmd)


def add_penalty_options(cmd) -> None:
    """``--penalty``, ``--phase-period``, ``--penalty-level``: which MSE the design bounds (shared by schedule, sweep, backtest)."""
    cmd.add_argument("--penalty", choices=PENALTY_CHOICES, default=None,
                     help="the MSE f̄ bounds: readings = estimated from the clipped readings, E[(m_{t-a} - m_t)^2] = "
                     "cross(a) + (self(a) - cross(a))/I at the worst phase, its point estimate; readings-upper = the upper "
                     "end of its block-bootstrap band (--penalty-level); readings-auto = the upper end when that band's lower "
                     "end is 0 at some age 1..A_MAX+S_MAX+1 (the pilot cannot tell the staleness there from 0), else the "
                     "point estimate (default with data); chain = the chain model of Zhang et al. eqs. (48)-(49) (independent "
                     "users, quantile-state values; the only choice for --chain/--matrix)")
    cmd.add_argument("--phase-period", type=int_at_least("--phase-period", 1, MAX_AGE_LIMIT), default=None, metavar="P",
                     help=f"slots per cycle of the readings penalty (hour of day: 24 for hourly data); the design uses the "
                     f"worst phase at every age (default: a day of slots — {BUNDLED_PHASE_PERIOD} for the bundled pilot, "
                     "e.g. 48 for 30-minute slots when --data has time stamps or --slot-length is given —, else 1 = "
                     "no phase)")
    cmd.add_argument("--penalty-level", type=probability("--penalty-level"), default=None, metavar="LEVEL",
                     help=f"two-sided level of the readings penalty's bootstrap band (default {DEFAULT_PENALTY_LEVEL})")


def add_bound_options(cmd) -> None:
    """``--max-penalty`` | ``--max-rmse`` (mutually exclusive): the utility bound f̄ of one design."""
    bound = cmd.add_mutually_exclusive_group()
    bound.add_argument("--max-penalty", type=positive_float("--max-penalty", upper=1e300), default=None, metavar="F",
                       help="bound f̄ on the MSE of the released value against the current mean of the readings, in the "
                       "readings' unit squared (kWh^2 for the bundled pilot; the state values' unit for --chain/--matrix); "
                       "default: the geometric midpoint √(low·high) of the trade-off range, which the report prints; at most 1e300")
    bound.add_argument("--max-rmse", type=positive_float("--max-rmse", upper=1e150, lower=1e-150), default=None,
                       metavar="R", help="the same bound as a root-mean-square error in the readings' unit (f̄ = R²; e.g. "
                       "kWh; between 1e-150 and 1e150, so that R² is a normal float)")


def add_max_tv_options(cmd) -> None:
    """``--max-tv SOURCE`` and ``--horizon H``: the Δ(t) a design uses (one definition for ``schedule`` and ``sweep``)."""
    cmd.add_argument("--max-tv", metavar="SOURCE", default=None,
                     help="Δ(t) the design uses (default: model, the fitted chains) or empirical[:LEVEL]: the upper "
                     "edge of the LEVEL simultaneous block-bootstrap band of Δ(t) estimated directly from the data, "
                     "LEVEL 0.95 when omitted, 1 beyond the estimated lags (data only, exact method)")
    cmd.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), default=None, metavar="H",
                     help="slots the model-free guarantee covers (the releases that read one user's series over H "
                     "slots are composed; default: a year of slots when the slot length is known, else the data's length, "
                     "else 8760); with --max-tv empirical, also the horizon of the design when no schedule has a finite "
                     f"infinite-horizon ε* (condition (31) fails); at most {MAX_HORIZON}")


def add_guarantee_options(cmd, *, design: bool = True, markov: bool = True, horizon: bool = False) -> None:
    """``--markov-model``, ``--delta`` and (for a design) ``--privacy``, ``--accept-refuted``: which guarantee a report states.

    `horizon` adds ``--horizon`` too (commands without :func:`add_max_tv_options`).
    """
    group = cmd.add_argument_group("guarantee (the model-free one always; a model-based one only under a model the data "
                                   "do not refute)")
    if markov:
        group.add_argument("--markov-model", metavar="MODEL", default=None,
                           help="the Markov model of the readings a model-based risk rests on: chain (first-order chain "
                           "over the quantile states), phase[:P] (a chain per phase of the day, or of P slots), "
                           "order:K (the state is the last K states), hmm:R (R hidden regimes), or auto (the simplest "
                           "that passes its checks on held-out time); checked against the readings (Markov test and "
                           "Δ(t) check, level 0.95) before any model-based number is stated (default: chain)")
    group.add_argument("--delta", type=delta_arg("--delta"), default=None, metavar="DELTA",
                       help="δ of the model-free (ε, δ) guarantee (default min(1e-6, 1/(10·I)): an order of magnitude "
                       "below 1/I, so publishing one user's series whole cannot meet it)")
    if horizon:
        cmd.add_argument("--horizon", type=int_at_least("--horizon", 1, MAX_HORIZON), default=None, metavar="H",
                         help="slots the model-free guarantee covers (default: a year of slots when the slot length is "
                         f"known, else the data's length, else 8760; at most {MAX_HORIZON})")
    if design:
        group.add_argument("--privacy", choices=("model-based", "model-free"), default=None,
                           help="what the design minimises: model-based = the peak age-dependent risk ε* under the Markov "
                           "model; model-free = the (ε, δ) of each user's whole series over --horizon, whatever the "
                           "correlation (A = 0; S_bar against ε_C) (default: model-based)")
        group.add_argument("--accept-refuted", metavar="REASON", default=None,
                           help="print a refuted (or unchecked) model's ε* anyway, with this reason recorded; it never "
                           "becomes the guarantee stated first")


def delta_arg(name):
    """An argparse ``type`` for δ of (ε, δ)-DP: a number in (0, 1); errors name the option `name`."""
    return probability(name, "strictly between 0 and 1 (e.g. 1e-6)")


def add_distributed_options(cmd, title: str | None = None, workers_help: str | None = None,
                            scheduler_help: str | None = None) -> None:
    """``--workers`` / ``--scheduler``: by default, fit a Parquet ``--data`` set as a map-reduce over its files on Dask.

    `title`, `workers_help` and `scheduler_help` replace the group's title and the options' help for a command
    that uses the cluster for something else (``publish`` splits the data set into slots on it).
    """
    group = cmd.add_argument_group(title or "distributed estimation (Parquet --data, one file per group of whole users)")
    group.add_argument("--workers", type=int_at_least("--workers", 1, MAX_LOCAL_WORKERS), default=None, metavar="N",
                       help=(workers_help or "estimate the chains, Δ(t), the envelope and the MSE terms on a local Dask "
                             "cluster of N worker processes, one Parquet file at a time per worker (memory bounded by the "
                             "file size)") + f" (at most {MAX_LOCAL_WORKERS} here, 4 per core; a larger cluster: --scheduler)")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help=scheduler_help or "the same on an existing Dask cluster (e.g. tcp://host:8786; its workers "
                       "need policyopt and the --data files at the same paths)")


def add_ledger_model_options(cmd, default_help: str, override_help: str) -> None:
    """Add ``--model``, ``--states``, ``--smoothing`` and ``--override`` to the sub-parser `cmd` (publish, ledger).

    Parameters
    ----------
    cmd : argparse.ArgumentParser
    default_help : str
        What ``--model`` defaults to, for its help.
    override_help : str
        What ``--override`` allows, for its help.
    """
    cmd.add_argument("--model", metavar="SPEC", default=None,
                     help="model of Δ(t) for the accounting: bundled (CityLearn 2022, as `policyopt schedule`), "
                     f"data:CSV, matrix:FILE or two-state:p=P,q=Q ({default_help})")
    cmd.add_argument("--states", type=int_at_least("--states", 2), default=None, metavar="K",
                     help="quantile states of a fitted model (default: the design's; 3 for the bundled pilot, 12 for data)")
    cmd.add_argument("--smoothing", type=non_negative_float("--smoothing"), default=None, metavar="S",
                     help="additive smoothing of a fitted model (default: the design's; 0.01)")
    cmd.add_argument("--override", metavar="REASON", default=None,
                     help=f"{override_help} on purpose; REASON (one line) says why"
                     + (" and is recorded in the ledger" if "publish" in override_help else ""))


def add_markov_model_option(cmd, default: str) -> None:
    """``--markov-model`` of ``publish`` and ``ledger``: the Markov model the accounting's Δ(t) is of."""
    cmd.add_argument("--markov-model", metavar="MODEL", default=None,
                     help="the Markov model of the readings the age-dependent risk ε(t) is accounted under (Theorem 3 "
                     "with Δ(t) of its augmented chain Z, fitted on the model's data with the chains' quantile states): "
                     "chain, order:K, phase[:P] or hmm:R (not auto: the design chose); apart from --model, which names "
                     f"the data the model is fitted on; {default}.  ε(t) is stated as a bound only when the design's "
                     "check passed this model")


def interrupted(what: str) -> int:
    """Print ``policyopt: interrupted; WHAT`` on stderr and return 130 (Ctrl-C inside a publish or ledger run)."""
    error_line(f"policyopt: interrupted; {what}")
    return 130


def error_line(line: str) -> None:
    """Write the one line of an error exit (2, 1 or 130) to stderr, whatever state the streams are in.

    Stdout is flushed first (pointed at /dev/null when its pipe is gone).  The line goes through ``sys.stderr``; if that
    fails (closed or replaced stream, an error or a second Ctrl-C while writing), it is written to file descriptor 2
    directly, so a non-zero exit is never silent while the process has a stderr at all.

    Parameters
    ----------
    line : str
        The line, without its newline (``policyopt: error: …``, ``policyopt: interrupted``, …).

    Nothing is raised: a process without any stderr exits without the line.
    """
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, OSError):
        silence_stdout()
    try:
        print(line, file=sys.stderr, flush=True)
        return
    except (ValueError, OSError, KeyboardInterrupt, AttributeError):
        pass
    import os

    try:
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:  # pragma: no cover - no stderr at all
        pass


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush does not fail."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # pragma: no cover
        pass


def check_plot(args) -> None:
    """``--plot FILE``: a writable image name and matplotlib, checked before any work."""
    if args.plot is not None:
        from policyopt.studies.plots import check_plot_option

        check_plot_option(args.plot)


def add_tpl_source(cmd) -> None:
    """Matrix / data source and guarantee options shared by ``tpl`` and ``tpl-budget``."""
    from policyopt.studies.tpl_report import MAX_TPL_Z_STATES

    cmd.add_argument("--pb", metavar="M", help="backward matrix P_B: CSV/NPY file or inline rows \"0.8,0.2;0.2,0.8\"")
    cmd.add_argument("--pf", metavar="M", help="forward matrix P_F: CSV/NPY file or inline rows")
    cmd.add_argument("--data", metavar="CSV", help="estimate P_B, P_F per user from readings (bundled data by default)")
    cmd.add_argument("--states", type=int_at_least("--states", 2, MAX_STATES), metavar="K",
                     help=f"quantile states for data (default {DEFAULT_STATES}, at most {MAX_STATES})")
    cmd.add_argument("--value-range", type=value_range_arg("--value-range"), metavar="LO:HI",
                     help="public range of one reading (data units): readings are clipped into it before the quantile "
                     "states are set (data only; default: no clipping)")
    cmd.add_argument("--slot-length", metavar="DUR", default=None,
                     help="length of one slot of --data, e.g. 30min, 1h: the model check's lags are a week of slots "
                     "and the w-event windows a day and a week (data only; the bundled data: 1h; unknown: 168 lags, "
                     "windows of 24 and 168 steps)")
    cmd.add_argument("--markov-model", metavar="MODEL", default=None,
                     help="the Markov model of the readings the leakage assumes the adversary knows: chain (first-order "
                     "chain over the quantile states), order:K (the state is the last K states), hmm:R (R hidden "
                     "regimes) or auto (the simplest of chain, order:2, hmm:2, order:3, hmm:3 that passes); checked "
                     "against the readings on held-out time (Markov test and Δ(t) check at lags up to a week, level "
                     "0.95) before BPL/FPL/TPL are stated; for order:K and hmm:R they are computed on the augmented "
                     f"chain Z (at most {MAX_TPL_Z_STATES} states); phase chains are time-inhomogeneous and refused "
                     "(data only; default chain)")
    add_guarantee_options(cmd, design=False, markov=False)
    cmd.add_argument("--accept-refuted", metavar="REASON", default=None,
                     help="compute and print a refuted model's BPL/FPL/TPL anyway, marked, with this reason recorded; "
                     "the guarantee stated first stays the model-free one (data only)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of text")
