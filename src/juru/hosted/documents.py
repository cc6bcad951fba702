"""Documents of an account for `rag_search`: upload checks, text extraction and chunking."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import PurePath

from juru.core.clock import Clock
from juru.core.errors import TooLargeError, UnsupportedMediaError, invalid, not_found
from juru.core.ids import new_id
from juru.core.text import text_problem
from juru.store import documents as store
from juru.store.database import Database
from juru.store.pages import Page, PageRequest
from juru.store.records import DocumentRecord
from juru.tools.chunking import chunk_text
from juru.tools.pdf_text import PdfTextError, pdf_text

PLAIN, MARKDOWN, PDF = "text/plain", "text/markdown", "application/pdf"
TYPE_BY_SUFFIX = {
    ".txt": PLAIN,
    ".text": PLAIN,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".pdf": PDF,
}
TYPE_BY_MEDIA = {PLAIN: PLAIN, MARKDOWN: MARKDOWN, "text/x-markdown": MARKDOWN, PDF: PDF}
MAX_TITLE = 500
_INVALID_TEXT_RE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Upload:
    """A document as it arrived: its bytes, and what the client said it is."""

    data: bytes
    filename: str | None
    media_type: str | None
    title: str | None


def document_type(upload: Upload) -> str:
    """Plain text, Markdown or PDF, from the file name's suffix, else the declared type."""
    suffix = PurePath(upload.filename or "").suffix.lower()
    media = (upload.media_type or "").split(";")[0].strip().lower()
    found = TYPE_BY_SUFFIX.get(suffix) or TYPE_BY_MEDIA.get(media)
    if found is None:
        raise UnsupportedMediaError(
            f"documents must be plain text (.txt), Markdown (.md) or PDF (.pdf); got "
            f"{upload.filename or 'a file'!r} of type {media or 'unknown'!r}",
            "unsupported_document_type",
        )
    return found


def document_text(kind: str, data: bytes) -> str:
    if kind == PDF:
        if not data.startswith(b"%PDF-"):
            raise invalid(
                "the file is not a PDF (it does not start with %PDF-)", "invalid_document"
            )
        try:
            return pdf_text(data)
        except PdfTextError as error:
            raise invalid(str(error), "invalid_document") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise invalid("text documents must be UTF-8", "invalid_document") from None


def document_title(upload: Upload) -> str:
    title = (upload.title or "").strip() or PurePath(upload.filename or "").stem or "Untitled"
    if len(title) > MAX_TITLE:
        raise invalid(f"title: at most {MAX_TITLE} characters")
    return title


def check_upload_text(upload: Upload) -> None:
    """The form's strings are stored: NUL characters and lone surrogates are refused."""
    for field, value in (("title", upload.title), ("file.filename", upload.filename)):
        problem = None if value is None else text_problem(value)
        if problem is not None:
            raise invalid(f"{field}: {problem}")


def extract_chunks(kind: str, data: bytes) -> list[str]:
    """The document's text in chunks (CPU-bound: run it off the event loop)."""
    text = document_text(kind, data)
    if kind == PDF:
        # Extraction may produce characters no database stores; they carry no words.
        text = _INVALID_TEXT_RE.sub("", text)
    else:
        problem = text_problem(text)
        if problem is not None:
            raise invalid(f"file: the text {problem}", "invalid_document")
    return chunk_text(text)


@dataclass
class DocumentLibrary:
    engine: Database
    clock: Clock
    max_bytes: int
    processing_seconds: float = 30.0

    async def add(self, account_id: str, upload: Upload) -> DocumentRecord:
        if len(upload.data) > self.max_bytes:
            raise TooLargeError(
                f"documents may be at most {self.max_bytes} bytes", "document_too_large"
            )
        kind = document_type(upload)
        check_upload_text(upload)
        title = document_title(upload)
        chunks = await self._chunks(kind, upload.data)
        if not chunks:
            raise invalid(
                "the document has no text (a scanned PDF needs OCR first)", "empty_document"
            )
        values = {
            "id": new_id("doc"),
            "account_id": account_id,
            "title": title,
            "filename": upload.filename,
            "content_type": kind,
            "size_bytes": len(upload.data),
            "characters": sum(len(chunk) for chunk in chunks),
            "chunk_count": len(chunks),
            "created_at": self.clock.now(),
        }
        return await store.insert_document(self.engine, values, chunks)

    async def _chunks(self, kind: str, data: bytes) -> list[str]:
        """Extraction and chunking in a worker thread, so the event loop keeps serving; a
        document that takes longer than `processing_seconds` is refused (the thread finishes
        on its own: a thread cannot be stopped, but its result is dropped)."""
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(extract_chunks, kind, data), self.processing_seconds
            )
        except TimeoutError:
            raise TooLargeError(
                f"the document took longer than {self.processing_seconds:g} s to read",
                "document_too_complex",
            ) from None

    async def documents(self, account_id: str, page: PageRequest) -> Page[DocumentRecord]:
        return await store.list_documents(self.engine, account_id, page)

    async def document(self, account_id: str, document_id: str) -> DocumentRecord:
        found = await store.get_document(self.engine, account_id, document_id)
        if found is None:
            raise not_found("document", document_id)
        return found

    async def delete(self, account_id: str, document_id: str) -> None:
        if not await store.delete_document(self.engine, account_id, document_id):
            raise not_found("document", document_id)
