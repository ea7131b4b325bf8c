"""Exceptions raised by policyopt.

Every message names the offending argument in backticks, shows the value that
was received and, where there is one, suggests the fix.  The command-line
interface prints the message of any :class:`PolicyOptError` on one line and
exits with code 2.
"""

from __future__ import annotations

__all__ = [
    "PolicyOptError",
    "InvalidInputError",
    "InvalidModelError",
    "InfeasibleProblemError",
    "BackendUnavailableError",
]


class PolicyOptError(Exception):
    """Base class of every error policyopt raises on purpose."""


class InvalidInputError(PolicyOptError, ValueError):
    """An argument, a file or a command-line option has a bad value."""


class InvalidModelError(InvalidInputError):
    """A Markov model (transition matrix, state values, data) is not valid."""


class InfeasibleProblemError(PolicyOptError):
    """A problem has no feasible point; the message gives the smallest achievable penalty."""


class BackendUnavailableError(PolicyOptError, ImportError):
    """A solver back end cannot be used here (missing library or licence)."""


def fmt(value) -> str:
    """Short repr of a user-supplied value for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
