"""A run as a notice carries it: its row without the input, in JSON values.

The write that pauses or ends a run returns these columns and its notice carries them
(`engine.events.changed_to`), so a `?wait=` waiter answers from the notice instead of reading
the run again. The input is left out: it can be large, and no answer of a waiter shows it.
The write that resumes a run for the worker that paused it also returns what a claim returns
besides the row (`HANDED_EXTRAS`), and its notice carries them too (`handed_state`), so that
the worker takes the run up without reading it (a resumed run's input is in its checkpoint).
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
# What a worker's claim returns besides the run's row (`RunRecord`): its agent's revision and
# its account's tier.
HANDED_EXTRAS = ("agent_revision", "account_tier")
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


def handed_state(row: Mapping[str, Any]) -> dict[str, Any]:
    """`run_state(row)` with the `HANDED_EXTRAS` of `row`."""
    return {**run_state(row), **{name: row[name] for name in HANDED_EXTRAS}}


def run_from_state(state: Mapping[str, Any]) -> RunRecord | None:
    """The run record a `run_state` (or a `handed_state`) describes, with an empty input;
    None when `state` is not one (a column missing, a value of the wrong kind)."""
    try:
        values = {name: state[name] for name in RUN_STATE_COLUMNS}
        values.update({name: state[name] for name in HANDED_EXTRAS if name in state})
        revision, tier = values.get("agent_revision"), values.get("account_tier")
        if not isinstance(revision, int | None) or not isinstance(tier, str | None):
            return None
        for name in _MONEY | _TIMES:
            value = values[name]
            if value is None:
                continue
            values[name] = Decimal(value) if name in _MONEY else datetime.fromisoformat(value)
    except (KeyError, TypeError, ValueError, InvalidOperation):
        return None
    return RunRecord(input=[], **values)
