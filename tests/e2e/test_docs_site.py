"""The documentation site: `mkdocs build --strict` of mkdocs.yml, in English and Indonesian, with
the playground panel's files from the package (docs/hooks/juru_panel.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin

import pytest

from tests.support.server import REPO

pytestmark = pytest.mark.e2e
STATIC = REPO / "src" / "juru" / "console" / "static"
SITE_ROOT = "http://127.0.0.1:8001/"


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def text_of(html_file: Path) -> str:
    """The page's words, tags dropped and white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html_file.read_text()).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("docs") / "site"
    built = mkdocs_build(REPO / "mkdocs.yml", site)
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return site


def test_the_site_has_an_english_and_an_indonesian_home(site: Path) -> None:
    english, indonesian = site / "index.html", site / "id" / "index.html"
    assert '<html lang="en"' in english.read_text()
    assert '<html lang="id"' in indonesian.read_text()
    assert "Juru is an agent server you run yourself" in text_of(english)
    assert "Juru adalah server agent yang Anda jalankan sendiri" in text_of(indonesian)
    assert "Juru adalah server agent" not in text_of(english)
    assert "Juru is an agent server" not in text_of(indonesian)
    # A page without an Indonesian version falls back to the English one under /id/.
    assert "Where the specification" in text_of(site / "id" / "decisions" / "index.html")


def test_the_panel_files_come_from_the_package(site: Path) -> None:
    sources = sorted(path.relative_to(STATIC) for path in STATIC.rglob("*") if path.is_file())
    assert Path("playground-panel.js") in sources
    for relative in sources:
        copied = site / "assets" / "juru" / relative
        assert copied.read_bytes() == (STATIC / relative).read_bytes(), relative


@pytest.mark.parametrize("page", ["playground-panel/", "id/playground-panel/"])
def test_the_playground_page_imports_the_panel(site: Path, page: str) -> None:
    html = (site / page / "index.html").read_text()
    assert 'id="juru-playground" data-base-url="http://127.0.0.1:8000"' in html
    assert 'new URLSearchParams(location.search).get("server")' in html
    module = re.search(r'await import\("([^"]+)"\)', html)
    stylesheet = re.search(r'<link rel="stylesheet" href="([^"]*console\.css)"', html)
    assert module and stylesheet, html
    # Resolved from the page's address, both reach the files the hook added.
    page_url = urljoin(SITE_ROOT, page)
    assert urljoin(page_url, module[1]) == urljoin(SITE_ROOT, "assets/juru/playground-panel.js")
    assert urljoin(page_url, stylesheet[1]) == urljoin(SITE_ROOT, "assets/juru/console.css")


def test_links_out_of_docs_show_the_repository_path(site: Path) -> None:
    html = (site / "hosted-agents" / "index.html").read_text()
    assert "<code>examples/weather_client.py</code>" in html
    assert "examples/weather_client.py</a>" not in html


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """A copy of the site's sources without examples/, and with a link to a page that does
    not exist: strict mode refuses both."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "mkdocs.yml", repo / "mkdocs.yml")
    shutil.copytree(REPO / "docs", repo / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(STATIC, repo / "src" / "juru" / "console" / "static")
    models = repo / "docs" / "models.md"
    models.write_text(models.read_text() + "\nSee [the pricing page](pricing.md).\n")

    built = mkdocs_build(repo / "mkdocs.yml", tmp_path / "site")

    assert built.returncode != 0
    assert "'models.md' contains a link 'pricing.md'" in built.stderr, built.stderr
    assert "links to '../examples/weather_client.py'" in built.stderr, built.stderr
