"""From a model call's list price to what the account pays: package (tier) discounts and
volume discounts, rounded once to the micro-rupiah."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict, Field

HUNDRED = Decimal(100)
# The ledger's unit: amounts are exact to the micro-rupiah (1e-6 Rp).
MICRO = Decimal("0.000001")
MICROS_PER_RUPIAH = 1_000_000


def to_micro(amount: Decimal) -> Decimal:
    """Round to the ledger's unit, the micro-rupiah (half up)."""
    return amount.quantize(MICRO, rounding=ROUND_HALF_UP)


class VolumeDiscount(BaseModel):
    """From `monthly_spend_rupiah` of list-price spend in a calendar month (UTC), `percent` off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monthly_spend_rupiah: Decimal = Field(ge=0)
    percent: Decimal = Field(ge=0, le=100)


class PriceRules:
    """The discounts an operator configured; with none, accounts pay list price."""

    def __init__(
        self,
        tier_discounts: Mapping[str, Decimal] | None = None,
        volume_discounts: Sequence[VolumeDiscount] = (),
    ) -> None:
        self.tier_discounts = dict(tier_discounts or {})
        self.volume_discounts = sorted(volume_discounts, key=lambda d: d.monthly_spend_rupiah)

    @property
    def uses_monthly_spend(self) -> bool:
        return bool(self.volume_discounts)

    def volume_percent(self, monthly_spend: Decimal) -> Decimal:
        reached = [
            d.percent for d in self.volume_discounts if monthly_spend >= d.monthly_spend_rupiah
        ]
        return reached[-1] if reached else Decimal(0)

    def charge(self, list_cost: Decimal, tier: str, monthly_spend: Decimal) -> Decimal:
        """What an account of `tier` pays for a call listed at `list_cost`, having spent
        `monthly_spend` (list price) this month before it."""
        tier_factor = 1 - self.tier_discounts.get(tier, Decimal(0)) / HUNDRED
        volume_factor = 1 - self.volume_percent(monthly_spend) / HUNDRED
        return to_micro(list_cost * tier_factor * volume_factor)
