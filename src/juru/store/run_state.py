"""A run as a notice carries it: its row without the input, in JSON values.

The write that pauses or ends a run returns these columns and its notice carries them
(`engine.events.changed_to`), so a `?wait=` waiter answers from the notice instead of reading
the run again. The input is left out: it can be large, and no answer of a waiter shows it.
The write that hands a resumed run to a worker carries the whole record (`handed_run_state`,
`engine.events.handed_to`), so that the worker takes it up without reading it.
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
# The fields of the record that `run_state` leaves out, and a hand-off carries.
HANDED_EXTRAS = ("input", "agent_revision", "account_tier")
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
    values = _values_of(state)
    return None if values is None else RunRecord(input=[], **values)


def handed_run_state(row: Mapping[str, Any]) -> dict[str, Any]:
    """The whole run record, as a worker the run is handed to takes it up: `run_state` with
    the input and what a claim returns besides the row (`HANDED_EXTRAS`), in JSON values."""
    return {**run_state(row), **{name: row[name] for name in HANDED_EXTRAS}}


def run_from_handed_state(state: Mapping[str, Any]) -> RunRecord | None:
    """The run record a `handed_run_state` describes; None when `state` is not one."""
    values = _values_of(state)
    if values is None or not all(name in state for name in HANDED_EXTRAS):
        return None
    if not isinstance(state["input"], list):
        return None
    return RunRecord(**values, **{name: state[name] for name in HANDED_EXTRAS})


def _values_of(state: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        values = {name: state[name] for name in RUN_STATE_COLUMNS}
        for name in _MONEY | _TIMES:
            value = values[name]
            if value is None:
                continue
            values[name] = Decimal(value) if name in _MONEY else datetime.fromisoformat(value)
    except (KeyError, TypeError, ValueError, InvalidOperation):
        return None
    return values
