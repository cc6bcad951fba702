"""Cursor pagination shared by every list query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; `has_more` says whether asking after the last item gives more."""

    items: list[T]
    has_more: bool


@dataclass(frozen=True)
class PageRequest:
    """At most `limit` items after the cursor `after` (an id), in the list's order."""

    limit: int = 20
    after: str | None = None
    descending: bool = True
