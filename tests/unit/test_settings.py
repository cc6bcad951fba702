"""Tests for Settings: environment names, defaults, `.env` and nothing read at import."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import juru.app
import juru.settings
from juru.settings import DEFAULT_PLAYGROUND_ORIGINS, Settings, read_provider_env

SETTINGS_VARIABLES = (
    "JURU_DATABASE_URL",
    "JURU_DEFAULT_MODEL",
    "JURU_MODEL_CATALOG",
    "JURU_FEATURES",
    "JURU_HOST",
    "JURU_PORT",
    "JURU_PROVIDER_ENV",
    "PORT",
    "PLAYGROUND_ENABLED",
    "PLAYGROUND_ORIGINS",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Juru variable from the developer's shell, and a working directory without `.env`."""
    for name in SETTINGS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- defaults and environment names -----------------------------------------------------------


def test_defaults() -> None:
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite:///.juru/juru.db"
    assert settings.is_sqlite is True
    assert settings.default_model == "juru/demo"
    assert settings.playground_enabled is False
    assert settings.playground_origins == ["http://127.0.0.1:8001", "http://localhost:8001"]
    assert list(DEFAULT_PLAYGROUND_ORIGINS) == settings.playground_origins
    assert settings.features == []
    assert settings.model_catalog is None
    assert settings.port == 8000


def test_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_DATABASE_URL", "postgresql://juru@db.test/juru")
    settings = Settings(_env_file=None)
    assert settings.database_url == "postgresql://juru@db.test/juru"
    assert settings.is_sqlite is False


def test_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_DEFAULT_MODEL", "openai/gpt-4o-mini")
    assert Settings(_env_file=None).default_model == "openai/gpt-4o-mini"


def test_model_catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JURU_MODEL_CATALOG", str(tmp_path / "models.toml"))
    assert Settings(_env_file=None).model_catalog == tmp_path / "models.toml"


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("false", False)])
def test_playground_enabled(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("PLAYGROUND_ENABLED", value)
    assert Settings(_env_file=None).playground_enabled is expected


def test_playground_origins_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_ORIGINS", "https://a.test, https://b.test,,")
    assert Settings(_env_file=None).playground_origins == ["https://a.test", "https://b.test"]


def test_a_single_playground_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_ORIGINS", "https://only.test")
    assert Settings(_env_file=None).playground_origins == ["https://only.test"]


def test_features_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_FEATURES", "pkg.mod:ONE , other.mod:two")
    assert Settings(_env_file=None).features == ["pkg.mod:ONE", "other.mod:two"]


def test_empty_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_FEATURES", "")
    assert Settings(_env_file=None).features == []


def test_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "9123")
    assert Settings(_env_file=None).port == 9123


def test_juru_port_is_accepted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_PORT", "9124")
    assert Settings(_env_file=None).port == 9124


def test_invalid_port_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "not-a-port")
    with pytest.raises(ValidationError, match="port"):
        Settings(_env_file=None)


def test_keyword_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURU_DEFAULT_MODEL", "openai/gpt-4o")
    settings = Settings(_env_file=None, default_model="juru/demo", features=["a:b"])
    assert settings.default_model == "juru/demo"
    assert settings.features == ["a:b"]


def test_provider_env_holds_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-environment")
    assert Settings(_env_file=None).provider_env["OPENAI_API_KEY"] == "from-environment"


def test_explicit_provider_env_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-environment")
    settings = Settings(_env_file=None, provider_env={"OPENAI_API_KEY": "explicit"})
    assert settings.provider_env == {"OPENAI_API_KEY": "explicit"}


# --- .env -----------------------------------------------------------------------------------------


def write_dotenv(directory: Path) -> None:
    (directory / ".env").write_text(
        "\n".join(
            [
                "JURU_DATABASE_URL=sqlite:///from-dotenv.db",
                "JURU_DEFAULT_MODEL=openai/gpt-4o",
                "PLAYGROUND_ENABLED=true",
                "PLAYGROUND_ORIGINS=https://a.test,https://b.test",
                "JURU_FEATURES=pkg.mod:ONE,pkg.mod:TWO",
                "PORT=9001",
                "OPENAI_API_KEY=key-from-dotenv",
                "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
            ]
        )
        + "\n",
        encoding="utf-8",
    )


