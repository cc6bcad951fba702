"""Juru's own tables (LangGraph's checkpointer keeps its tables to itself)."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, MetaData, String, Table

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

playground_threads = Table(
    "playground_threads",
    metadata,
    Column("thread_id", String(200), primary_key=True),
    Column("feature", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
