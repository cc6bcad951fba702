"""Text that may enter Juru, and text that may leave it in an error message.

Every string stored must be encodable as UTF-8 and free of NUL: PostgreSQL refuses NUL in text,
and a lone surrogate (valid JSON, `"\\ud800"`) cannot be encoded at all.
"""

from __future__ import annotations

import re

_INVALID_TEXT_RE = re.compile("[\x00\ud800-\udfff]")
# A library's own advice (LangChain's "For troubleshooting, visit: ...") and any link.
_TROUBLESHOOTING_RE = re.compile(r"\s*For troubleshooting, visit:\s*\S+", re.IGNORECASE)
_URL_RE = re.compile(r"https?://\S+")
MAX_MESSAGE_CHARACTERS = 1_000


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored (a NUL character, a lone surrogate), or None."""
    found = _INVALID_TEXT_RE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return f"contains a NUL character (U+0000) at position {found.start()}"
    return (
        f"contains a lone surrogate (U+{ord(found.group()):04X}) at position {found.start()}, "
        "which is not valid Unicode text"
    )


def public_message(text: str) -> str:
    """`text` without links and library advice, on one line and of bounded length."""
    cleaned = _URL_RE.sub("", _TROUBLESHOOTING_RE.sub("", text))
    cleaned = " ".join(cleaned.split())
    if len(cleaned) > MAX_MESSAGE_CHARACTERS:
        cleaned = cleaned[: MAX_MESSAGE_CHARACTERS - 1] + "…"
    return cleaned
