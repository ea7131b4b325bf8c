"""The ``policyopt`` command line: :mod:`~policyopt.cli.main` (parser, entry point), :mod:`~policyopt.cli.options`
(shared option parsers) and one module per sub-command.

May import every other layer; nothing but ``policyopt.__main__`` and the entry point imports it.
"""
