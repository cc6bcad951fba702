"""One `JURU_DATABASE_URL`, spelled for each driver that opens it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url


class UnsupportedDatabaseError(ValueError):
    """The URL names a database Juru does not run on."""


@dataclass(frozen=True)
class DatabaseUrl:
    """A parsed database URL: SQLite file or PostgreSQL server."""

    url: URL

    @classmethod
    def parse(cls, raw: str) -> DatabaseUrl:
        url = make_url(raw)
        backend = url.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise UnsupportedDatabaseError(
                f"JURU_DATABASE_URL must be sqlite:///path or postgresql://..., not {backend}://"
            )
        if backend == "sqlite" and url.database in (None, "", ":memory:"):
            raise UnsupportedDatabaseError("SQLite needs a file path: sqlite:///path/juru.db")
        return cls(url)

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def sqlite_path(self) -> Path:
        assert self.is_sqlite and self.url.database
        return Path(self.url.database)

    def async_url(self) -> URL:
        driver = "sqlite+aiosqlite" if self.is_sqlite else "postgresql+psycopg"
        return self.url.set(drivername=driver)

    def sync_url(self) -> URL:
        driver = "sqlite+pysqlite" if self.is_sqlite else "postgresql+psycopg"
        return self.url.set(drivername=driver)

    def libpq_dsn(self) -> str:
        """The plain `postgresql://` form that psycopg (and the checkpointer) connect with."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def ensure_directory(self) -> None:
        if self.is_sqlite:
            self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
