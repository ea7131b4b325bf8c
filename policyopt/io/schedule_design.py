"""A schedule file — the JSON object of ``policyopt schedule --json`` — read once: :class:`ScheduleDesign`.

``publish`` and ``ledger`` run and account a design (:class:`policyopt.deploy.ScheduleSpec` is built from one), and
``backtest`` replays it; each reads the same object through this type.  Which schedule the object asks to run is
decided here, once: its own A, S̄, ε_C, or — for a design against the data's Δ̃(t) band for which no schedule has a
finite ε* (``A`` null) — the optimal ``horizon_design`` over H slots (Zhang, Wei, Berry, Huang, "Age-Dependent
Differential Privacy", IEEE Trans. Inf. Theory, 2024, Theorem 3, or the model-free design).  What each use then
requires of it is a method: :meth:`ScheduleDesign.check_publishable` (a status with a schedule, whole-number A and S̄,
a ``deployment`` record) and :meth:`ScheduleDesign.replay_fields` (integer A, S̄ and a bound f̄ to replay against).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from policyopt.errors import InvalidInputError, fmt

__all__ = ["ScheduleDesign", "PUBLISHABLE_STATUSES", "BAND_SOURCE"]

#: Statuses of a schedule JSON that carry a schedule one may publish.
PUBLISHABLE_STATUSES = ("optimal", "feasible", "unbounded")


def _number(x) -> bool:
    """Whether `x` is a finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


#: The ``design_max_tv`` source of a design against the data's upper band Δ̃(t) (``--max-tv empirical``).
BAND_SOURCE = "the data's upper band (--max-tv empirical)"


