"""Queries of `documents` and `document_chunks`, and full-text search over the chunks.

SQLite ranks with FTS5's bm25 over `document_chunks_fts`; PostgreSQL with `ts_rank` over the
`to_tsvector('simple', content)` expression its GIN index covers (both made by migration 0006).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, text

from juru.store.database import Database
from juru.store.hosted import page_of
from juru.store.pages import Page, PageRequest
from juru.store.records import DocumentRecord
from juru.store.tables import document_chunks, documents
from juru.store.transactions import write


@dataclass(frozen=True)
class ChunkHit:
    """One chunk that matched a search, best first; a higher `score` is a better match."""

    document_id: str
    title: str
    position: int
    content: str
    score: float


async def insert_document(
    engine: Database, values: dict[str, Any], chunks: Sequence[str]
) -> DocumentRecord:
    """Store a document and its chunks in one transaction (the search index follows)."""

    def add(connection: Connection) -> None:
        connection.execute(insert(documents).values(values))
        connection.execute(
            insert(document_chunks),
            [
                {
                    "document_id": values["id"],
                    "account_id": values["account_id"],
                    "position": position,
                    "content": content,
                }
                for position, content in enumerate(chunks)
            ],
        )

    await write(engine, add)
    found = await get_document(engine, values["account_id"], values["id"])
    assert found is not None
    return found


async def get_document(
    engine: Database, account_id: str, document_id: str
) -> DocumentRecord | None:
    query = select(documents).where(
        documents.c.id == document_id, documents.c.account_id == account_id
    )
    row = await engine.first_row(query)
    return DocumentRecord.from_row(row) if row is not None else None


async def list_documents(
    engine: Database, account_id: str, page: PageRequest
) -> Page[DocumentRecord]:
    query = select(documents).where(documents.c.account_id == account_id)
    rows = await engine.read(lambda connection: page_of(connection, documents, query, page))
    return Page([DocumentRecord.from_row(row) for row in rows.items], rows.has_more)


async def delete_document(engine: Database, account_id: str, document_id: str) -> bool:
    """Delete the account's document with its chunks; False when there was none."""

    def remove(connection: Connection) -> bool:
        owned = connection.scalar(
            select(documents.c.id).where(
                documents.c.id == document_id, documents.c.account_id == account_id
            )
        )
        if owned is None:
            return False
        # Chunks first and explicitly: the FTS5 delete trigger must see every row go.
        connection.execute(
            delete(document_chunks).where(document_chunks.c.document_id == document_id)
        )
        connection.execute(delete(documents).where(documents.c.id == document_id))
        return True

    return await write(engine, remove)


def _sqlite_match(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{term}"*' for term in terms)


def _postgres_query(terms: Sequence[str]) -> str:
    return " | ".join(f"{term}:*" for term in terms)


_SQLITE_SEARCH = text(
    "SELECT c.document_id, d.title, c.position, c.content, "
    "-bm25(document_chunks_fts) AS score "
    "FROM document_chunks_fts "
    "JOIN document_chunks AS c ON c.id = document_chunks_fts.rowid "
    "JOIN documents AS d ON d.id = c.document_id "
    "WHERE document_chunks_fts MATCH :match AND c.account_id = :account_id "
    "ORDER BY bm25(document_chunks_fts), c.id LIMIT :limit"
)
# Normalisation 1 divides by 1 + log(length), so long chunks do not win by size alone.
_POSTGRES_SEARCH = text(
    "SELECT c.document_id, d.title, c.position, c.content, "
    "ts_rank(to_tsvector('simple', c.content), q.query, 1) AS score "
    "FROM document_chunks AS c "
    "JOIN documents AS d ON d.id = c.document_id, "
    "to_tsquery('simple', :match) AS q(query) "
    "WHERE c.account_id = :account_id AND to_tsvector('simple', c.content) @@ q.query "
    "ORDER BY score DESC, c.id LIMIT :limit"
)


async def search_chunks(
    engine: Database, account_id: str, terms: Sequence[str], limit: int
) -> list[ChunkHit]:
    """The account's chunks matching any of `terms` (plain words; each also as a prefix),
    best first. Terms must be letters and digits only: they are written into the query."""
    if not terms:
        return []
    sqlite = engine.dialect_name == "sqlite"
    statement = _SQLITE_SEARCH if sqlite else _POSTGRES_SEARCH
    match = _sqlite_match(terms) if sqlite else _postgres_query(terms)
    params = {"match": match, "account_id": account_id, "limit": limit}
    return [
        ChunkHit(
            document_id=row["document_id"],
            title=row["title"],
            position=int(row["position"]),
            content=row["content"],
            score=float(row["score"]),
        )
        for row in await engine.rows(statement, params)
    ]
