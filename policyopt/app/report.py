"""The report of one command run from Python: :class:`CommandReport`.

Each command's Python call (:func:`policyopt.check_deployment_model` for ``check-model``,
:func:`policyopt.backtest_deployment` for ``backtest``, :func:`policyopt.publish_releases` for ``publish``,
:func:`policyopt.audit_ledger` for ``ledger``) runs the code the command runs and returns one of these: ``to_dict()`` is the command's ``--json`` object, ``str()`` its text,
and a notebook shows it as a table (``_repr_html_``).  The command line prints exactly these two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["CommandReport", "text_html"]


@dataclass(frozen=True)
class CommandReport:
    """What one ``policyopt`` command prints, as a Python object.

    Attributes
    ----------
    command : str
        The sub-command (``"check-model"``, ``"backtest"``, ``"publish"``, ``"ledger"``).
    fields : dict
        The command's ``--json`` object (documented field by field in the CLI reference); read it with
        :meth:`to_dict`.
    text : str
        The text the command prints (without the final newline).
    allow_nan : bool
        Whether the command's JSON may hold NaN (``publish`` and ``ledger`` print theirs without the check, as they
        always have; their numbers are finite in practice).
    extras : dict
        What the command computes but does not print (``backtest``: ``series``, the held-out time, ages and realised
        MSE, for a plot).
    """

    command: str
    fields: dict
    text: str
    allow_nan: bool = False
    extras: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """The command's ``--json`` output: the object, indented, as the command prints it."""
        return json.dumps(self.fields, indent=2, ensure_ascii=False, allow_nan=self.allow_nan)

    def to_dict(self) -> dict:
        """The command's ``--json`` object (a deep copy)."""
        return json.loads(self.to_json())

    @property
    def warnings(self) -> list:
        """Every warning the text shows (the JSON's ``warnings``; empty when the command has none)."""
        return list(self.fields.get("warnings") or [])

    @property
    def guarantee(self) -> dict | None:
        """The guarantee stated first (the JSON's ``guarantee``), when the command states one."""
        return self.fields.get("guarantee")

    def __str__(self) -> str:
        """The text the command prints."""
        return self.text

    def __repr__(self) -> str:
        g = (self.guarantee or {}).get("kind")
        return f"CommandReport(command={self.command!r}, fields={len(self.fields)}, guarantee={g!r})"

    def _repr_html_(self) -> str:
        """The text as a table for notebooks (:func:`text_html`)."""
        return text_html(self.text)


def text_html(text: str) -> str:
    """A report's text as an HTML table: each ``label : value`` line a row (the label a header cell), any other line
    (a table of releases, the title) a full-width preformatted row.

    Parameters
    ----------
    text : str
        A report's text, as a command prints it.

    Returns
    -------
    str
        One ``<table>`` element.
    """
    from html import escape

    rows = []
    for line in text.splitlines():
        label, sep, value = line.partition(" : ")
        if sep and label.strip() and len(label) <= 14 and not label.startswith(" "):
            rows.append(f"<tr><th style='text-align:left'>{escape(label.strip())}</th>"
                        f"<td style='text-align:left'>{escape(value)}</td></tr>")
        else:
            rows.append(f"<tr><td colspan='2' style='text-align:left'><pre style='margin:0'>{escape(line)}</pre>"
                        "</td></tr>")
    return "<table>" + "".join(rows) + "</table>"
