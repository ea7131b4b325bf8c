"""Sphinx directives that render policyopt's command line from the code at build time.

``.. policyopt-help:: schedule``
    The ``policyopt schedule --help`` text, from :func:`policyopt.cli.main.build_parser` (no argument: the top level).

``.. policyopt-figure:: NAME`` with ``:command:`` (a ``policyopt`` command holding ``{plot}``) or ``:figure:`` (a function
of :mod:`policyopt_figures`)
    Makes the figure at build time with the code the page documents and shows it with the directive's content as
    its caption: the command's own ``--plot`` output, or a figure drawn from the command's ``--json`` numbers.

``.. policyopt-json:: schedule --chain two-state:p=0.1,q=0.1 --max-age 12 --max-interval 12``
    Runs the command in-process with ``--json`` and renders a table of the top-level fields of its output with
    their type, next to the descriptions given in the directive's content (``field: description`` per line).
    A field of the output without a description, or a description of a field the output lacks, is a warning
    (an error under ``-W``): the JSON contract on the page cannot drift from the code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _subparsers(parser):
    import argparse

    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


class PolicyoptHelp(Directive):
    """``.. policyopt-help:: [COMMAND]``: the ``--help`` text of ``policyopt`` (or of one sub-command) as a literal block,
    generated from the installed parser at build time, so the CLI reference cannot drift from the code."""

    optional_arguments = 1
    has_content = False

    def run(self):
        """The help text (110 columns) as one literal block node; an unknown COMMAND is a build error."""
        from policyopt.cli.main import build_parser

        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "110"
        try:
            parser = build_parser()
            if self.arguments:
                name = self.arguments[0]
                choices = _subparsers(parser)
                if name not in choices:
                    raise self.error(f"policyopt has no sub-command {name!r} (known: {sorted(choices)})")
                parser = choices[name]
            text = parser.format_help()
        finally:
            if old is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = old
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


_WORKDIR: list[str] = []


def _workdir() -> str:
    """A fresh temporary directory for this build's examples (files they write land there, not in the tree)."""
    if not _WORKDIR:
        _WORKDIR.append(tempfile.mkdtemp(prefix="policyopt-docs-"))
    return _WORKDIR[0]


def _strict_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


class PolicyoptJson(Directive):
    """``.. policyopt-json:: ARGS`` with a field list as content: runs ``policyopt ARGS --json`` at build time and fails
    the build when the command fails or its output is not strict JSON; a top-level field without a description (or a
    description of a field it lacks) is a warning, an error under ``-W``."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self):
        """A table of the output's fields (type, description) as nodes; see the class docstring for what fails."""
        argv = shlex.split(self.arguments[0]) + ["--json"]
        try:  # one directory per build: an example may read what an earlier one wrote
            stdout = run_policyopt(argv)
        except RuntimeError as exc:
            raise self.error(str(exc)) from None
        data = json.loads(stdout, parse_constant=_strict_constant)
        described = {}
        for line in self.content:
            if not line.strip():
                continue
            key, sep, text = line.partition(":")
            if not sep:
                raise self.error(f"expected 'field: description', got {line!r}")
            for k in key.split(","):
                described[k.strip()] = text.strip()
        missing = [k for k in data if k not in described]
        extra = [k for k in described if k not in data]
        where = f"{self.state.document.current_source}:{self.lineno}"
        if missing:
            logger.warning(f"{where}: JSON fields of `policyopt {argv[0]}` without a description: {missing}")
        if extra:
            logger.warning(f"{where}: described fields that `policyopt {argv[0]}` does not output: {extra}")
        rows = ["   * - field", "     - type", "     - meaning"]
        for key, value in data.items():
            rows += [f"   * - ``{key}``", f"     - {_kind(value)}", f"     - {described.get(key, '')}"]
        text = [".. list-table::", "   :header-rows: 1", "   :widths: 18 8 74", ""] + rows
        node = nodes.container()
        self.state.nested_parse(StringList(text, source=where), self.content_offset, node)
        return node.children


def run_policyopt(argv: list[str]) -> str:
    """Run ``policyopt ARGV`` in-process in the build's working directory; its stdout, or RuntimeError on failure."""
    from policyopt.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(_workdir())
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(cwd)
    if code != 0:
        raise RuntimeError(f"policyopt {' '.join(argv)} exited with {code}: {err.getvalue().strip()}")
    return out.getvalue()


class PolicyoptFigure(Directive):
    """``.. policyopt-figure:: NAME``: a PNG made at build time into ``docs/_generated/NAME.png`` and shown as a figure.

    Options: ``:command:`` a ``policyopt`` command line whose ``{plot}`` is replaced by the file (its ``--plot``
    draws it), or ``:figure:`` the name of a function of :mod:`policyopt_figures` (``function(path)``, drawing
    numbers it gets from ``policyopt … --json``); ``:alt:``.  The content is the caption (first paragraph) and legend.
    A failing command is a build error."""

    required_arguments = 1
    has_content = True
    option_spec = {"command": directives.unchanged, "figure": directives.unchanged, "alt": directives.unchanged}

    def run(self):
        """The figure node; the PNG is (re)made on every build."""
        import policyopt_figures

        env = self.state.document.settings.env
        name = self.arguments[0]
        target = Path(env.srcdir) / "_generated" / f"{name}.png"
        target.parent.mkdir(exist_ok=True)
        try:
            if "command" in self.options:
                run_policyopt(shlex.split(self.options["command"].replace("{plot}", str(target))))
            elif "figure" in self.options:
                getattr(policyopt_figures, self.options["figure"])(target)
            else:
                raise self.error("policyopt-figure needs :command: or :figure:")
        except (RuntimeError, AttributeError) as exc:
            raise self.error(f"policyopt-figure {name}: {exc}") from None
        if not target.is_file() or target.stat().st_size < 1000:
            raise self.error(f"policyopt-figure {name}: no figure was written to {target}")
        doc_dir = Path(env.doc2path(env.docname)).parent
        figure = nodes.figure()
        figure += nodes.image(uri=os.path.relpath(target, doc_dir), alt=self.options.get("alt", name), width="100%")
        body = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, body)
        if body.children and isinstance(body.children[0], nodes.paragraph):
            first = body.children[0]
            figure += nodes.caption(first.rawsource, "", *first.children)
            if len(body.children) > 1:
                figure += nodes.legend("", *body.children[1:])
        return [figure]


def setup(app):
    """Sphinx entry point: register the ``policyopt-help``, ``policyopt-json`` and ``policyopt-figure`` directives."""
    app.add_directive("policyopt-help", PolicyoptHelp)
    app.add_directive("policyopt-json", PolicyoptJson)
    app.add_directive("policyopt-figure", PolicyoptFigure)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
