"""Tests for the model catalog: loading, merging, prices and building chat models."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

from juru.models.catalog import (
    BUILTIN_CATALOG,
    CatalogError,
    ModelCatalog,
    ModelSpec,
    ProviderNotConfiguredError,
    UnknownModelError,
)
from juru.models.demo import DemoChatModel

OPENAI_ENV = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


@pytest.fixture
def catalog() -> ModelCatalog:
    return ModelCatalog.load()


def write_catalog(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- the built-in catalog ---------------------------------------------------------------------


def test_builtin_catalog_loads_with_known_models(catalog: ModelCatalog) -> None:
    ids = {model.id for model in catalog.models()}
    assert BUILTIN_CATALOG.is_file()
    assert {"juru/demo", "openai/gpt-4o", "openai/gpt-5.6", "anthropic/claude-haiku-4-5"} <= ids
    assert {"juru", "openai", "anthropic", "deepseek", "ollama"} <= set(catalog.providers)


def test_every_builtin_model_has_a_known_provider(catalog: ModelCatalog) -> None:
    assert catalog.models()
    for model in catalog.models():
        assert model.provider in catalog.providers, model.id


def test_demo_model_is_free_and_agent_capable(catalog: ModelCatalog) -> None:
    demo = catalog.get("juru/demo")
    assert demo.agents is True
    assert demo.input_rupiah_per_million == 0
    assert demo.output_rupiah_per_million == 0
    assert demo.cost_rupiah(10_000, 10_000) == 0
    assert catalog.providers["juru"].kind == "demo"


def test_gpt_5_6_is_not_agent_capable(catalog: ModelCatalog) -> None:
    assert catalog.get("openai/gpt-5.6").agents is False


def test_provider_and_provider_model_split_on_the_first_slash(catalog: ModelCatalog) -> None:
    model = catalog.get("openrouter/openai/gpt-4o-mini")
    assert model.provider == "openrouter"
    assert model.provider_model == "openai/gpt-4o-mini"


def test_get_unknown_model_raises_naming_it(catalog: ModelCatalog) -> None:
    with pytest.raises(UnknownModelError, match="nobody/nothing-9") as error:
        catalog.get("nobody/nothing-9")
    assert isinstance(error.value, KeyError)
    assert "nobody/nothing-9" in str(error.value)


# --- prices -------------------------------------------------------------------------------------


def test_cost_rupiah_is_exact_for_gpt_4o(catalog: ModelCatalog) -> None:
    # 1,234 x 41,250 = 50,902,500 and 567 x 165,000 = 93,555,000; together 144,457,500
    # Rupiah per million tokens, so 144.4575 Rupiah.
    cost = catalog.get("openai/gpt-4o").cost_rupiah(1_234, 567)
    assert isinstance(cost, Decimal)
    assert cost == Decimal("144.4575")


def test_cost_rupiah_keeps_every_digit() -> None:
    # 1,000,001 x 2,475 = 2,475,002,475 and 3 x 9,900 = 29,700: 2,475,032,175 per million.
    model = ModelSpec(id="x/mini", input_rupiah_per_million=2475, output_rupiah_per_million=9900)
    assert model.cost_rupiah(1_000_001, 3) == Decimal("2475.032175")


def test_cost_rupiah_has_no_float_rounding() -> None:
    # In binary floating point 0.1 + 0.2 is not 0.3; one token of each costs 0.3 millionths.
    model = ModelSpec(id="x/tiny", input_rupiah_per_million="0.1", output_rupiah_per_million="0.2")
    assert model.cost_rupiah(1, 1) == Decimal("0.0000003")
    assert model.cost_rupiah(0, 0) == 0


# --- an extra catalog file ------------------------------------------------------------------------


def test_extra_catalog_adds_a_provider_and_model_and_overrides_a_price(tmp_path: Path) -> None:
    extra = write_catalog(
        tmp_path,
        """
[providers.acme]
kind = "openai"
base_url = "http://acme.test/v1"
api_key_env = "ACME_API_KEY"

[[models]]
id = "acme/rocket-1"
label = "Rocket"
input_rupiah_per_million = "0.5"
output_rupiah_per_million = 2
agents = true

