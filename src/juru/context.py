"""Everything an app runs on, opened together and closed together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from juru.agents.builtin import builtin_features
from juru.agents.features import load_feature_reference, merge_features
from juru.agents.registry import FeatureRegistry
from juru.models.catalog import ModelCatalog
from juru.playground import Playground
from juru.settings import Settings
from juru.store.checkpointer import open_checkpointer
from juru.store.database import create_engine
from juru.store.migrations import upgrade_to_head
from juru.store.urls import DatabaseUrl


@dataclass
class AppContext:
    """The settings and the open resources of one running app."""

    settings: Settings
    database: DatabaseUrl
    engine: AsyncEngine
    catalog: ModelCatalog
    features: FeatureRegistry
    playground: Playground


def load_catalog(settings: Settings) -> ModelCatalog:
    return ModelCatalog.load(Path(settings.model_catalog) if settings.model_catalog else None)


@asynccontextmanager
async def open_context(settings: Settings) -> AsyncIterator[AppContext]:
    """Open the database (migrating SQLite), the checkpointer and the feature registry."""
    database = DatabaseUrl.parse(settings.database_url)
    catalog = load_catalog(settings)
    features = merge_features(
        [
            builtin_features(settings, catalog),
            *(load_feature_reference(target) for target in settings.features),
        ]
    )
    if database.is_sqlite:
        await asyncio.to_thread(upgrade_to_head, database)
    engine = create_engine(database)
    try:
        async with open_checkpointer(database) as checkpointer:
            registry = FeatureRegistry(features, checkpointer)
            yield AppContext(
                settings=settings,
                database=database,
                engine=engine,
                catalog=catalog,
                features=registry,
                playground=Playground(registry, engine),
            )
    finally:
        await catalog.aclose()
        await engine.dispose()
