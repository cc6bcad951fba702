"""Metering: the hold before a paid call and the charge after it.

Agents (source `agent`), `/v1/chat/completions` (source `chat`), the Agent Runtime (source
`runtime`) and built-in tools (source `builtin`) share it, so all bill the same way. Before a
paid call, the most it can cost is held against the balance (`store.holds`); a call whose hold
does not fit in what the balance has left after the other holds is refused. The charge settles
the hold to the real cost. However many calls run at once, the balance never goes below zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_openai_messages

from juru.core.clock import Clock
from juru.core.errors import InsufficientBalanceError
from juru.core.ids import new_id
from juru.core.money import MICRO, PriceRules
from juru.models.catalog import ModelCatalog, UnknownModelError
from juru.store import holds as hold_store
from juru.store.accounts import available_of
from juru.store.database import Database
from juru.store.records import RunRecord
from juru.store.usage import ChargeRequest, record_charge

# What one image in a prompt is assumed to cost at most, in input tokens.
IMAGE_PART_TOKENS = 3_000
DEFAULT_HOLD_SECONDS = 3_600.0
# Added per tool output to a pre-hold, for the fields the graph's tool message adds.
TOOL_OUTPUT_SLACK_BYTES = 256


def token_counts(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """Input and output tokens from a LangChain message's `usage_metadata`."""
    usage = usage or {}
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


def json_bytes(value: Any) -> int:
    """UTF-8 bytes of `value` as JSON, plus an allowance per image it holds."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    images = text.count('"image_url"') + text.count('"type": "image"')
    return len(text.encode("utf-8")) + images * IMAGE_PART_TOKENS


def input_token_bound(messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
    """At most how many input tokens a prompt can be: the UTF-8 bytes of each message as
    OpenAI-style JSON, and of the tools (a token is at least one byte in the byte-level
    tokenizers providers use, and the JSON's keys outweigh each message's framing tokens),
    plus an allowance per image. Adding a message adds its own bytes (`json_bytes`)."""
    total = json_bytes(list(tools)) if tools else 0
    for message in convert_to_openai_messages(list(messages)):
        total += json_bytes(message)
    return total


def tool_outputs_bound(outputs: Mapping[str, str]) -> int:
    """What tool outputs add to the next prompt's bound, as tool messages."""
    return sum(
        json_bytes({"role": "tool", "tool_call_id": call_id, "content": output})
        + TOOL_OUTPUT_SLACK_BYTES
        for call_id, output in outputs.items()
    )


def round_up(amount: Decimal) -> Decimal:
    return amount.quantize(MICRO, rounding=ROUND_CEILING)