@dataclass(frozen=True)
class ScheduleDesign:
    """One ``policyopt schedule --json`` object and the schedule it asks to run.

    Attributes
    ----------
    fields : dict
        The object as written, with ``A``, ``S_bar``, ``epsilon_c`` (and ``penalty``) of the horizon design when that is
        the schedule (:attr:`replayed`).
    replayed : str
        ``"schedule"`` (the object's own A, S̄, ε_C) or ``"horizon_design"``.
    where : str
        The object in the words of messages (``--schedule 'FILE'``).
    """

    fields: dict
    replayed: str
    where: str

    @classmethod
    def from_json(cls, obj, where: str = "--schedule") -> "ScheduleDesign":
        """The design of a parsed ``policyopt schedule --json`` object `obj` (`where`: its name in messages).

        The horizon design is the schedule when the object has no schedule of its own (``A`` null, or a status
        without one) and its ``horizon_design`` is ``optimal``.

        Raises
        ------
        InvalidInputError
            If `obj` is not a JSON object.
        """
        if not isinstance(obj, dict):
            raise InvalidInputError(f"{where} must hold the JSON object of `policyopt schedule --json`, got "
                                    f"{type(obj).__name__}")
        hd = obj.get("horizon_design")
        no_schedule = obj.get("A") is None or obj.get("status") not in PUBLISHABLE_STATUSES
        if no_schedule and isinstance(hd, dict) and hd.get("status") == "optimal":
            return cls({**obj, "A": hd.get("A"), "S_bar": hd.get("S_bar"), "epsilon_c": hd.get("epsilon_c"),
                        "penalty": hd.get("penalty")}, "horizon_design", where)
        return cls(dict(obj), "schedule", where)

    @classmethod
    def read(cls, path, option: str = "--schedule") -> "ScheduleDesign":
        """The design in the JSON file `path` (`option`: the option that named it, for messages).

        Raises
        ------
        InvalidInputError
            A missing file, not JSON, or JSON nested too deeply.
        """
        p = Path(path)
        where = f"{option} {str(p)!r}"
        if not p.is_file():
            raise InvalidInputError(f"{option} file not found: {str(p)!r}")
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"{where} is not JSON ({exc}); expected the output of `policyopt schedule --json`") \
                from None
        except RecursionError:
            raise InvalidInputError(f"{where} is JSON nested too deeply; expected the output of `policyopt schedule "
                                    "--json`") from None
        if not isinstance(obj, dict) or "status" not in obj:
            raise InvalidInputError(f"{where} has no `status`; expected the output of `policyopt schedule --json`")
        return cls.from_json(obj, where)

    def to_dict(self) -> dict:
        """The object (a copy), with the schedule it asks to run."""
        return dict(self.fields)

    @property
    def horizon_design(self) -> dict | None:
        """The ``horizon_design`` that is the schedule, or ``None`` (the object's own schedule)."""
        return self.fields["horizon_design"] if self.replayed == "horizon_design" else None

    def check_publishable(self) -> "ScheduleDesign":
        """This design, checked to be one ``publish`` can run: a status with a schedule (or an optimal horizon
        design), whole-number A and S̄ (integral floats too), ε_C given, and a ``deployment`` with its ``model``
        when the object has one.

        Raises
        ------
        InvalidInputError
            As above, naming :attr:`where`.
        """
        data, where = self.fields, self.where
        hd = self.horizon_design
        if hd is not None:
            if not _number(hd.get("horizon")) or not _number(hd.get("epsilon_c")):
                raise InvalidInputError(f"{where}: `horizon_design` lacks its horizon or ε_C")
        elif data.get("status") not in PUBLISHABLE_STATUSES:
            why = str(data.get("message") or "")[:120]
            raise InvalidInputError(f"{where} has status {data.get('status')!r}: there is no schedule to publish"
                                    + (f" ({why})" if why else "") + "; design a feasible schedule first")
        missing = [k for k in ("A", "S_bar", "epsilon_c") if data.get(k) is None]
        if missing:
            raise InvalidInputError(f"{where} lacks {missing}; expected the output of `policyopt schedule --json`")
        for k in ("A", "S_bar"):
            v = data[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
                raise InvalidInputError(f"{where}: `{k}` = {fmt(v)} is not a whole number of slots (a --relax design?); "
                                        "round it and pass --A/--S-bar/--epsilon-c")
        dep = data.get("deployment")
        if dep is not None and (not isinstance(dep, dict) or not isinstance(dep.get("model"), dict)):
            raise InvalidInputError(f"{where}: `deployment` has no `model`; expected the output of `policyopt "
                                    "schedule --json`")
        return self

    def replay_fields(self, source: str | None = None) -> dict:
        """What ``backtest`` replays: ``A``, ``S_bar``, ``epsilon_c``, ``max_penalty`` (f̄), ``users``,
        ``value_range`` (the declared one, else ``None``), ``promised`` (the penalty the design promised), ``unit``,
        ``penalty``, ``states``, ``smoothing`` and ``design_max_tv`` (the Δ(t) values the design says it used, by
        lag: the data's band of ``--max-tv empirical`` or the chains' values at A and S̄).

        Raises
        ------
        InvalidInputError
            No integer A ≥ 0, S̄ ≥ 1 with a finite ε_C > 0, or no positive f̄ (naming `source`, default :attr:`where`).
        """
        obj, source = self.fields, source or self.where
        A, S, eps, f_bar = obj.get("A"), obj.get("S_bar"), obj.get("epsilon_c"), obj.get("max_penalty")
        ok = (isinstance(A, int) and not isinstance(A, bool) and A >= 0 and isinstance(S, int)
              and not isinstance(S, bool) and S >= 1 and _number(eps) and eps > 0)
        if not ok:
            raise InvalidInputError(f"{source} has no integer schedule to replay (A={A!r}, S_bar={S!r}, "
                                    f"epsilon_c={eps!r}; status {obj.get('status')!r})")
        if not (_number(f_bar) and f_bar > 0):
            raise InvalidInputError(f"{source} has no positive `max_penalty` (f̄), got {f_bar!r}")
        m = obj.get("model") or {}
        vr = m.get("value_range") if m.get("value_range_declared") else None
        return {"A": A, "S_bar": S, "epsilon_c": float(eps), "max_penalty": float(f_bar), "users": m.get("users"),
                "value_range": None if vr is None else (float(vr[0]), float(vr[1])), "promised": obj.get("penalty"),
                "unit": m.get("penalty_unit") or "", "penalty": m.get("penalty"), "states": m.get("states"),
                "smoothing": m.get("smoothing"), "design_max_tv": self._design_max_tv()}

    def _design_max_tv(self) -> dict:
        """The Δ(t) values the object says its design used, by lag (empty when it records neither)."""
        obj = self.fields
        emp = obj.get("empirical_max_tv")
        if isinstance(emp, dict) and isinstance(emp.get("max_tv_used"), list):
            return {"source": BAND_SOURCE, "values": dict(enumerate(emp["max_tv_used"]))}
        wit = (obj.get("model") or {}).get("max_tv_witnesses")
        if isinstance(wit, list):
            vals = {w["t"]: w["max_tv"] for w in wit if isinstance(w, dict) and isinstance(w.get("t"), int)
                    and isinstance(w.get("max_tv"), (int, float))}
            return {"source": "the design's chains", "values": vals}
        return {"source": None, "values": {}}
