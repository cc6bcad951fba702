"""Small statistics the scenarios share."""

from __future__ import annotations


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` (0-1) of the sorted values, nearest rank; NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
