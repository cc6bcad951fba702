"""`package.module:attribute` references (features, `juru chat --tools`), imported."""

from __future__ import annotations

import importlib
from typing import Any


class ReferenceLoadError(ValueError):
    """The reference is malformed, its module does not import, or it has no such attribute."""


def import_reference(target: str) -> Any:
    """The object `target` (`package.module:attribute`) names."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ReferenceLoadError(f"{target!r} must look like 'package.module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ReferenceLoadError(f"cannot import {module_name!r} for {target}: {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ReferenceLoadError(f"{module_name!r} has no attribute {attribute!r}") from None
