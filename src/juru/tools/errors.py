"""The error a built-in tool reports to the model (as an error tool result, never a crash)."""

from __future__ import annotations


class BuiltinToolError(Exception):
    """A built-in call that cannot be done: bad arguments, limits, or its engine failing."""