class Meter:
    """Holds, releases and charges for one app."""

    def __init__(
        self,
        engine: Database,
        catalog: ModelCatalog,
        rules: PriceRules,
        clock: Clock,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.rules = rules
        self.clock = clock
        self.hold_seconds = hold_seconds

    def is_paid(self, model_id: str) -> bool:
        return self.catalog.get(model_id).is_paid

    def most_a_call_costs(
        self,
        model_id: str,
        messages: Sequence[BaseMessage],
        tools: Sequence[Any] = (),
        max_tokens: int | None = None,
    ) -> Decimal:
        """The list price of the call if it used every input token it can and the most
        output tokens it may (`max_tokens` when given, else the model's cap)."""
        return self.most_a_prompt_costs(model_id, input_token_bound(messages, tools), max_tokens)

    def most_a_prompt_costs(
        self, model_id: str, input_tokens: int, max_tokens: int | None = None
    ) -> Decimal:
        """`most_a_call_costs` for a prompt of at most `input_tokens`."""
        model = self.catalog.get(model_id)
        output = model.max_output_tokens
        if max_tokens is not None:
            output = min(output, max_tokens)
        return round_up(model.cost_rupiah(input_tokens, output))

    async def hold_call(
        self,
        account_id: str,
        model_id: str,
        messages: Sequence[BaseMessage],
        tools: Sequence[Any] = (),
        max_tokens: int | None = None,
    ) -> str | None:
        """Hold the most a call to `model_id` can cost; its id, or None for a free model.
        `InsufficientBalanceError` when it does not fit."""
        if not self.is_paid(model_id):
            return None
        amount = self.most_a_call_costs(model_id, messages, tools, max_tokens)
        return await self.hold(account_id, amount, model_id)

    def pre_hold(self, run: RunRecord, outputs: Mapping[str, str]) -> hold_store.Hold | None:
        """The hold of the call a paused run makes once it has these tool outputs, to take
        with their submission (None when the run's model is free or unknown)."""
        if run.next_prompt_bytes is None or run.next_model_id is None:
            return None
        try:
            model = self.catalog.get(run.next_model_id)
        except UnknownModelError:
            return None
        if not model.is_paid:
            return None
        prompt = run.next_prompt_bytes + tool_outputs_bound(outputs)
        return self.prompt_hold(run.account_id, model.id, prompt, run.id)

    def prompt_hold(
        self, account_id: str, model_id: str, prompt_bytes: int, run_id: str
    ) -> hold_store.Hold | None:
        """The hold of a run's call that sends `prompt_bytes` (None for a free model), to
        take inside the write that creates or resumes the run."""
        if not self.is_paid(model_id):
            return None
        amount = self.most_a_prompt_costs(model_id, prompt_bytes)
        return self.new_hold(account_id, amount, model_id, run_id)

    def new_hold_id(self) -> str:
        return new_id("hold")

    def new_hold(
        self,
        account_id: str,
        amount: Decimal,
        what: str,
        run_id: str | None = None,
        hold_id: str | None = None,
    ) -> hold_store.Hold:
        """A hold to take now (by `hold`, or inside another write: `store.holds.take_hold`)."""
        now = self.clock.now()
        return hold_store.Hold(
            id=hold_id or self.new_hold_id(),
            account_id=account_id,
            amount=amount,
            what=what,
            run_id=run_id,
            created_at=now,
            expires_at=now + timedelta(seconds=self.hold_seconds),
        )

    async def hold(
        self,
        account_id: str,
        amount: Decimal,
        what: str,
        run_id: str | None = None,
        hold_id: str | None = None,
        replacing: str | None = None,
    ) -> str:
        """Set `amount` aside for a call to `what` (giving back the hold `replacing`, if
        given, in the same write); `InsufficientBalanceError` when the balance, less what is
        held already, does not cover it. Returns the hold's id (given ahead by `hold_id`, so
        that a caller cancelled meanwhile still knows it)."""
        hold = self.new_hold(account_id, amount, what, run_id, hold_id)
        if not await hold_store.hold(self.engine, hold, replacing):
            available = await available_of(self.engine, account_id)
            raise InsufficientBalanceError(
                f"a call to {what} may cost up to Rp{amount}, and the account has "
                f"Rp{available} available (its balance less what calls in flight hold); "
                "top it up"
            )
        return hold.id

    async def release(self, account_id: str, hold_ids: Sequence[str | None]) -> None:
        """Give holds back without a charge (their calls failed or never happened)."""
        await hold_store.release(self.engine, account_id, [h for h in hold_ids if h])

    async def charge_builtin(
        self,
        account_id: str,
        tool: str,
        list_cost: Decimal,
        run_id: str,
        step: int | None,
        hold_id: str | None = None,
    ) -> Decimal:
        """A built-in tool call's ledger row (source `builtin`, the tool's name as `model_id`,
        no tokens), with the account's discounts; returns what it cost."""
        request = ChargeRequest(
            account_id=account_id,
            source="builtin",
            model_id=tool,
            input_tokens=0,
            output_tokens=0,
            list_cost=list_cost,
            created_at=self.clock.now(),
            run_id=run_id,
            step=step,
            hold_id=hold_id,
        )
        return await record_charge(self.engine, request, self.rules)

    def charge_request(
        self,
        account_id: str,
        model_id: str,
        usage: Mapping[str, Any] | None,
        source: str,
        run_id: str | None = None,
        step: int | None = None,
        charge_key: str | None = None,
        hold_id: str | None = None,
    ) -> ChargeRequest:
        """A model call priced at list price from the catalog, ready to be written."""
        input_tokens, output_tokens = token_counts(usage)
        return ChargeRequest(
            account_id=account_id,
            source=source,
            model_id=model_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            list_cost=self.catalog.get(model_id).cost_rupiah(input_tokens, output_tokens),
            created_at=self.clock.now(),
            run_id=run_id,
            step=step,
            charge_key=charge_key,
            hold_id=hold_id,
        )

    async def charge(
        self,
        account_id: str,
        model_id: str,
        usage: Mapping[str, Any] | None,
        source: str,
        run_id: str | None = None,
        step: int | None = None,
        hold_id: str | None = None,
    ) -> Decimal:
        """Write the call's ledger row, debit the balance and settle the call's hold; returns
        what it cost."""
        request = self.charge_request(
            account_id, model_id, usage, source, run_id, step, hold_id=hold_id
        )
        return await record_charge(self.engine, request, self.rules)

    async def release_expired(self) -> int:
        """Release the holds whose process died before settling them."""
        return await hold_store.release_expired(self.engine, self.clock.now())
