"""Storage: SQLAlchemy Core tables, Alembic migrations and LangGraph's checkpointer."""