[[models]]
id = "openai/gpt-4o"
label = "GPT-4o (negotiated)"
input_rupiah_per_million = 30000
output_rupiah_per_million = 120000
agents = true
""",
    )
    builtin = ModelCatalog.load()
    catalog = ModelCatalog.load(extra)

    assert catalog.providers["acme"].base_url == "http://acme.test/v1"
    assert catalog.providers["acme"].api_key_env == "ACME_API_KEY"
    rocket = catalog.get("acme/rocket-1")
    assert rocket.label == "Rocket"
    assert rocket.input_rupiah_per_million == Decimal("0.5")
    assert rocket.agents is True

    gpt_4o = catalog.get("openai/gpt-4o")
    assert gpt_4o.label == "GPT-4o (negotiated)"
    assert gpt_4o.input_rupiah_per_million == 30000
    assert gpt_4o.output_rupiah_per_million == 120000
    assert builtin.get("openai/gpt-4o").input_rupiah_per_million == 41250

    # Everything else of the built-in catalog is still there.
    assert {m.id for m in builtin.models()} | {"acme/rocket-1"} == {m.id for m in catalog.models()}
    assert catalog.providers["openai"] == builtin.providers["openai"]
    chat = catalog.chat_model("acme/rocket-1", {"ACME_API_KEY": "a"})
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "http://acme.test/v1"
    assert chat.model_name == "rocket-1"


def test_extra_catalog_may_replace_a_provider(tmp_path: Path) -> None:
    extra = write_catalog(
        tmp_path,
        """
