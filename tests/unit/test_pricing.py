"""Price rules: discounts multiply, the highest volume threshold reached applies, and a charge
is rounded once, half up, to the micro-rupiah."""

from __future__ import annotations

from decimal import Decimal

import pytest

from juru.core.money import PriceRules, VolumeDiscount, to_micro

RULES = PriceRules(
    {"corporate": Decimal(10)},
    [
        VolumeDiscount(monthly_spend_rupiah=Decimal(10_000_000), percent=Decimal(10)),
        VolumeDiscount(monthly_spend_rupiah=Decimal(1_000_000), percent=Decimal(5)),
    ],
)


@pytest.mark.parametrize(
    ("spent", "percent"),
    [(0, 0), (999_999, 0), (1_000_000, 5), (9_999_999, 5), (10_000_000, 10), (10**9, 10)],
)
def test_the_highest_threshold_reached_applies(spent: int, percent: int) -> None:
    assert RULES.volume_percent(Decimal(spent)) == percent


def test_discounts_multiply() -> None:
    assert RULES.charge(Decimal(1000), "corporate", Decimal(10_000_000)) == Decimal(810)
    assert RULES.charge(Decimal(1000), "paid", Decimal(10_000_000)) == Decimal(900)
    assert RULES.charge(Decimal(1000), "paid", Decimal(0)) == Decimal(1000)


def test_no_rules_means_list_price() -> None:
    rules = PriceRules()
    assert not rules.uses_monthly_spend
    assert rules.charge(Decimal("0.1234565"), "corporate", Decimal(10**12)) == Decimal("0.123457")


@pytest.mark.parametrize(
    ("amount", "rounded"),
    [
        ("0.0000005", "0.000001"),
        ("0.0000004999", "0.000000"),
        ("2475.0321755", "2475.032176"),
        ("-0.0000005", "-0.000001"),
    ],
)
def test_to_micro_rounds_half_up(amount: str, rounded: str) -> None:
    assert to_micro(Decimal(amount)) == Decimal(rounded)
