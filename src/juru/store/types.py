"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from juru.core.money import MICROS_PER_RUPIAH


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes in and out (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Money(TypeDecorator[Decimal]):
    """Exact Rupiah: stored as an integer count of micro-rupiah (1e-6 Rp) on every dialect, so
    SQLite sums stay exact too; Python sees `Decimal` Rupiah."""

    impl = BigInteger()
    cache_ok = True

    def process_bind_param(self, value: Decimal | int | None, dialect: Dialect) -> int | None:
        if value is None:
            return None
        micros = Decimal(value) * MICROS_PER_RUPIAH
        if micros != micros.to_integral_value():
            raise ValueError(f"{value} Rp has more than six decimal places; round it first")
        return int(micros)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return Decimal(int(value)) / MICROS_PER_RUPIAH
