"""The client's models and the server's OpenAPI description cannot drift apart: each model has
the same fields as the schema it reads, with the same JSON types and the same required ones."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from juru.app import create_app
from juru.client import models
from tests.conftest import make_settings

JSON_TYPE_OF = {str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
READS = {
    models.Agent: "AgentOut",
    models.AgentTool: "AgentToolOut",
    models.McpServer: "McpServerOut",
    models.Tool: "ToolOut",
    models.Function: "FunctionOut",
    models.Thread: "ThreadOut",
    models.Message: "MessageOut",
    models.ToolCall: "PendingToolCall",
    models.Run: "RunOut",
    models.Model: "ModelOut",
    models.Account: "AccountOut",
    models.RateLimit: "RateLimitOut",
    models.Usage: "UsageOut",
    models.UsageLine: "UsageLineOut",
    models.Document: "DocumentOut",
    models.File: "FileOut",
    models.Deleted: "DeletedOut",
    models.StepCompleted: "StepEventOut",
    models.MessageDelta: "MessageDeltaOut",
}


@pytest.fixture(scope="module")
def server_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("openapi")
    app = create_app(make_settings(f"sqlite:///{folder}/juru.db"))
    schemas: dict[str, Any] = app.openapi()["components"]["schemas"]
    return schemas


def json_types(schema: dict[str, Any], definitions: dict[str, Any]) -> frozenset[str]:
    """The JSON types a property's schema admits; numbers are one kind (Rupiah amounts are
    integers or decimals on the wire, `Decimal` in the client)."""
    if "$ref" in schema:
        return json_types(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
    if "anyOf" in schema:
        return frozenset().union(*(json_types(s, definitions) for s in schema["anyOf"]))
    if "const" in schema or "enum" in schema:
        values = schema.get("enum", [schema.get("const")])
        found = {JSON_TYPE_OF[type(value)] for value in values}
        return frozenset(found | ({schema["type"]} if "type" in schema else set()))
    kind = schema.get("type", "object")
    return frozenset({"number" if kind == "integer" else kind})


def shape(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, frozenset[str]]:
    return {name: json_types(prop, definitions) for name, prop in schema["properties"].items()}


@pytest.mark.parametrize("model", list(READS), ids=lambda m: m.__name__)
def test_the_model_has_the_schemas_fields(
    model: type[BaseModel], server_schemas: dict[str, Any]
) -> None:
    server = server_schemas[READS[model]]
    client = model.model_json_schema(mode="validation", ref_template="#/$defs/{model}")
    client_definitions = {**client.get("$defs", {}), model.__name__: client}
    server_shape = shape(server, server_schemas)
    client_shape = shape(client, client_definitions)
    assert client_shape.keys() == server_shape.keys()
    for name, types in server_shape.items():
        assert _comparable(client_shape[name]) == _comparable(types), name
    # A field the server always sends is one the client cannot do without, and back.
    client_required = {n for n, f in model.model_fields.items() if f.is_required()}
    server_required = set(server.get("required", []))
    assert client_required <= server_required


def _comparable(types: frozenset[str]) -> frozenset[str]:
    """`Decimal` reads a number or a numeric string: a number."""
    named = {"string" if kind == "str" else kind for kind in types}
    return (
        frozenset({"number"} | (named - {"number", "string"}))
        if "number" in named
        else frozenset(named)
    )
