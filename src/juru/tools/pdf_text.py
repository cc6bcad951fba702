"""The text of a PDF, with pypdf (pure Python)."""

from __future__ import annotations

import io

from pypdf import PdfReader


class PdfTextError(ValueError):
    """The bytes are not a PDF whose text can be read."""


def pdf_text(data: bytes) -> str:
    """The text of every page, pages separated by a blank line."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PdfTextError("the PDF is encrypted")
        pages = [page.extract_text() or "" for page in reader.pages]
    except PdfTextError:
        raise
    except Exception as error:
        # Uploaded bytes are untrusted: pypdf fails on broken files in many ways, all a 400.
        raise PdfTextError(f"the PDF cannot be read: {type(error).__name__}: {error}") from None
    return "\n\n".join(page.strip() for page in pages if page.strip())
