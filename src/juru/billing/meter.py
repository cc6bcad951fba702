"""Metering: the balance check before a paid model call and the charge after it.

Agents (source `agent`), `/v1/chat/completions` (source `chat`) and built-in tools (source
`builtin`) share it, so all bill the same way. The check only asks for a positive balance: a
call's cost is known after it returns, so each concurrent call may overdraw by at most its own
cost, never more.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from juru.core.clock import Clock
from juru.core.errors import InsufficientBalanceError
from juru.core.money import PriceRules
from juru.models.catalog import ModelCatalog
from juru.store.accounts import balance_of
from juru.store.database import Database
from juru.store.usage import ChargeRequest, record_charge


def token_counts(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """Input and output tokens from a LangChain message's `usage_metadata`."""
    usage = usage or {}
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


class Meter:
    """Checks balances and writes charges for one app."""

    def __init__(
        self, engine: Database, catalog: ModelCatalog, rules: PriceRules, clock: Clock
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.rules = rules
        self.clock = clock

    def is_paid(self, model_id: str) -> bool:
        model = self.catalog.get(model_id)
        return bool(model.input_rupiah_per_million or model.output_rupiah_per_million)

    async def ensure_funds(self, account_id: str, model_id: str) -> None:
        """Raise `InsufficientBalanceError` before a paid call when the balance is used up."""
        if self.is_paid(model_id):
            await self.ensure_balance(account_id, model_id)

    async def ensure_balance(self, account_id: str, what: str) -> None:
        """Raise `InsufficientBalanceError` unless the balance is positive."""
        balance = await balance_of(self.engine, account_id)
        if balance <= 0:
            raise InsufficientBalanceError(
                f"the account's balance is Rp{balance}; top it up to call {what}"
            )

    async def charge_builtin(
        self, account_id: str, tool: str, list_cost: Decimal, run_id: str, step: int | None
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
        )

    async def charge(
        self,
        account_id: str,
        model_id: str,
        usage: Mapping[str, Any] | None,
        source: str,
        run_id: str | None = None,
        step: int | None = None,
    ) -> Decimal:
        """Write the call's ledger row and debit the balance; returns what it cost."""
        request = self.charge_request(account_id, model_id, usage, source, run_id, step)
        return await record_charge(self.engine, request, self.rules)
