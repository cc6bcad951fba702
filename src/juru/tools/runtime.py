"""Running built-in tools for one run: arguments, list prices, the work, and the charge."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from juru.billing.meter import Meter
from juru.core.clock import Clock
from juru.core.errors import InsufficientBalanceError
from juru.core.money import to_micro
from juru.files.storage import FileStorage
from juru.store.database import Database
from juru.tools import rag_search, text_to_speech
from juru.tools.errors import BuiltinToolError
from juru.tools.speech import EspeakSynthesizer

BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    text_to_speech.NAME: text_to_speech.SCHEMA,
    rag_search.NAME: rag_search.SCHEMA,
}


@dataclass(frozen=True)
class BuiltinPrices:
    """The built-in tools' list prices in Rupiah (discounts apply as for model calls)."""

    text_to_speech_per_1k_characters: Decimal
    rag_search_per_call: Decimal


@dataclass
class BuiltinServices:
    """What built-in tools need from the app, shared by every run."""

    engine: Database
    storage: FileStorage
    synthesizer: EspeakSynthesizer
    meter: Meter
    clock: Clock
    prices: BuiltinPrices
    tts_max_characters: int

    def for_run(self, account_id: str, run_id: str) -> BuiltinRuntime:
        return BuiltinRuntime(self, account_id, run_id)


@dataclass(frozen=True)
class PricedCall:
    """A built-in call with valid arguments, and what it lists at."""

    name: str
    request: Any
    list_cost: Decimal


class BuiltinRuntime:
    """Built-in tools acting for one account within one run (passed in the run's config)."""

    def __init__(self, services: BuiltinServices, account_id: str, run_id: str) -> None:
        self.services = services
        self.account_id = account_id
        self.run_id = run_id

    def price(self, name: str, args: dict[str, Any]) -> PricedCall:
        """Check the arguments and price the call; `BuiltinToolError` when they are wrong."""
        prices = self.services.prices
        if name == text_to_speech.NAME:
            speech = text_to_speech.parse_request(args, self.services.tts_max_characters)
            cost = text_to_speech.list_price(speech, prices.text_to_speech_per_1k_characters)
            return PricedCall(name, speech, to_micro(cost))
        if name == rag_search.NAME:
            return PricedCall(name, rag_search.parse_request(args), prices.rag_search_per_call)
        raise BuiltinToolError(f"there is no built-in tool named {name!r}")

    async def run(self, call: PricedCall, step: int | None) -> str:
        """Do the call and charge it: its price is held first, and only a call that worked is
        charged (a failed one gives its hold back); the tool result."""
        services = self.services
        meter = services.meter
        hold_id = None
        if call.list_cost > 0:
            try:
                hold_id = await meter.hold(self.account_id, call.list_cost, call.name, self.run_id)
            except InsufficientBalanceError as error:
                raise BuiltinToolError(str(error)) from None
        try:
            result = await self._perform(call)
        except BaseException:
            await asyncio.shield(meter.release(self.account_id, [hold_id]))
            raise
        await meter.charge_builtin(
            self.account_id, call.name, call.list_cost, self.run_id, step, hold_id
        )
        return json.dumps(result, ensure_ascii=False)

    async def _perform(self, call: PricedCall) -> Any:
        services = self.services
        if call.name == text_to_speech.NAME:
            target = text_to_speech.SpeechTarget(
                services.engine,
                services.storage,
                self.account_id,
                self.run_id,
                services.clock.now(),
            )
            return await text_to_speech.speak(call.request, services.synthesizer, target)
        return await rag_search.search(services.engine, self.account_id, call.request)
