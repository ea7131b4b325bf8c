"""The schedule a publisher runs, and the schedule JSON it is read from.

:class:`ScheduleSpec` is the equal-spacing schedule of Zhang, Wei, Berry, Huang, "Age-Dependent Differential
Privacy", IEEE Trans. Inf. Theory, 2024, Proposition 3: publishing times S_n = origin + A + (n − 1)·S̄ (slots), a
constant aging A and a per-release budget ε_C, with the public value range the readings are clipped to.  It checks
its parameters (ε_C ≤ :data:`MAX_EPSILON_C`, a range within :data:`MAX_VALUE`), and its :attr:`ScheduleSpec.id`
names the fields that fix the mechanism a ledger records.  :meth:`ScheduleSpec.from_design` builds it from the
JSON printed by ``policyopt schedule --json``, read once as a :class:`~policyopt.io.schedule_design.ScheduleDesign`
(checked there: a status of :data:`PUBLISHABLE_STATUSES` and whole-number A and S̄, or the ``horizon_design`` of a
design for which no schedule has a finite ε*).

The ledger that records a schedule's releases is :mod:`policyopt.deploy.ledger`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from policyopt.deploy.model import int_param, is_number
from policyopt.errors import InvalidInputError, fmt
from policyopt.formatting import fmt_count
from policyopt.io.schedule_design import PUBLISHABLE_STATUSES, ScheduleDesign

__all__ = ["ScheduleSpec", "PUBLISHABLE_STATUSES", "MAX_EPSILON_C", "MAX_VALUE"]

#: Largest per-release budget ε_C (nats): beyond it e^{ε_C} overflows a float and the Laplace noise is below the
#: resolution of any released value, i.e. no privacy at all.
MAX_EPSILON_C = 700.0
#: Largest ``|LO|``, ``|HI|`` of the value range: OpenDP's float-safe sensitivity bound must stay finite.
MAX_VALUE = 1e300


@dataclass(frozen=True)
class ScheduleSpec:
    """The schedule a publisher runs: equal spacing S̄, constant aging A and budget ε_C.

    Publishing times are S_n = origin + A + (n − 1)·S̄ (slots, n = 1, 2, ...); the n-th release
    uses the readings of slot S_n − A = origin + (n − 1)·S̄ (Zhang et al. 2024, IEEE Trans. Inf.
    Theory, 2024, the equal-spacing policy of Proposition 3).

    Attributes
    ----------
    A : int
        Aging, slots (≥ 0).
    S_bar : int
        Inter-publish time, slots (≥ 1).
    epsilon_c : float
        Nominal per-release budget ε_C > 0, nats.
    value_range : tuple of float
        Public range (LO, HI) of one reading; readings are clipped to it and Δf = (HI − LO)/I.
    origin : int or None
        First input slot; ``None`` until the publisher fixes it to the stream's first slot
        when it creates the ledger.
    source : str
        Where the schedule came from (file or options); not part of :attr:`id`.
    designed_peak_risk : float or None
        ε* printed by ``policyopt schedule`` (nats), for the record; ``None`` when given directly.
    horizon : int or None
        The deployment horizon H (slots) of a horizon design (``schedule --max-tv empirical`` when no
        schedule has a finite ε*: ``horizon_design``): releases at S_n ≤ origin + H.  Not part of :attr:`id`.
    designed_horizon_risk : float or None
        The largest risk over H the schedule printed (``horizon_design.horizon_risk``, nats), for the record.
    horizon_accounting : str or None
        How the horizon design bounds the risk over H (``horizon_design.accounting``): ``"theorem-3"`` (the largest
        age-dependent risk under the model, Zhang et al. 2024, Theorem 3) or ``"model-free"`` (the pure ε of the
        ⌈H/S̄⌉ planned releases by basic composition, whatever the correlation); ``None`` without a horizon.  Not part
        of :attr:`id`.

    Raises
    ------
    InvalidInputError
        If A or S̄ is not an integer in range, ε_C is not finite and > 0, or the range is not
        two finite numbers LO < HI.
    """

    A: int
    S_bar: int
    epsilon_c: float
    value_range: tuple
    origin: int | None = None
    source: str = "options"
    designed_peak_risk: float | None = None
    horizon: int | None = None
    designed_horizon_risk: float | None = None
    horizon_accounting: str | None = None

    def __post_init__(self):
        from policyopt.errors import check_positive

        if self.horizon is not None:
            object.__setattr__(self, "horizon", int_param(self.horizon, "horizon", 1))
            acc = "theorem-3" if self.horizon_accounting is None else self.horizon_accounting
            if acc not in ("theorem-3", "model-free"):
                raise InvalidInputError(f"`horizon_accounting` must be 'theorem-3' or 'model-free', got {fmt(acc)}")
            object.__setattr__(self, "horizon_accounting", acc)
        elif self.horizon_accounting is not None:
            raise InvalidInputError(f"`horizon_accounting` = {fmt(self.horizon_accounting)} needs a `horizon`")

        object.__setattr__(self, "A", int_param(self.A, "A", 0))
        object.__setattr__(self, "S_bar", int_param(self.S_bar, "S_bar", 1))
        object.__setattr__(self, "epsilon_c", check_positive(self.epsilon_c, "epsilon_c", "nats"))
        if self.epsilon_c > MAX_EPSILON_C:
            raise InvalidInputError(
                f"`epsilon_c` must be ≤ {MAX_EPSILON_C:g} nats, got {fmt(self.epsilon_c)}: beyond it e^ε_C overflows "
                "and the Laplace noise is below the resolution of the released value (no privacy)"
            )
        if self.origin is not None:
            if isinstance(self.origin, bool) or not isinstance(self.origin, (int, np.integer)):
                raise InvalidInputError(f"`origin` must be an integer slot, got {fmt(self.origin)}")
            object.__setattr__(self, "origin", int_param(self.origin, "origin", 0))
        try:
            lo, hi = (float(v) for v in self.value_range)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"`value_range` must be two numbers (LO, HI), got {fmt(self.value_range)}"
            ) from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidInputError(f"`value_range` must be finite with LO < HI, got {fmt(self.value_range)}")
        if max(abs(lo), abs(hi)) > MAX_VALUE:
            raise InvalidInputError(
                f"`value_range` must lie within ±{MAX_VALUE:g} (the mean's sensitivity must stay finite), got "
                f"{fmt(self.value_range)}"
            )
        object.__setattr__(self, "value_range", (lo, hi))
        if not (hi - lo) / self.epsilon_c * 4.0 < MAX_VALUE:
            raise InvalidInputError(
                f"`epsilon_c` = {self.epsilon_c!r} nats is too small for the value range {lo!r}:{hi!r}: the Laplace "
                f"scale (HI − LO)/(I·ε_C) would exceed {MAX_VALUE:g} (a release of pure noise)"
            )

    @property
    def id(self) -> str:
        """SHA-256 prefix (16 hex digits) of A, S̄, ε_C, the value range and the origin."""
        if self.origin is None:
            raise InvalidInputError("the schedule's first input slot (`origin`) is not fixed yet")
        key = {"A": self.A, "S_bar": self.S_bar, "epsilon_c": repr(self.epsilon_c),
               "value_range": [repr(v) for v in self.value_range], "origin": self.origin}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def publish_time(self, n: int) -> int:
        """S_n (slots) of the n-th release, n ≥ 1."""
        return self.origin + self.A + (n - 1) * self.S_bar

    def to_dict(self) -> dict:
        """The schedule as a JSON-ready dict (value range as a list)."""
        d = asdict(self)
        d["value_range"] = list(self.value_range)
        return d

    def describe(self) -> str:
        """One line for people: the schedule's or model's parameters."""
        lo, hi = self.value_range
        return (f"A = {fmt_count(self.A, 'slot')}, S̄ = {fmt_count(self.S_bar, 'slot')}, "
                f"ε_C = {self.epsilon_c!r} nats, value range {lo!r}:{hi!r}, first input slot {self.origin}")

    @classmethod
    def from_json_file(cls, path, *, value_range=None, origin: int | None = None,
                       option: str = "--schedule") -> "ScheduleSpec":
        """Read the JSON printed by ``policyopt schedule --json``.

        Parameters
        ----------
        path : str or Path
        value_range : tuple of float, optional
            The public range readings are clipped to.  Default: the schedule's declared
            ``deployment.value_range``.
        origin : int, optional
            First input slot (default: fixed by the publisher from the stream).
        option : str
            Name shown in messages.

        Raises
        ------
        InvalidInputError
            Whatever :meth:`~policyopt.io.schedule_design.ScheduleDesign.read` and
            :meth:`~policyopt.io.schedule_design.ScheduleDesign.check_publishable` raise, and no `value_range` when
            the schedule declares none (its design used the data's own range, which is not public).
        """
        return cls.from_design(ScheduleDesign.read(path, option), value_range=value_range, origin=origin)

    @classmethod
    def from_design(cls, design: ScheduleDesign, *, value_range=None, origin: int | None = None) -> "ScheduleSpec":
        """The schedule a publisher runs for `design` (its own A, S̄, ε_C, or its horizon design over H slots).

        Parameters
        ----------
        design : policyopt.io.schedule_design.ScheduleDesign
            A ``policyopt schedule --json`` object, read once (checked here to be publishable).
        value_range : tuple of float, optional
            The public range readings are clipped to (default: the design's declared ``deployment.value_range``).
        origin : int, optional
            First input slot (default: fixed by the publisher from the stream).

        Raises
        ------
        InvalidInputError
            What :meth:`~policyopt.io.schedule_design.ScheduleDesign.check_publishable` raises, and no `value_range`
            when the design declares none (it used the data's own range, which is not public).
        """
        data = design.check_publishable().fields
        if value_range is None:
            declared = (data.get("deployment") or {}).get("value_range")
            if declared is None:
                raise InvalidInputError(
                    f"{design.where} declares no public value range (it was designed on the data's own range, "
                    "which is not private): give --value-range LO:HI"
                )
            value_range = tuple(declared)
        peak = data.get("peak_risk")
        hd = design.horizon_design
        horizon = None if hd is None else hd["horizon"]
        risk = None if hd is None else hd.get("horizon_risk")
        return cls(int(data["A"]), int(data["S_bar"]), data["epsilon_c"], value_range, origin,
                   source=design.where, designed_peak_risk=peak if is_number(peak) else None,
                   horizon=horizon, designed_horizon_risk=risk if is_number(risk) else None,
                   horizon_accounting=None if hd is None else ("model-free" if hd.get("accounting") == "model-free"
                                                               else "theorem-3"))
