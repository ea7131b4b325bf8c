"""The publisher: run a designed schedule on a growing stream, one committed release at a time.

At each publishing time S_n = origin + A + (n − 1)·S̄ up to the last complete slot of the
stream, the n-th release is the mean over users of their readings at S_n − A, clipped to the
public range [LO, HI], plus Laplace noise of scale Δf/ε_C (Zhang, Wei, Berry, Huang,
"Age-Dependent Differential Privacy", IEEE Trans. Inf. Theory, 2024, the equal-spacing policy
of Proposition 3 with the Laplace mechanism of Section VI).

Missing readings
----------------
The n-th release is made over the I users that have a reading at the input slot, with the
sensitivity of that mean, Δf = (HI − LO)/I (one user's reading replaced; who reports at a
slot is treated as public, as the number of users is in the paper).  When no user has a
reading there (I = 0) the release is **skipped**: the ledger records a ``skipped`` row with
the reason, no noise is drawn, nothing is spent, and the accounting (Theorem 3) simply has no
release at that time.  Readings outside [LO, HI] are clipped; each row counts them.

Noise
-----
The released value is OpenDP's measurement ``make_clamp(LO, HI) >> make_mean >>
make_laplace(scale)`` on a vector of the I readings (``opendp.prelude``, features
``contrib``), never numpy's generator.  OpenDP computes the mean's sensitivity with its
float-safe bound (slightly above (HI − LO)/I, to cover the rounding of the float sum); the
scale is that Δf over ε_C.  For float inputs OpenDP's Laplace mechanism rounds the input to the
nearest multiple of 2^k with k = −1074 (the float grid itself, so this step is exact), adds
discrete Laplace noise of scale/2^k sampled exactly on integers (Canonne, Kamath, Steinke,
"The Discrete Gaussian for Differential Privacy", NeurIPS 2020; the sampler of OpenDP's
``make_laplace``), and converts the result to the nearest float — a post-processing step.  The
budget entered in the ledger is OpenDP's own privacy map at the replace-one distance (2 in
the symmetric distance), which is ≥ ε_C after OpenDP's outward rounding.

Crash safety
------------
Each release is one SQLite transaction committed **before** its value is appended to the
output CSV; a run of consecutive skipped rows (no reading, no noise drawn) is committed as one
transaction, so a sparse stream costs one transaction per gap, not one per skipped slot.  A crash after the noise draw and before the commit loses a value nobody saw;
a crash after the commit leaves the CSV behind the ledger, and the next run rebuilds it from
the ledger.  A rerun starts after the last committed release: noise is never drawn twice for
a committed slot; the commit is checkpointed into the ledger's main file, so it survives the
loss of the ``-wal`` file (see :mod:`policyopt.deploy.ledger`, Durability).  A new or empty
ledger next to an output CSV that already holds releases is refused.

Stream identity
---------------
Every row records ``input_sha256`` (:func:`policyopt.deploy.ledger_row.input_digest` of the
readings at its input slot).  A rerun recomputes it from the stream for every row already in
the ledger and refuses a stream that changes any of them, naming the first such slot: the
stream must keep the whole history since the first input slot, and only grow.

For tests, the environment variable ``POLICYOPT_PUBLISH_PAUSE=STAGE:K``
(STAGE ``drawn`` or ``committed``; K counts due publishing times, and only released ones pause) makes the K-th release of a run print
``policyopt-pause STAGE slot=S`` on stderr and sleep, so a test can SIGKILL the process there.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from policyopt import progress
from policyopt.errors import InvalidInputError, PolicyOptError, fmt
from policyopt.deploy.ledger import (
    EMPTY_INPUT_SHA256,
    Ledger,
    LedgerRow,
    ScheduleSpec,
    input_digest,
    now_utc,
    package_version,
)
from policyopt.deploy.model import ModelSpec
from policyopt.deploy.out_file import OLD_OUT_HEADER, out_table, render_out
from policyopt.deploy.stream import ParquetStream, check_stream_order
from policyopt.formatting import fmt_count, round_up

__all__ = ["Publisher", "PublishReport", "RiskLimitError", "TrialError", "TRIAL_FRACTION", "ScheduleSpec"]

class RiskLimitError(PolicyOptError):
    """A due release would raise the peak age-dependent risk above ``max_risk``; nothing was published."""


#: A release over fewer than this fraction of the design's I users is a trial, not the deployment designed: its
#: noise is at least (1/0.5)² = 4 times the MSE the schedule's utility bound assumed (the sensitivity of the mean is
#: (HI − LO)/users).  Refused unless the run is declared a trial (``publish --trial REASON``, recorded).
TRIAL_FRACTION = 0.5


class TrialError(PolicyOptError):
    """A due release averages far fewer users than the schedule was designed for, and the run is not a declared trial;
    nothing was published."""


@dataclass(frozen=True)
class PublishReport:
    """What one :meth:`Publisher.publish` run did.

    Attributes
    ----------
    ledger : str
    schedule_id : str
    schedule : ScheduleSpec
    through : int
        Last complete slot of the stream used (slots).
    new_rows : list of LedgerRow
        Rows committed in this run (released and skipped).
    total_rows, released_total, skipped_total : int
    last_slot : int or None
        Slot of the last row in the ledger.
    next_slot : int
        Publishing time of the next release (slots).
    peak_risk : float
        Largest ε(S_n) recorded over all releases (nats; 0 without release).
    out : str or None
        The output CSV, if any.
    out_rebuilt : bool
        Whether the CSV was rebuilt from the ledger (it lagged or was missing).
    model : str
        The accounting model.
    provenance : dict
        The ledger's recorded ``provenance`` (why this model; the design's data and the stream's).
    rows : tuple of LedgerRow
        Every row of the ledger after the run (earlier runs' and this one's), e.g. for
        :func:`policyopt.deploy.ledger_risk.model_free_of_rows`.
    trial : dict or None
        This run's trial record (:meth:`policyopt.deploy.ledger.Ledger.record_trial`: ``reason``, ``first_release``,
        ``fewest_users``, ``design_users``) when it made releases over fewer than :data:`TRIAL_FRACTION` of the
        design's users; else ``None``.
    intervals : dict or None
        The ledger's ``intervals`` record (:mod:`policyopt.deploy.error_bars`; ``None`` for a ledger written before
        it existed).
    """

    ledger: str
    schedule_id: str
    schedule: ScheduleSpec
    through: int
    new_rows: list
    total_rows: int
    released_total: int
    skipped_total: int
    last_slot: int | None
    next_slot: int
    peak_risk: float
    out: str | None
    out_rebuilt: bool
    model: str
    provenance: dict
    rows: tuple = ()
    intervals: dict | None = None
    trial: dict | None = None


def _pause(stage: str, k: int, slot: int) -> None:
    """Test hook (see the module docstring): stop at a named point so a test can SIGKILL here."""
    want = os.environ.get("POLICYOPT_PUBLISH_PAUSE")
    if want and want == f"{stage}:{k}":
        print(f"policyopt-pause {stage} slot={slot}", file=sys.stderr, flush=True)
        time.sleep(600)


class _Mechanism:
    """OpenDP measurements clamp → mean → Laplace, one per number of users I (cached)."""

    def __init__(self, value_range, epsilon_c):
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self.dp = dp
        self.lo, self.hi = value_range
        self.epsilon_c = epsilon_c
        self._cache = {}
        from importlib.metadata import version

        self.sampler = (f"opendp {version('opendp')}: make_clamp >> make_mean >> make_laplace "
                        "(discrete Laplace on the 2^-1074 grid)")

    def get(self, users: int):
        """(measurement, Δf, scale, ε spent) for a mean over `users` readings."""
        if users not in self._cache:
            dp = self.dp
            try:
                space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=users), dp.symmetric_distance()
                mean = space >> dp.t.then_clamp((self.lo, self.hi)) >> dp.t.then_mean()
                sensitivity = float(mean.map(2))  # replace one user's reading: symmetric distance 2
                scale = sensitivity / self.epsilon_c
                meas = mean >> dp.m.then_laplace(scale)
                spent = float(meas.map(2))
            except dp.OpenDPException as exc:
                raise InvalidInputError(
                    f"OpenDP refuses the mechanism for {users} users, value range {self.lo!r}:{self.hi!r} and ε_C = "
                    f"{self.epsilon_c!r} ({str(exc).splitlines()[0][:200]}); use a narrower --value-range or a larger --epsilon-c"
                ) from None
            self._cache[users] = (meas, sensitivity, scale, spent)
        return self._cache[users]


class Publisher:
    """Publish a schedule's releases into a ledger (and optionally a CSV), resumably.

    Parameters
    ----------
    ledger : str or Path
        The SQLite ledger; created on the first run.
    schedule : ScheduleSpec
        A, S̄, ε_C and the public value range.  With ``origin=None`` the first input slot is
        the stream's first slot when the ledger is created (and the ledger's on later runs).
    model : ModelSpec, optional
        The model of Δ(t) for the risk recorded per release and for `max_risk`.  Default: the
        ledger's recorded model, or for a new ledger the bundled CityLearn fit (as
        ``policyopt schedule``).  A model other than the ledger's is refused.
    max_risk : float, optional
        Refuse (:class:`RiskLimitError`, nothing written) a run in which a due release would
        have ε(S_n) > `max_risk` (nats).
    out : str or Path, optional
        CSV of the rows (:data:`~policyopt.deploy.out_file.OUT_HEADER`), appended after each commit and rebuilt from the
        ledger when it lags; a ``.parquet`` name writes the same columns (:func:`out_table`) as one Parquet file,
        rewritten whole at the end of each run (a run that is killed leaves it behind; the next rebuilds it).  A new or empty ledger next to an `out` that already holds
        releases is refused (those slots were released with noise the ledger no longer knows).
    provenance : dict, optional
        Why this model and stream (JSON-ready; e.g. ``model_reason``), recorded in the ledger's
        ``meta`` when it is created.
    ci_level : float, optional
        Level of the error bars recorded when the ledger is created (default
        :data:`~policyopt.utility.intervals.DEFAULT_CI_LEVEL`); a later run may not change it.
    slot_seconds : int, optional
        Slot length (the phase of the day of the current-mean interval); used when the ledger is created.
    trial : str, optional
        The reason this run is a trial (``publish --trial REASON``): releases over fewer than :data:`TRIAL_FRACTION`
        of the design's users (``provenance["design_users"]``, the schedule's I) are then made and the trial is
        recorded in the ledger (``meta`` ``trials``); without it such a run raises :class:`TrialError` and nothing is
        published.  A pilot stream is not the deployment: its releases carry the accounted privacy but noise
        (I/users)² times the designed MSE.
    check_design : bool
        When the ledger is created, recompute the schedule's own ε* (eq. (30)) and horizon risk from its A, S̄, ε_C
        under `model` (:func:`policyopt.deploy.ledger_risk.schedule_discrepancies`) and refuse a schedule whose
        recorded values they do not reproduce (a file edited after its design).  Default True; ``publish --override``
        turns it off.

    Raises
    ------
    InvalidInputError
        If `max_risk` is not a positive number; at :meth:`publish`, a schedule that does not reproduce its numbers
        (with `check_design`).
    TrialError
        At :meth:`publish`: see `trial`.

    Examples
    --------
    >>> pub = Publisher("ledger.sqlite", ScheduleSpec(24, 24, 1.0, (0.0, 4.0)))  # doctest: +SKIP
    >>> report = pub.publish(read_stream_csv("stream.csv"))                     # doctest: +SKIP
    """

    def __init__(self, ledger, schedule: ScheduleSpec, *, model: ModelSpec | None = None,
                 max_risk: float | None = None, out=None, provenance: dict | None = None, check_design: bool = True,
                 ci_level: float | None = None, slot_seconds: int | None = None, trial: str | None = None):
        from policyopt.errors import check_positive
        from policyopt.utility.intervals import check_ci_level

        if not isinstance(schedule, ScheduleSpec):
            raise InvalidInputError(f"`schedule` must be a ScheduleSpec, got {fmt(schedule)}")
        self.ledger_path = Path(ledger)
        self.schedule = schedule
        if model is not None and not isinstance(model, ModelSpec):
            raise InvalidInputError(f"`model` must be a ModelSpec, got {fmt(model)}")
        self.model = model
        self.max_risk = None if max_risk is None else check_positive(max_risk, "max_risk", "nats")
        self.out = None if out is None else Path(out)
        self.provenance = provenance
        self.check_design = bool(check_design)
        self.ci_level = None if ci_level is None else check_ci_level(ci_level, "ci_level")
        self.slot_seconds = slot_seconds
        if trial is not None and (not isinstance(trial, str) or not trial.strip() or "\n" in trial):
            raise InvalidInputError(f"`trial` must be a one-line reason, got {fmt(trial)}")
        self.trial = trial
        self._intervals = None
        self._out_cache = None  # (the intervals record, render_out's cache for it): one computation per run

    # ---------------------------------------------------------------------------------------
    def _compare(self, led: Ledger) -> ScheduleSpec:
        old, new = led.schedule, self.schedule
        diffs = []
        for name, a, b in (("A", old.A, new.A), ("S_bar", old.S_bar, new.S_bar), ("epsilon_c", old.epsilon_c, new.epsilon_c)):
            if a != b:
                diffs.append(f"{name}: ledger {a!r}, given {b!r}")
        if tuple(old.value_range) != tuple(new.value_range):
            diffs.append(f"value range: ledger {old.value_range[0]!r}:{old.value_range[1]!r}, "
                         f"given {new.value_range[0]!r}:{new.value_range[1]!r}")
        if new.origin is not None and new.origin != old.origin:
            diffs.append(f"first input slot: ledger {old.origin}, given {new.origin}")
        if diffs:
            raise InvalidInputError(
                f"`ledger` {str(self.ledger_path)!r} belongs to another schedule or data range ({'; '.join(diffs)}); "
                "use a new ledger file for a new schedule"
            )
        if self.model is not None and led.model != self.model:
            raise InvalidInputError(
                f"`ledger` {str(self.ledger_path)!r} accounts with model {led.model.describe()}, not "
                f"{self.model.describe()}; publish with the ledger's model (audit under another with `policyopt ledger --model` or `--markov-model`)"
            )
        return old

    @property
    def _parquet(self) -> bool:
        """Whether ``out`` is a Parquet file (rewritten whole at the end of each run) rather than a CSV (appended)."""
        return self.out is not None and self.out.suffix.lower() == ".parquet"

    def _check_parquet_out(self, rows) -> tuple[None, bool]:
        """:meth:`_check_out` for a Parquet ``out``: whether it is behind the ledger (error if it disagrees)."""
        import pyarrow.parquet as pq

        if not self.out.exists():
            return None, True
        if not self.out.is_file():
            raise InvalidInputError(f"`out` {str(self.out)!r} is not a file")
        try:
            have = pq.read_table(self.out).to_pylist()
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError on a file that is not Parquet
            raise InvalidInputError(f"`out` {str(self.out)!r} is not a Parquet file of releases ({' '.join(str(exc).split())[:200]}); "
                                    "move it away and rerun — the ledger rebuilds it") from None
        if have and not rows:
            raise InvalidInputError(
                f"`out` {str(self.out)!r} already holds {len(have)} releases but `ledger` {str(self.ledger_path)!r} is new "
                "or empty: publishing would draw fresh noise for slots already released (twice the budget); restore the "
                "ledger those releases were committed to, or move the file away on purpose")
        expected = out_table(rows, self._intervals).to_pylist()
        if have == expected:
            return None, False
        if have == expected[: len(have)]:
            return None, True
        k = next(i for i, (a, b) in enumerate(zip(have, expected + [None] * len(have))) if a != b)
        raise InvalidInputError(
            f"`out` {str(self.out)!r} disagrees with the ledger at release row {k + 1} (it holds rows the ledger does not "
            "have: written from another ledger?); move it away and rerun — the ledger rebuilds it")

    def _write_parquet_out(self, rows) -> None:
        """Write every row to a Parquet ``out`` (a temporary file, then an atomic rename)."""
        import pyarrow.parquet as pq

        tmp = self.out.with_name(self.out.name + ".tmp")
        pq.write_table(out_table(rows, self._intervals), tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.out)

    def _check_out(self, rows) -> tuple[str | None, bool]:
        """Expected CSV text and whether the existing file is behind it (error if it disagrees)."""
        if self._parquet:
            return self._check_parquet_out(rows)
        expected = render_out(rows, self._intervals)
        if not self.out.exists():
            return expected, True
        if not self.out.is_file():
            raise InvalidInputError(f"`out` {str(self.out)!r} is not a file")
        try:
            have = self.out.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            have = None
        if have == expected:
            return expected, False
        if not rows and have is not None and have.count("\n") > 1:
            raise InvalidInputError(
                f"`out` {str(self.out)!r} already holds {have.count(chr(10)) - 1} releases but `ledger` "
                f"{str(self.ledger_path)!r} is new or empty: publishing would draw fresh noise for slots already released "
                "(twice the budget); restore the ledger those releases were committed to, or move the CSV away on purpose"
            )
        if have is not None and expected.startswith(have):
            return expected, True
        if have is not None and have.split("\n", 1)[0] == OLD_OUT_HEADER:
            return expected, True  # written before the error-bar columns: rebuilt from the ledger with them
        exp_lines = expected.splitlines()
        have_lines = [] if have is None else have.splitlines()
        k = next((i for i, (a, b) in enumerate(zip(have_lines, exp_lines)) if a != b), min(len(have_lines), len(exp_lines)))
        raise InvalidInputError(
            f"`out` {str(self.out)!r} disagrees with the ledger at line {k + 1} (it holds rows the ledger does not have: "
            "written from another ledger?); move it away and rerun — the ledger rebuilds it"
        )

    def _write_out(self, text: str) -> None:
        tmp = self.out.with_name(self.out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.out)

    def _append_out(self, rows) -> None:
        if self._parquet:
            return  # a Parquet file is rewritten whole at the end of the run
        if self._out_cache is None or self._out_cache[0] is not self._intervals:
            self._out_cache = (self._intervals, {})
        line = render_out(rows, self._intervals, cache=self._out_cache[1]).split("\n", 1)[1]
        with open(self.out, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    # ---------------------------------------------------------------------------------------
    def publish(self, readings, *, through: int | None = None) -> PublishReport:
        """Make every release due up to the last complete slot; resume after the last committed one.

        Parameters
        ----------
        readings : pandas.DataFrame or ParquetStream
            The stream so far: columns user, time (integer slots), value, in arrival order
            (each user's times strictly increasing down the rows); or a
            :class:`~policyopt.deploy.stream.ParquetStream`, read slot by slot.  Every run reads the inputs of all
            rows already in the ledger again, to check their digests (so a run's reading cost grows with the history).
        through : int, optional
            Last complete slot.  Default: the stream's last slot minus one (a slot is complete
            once a later slot has appeared; its readings may still be arriving until then).

        Returns
        -------
        PublishReport

        Raises
        ------
        InvalidInputError
            Bad readings (see :func:`policyopt.models.estimation.validate_readings`), time going
            backwards in the stream or behind the ledger's last release, `through` outside the
            data, a ledger of another schedule / value range / model, a corrupted or foreign
            ledger file, an output CSV that disagrees with the ledger.  The ledger is not changed.
        RiskLimitError
            If a due release would have ε(S_n) > `max_risk`; nothing is written.
        LedgerLockedError
            If another publisher holds the ledger.
        """
        from policyopt.privacy.age_dependent import risk_after_aging_upper
        from policyopt.models.estimation import sort_readings, validate_readings

        if isinstance(readings, ParquetStream):
            clean = None
            t_min, t_max = readings.span()
        elif not hasattr(readings, "columns"):
            raise InvalidInputError(f"`readings` must be a pandas DataFrame with columns user,time,value, got {fmt(readings)}")
        else:
            src = "`readings`"
            rows = validate_readings(readings, source=src, sort=False)
            if rows.empty:
                raise InvalidInputError(f"{src} holds no reading")
            check_stream_order(rows, src)
            clean = sort_readings(rows)
            t_min, t_max = int(clean["time"].min()), int(clean["time"].max())
        if through is None:
            through = t_max - 1
        else:
            if isinstance(through, bool) or not isinstance(through, (int, np.integer)) or not (t_min <= through <= t_max):
                raise InvalidInputError(f"`through` must be a slot of the data ({t_min}..{t_max}), got {fmt(through)}")
            through = int(through)

        created = not self.ledger_path.exists()
        try:
            led = Ledger(self.ledger_path, writer=True)
        except BaseException:
            if created:
                _remove_db(self.ledger_path)
            raise
        try:
            with contextlib.ExitStack() as stack:  # holds the spilled slots of a Parquet stream until the run ends
                return self._run(led, readings if clean is None else clean, through, t_min, t_max, created,
                                 risk_after_aging_upper, stack)
        except BaseException:
            if created and led.is_new:
                led.close()
                _remove_db(self.ledger_path)
            raise
        finally:
            led.close()

    def _prepare(self, led, t_min: int, t_max: int):
        """The schedule and accounting model of this run (the design's for a new ledger, the ledger's otherwise), the
        recorded rows, and the error bars' record; refuses another slot length, a stream that ends before the last
        released slot, another --ci-level."""
        if led.is_new:
            sch = self.schedule if self.schedule.origin is not None else replace(self.schedule, origin=t_min)
            model = ModelSpec() if self.model is None else self.model
        else:
            sch = self._compare(led)
            model = led.model
            have = json.loads(led.meta().get("provenance", "{}")).get("slot_length")
            want = (self.provenance or {}).get("slot_length")
            if have is not None and want is not None and have != want:
                raise InvalidInputError(
                    f"`ledger` {str(self.ledger_path)!r} counts slots of {have}, this stream's are {want}: its A, S̄ and "
                    "release slots would change meaning; publish with the ledger's slot length (--slot-length/--resample)"
                )
        rows = led.rows()
        last = rows[-1] if rows else None
        if last is not None and last.slot > t_max:
            raise InvalidInputError(
                f"the stream ends at slot {t_max} (data {t_min}..{t_max}) but the ledger already released slot "
                f"{last.slot}: time went backwards (was the data file replaced or truncated?)"
            )
        from policyopt.deploy.error_bars import design_intervals, recorded_intervals
        from policyopt.utility.intervals import DEFAULT_CI_LEVEL

        if led.is_new:
            self._intervals = design_intervals(model, sch, level=self.ci_level, slot_seconds=self.slot_seconds)
        else:
            self._intervals = recorded_intervals(led.meta())
            have_level = DEFAULT_CI_LEVEL if self._intervals is None else self._intervals["level"]
            if self.ci_level is not None and self.ci_level != have_level:
                raise InvalidInputError(
                    f"`ledger` {str(self.ledger_path)!r} gives its releases error bars at level {have_level!r}, not "
                    f"{self.ci_level!r}: the level is fixed when the ledger is created (audit at another level with "
                    "`policyopt ledger --ci-level`)")
        return sch, model, rows

    def _plan(self, led, sch, rows, groups, mech, ldtv, through: int, risk_after_aging_upper):
        """Every release due through slot `through`, in order: (n, slot, input slot, users, ε spent, prior risk,
        ε(S_n), input digest), or Nones for a skipped slot; the largest ε(S_n) so far; this run's trial record.  The
        risk does not depend on the noise, so `--max-risk` and the trial floor are checked before anything is drawn.

        Raises
        ------
        RiskLimitError
            If a release would raise ε(S_n) above ``max_risk``.
        TrialError
            If a release would average fewer than TRIAL_FRACTION of the design's users and no trial was declared.
        """
        last = rows[-1] if rows else None
        prev = led.last_released()
        state = None if prev is None else (prev.input_time, prev.epsilon_spent, prev.prior_risk)
        peak = max((r.risk_at_release for r in rows if r.status == "released"), default=0.0)
        plan = []
        design_users = (self.provenance or {}).get("design_users")
        trial_floor = TRIAL_FRACTION * design_users if isinstance(design_users, int) and design_users > 0 else 0.0
        trial = None  # this run's trial record: the first release below the floor and the fewest users
        n = (last.n if last else 0) + 1
        while sch.publish_time(n) <= through:
            slot = sch.publish_time(n)
            tau = slot - sch.A
            users, vals = groups.get(tau, (None, None))
            if vals is None:
                plan.append((n, slot, tau, None, None, None, None, EMPTY_INPUT_SHA256))
            else:
                _, sens, scale, spent = mech.get(vals.size)
                # upper bounds (issue 26): eq. (25) is increasing in its inputs, so each step is fed the previous
                # step's upper bound and rounded up; --max-risk compares this upper side
                prior = 0.0 if state is None else risk_after_aging_upper(
                    ldtv(tau - state[0]), round_up(state[1] + state[2]), tau - state[0])  # (25) at S_n − A_n
                risk = risk_after_aging_upper(ldtv(sch.A), round_up(spent + prior), sch.A)  # (25) at t = S_n
                if self.max_risk is not None and risk > self.max_risk:
                    ok = len(plan)
                    raise RiskLimitError(
                        f"release {n} at slot {slot} would raise the peak age-dependent risk to ε(S_n) = {risk!r} nats > "
                        f"--max-risk {self.max_risk!r}; nothing was published"
                        + (f" ({ok} earlier due releases stay within it: --through {slot - 1} publishes them)" if ok else "")
                    )
                if vals.size < trial_floor:
                    if self.trial is None:
                        ok = len(plan)
                        raise TrialError(
                            f"release {n} at slot {slot} would average {fmt_count(vals.size, 'user')}' readings, fewer "
                            f"than {TRIAL_FRACTION:g} of the I = {design_users} users the schedule was designed for (noise "
                            f"variance {(design_users / vals.size) ** 2:.3g} times the schedule's): this stream is a trial, "
                            "not the deployment; publish the deployment's stream, or declare the trial with --trial REASON "
                            "(recorded in the ledger); nothing was published"
                            + (f" ({ok} earlier due releases have enough users: --through {slot - 1} publishes them)"
                               if ok else ""))
                    if trial is None:
                        trial = {"reason": self.trial, "first_release": n, "fewest_users": int(vals.size),
                                 "design_users": int(design_users)}
                    trial["fewest_users"] = min(trial["fewest_users"], int(vals.size))
                plan.append((n, slot, tau, vals.size, spent, prior, risk, input_digest(users, vals)))  # values read again to draw
                state = (tau, spent, prior)
                peak = max(peak, risk)
            n += 1
        return plan, peak, trial

    def _run(self, led, clean, through, t_min, t_max, created, risk_after_aging_upper, stack):
        """One publishing run on an open ledger: prepare, check the schedule and the history, plan every due release,
        then draw and commit them one by one (see :meth:`publish`)."""
        sch, model, rows = self._prepare(led, t_min, t_max)
        if self.out is not None:
            expected, lagging = self._check_out(rows)
        population = model.load()
        if led.is_new and self.check_design:
            from policyopt.deploy.ledger import schedule_discrepancies

            bad = schedule_discrepancies(sch, population)
            if bad:
                raise InvalidInputError(
                    f"the schedule ({sch.source}) does not reproduce its own numbers: {'; '.join(bad)} — was it edited "
                    "after its design? Redesign it, or publish it anyway with --override REASON (recorded)")
        log_dtv = {}

        def ldtv(age: int) -> float:
            """ln Δ(age), cached per age."""
            if age not in log_dtv:
                log_dtv[age] = float(population.log_max_tv(int(age)))
            return log_dtv[age]

        mech = _Mechanism(sch.value_range, sch.epsilon_c)
        if isinstance(clean, ParquetStream):  # the input slots' readings, spilled to one file per slot, read one at a time
            groups = stack.enter_context(clean.spill(range(sch.origin, max(through - sch.A, sch.origin - 1) + 1, sch.S_bar)))
        else:
            groups = _slot_groups(clean)
        _check_history(rows, groups)
        lo, hi = sch.value_range
        # Plan every due release (the risk does not depend on the noise), then check max_risk.
        plan, peak, trial = self._plan(led, sch, rows, groups, mech, ldtv, through, risk_after_aging_upper)
        if led.is_new:
            led.initialise(sch, model, self.provenance, intervals=self._intervals)
        if trial is not None:
            led.record_trial(trial)  # before any noise is drawn: a trial's releases are never unrecorded
        rebuilt = False
        if self.out is not None and lagging:
            if not self._parquet:
                self._write_out(expected)
            rebuilt = bool(rows) or not created
        new_rows = []
        skipped = []  # a run of skipped rows: no noise, so they are committed together (one transaction per gap)
        version = package_version()

        def flush():
            """Commit the pending run of skipped rows in one transaction, then append them to --out and the report."""
            if skipped:
                led.append_many(skipped)
                if self.out is not None:
                    self._append_out(skipped)
                new_rows.extend(skipped)
                skipped.clear()

        steps = progress.bar(len(plan), "publishing", unit="release")
        for k, (n, slot, tau, vals, spent, prior, risk, digest) in enumerate(plan, start=1):
            steps.update(1)
            common = dict(n=n, slot=slot, input_time=tau, input_sha256=digest, schedule_id=sch.id, package_version=version,
                          sampler=mech.sampler, committed_at="")
            if vals is None:
                skipped.append(LedgerRow(status="skipped", users=0, clipped=0, epsilon_c=0.0, epsilon_spent=0.0,
                                         sensitivity=None, noise_scale=None, value=None, prior_risk=None,
                                         risk_at_release=None, reason=f"no reading at input slot {tau}",
                                         **dict(common, committed_at=now_utc())))
                continue
            flush()
            _, vals = groups.get(tau)
            meas, sens, scale, _ = mech.get(vals.size)
            value = float(meas(np.require(vals, np.float64, ["C", "W"])))  # OpenDP: clamp, mean, Laplace(Δf/ε_C); numpy in, no list
            _pause("drawn", k, slot)
            row = LedgerRow(status="released", users=int(vals.size), clipped=int(np.sum((vals < lo) | (vals > hi))),
                            epsilon_c=sch.epsilon_c, epsilon_spent=spent, sensitivity=sens, noise_scale=scale,
                            value=value, prior_risk=float(prior), risk_at_release=float(risk), reason=None, **common)
            row = replace(row, committed_at=now_utc())
            led.append(row)  # one transaction, committed before the CSV sees the value
            _pause("committed", k, slot)
            if self.out is not None:
                self._append_out([row])
            new_rows.append(row)
        flush()
        steps.close()
        all_rows = rows + new_rows
        if self._parquet and (lagging or new_rows):
            self._write_parquet_out(all_rows)
        last_row = all_rows[-1] if all_rows else None
        return PublishReport(
            ledger=str(self.ledger_path), schedule_id=sch.id, schedule=sch, through=through, new_rows=new_rows,
            total_rows=len(all_rows), released_total=sum(r.status == "released" for r in all_rows),
            skipped_total=sum(r.status == "skipped" for r in all_rows),
            last_slot=None if last_row is None else last_row.slot,
            next_slot=sch.publish_time((last_row.n if last_row else 0) + 1), peak_risk=float(peak),
            out=None if self.out is None else str(self.out), out_rebuilt=rebuilt, model=model.describe(),
            provenance=json.loads(led.meta().get("provenance", "{}")), rows=tuple(all_rows), intervals=self._intervals,
            trial=trial,
        )


def _slot_groups(clean) -> dict:
    """Per slot of `clean` (readings sorted by user, then time): (users, values) of its readings, in row order.

    What ``{t: (g["user"].to_numpy(), g["value"].to_numpy(dtype=float)) for t, g in clean.groupby("time")}`` gives
    — the same arrays, dtypes and row order; the values read-only as pandas's views are — by one stable sort on the
    time column and slices, instead of a DataFrame per slot (a year of hourly slots took seconds)."""
    times = clean["time"].to_numpy()
    order = np.argsort(times, kind="stable")
    ts = times[order]
    if ts.size == 0:
        return {}
    users = clean["user"].to_numpy()[order]
    values = clean["value"].to_numpy(dtype=float)[order]
    values.flags.writeable = False
    cuts = (np.flatnonzero(ts[1:] != ts[:-1]) + 1).tolist()
    return {int(ts[a]): (users[a:b], values[a:b]) for a, b in zip([0, *cuts], [*cuts, ts.size])}


def _check_history(rows, groups) -> None:
    """Refuse a stream that changes the readings of a slot the ledger already has a row for.

    Raises
    ------
    InvalidInputError
        Naming the first such row's publishing time and input slot.
    """
    for r in rows:
        users, vals = groups.get(r.input_time, ((), ()))
        if input_digest(users, vals) != r.input_sha256:
            what = "released" if r.status == "released" else "skipped (no reading then)"
            raise InvalidInputError(
                f"the stream rewrites history: the readings of input slot {r.input_time} differ from those of release {r.n} "
                f"at slot {r.slot} ({what}, {fmt_count(r.users, 'reading')}, sha256 {r.input_sha256[:12]}…); the ledger's releases stand: "
                "restore the stream those slots were published from"
            )


def _remove_db(path: Path) -> None:
    """Remove a ledger file this run created but never initialised (and its WAL side files)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
