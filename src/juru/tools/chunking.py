"""Splitting a document's text into chunks that a search can return on their own."""

from __future__ import annotations

import re

MAX_CHUNK_CHARACTERS = 800
_BLANK_LINES_RE = re.compile(r"\n\s*\n")
_HEADING_RE = re.compile(r"^#{1,6}\s")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")


def _pieces(block: str, limit: int) -> list[str]:
    """A block longer than `limit` cut at sentence ends, and at spaces when a sentence is too
    long; never inside a word unless a single word is."""
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END_RE.split(block):
        words = sentence.split(" ")
        for whole in words:
            word = whole
            if len(whole) > limit:
                # Cut by offsets: slicing the rest off again and again is quadratic.
                if current:
                    pieces.append(current)
                    current = ""
                cut = (len(whole) - 1) // limit * limit
                pieces.extend(whole[start : start + limit] for start in range(0, cut, limit))
                word = whole[cut:]
            candidate = f"{current} {word}" if current else word
            if len(candidate) > limit:
                pieces.append(current)
                current = word
            else:
                current = candidate
    if current:
        pieces.append(current)
    return [piece.strip() for piece in pieces if piece.strip()]


def chunk_text(text: str, limit: int = MAX_CHUNK_CHARACTERS) -> list[str]:
    """Paragraphs packed into chunks of at most `limit` characters; a Markdown heading starts a
    new chunk, so a section's text stays with its heading."""
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    chunks: list[str] = []
    current = ""
    for raw in _BLANK_LINES_RE.split(normalised):
        block = raw.strip()
        if not block:
            continue
        if _HEADING_RE.match(block) and current:
            chunks.append(current)
            current = ""
        for piece in _pieces(block, limit) if len(block) > limit else [block]:
            candidate = f"{current}\n\n{piece}" if current else piece
            if len(candidate) > limit:
                chunks.append(current)
                current = piece
            else:
                current = candidate
    if current:
        chunks.append(current)
    return chunks
