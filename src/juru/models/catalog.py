"""The model catalog: `provider/model` ids resolved to LangChain chat models, with prices.

The catalog ships as `catalog.toml` beside this module; `JURU_MODEL_CATALOG` names a file of
the same shape whose providers and models are merged over it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import openai
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from juru.models.demo import DemoChatModel
from juru.models.openai_body import DirectPosts, with_plain_bodies

BUILTIN_CATALOG = Path(__file__).with_name("catalog.toml")
TOKENS_PER_PRICE_UNIT = Decimal(1_000_000)
# `created` of a model whose entry gives none (2025-01-01 UTC): fixed, so model objects are stable.
CATALOG_CREATED = 1_735_689_600
# A model entry without `max_output_tokens`: the most one reply is assumed to hold.
DEFAULT_MAX_OUTPUT_TOKENS = 16_384


class CatalogError(ValueError):
    """The catalog file is malformed."""


class UnknownModelError(KeyError):
    """The model id is not in the catalog."""

    def __str__(self) -> str:
        return str(self.args[0])


class ProviderNotConfiguredError(RuntimeError):
    """The provider's credential is missing from the environment (`variable` names it)."""

    def __init__(self, model_id: str, variable: str) -> None:
        super().__init__(
            f"model {model_id} needs the provider credential {variable}, which is not set: "
            f"set {variable} in the server's environment and restart it"
        )
        self.model_id = model_id
        self.variable = variable


class ProviderSpec(BaseModel):
    """How to reach one provider."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["openai", "anthropic", "demo"]
    base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    api_key_required: bool = True


class ModelSpec(BaseModel):
    """One catalog entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+/.+$")
    label: str = ""
    input_rupiah_per_million: Decimal = Field(ge=0)
    output_rupiah_per_million: Decimal = Field(ge=0)
    agents: bool = False
    created: int = Field(default=CATALOG_CREATED, ge=0)
    max_output_tokens: int = Field(default=DEFAULT_MAX_OUTPUT_TOKENS, gt=0)

    @property
    def provider(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def provider_model(self) -> str:
        """The model name the provider knows (everything after the first slash)."""
        return self.id.split("/", 1)[1]

    @property
    def is_paid(self) -> bool:
        return bool(self.input_rupiah_per_million or self.output_rupiah_per_million)

    def cost_rupiah(self, input_tokens: int, output_tokens: int) -> Decimal:
        """Exact price of one call's tokens."""
        return (
            self.input_rupiah_per_million * input_tokens
            + self.output_rupiah_per_million * output_tokens
        ) / TOKENS_PER_PRICE_UNIT


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    models: list[ModelSpec] = Field(default_factory=list)


def _read_catalog_file(path: Path) -> _CatalogFile:
    try:
        raw: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return _CatalogFile.model_validate(raw)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as error:
        raise CatalogError(f"model catalog {path}: {error}") from error


class ModelCatalog:
    """Providers and models, and the chat models built from them (cached per credential)."""

    def __init__(self, providers: Mapping[str, ProviderSpec], models: list[ModelSpec]) -> None:
        self.providers = dict(providers)
        self._models = {model.id: model for model in models}
        for model in models:
            if model.provider not in self.providers:
                raise CatalogError(f"model {model.id}: unknown provider {model.provider!r}")
        self._chat_models: dict[tuple[str, str | None, str | None], BaseChatModel] = {}
        self._openai_http: openai.DefaultAioHttpClient | None = None
        self._direct_posts = DirectPosts()

    def _openai_http_client(self) -> openai.DefaultAioHttpClient:
        # One connection pool for every OpenAI-compatible model of this catalog, closed by
        # `aclose`: the client library's process-wide default would outlive the event loop.
        # The SDK's aiohttp transport (its own alternative to httpx, with the SDK's limits,
        # timeouts, retries and error types): a model call costs about a third less CPU
        # (bench/RESULTS.md, seventh round).
        if self._openai_http is None:
            self._openai_http = openai.DefaultAioHttpClient()
        return self._openai_http

    async def aclose(self) -> None:
        """Close the HTTP connections the catalog's chat models opened."""
        self._chat_models.clear()
        await self._direct_posts.aclose()
        if self._openai_http is not None:
            await self._openai_http.aclose()
            self._openai_http = None

    @classmethod
    def load(cls, extra: Path | None = None) -> ModelCatalog:
        """The built-in catalog, with `extra` (if given) merged over it."""
        files = [_read_catalog_file(BUILTIN_CATALOG)]
        if extra is not None:
            files.append(_read_catalog_file(extra))
        providers: dict[str, ProviderSpec] = {}
        models: dict[str, ModelSpec] = {}
        for catalog_file in files:
            providers.update(catalog_file.providers)
            models.update({model.id: model for model in catalog_file.models})
        return cls(providers, list(models.values()))

    def models(self) -> list[ModelSpec]:
        return list(self._models.values())

    def get(self, model_id: str) -> ModelSpec:
        try:
            return self._models[model_id]
        except KeyError:
            raise UnknownModelError(f"model {model_id!r} is not in the catalog") from None

    def chat_model(self, model_id: str, env: Mapping[str, str]) -> BaseChatModel:
        """A LangChain chat model for `model_id`, with credentials read from `env`."""
        spec = self.get(model_id)
        provider = self.providers[spec.provider]
        api_key = env.get(provider.api_key_env) if provider.api_key_env else None
        if provider.kind != "demo" and provider.api_key_required and not api_key:
            raise ProviderNotConfiguredError(model_id, str(provider.api_key_env))
        base_url = env.get(provider.base_url_env or "") or provider.base_url
        key = (model_id, base_url, api_key)
        if key not in self._chat_models:
            self._chat_models[key] = self._build_chat_model(spec, provider, base_url, api_key)
        return self._chat_models[key]

    def _build_chat_model(
        self, spec: ModelSpec, provider: ProviderSpec, base_url: str | None, api_key: str | None
    ) -> BaseChatModel:
        if provider.kind == "demo":
            return DemoChatModel()
        if provider.kind == "anthropic":
            from langchain_anthropic import ChatAnthropic

            anthropic_options: dict[str, Any] = {"base_url": base_url} if base_url else {}
            return ChatAnthropic(
                model_name=spec.provider_model, api_key=api_key or "", **anthropic_options
            )
        from langchain_openai import ChatOpenAI

        return with_plain_bodies(
            ChatOpenAI(
                model=spec.provider_model,
                api_key=api_key or "not-needed",
                base_url=base_url,
                stream_usage=True,
                http_async_client=self._openai_http_client(),
                # Streamed calls are guarded by `streams.until_silent`, at less cost a chunk.
                stream_chunk_timeout=None,
            ),
            self._direct_posts,
        )