[providers.deepseek]
kind = "openai"
base_url = "http://mirror.test/v1"
api_key_env = "MIRROR_KEY"
""",
    )
    catalog = ModelCatalog.load(extra)
    chat = catalog.chat_model("deepseek/deepseek-chat", {"MIRROR_KEY": "m"})
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "http://mirror.test/v1"
    with pytest.raises(ProviderNotConfiguredError, match="MIRROR_KEY"):
        catalog.chat_model("deepseek/deepseek-chat", {"DEEPSEEK_API_KEY": "d"})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("[providers.acme\nkind = 'openai'\n", "", id="bad-toml"),
        pytest.param(
            "[[models]]\nid = 'openai/x'\ninput_rupiah_per_million = 1\n"
            "output_rupiah_per_million = 1\npirce = 3\n",
            "pirce",
            id="unknown-model-key",
        ),
        pytest.param("[extras]\nfoo = 1\n", "extras", id="unknown-top-level-key"),
        pytest.param(
            "[providers.acme]\nkind = 'openai'\ncolour = 'red'\n",
            "colour",
            id="unknown-provider-key",
        ),
        pytest.param("[providers.acme]\nkind = 'grpc'\n", "kind", id="unknown-provider-kind"),
        pytest.param(
            "[[models]]\nid = 'openai/x'\ninput_rupiah_per_million = -1\n"
            "output_rupiah_per_million = 1\n",
            "input_rupiah_per_million",
            id="negative-price",
        ),
        pytest.param(
            "[[models]]\nid = 'noslash'\ninput_rupiah_per_million = 1\n"
            "output_rupiah_per_million = 1\n",
            "id",
            id="id-without-slash",
        ),
    ],
)
def test_malformed_extra_catalog_raises_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    extra = write_catalog(tmp_path, text)
    with pytest.raises(CatalogError) as error:
        ModelCatalog.load(extra)
    message = str(error.value)
    assert str(extra) in message
    assert problem in message


def test_model_of_an_unknown_provider_raises_naming_it(tmp_path: Path) -> None:
    extra = write_catalog(
        tmp_path,
        "[[models]]\nid = 'nowhere/model-1'\ninput_rupiah_per_million = 1\n"
        "output_rupiah_per_million = 1\n",
    )
    with pytest.raises(CatalogError, match=r"nowhere/model-1.*unknown provider 'nowhere'"):
        ModelCatalog.load(extra)


def test_missing_extra_catalog_raises_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(CatalogError, match=r"absent\.toml"):
        ModelCatalog.load(missing)


# --- chat models ----------------------------------------------------------------------------------


@pytest.mark.parametrize("env", [{}, {"OPENAI_API_KEY": ""}, {"ANTHROPIC_API_KEY": "a"}])
def test_chat_model_without_the_key_raises_naming_the_variable(
    catalog: ModelCatalog, env: dict[str, str]
) -> None:
    with pytest.raises(ProviderNotConfiguredError, match="OPENAI_API_KEY") as error:
        catalog.chat_model("openai/gpt-4o-mini", env)
    assert "openai/gpt-4o-mini" in str(error.value)


def test_chat_model_for_unknown_model_raises(catalog: ModelCatalog) -> None:
    with pytest.raises(UnknownModelError, match="openai/nope"):
        catalog.chat_model("openai/nope", OPENAI_ENV)


def test_openai_chat_model_uses_the_key_and_base_url_from_env(catalog: ModelCatalog) -> None:
    chat = catalog.chat_model("openai/gpt-4o-mini", OPENAI_ENV)
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "http://127.0.0.1:9/v1"
    assert chat.model_name == "gpt-4o-mini"
    assert chat.openai_api_key is not None
    assert chat.openai_api_key.get_secret_value() == "k"
    # Streamed calls are guarded by `juru.models.streams`, not by a task per chunk.
    assert chat.stream_chunk_timeout is None


def test_deepseek_uses_its_default_base_url_and_its_own_key(catalog: ModelCatalog) -> None:
    with pytest.raises(ProviderNotConfiguredError, match="DEEPSEEK_API_KEY"):
        catalog.chat_model("deepseek/deepseek-chat", OPENAI_ENV)
    chat = catalog.chat_model("deepseek/deepseek-chat", {**OPENAI_ENV, "DEEPSEEK_API_KEY": "d"})
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "https://api.deepseek.com/v1"
    assert chat.model_name == "deepseek-chat"
    assert chat.openai_api_key is not None
    assert chat.openai_api_key.get_secret_value() == "d"


def test_deepseek_base_url_can_be_overridden_by_its_variable(catalog: ModelCatalog) -> None:
    env = {"DEEPSEEK_API_KEY": "d", "DEEPSEEK_BASE_URL": "http://127.0.0.1:7/v1"}
    chat = catalog.chat_model("deepseek/deepseek-chat", env)
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "http://127.0.0.1:7/v1"


def test_ollama_needs_no_key(catalog: ModelCatalog) -> None:
    chat = catalog.chat_model("ollama/llama3.1", {})
    assert isinstance(chat, ChatOpenAI)
    assert chat.openai_api_base == "http://127.0.0.1:11434/v1"
    assert chat.model_name == "llama3.1"


def test_anthropic_returns_chat_anthropic(catalog: ModelCatalog) -> None:
    chat = catalog.chat_model("anthropic/claude-haiku-4-5", {"ANTHROPIC_API_KEY": "a"})
    assert isinstance(chat, ChatAnthropic)
    assert chat.model == "claude-haiku-4-5"
    assert chat.anthropic_api_key.get_secret_value() == "a"
    with pytest.raises(ProviderNotConfiguredError, match="ANTHROPIC_API_KEY"):
        catalog.chat_model("anthropic/claude-haiku-4-5", OPENAI_ENV)


def test_same_model_and_credentials_return_the_cached_model(catalog: ModelCatalog) -> None:
    first = catalog.chat_model("openai/gpt-4o-mini", OPENAI_ENV)
    assert catalog.chat_model("openai/gpt-4o-mini", dict(OPENAI_ENV)) is first
    other_key = catalog.chat_model("openai/gpt-4o-mini", {**OPENAI_ENV, "OPENAI_API_KEY": "k2"})
    other_url = catalog.chat_model(
        "openai/gpt-4o-mini", {**OPENAI_ENV, "OPENAI_BASE_URL": "http://127.0.0.1:10/v1"}
    )
    other_model = catalog.chat_model("openai/gpt-4o", OPENAI_ENV)
    assert len({id(first), id(other_key), id(other_url), id(other_model)}) == 4
    assert isinstance(other_key, ChatOpenAI)
    assert other_key.openai_api_key is not None
    assert other_key.openai_api_key.get_secret_value() == "k2"


def test_demo_model_needs_no_env(catalog: ModelCatalog) -> None:
    assert isinstance(catalog.chat_model("juru/demo", {}), DemoChatModel)
