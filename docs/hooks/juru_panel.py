"""MkDocs hook: serve the playground panel's files in the documentation site.

Every file of ``src/juru/console/static/`` (the panel's ES module, the modules it imports and
``console.css``) is added to the site at ``assets/juru/<name>``, read from the package each
build, so the Playground page (``docs/playground-panel.md``) always runs the panel the server
ships and nothing is copied into ``docs/``. ``mkdocs serve`` watches the folder too.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.livereload import LiveReloadServer
from mkdocs.structure.files import File, Files

STATIC = Path(__file__).resolve().parents[2] / "src" / "juru" / "console" / "static"
SITE_FOLDER = "assets/juru"


def panel_files() -> list[Path]:
    """The panel's files, sub-folders included (skipping caches and hidden files)."""
    return sorted(
        path
        for path in STATIC.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in path.parts)
    )


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path in panel_files():
        uri = f"{SITE_FOLDER}/{path.relative_to(STATIC).as_posix()}"
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_serve(server: LiveReloadServer, config: MkDocsConfig, builder: object) -> None:
    server.watch(str(STATIC))