def test_dotenv_in_the_working_directory_is_read(tmp_path: Path) -> None:
    write_dotenv(tmp_path)
    settings = Settings()
    assert settings.database_url == "sqlite:///from-dotenv.db"
    assert settings.default_model == "openai/gpt-4o"
    assert settings.playground_enabled is True
    assert settings.playground_origins == ["https://a.test", "https://b.test"]
    assert settings.features == ["pkg.mod:ONE", "pkg.mod:TWO"]
    assert settings.port == 9001
    assert settings.provider_env["OPENAI_API_KEY"] == "key-from-dotenv"
    assert settings.provider_env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"


def test_the_environment_wins_over_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    write_dotenv(tmp_path)
    monkeypatch.setenv("JURU_DEFAULT_MODEL", "anthropic/claude-haiku-4-5")
    monkeypatch.setenv("PORT", "9002")
    monkeypatch.setenv("OPENAI_API_KEY", "key-from-environment")
    settings = Settings()
    assert settings.default_model == "anthropic/claude-haiku-4-5"
    assert settings.port == 9002
    assert settings.provider_env["OPENAI_API_KEY"] == "key-from-environment"
    # What the environment does not set still comes from `.env`.
    assert settings.provider_env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert settings.database_url == "sqlite:///from-dotenv.db"


def test_dotenv_is_read_from_the_working_directory_when_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with_dotenv = tmp_path / "with"
    with_dotenv.mkdir()
    write_dotenv(with_dotenv)
    without = tmp_path / "without"
    without.mkdir()
    monkeypatch.chdir(with_dotenv)
    assert Settings().default_model == "openai/gpt-4o"
    monkeypatch.chdir(without)
    assert Settings().default_model == "juru/demo"
    assert "OPENAI_API_KEY" not in Settings().provider_env


def test_read_provider_env_overlays_the_given_environment(tmp_path: Path) -> None:
    dotenv = tmp_path / "creds.env"
    dotenv.write_text("A=from-file\nB=from-file\n", encoding="utf-8")
    values = read_provider_env(dotenv, {"B": "from-environ", "C": "only-environ"})
    assert values == {"A": "from-file", "B": "from-environ", "C": "only-environ"}
    assert read_provider_env(tmp_path / "absent.env", {"X": "1"}) == {"X": "1"}


# --- nothing is read at import ---------------------------------------------------------------


def test_no_settings_instance_exists_at_module_level() -> None:
    assert inspect.isfunction(juru.app.create_app)
    for module in (juru.app, juru.settings):
        instances = [n for n, v in vars(module).items() if isinstance(v, Settings)]
        assert instances == [], module.__name__


def test_environment_set_after_import_takes_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    # juru.app and juru.settings are imported at the top of this file, before these are set.
    monkeypatch.setenv("JURU_DEFAULT_MODEL", "deepseek/deepseek-chat")
    monkeypatch.setenv("PLAYGROUND_ENABLED", "true")
    monkeypatch.setenv("OPENAI_API_KEY", "set-after-import")
    settings = Settings(_env_file=None)
    assert settings.default_model == "deepseek/deepseek-chat"
    assert settings.playground_enabled is True
    assert settings.provider_env["OPENAI_API_KEY"] == "set-after-import"


def test_importing_the_app_survives_invalid_settings(tmp_path: Path) -> None:
    """Were settings read at import, this invalid PORT and `.env` would make the import fail."""
    (tmp_path / ".env").write_text("JURU_PORT=also-not-a-port\n", encoding="utf-8")
    env = {**os.environ, "PORT": "not-a-port"}
    script = (
        "import juru.app, juru.settings\n"
        "try:\n"
        "    juru.settings.Settings()\n"
        "except Exception as error:\n"
        "    print('refused', type(error).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "refused ValidationError"
