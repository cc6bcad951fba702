"""The `rag_search` built-in tool: full-text search over the account's documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from juru.store.database import Database
from juru.store.documents import search_chunks
from juru.tools.errors import BuiltinToolError
from juru.tools.search_terms import search_terms

NAME = "rag_search"
DEFAULT_TOP_K = 3
MAX_TOP_K = 10
MAX_QUERY_CHARACTERS = 1000
SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Search the uploaded documents (knowledge base) for passages relevant "
        "to a question; returns the best passages with their document id, title and chunk.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The question or keywords."},
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TOP_K,
                    "description": f"How many passages to return (default {DEFAULT_TOP_K}).",
                },
            },
            "required": ["query"],
        },
    },
}


@dataclass(frozen=True)
class SearchRequest:
    query: str
    top_k: int


def parse_request(args: dict[str, Any]) -> SearchRequest:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BuiltinToolError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARACTERS:
        raise BuiltinToolError(f"query must be at most {MAX_QUERY_CHARACTERS} characters")
    top_k = args.get("top_k", DEFAULT_TOP_K)
    if top_k is None:
        top_k = DEFAULT_TOP_K
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise BuiltinToolError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    return SearchRequest(query.strip(), top_k)


async def search(engine: Database, account_id: str, request: SearchRequest) -> dict[str, Any]:
    """The best chunks for the query, each citing its document and position."""
    hits = await search_chunks(engine, account_id, search_terms(request.query), request.top_k)
    results = [
        {
            "document_id": hit.document_id,
            "title": hit.title,
            "chunk": hit.position,
            "score": round(hit.score, 6),
            "text": hit.content,
        }
        for hit in hits
    ]
    answer: dict[str, Any] = {"query": request.query, "results": results}
    if not results:
        answer["note"] = "No document matched the query."
    return answer
