"""The model a ledger accounts with: :class:`ModelSpec`, pinned to its data, and the stream's identity check.

The accounting of :mod:`policyopt.deploy.ledger_risk` evaluates Δ(t) of Zhang, Wei, Berry, Huang, "Age-Dependent
Differential Privacy", IEEE Trans. Inf. Theory, 2024, eq. (12), from the chains fitted to the design's data
(pinned by its SHA-256), from a transition matrix, or from the Δ̃(t) table a ``--max-tv empirical`` design
recorded (Δ = 1 beyond the table).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError, check_value_range, fmt

__all__ = ["MAX_SLOT", "ModelSpec", "REPRODUCIBLE_MAX_TV_SOURCES", "TABLE_MAX_TV_SOURCE", "int_param", "is_number",
           "same_source"]

#: Largest slot number (A, S̄, first input slot, stream times): 2⁶² keeps every S_n = origin + A + (n − 1)·S̄ that
#: can be due inside SQLite's 64-bit INTEGER and exact in int64 arithmetic.
MAX_SLOT = 2**62


def is_number(x, *, optional: bool = False) -> bool:
    """Whether `x` is a finite int or float (not a bool); ``None`` counts when `optional`."""
    if x is None:
        return optional
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def int_param(value, name: str, lower: int, upper: int = MAX_SLOT, unit: str = "slots") -> int:
    """`value` as an int in [`lower`, `upper`].

    Raises
    ------
    InvalidInputError
        If it is a bool, a string, not a whole finite number, or out of range (naming `name` and the value).
    """
    what = f"`{name}` must be an integer from {lower} to {upper} ({unit}), got {fmt(value)}"
    if isinstance(value, bool) or isinstance(value, str):
        raise InvalidInputError(what)
    if isinstance(value, (int, np.integer)):
        as_int = int(value)
    else:
        try:
            as_float = float(value)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInputError(what) from None
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise InvalidInputError(what)
        as_int = int(as_float)
    if not lower <= as_int <= upper:
        raise InvalidInputError(what)
    return as_int


#: The Δ(t) sources a ledger can reproduce from the model alone (the model's own chains, eq. (12)).  An
#: ``empirical:LEVEL`` source is reproduced from the table the schedule recorded (``ModelSpec.max_tv_table``).
REPRODUCIBLE_MAX_TV_SOURCES = ("chain",)
#: Prefix of the Δ(t) sources a ledger accounts with from a stored table.
TABLE_MAX_TV_SOURCE = "empirical:"


def _check_max_tv_table(table, source: str) -> tuple:
    """A Δ(t) table as a tuple of floats: finite, in [0, 1], non-increasing, Δ(0) = 1, for an ``empirical:`` source.

    Raises
    ------
    InvalidInputError
        Otherwise (naming the table's offending entry).
    """
    if not str(source).startswith(TABLE_MAX_TV_SOURCE):
        raise InvalidInputError(f"`max_tv_table` goes with an {TABLE_MAX_TV_SOURCE}LEVEL Δ(t) source, not {fmt(source)}")
    if isinstance(table, (str, bytes)) or not hasattr(table, "__len__") or len(table) < 1:
        raise InvalidInputError(f"`max_tv_table` must be a non-empty list of Δ(t), got {fmt(table)}")
    vals = []
    for t, v in enumerate(table):
        if not is_number(v) or not 0.0 <= v <= 1.0:
            raise InvalidInputError(f"`max_tv_table`[{t}] must be a number in [0, 1], got {fmt(v)}")
        if vals and v > vals[-1]:
            raise InvalidInputError(f"`max_tv_table` must be non-increasing, but Δ({t}) = {v!r} > Δ({t - 1}) = {vals[-1]!r}")
        vals.append(float(v))
    if vals[0] != 1.0:
        raise InvalidInputError(f"`max_tv_table`[0] must be 1 (Δ(0) = 1: a reading and itself are as far apart as two "
                                f"states can be), got {fmt(vals[0])}")
    return tuple(vals)


@dataclass(frozen=True)
class ModelSpec:
    """The Markov model whose Δ(t) (Zhang et al. 2024, eq. (12)) the accounting uses, pinned to its data.

    Attributes
    ----------
    spec : str
        ``"bundled"`` (CityLearn 2022, the default of ``policyopt schedule``), ``"data:PATH"``
        (chains fitted per user to a long user,time,value CSV or a Parquet data set), ``"matrix:FILE"``
        (a transition matrix file, see :func:`policyopt.io.read_matrix`) or ``"two-state:p=P,q=Q"``
        (chain (43)).  Paths are stored absolute.
    states : int or None
        Quantile states of fitted chains (default: 3 for the bundled pilot, 12 for data, as
        ``policyopt schedule``); ``None`` for a matrix or two-state chain.
    smoothing : float or None
        Additive smoothing of fitted chains (default 0.01); ``None`` for a matrix or two-state chain.
    value_range : tuple of float or None
        Range the readings are clipped to before the quantile states are fitted (default 0:48 kWh
        for the bundled pilot; ``None``: the data's own range, as ``schedule`` without ``--value-range``).
    sha256 : str or None
        Content digest of the model's data or matrix file (:func:`policyopt.io.data_digest`);
        filled by :meth:`pinned`.  ``None`` for a two-state chain, or not pinned yet.
    nbytes : int or None
        Size of the data the model was fitted on: a CSV that has grown by appended lines since
        is fitted on its first `nbytes` bytes, whose digest must be `sha256`.
    max_tv_source : str
        Where Δ(t) comes from: ``"chain"`` (the model's chains, eq. (12)) or ``"empirical:LEVEL"``
        (``schedule --max-tv empirical``: the table `max_tv_table`).  A schedule designed against
        another source (e.g. ``"posterior-band"`` of ``schedule --robust``) records it here;
        :meth:`load` refuses what it cannot reproduce.
    max_tv_table : tuple of float or None
        Δ̃(0..H) the design used, for an ``empirical:LEVEL`` source (the schedule JSON's
        ``empirical_max_tv.max_tv_used``: non-increasing, in [0, 1]); Δ(t) = 1 beyond H.  ``None``
        for the chains.
    markov_model : str
        The Markov model of the readings whose Δ_Z(t) (eq. (12) for the augmented chain Z,
        :mod:`policyopt.models.markov_model`) the accounting uses: ``"chain"`` (the first-order chains
        themselves, default), or ``order:K``, ``phase:P``, ``hmm:R`` (``schedule --markov-model``), refitted on the
        pinned data with the chains' quantile states (:func:`policyopt.models.markov_model.fit_readings_model`).
        Only for a fitted model whose Δ(t) source is the model itself (``max_tv_source`` ``chain``) or a
        posterior band of it.
    markov_seed : int
        Seed of the HMM restarts of an ``hmm:R`` fit (the design's ``--seed``, default 0); others are deterministic.

    Raises
    ------
    InvalidInputError
        If the spec has an unknown kind, `states`/`smoothing`/`value_range` is out of range, or `markov_model` is
        not a canonical non-``auto`` model (e.g. ``phase`` without its period), goes with a model not fitted to
        data, or with a Δ(t) table.
    """

    spec: str = "bundled"
    states: int | None = None
    smoothing: float | None = None
    value_range: tuple | None = None
    sha256: str | None = None
    nbytes: int | None = None
    max_tv_source: str = "chain"
    max_tv_table: tuple | None = None
    markov_model: str = "chain"
    markov_seed: int = 0

    def __post_init__(self):
        from policyopt.data import BUNDLED_SMOOTHING, BUNDLED_STATES, BUNDLED_VALUE_RANGE
        from policyopt.models.estimation import DEFAULT_SMOOTHING, DEFAULT_STATES

        kind, sep, arg = str(self.spec).partition(":")
        if kind in ("data", "matrix"):
            if not arg:
                raise InvalidInputError(f"`model` {kind}:FILE needs a file, got {fmt(self.spec)}")
            object.__setattr__(self, "spec", f"{kind}:{os.path.abspath(arg)}")
        elif not (kind == "bundled" and not sep) and kind != "two-state":
            raise InvalidInputError(
                f"`model` must be bundled, data:CSV, matrix:FILE or two-state:p=P,q=Q, got {fmt(self.spec)}"
            )
        if self.fitted:
            bundled = kind == "bundled"
            states = (BUNDLED_STATES if bundled else DEFAULT_STATES) if self.states is None else self.states
            object.__setattr__(self, "states", int_param(states, "states", 2, 10_000, "quantile states"))
            s = (BUNDLED_SMOOTHING if bundled else DEFAULT_SMOOTHING) if self.smoothing is None else self.smoothing
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not (math.isfinite(s) and s >= 0):
                raise InvalidInputError(f"`smoothing` must be a finite number ≥ 0, got {fmt(s)}")
            object.__setattr__(self, "smoothing", float(s))
            vr = BUNDLED_VALUE_RANGE if bundled and self.value_range is None else self.value_range
            object.__setattr__(self, "value_range", None if vr is None else check_value_range(vr, "value_range"))
        else:
            for name in ("states", "smoothing", "value_range"):
                if getattr(self, name) is not None:
                    raise InvalidInputError(f"`{name}` applies to a fitted model (bundled or data:PATH), not {fmt(self.spec)}")
        if not isinstance(self.max_tv_source, str) or not self.max_tv_source:
            raise InvalidInputError(f"`max_tv_source` must be a non-empty string, got {fmt(self.max_tv_source)}")
        if self.max_tv_table is not None:
            object.__setattr__(self, "max_tv_table", _check_max_tv_table(self.max_tv_table, self.max_tv_source))
        self._check_markov_model()

    def _check_markov_model(self) -> None:
        """Canonicalise `markov_model` and `markov_seed`; see the class docstring for what is refused."""
        from policyopt.models.markov_model import MarkovModelSpec
        from policyopt.models.model_fitting import check_seed

        if self.markov_model == "chain":
            object.__setattr__(self, "markov_seed", check_seed(self.markov_seed))
            return
        if not isinstance(self.markov_model, str):
            raise InvalidInputError(f"`markov_model` must be a string such as 'order:2', got {fmt(self.markov_model)}")
        sp = MarkovModelSpec.parse(self.markov_model)
        if sp.kind == "auto" or (sp.kind == "phase" and sp.param is None):
            raise InvalidInputError(f"`markov_model` must name one model (chain, order:K, phase:P or hmm:R), got "
                                    f"{fmt(self.markov_model)}")
        if not self.fitted:
            raise InvalidInputError(f"`markov_model` {fmt(self.markov_model)} is fitted to readings: it goes with a "
                                    f"model fitted to data (bundled or data:PATH), not {fmt(self.spec)}")
        if self.max_tv_table is not None:
            raise InvalidInputError(f"`markov_model` {fmt(self.markov_model)} has its own Δ_Z(t): it does not go with a "
                                    f"Δ(t) table from {fmt(self.max_tv_source)}")
        object.__setattr__(self, "markov_model", str(sp))
        object.__setattr__(self, "markov_seed", check_seed(self.markov_seed))

    def same_chains(self, other: "ModelSpec") -> bool:
        """Whether `other` is this model up to its Markov model (``markov_model``, ``markov_seed``): the same data,
        fit and Δ(t) source, so the same releases may be accounted under either with the design's verdicts."""
        return replace(self, markov_model=other.markov_model, markov_seed=other.markov_seed) == other

    @property
    def fitted(self) -> bool:
        """True for chains fitted to data (bundled or ``data:PATH``)."""
        return self.spec == "bundled" or self.spec.startswith("data:")

    @property
    def path(self) -> str | None:
        """The data or matrix file of the model (``None`` for bundled and two-state)."""
        kind, _, arg = self.spec.partition(":")
        return arg if kind in ("data", "matrix") else None

    def digest_now(self, option: str = "--model") -> dict | None:
        """The current identity of the model's data (:func:`policyopt.io.data_digest`); ``None`` for two-state."""
        from policyopt.io import data_digest

        if self.spec == "bundled":
            return data_digest(None)
        if self.path is None:
            return None
        return data_digest(self.path, f"{option} {self.spec.partition(':')[0]}:")

    def pinned(self, option: str = "--model") -> "ModelSpec":
        """This spec with `sha256` and `nbytes` of its data as it is now (unchanged when already pinned).

        Raises
        ------
        InvalidInputError
            If the model's file does not exist.
        """
        if self.sha256 is not None:
            return self
        d = self.digest_now(option)
        if d is None:
            return self
        return replace(self, sha256=d["sha256"], nbytes=d["bytes"])

    def to_dict(self) -> dict:
        """The model spec as a JSON-ready dict (value range as a list; ``max_tv_table`` only when there is one)."""
        d = asdict(self)
        d["value_range"] = None if self.value_range is None else list(self.value_range)
        if self.max_tv_table is None:
            del d["max_tv_table"]  # the chains' Δ(t): the record of earlier policyopt versions, unchanged
        else:
            d["max_tv_table"] = list(self.max_tv_table)
        if self.markov_model == "chain":  # likewise
            del d["markov_model"], d["markov_seed"]
        return d

    def to_json(self) -> str:
        """The model spec as canonical JSON (stored in the ledger's meta table)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelSpec":
        """The model spec of :meth:`to_dict` (a ledger of an earlier policyopt may lack the newer keys)."""
        if not isinstance(d, dict) or not isinstance(d.get("spec"), str):
            raise InvalidInputError(f"a model must be an object with a `spec`, got {fmt(d)}")
        kind = d["spec"].partition(":")[0]
        fitted = kind in ("bundled", "data")
        vr = d.get("value_range")
        return cls(d["spec"], d.get("states") if fitted else None, d.get("smoothing") if fitted else None,
                   tuple(vr) if vr is not None else None, d.get("sha256"), d.get("nbytes"),
                   d.get("max_tv_source", "chain"), d.get("max_tv_table"), d.get("markov_model", "chain"),
                   d.get("markov_seed", 0))

    @classmethod
    def from_schedule(cls, data: dict, option: str = "--schedule") -> "ModelSpec":
        """The accounting model a schedule JSON records: ``deployment.model``, with the Δ(t) table of its design.

        For an ``empirical:LEVEL`` Δ(t) source the table is the schedule's ``empirical_max_tv.max_tv_used``
        (Δ̃(0..A_max + S_max − 1), non-increasing; Δ = 1 beyond it).

        Raises
        ------
        InvalidInputError
            If `data` has no ``deployment.model``, or an ``empirical:`` source without a valid table.
        """
        dep = data.get("deployment")
        if not isinstance(dep, dict) or not isinstance(dep.get("model"), dict):
            raise InvalidInputError(f"{option}: the schedule records no `deployment.model`")
        d = dict(dep["model"])
        if str(d.get("max_tv_source", "")).startswith(TABLE_MAX_TV_SOURCE) and d.get("max_tv_table") is None:
            emp = data.get("empirical_max_tv")
            table = emp.get("max_tv_used") if isinstance(emp, dict) else None
            if table is None:
                raise InvalidInputError(
                    f"{option}: its Δ(t) source is {d['max_tv_source']!r} but it records no `empirical_max_tv.max_tv_used` "
                    "table to account with; redesign it with `policyopt schedule --max-tv empirical --json`")
            d["max_tv_table"] = table
        return cls.from_dict(d)

    @classmethod
    def from_json(cls, text: str) -> "ModelSpec":
        """The model spec stored by :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    def describe(self) -> str:
        """One line for people: the model, its fit and the first digits of its data's digest."""
        parts = []
        if self.fitted:
            parts.append(f"{self.states} states, smoothing {self.smoothing:g}")
            if self.value_range is not None:
                parts.append(f"fitted on {self.value_range[0]:g}:{self.value_range[1]:g}")
        if self.sha256 is not None:
            parts.append(f"sha256 {self.sha256[:12]}")
        if self.max_tv_table is not None:
            parts.append(f"Δ(t) from {self.max_tv_source}: the recorded table for t ≤ {len(self.max_tv_table) - 1}, 1 beyond")
        elif self.max_tv_source != "chain":
            parts.append(f"Δ(t) from {self.max_tv_source}")
        if self.markov_model != "chain":
            parts.append(f"Markov model {self.markov_model}: Δ(t) of its augmented chain Z")
        return self.spec + (f" ({', '.join(parts)})" if parts else "")

    def _check_pin(self, option: str):
        """Verify the data still holds what the model was fitted on; return the path to fit (or None)."""
        from policyopt.io import file_prefix_sha256

        if self.sha256 is None:
            return self.path
        now = self.digest_now(option)
        if now["sha256"] == self.sha256:
            return self.path
        path = self.path
        if (now["format"] == "csv" and self.nbytes is not None and now["bytes"] > self.nbytes
                and file_prefix_sha256(path, self.nbytes) == self.sha256):
            return path, self.nbytes  # the CSV grew by appended lines: fit on the design's bytes
        raise InvalidInputError(
            f"{option} {self.spec!r} is not the data the model was fitted on (sha256 {self.sha256[:12]}…, "
            f"{self.nbytes} bytes; now {now['sha256'][:12]}…, {now['bytes']} bytes): the accounting would use other chains; "
            "restore that data"
        )

    def load(self, option: str = "--model"):
        """The :class:`policyopt.models.markov.Population` of this model, fitted on the pinned data (for a
        `markov_model` other than ``chain``, that model's
        :class:`~policyopt.models.markov_model.FittedMarkovModel`, whose Δ_Z(t) Theorem 3 on Z uses).

        A pinned model (`sha256` set) first checks that its data still has that digest, or,
        for a CSV, that its first `nbytes` bytes have it (the file grew by appended lines; the
        chains are then fitted on those bytes only, exactly the design's data).

        Raises
        ------
        InvalidInputError
            Missing or bad model file (see :mod:`policyopt.io`); data whose digest is not the
            pinned one; a Δ(t) source other than the chains (:data:`REPRODUCIBLE_MAX_TV_SOURCES`)
            without its table.
        InvalidModelError
            If the data fit no chain or a matrix is not stochastic.

        Notes
        -----
        With a `max_tv_table` (an ``empirical:LEVEL`` design) the Δ(t) source is that table,
        Δ(t) = 1 beyond it (:class:`policyopt.models.tabulated.TabulatedMaxTV` with ``beyond_one``);
        no chain is fitted and the model's data are not read.
        """
        from policyopt.models.markov import Population

        if self.max_tv_table is not None:
            from policyopt.models.tabulated import TabulatedMaxTV

            with np.errstate(divide="ignore"):
                logs = np.log(np.asarray(self.max_tv_table, dtype=float))
            return TabulatedMaxTV(logs, 1, 1.0, beyond_one=True)
        if self.max_tv_source not in REPRODUCIBLE_MAX_TV_SOURCES:
            raise InvalidInputError(
                f"the model's Δ(t) comes from {self.max_tv_source!r}, which the ledger cannot reproduce (it accounts with the "
                "chains' own Δ(t), eq. (12)); give --model with --override REASON to account with a model's chains"
            )
        if self.markov_model != "chain":
            from policyopt.models.markov_model import fit_readings_model

            fitted, df = self.fit(option)
            return fit_readings_model(self.markov_model, df, fitted.quantizer, fitted.users, value_range=self.value_range,
                                      smoothing=float(self.smoothing), seed=self.markov_seed)
        kind, _, arg = self.spec.partition(":")
        if kind == "two-state":
            from policyopt.io import parse_chain_spec

            return Population([parse_chain_spec(self.spec, option)])
        if kind == "matrix":
            self._check_pin(option)
            from policyopt.io import read_matrix

            return Population([read_matrix(arg, f"{option} matrix:")])
        return self.fit(option)[0].population

    def fit(self, option: str = "--model"):
        """The chains of a fitted model (bundled or ``data:PATH``) and the readings they were fitted on.

        The pinned data is checked as :meth:`load` does.  The Δ(t) table of an ``empirical:`` source plays no part:
        these are the chains themselves (for a model check, :func:`policyopt.studies.check_model.quick_check`).

        Returns
        -------
        (policyopt.models.estimation.FittedModel, pandas.DataFrame)

        Raises
        ------
        InvalidInputError
            If the model is not fitted (a matrix or two-state chain), or as :meth:`load`.
        """
        from policyopt.models.estimation import fit_population

        df = self.readings(option)
        source = f"{option} {self.spec!r}" if self.spec.startswith("data:") else "bundled data"
        fitted = fit_population(df, self.states, smoothing=float(self.smoothing), source=source,
                                value_range=self.value_range)
        return fitted, df

    def readings(self, option: str = "--model"):
        """The readings a fitted model (bundled or ``data:PATH``) was fitted on, the pin checked as :meth:`load` does.

        Returns
        -------
        pandas.DataFrame
            Long readings user, time, value (not clipped).

        Raises
        ------
        InvalidInputError
            If the model is not fitted (a matrix or two-state chain), or as :meth:`load`.
        """
        if not self.fitted:
            raise InvalidInputError(f"{option} {self.spec!r} is not fitted to data: there are no readings to fit")
        where = self._check_pin(option)
        if self.spec.startswith("data:"):
            return _read_design_data(where, f"{option} data:")
        from policyopt.data import load_citylearn

        return load_citylearn()


def same_source(design: dict | None, stream, option: str = "--data") -> str | None:
    """Whether a stream comes from the data a schedule was designed on; ``None`` if so, else why not.

    The stream is the design's source when its identity (:func:`policyopt.io.data_digest`) has the
    design's digest, or when it is a CSV whose first ``design["bytes"]`` bytes have it (the design's
    file, grown since by appended lines: the pilot is the start of the stream).

    Parameters
    ----------
    design : dict or None
        ``deployment.data`` of the schedule JSON; ``None`` (a --chain/--matrix design) matches any stream.
    stream : str or Path or None
        The ``--data`` of the publisher; ``None`` for the bundled data.
    option : str
        Option name for messages.

    Returns
    -------
    str or None
        One sentence naming both sources and digests when they differ.
    """
    from policyopt.io import data_digest, file_prefix_sha256

    if design is None:
        return None
    now = data_digest(stream, option)
    if now["sha256"] == design.get("sha256"):
        return None
    if (now["format"] == "csv" and design.get("format") == "csv" and isinstance(design.get("bytes"), int)
            and now["bytes"] > design["bytes"] and file_prefix_sha256(now["source"], design["bytes"]) == design["sha256"]):
        return None
    what = "the bundled data" if stream is None else f"{option} {str(stream)!r}"
    return (f"the stream ({what}, sha256 {now['sha256'][:12]}…) is not the data the schedule was designed on "
            f"({design.get('source')}, sha256 {str(design.get('sha256'))[:12]}…) nor that data grown by appended lines")


def _read_design_data(where, option: str):
    """Readings of a model's data: a path, or (CSV path, n) for its first n bytes (a grown file)."""
    from policyopt.io import read_readings

    if not isinstance(where, tuple):
        return read_readings(where, option)
    import tempfile

    path, nbytes = where
    with open(path, "rb") as fh:
        head = fh.read(nbytes)
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / Path(path).name
        part.write_bytes(head)
        return read_readings(part, option)
