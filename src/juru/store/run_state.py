"""A run as a notice carries it: its row without the input, in JSON values.

The write that pauses or ends a run returns these columns and its notice carries them
(`engine.events.changed_to`), so a `?wait=` waiter answers from the notice instead of reading
the run again. The input is left out: it can be large, and no answer of a waiter shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from juru.store.records import RunRecord
from juru.store.tables import runs
from juru.store.types import Money, UtcDateTime

RUN_STATE_COLUMNS = tuple(
    field.name for field in fields(RunRecord) if field.name in runs.c and field.name != "input"
)
_MONEY = frozenset(name for name in RUN_STATE_COLUMNS if isinstance(runs.c[name].type, Money))
_TIMES = frozenset(name for name in RUN_STATE_COLUMNS if isinstance(runs.c[name].type, UtcDateTime))


def run_state(row: Mapping[str, Any]) -> dict[str, Any]:
    """The run's `RUN_STATE_COLUMNS` from `row`, as JSON values."""
    state = {}
    for name in RUN_STATE_COLUMNS:
        value = row[name]
        if value is not None and name in _MONEY:
            value = str(value)
        elif value is not None and name in _TIMES:
            value = value.isoformat()
        state[name] = value
    return state


def run_from_state(state: Mapping[str, Any]) -> RunRecord | None:
    """The run record a `run_state` describes, with an empty input; None when `state` is not
    one (a column missing, a value of the wrong kind)."""
    try:
        values = {name: state[name] for name in RUN_STATE_COLUMNS}
        for name in _MONEY | _TIMES:
            value = values[name]
            if value is None:
                continue
            values[name] = Decimal(value) if name in _MONEY else datetime.fromisoformat(value)
    except (KeyError, TypeError, ValueError, InvalidOperation):
        return None
    return RunRecord(input=[], **values)
