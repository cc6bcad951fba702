"""Juru: a self-hosted agent server over one LangGraph runtime."""

__version__ = "0.1.0"
