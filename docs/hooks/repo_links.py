"""MkDocs hook: links from a page to files of the repository outside ``docs/``.

On GitHub a page may link to ``../examples/weather_client.py`` or ``../README.md``: the link
opens the file. The site has no page for those files, so on the site such a link becomes its
text followed by the file's path in the repository as code (``examples/weather_client.py``),
and the Markdown stays as it is. A link out of ``docs/`` whose target does not exist is a
warning, so ``mkdocs build --strict`` still fails on it; links between pages are left to
MkDocs' own validation.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

log = logging.getLogger(f"mkdocs.hooks.{__name__}")

# [text](../path) or [text](../path#anchor), not an image; the text may span lines.
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>\.\./[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    docs_dir = Path(config.docs_dir).resolve()
    repo = docs_dir.parent
    source = page.file.abs_src_path
    if source is None:
        return markdown
    folder = Path(source).resolve().parent

    def rewrite(match: re.Match[str]) -> str:
        target = (folder / match["target"]).resolve()
        if target.is_relative_to(docs_dir):
            return match[0]
        if not target.is_relative_to(repo) or not target.exists():
            log.warning(
                "Doc file '%s' links to '%s', which is not a file of the repository.",
                page.file.src_uri,
                match["target"],
            )
            return match[0]
        path = target.relative_to(repo).as_posix()
        text = match["text"]
        return text if path in text else f"{text} (`{path}`)"

    # Fenced code is left alone: a `](../x)` there is an example, not a link.
    parts: list[str] = []
    last = 0
    for fence in FENCE.finditer(markdown):
        parts.append(LINK.sub(rewrite, markdown[last : fence.start()]))
        parts.append(fence[0])
        last = fence.end()
    parts.append(LINK.sub(rewrite, markdown[last:]))
    return "".join(parts)
