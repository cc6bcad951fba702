"""Files (built-in tool output), documents and their chunks, with full-text search.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# SQLite: an external-content FTS5 table over document_chunks, kept in step by triggers.
# Later batch migrations of document_chunks recreate the table: they must recreate these too.
SQLITE_SEARCH = (
    "CREATE VIRTUAL TABLE document_chunks_fts USING fts5(content, content='document_chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER document_chunks_fts_insert AFTER INSERT ON document_chunks BEGIN "
    "INSERT INTO document_chunks_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER document_chunks_fts_delete AFTER DELETE ON document_chunks BEGIN "
    "INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
)
# PostgreSQL: 'simple' (no stemming, no stop words) suits English and Indonesian alike.
POSTGRES_SEARCH = (
    "CREATE INDEX ix_document_chunks_search ON document_chunks "
    "USING gin (to_tsvector('simple', content))",
)


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("purpose", sa.String(length=40), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("content_type", sa.String(length=100), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("duration_seconds", sa.Float(), nullable=True),
        sa.Column("storage_key", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_files_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    op.create_index(op.f("ix_files_account_id"), "files", ["account_id"], unique=False)
    op.create_table(
        "documents",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=True),
        sa.Column("content_type", sa.String(length=100), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("characters", sa.Integer(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_documents_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_documents")),
    )
    op.create_index(op.f("ix_documents_account_id"), "documents", ["account_id"], unique=False)
    op.create_table(
        "document_chunks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("document_id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name=op.f("fk_document_chunks_document_id_documents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_document_chunks")),
        sa.UniqueConstraint("document_id", "position", name="uq_document_chunks_document_position"),
    )
    op.create_index(
        op.f("ix_document_chunks_account_id"), "document_chunks", ["account_id"], unique=False
    )
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_SEARCH if dialect == "sqlite" else POSTGRES_SEARCH:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS document_chunks_fts_delete")
        op.execute("DROP TRIGGER IF EXISTS document_chunks_fts_insert")
        op.execute("DROP TABLE IF EXISTS document_chunks_fts")
    op.drop_table("document_chunks")
    op.drop_table("documents")
    op.drop_table("files")
