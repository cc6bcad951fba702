"""Alembic migrations for Juru's tables; `upgrade_to_head` applies them."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

from juru.store.urls import DatabaseUrl

MIGRATIONS_DIR = Path(__file__).parent


def alembic_config(database: DatabaseUrl) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option(
        "sqlalchemy.url",
        database.sync_url().render_as_string(hide_password=False).replace("%", "%%"),
    )
    return config


def upgrade_to_head(database: DatabaseUrl) -> None:
    """Apply every migration not yet applied (blocking; call it off the event loop)."""
    database.ensure_directory()
    engine = create_engine(database.sync_url())
    try:
        with engine.begin() as connection:
            config = alembic_config(database)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    finally:
        engine.dispose()
