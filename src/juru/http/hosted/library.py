"""Routes of `/v1/files` and `/v1/documents`: each validates its input and makes one call."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import Response

from juru.hosted.documents import Upload
from juru.http.deps import Account, Documents, Files, current_account
from juru.http.hosted.schemas import DeletedOut, DocumentList, DocumentOut, FileList, FileOut
from juru.http.openapi import ADMISSION_ERRORS, errors
from juru.store.pages import PageRequest

router = APIRouter(
    prefix="/v1",
    tags=["files and documents"],
    dependencies=[Depends(current_account)],
    responses=ADMISSION_ERRORS,
)
Limit = Annotated[int, Query(ge=1, le=100, description="Items per page.")]
After = Annotated[str | None, Query(description="Cursor: the id after which the page starts.")]


@router.get("/files", responses=errors(400))
async def list_files(
    account: Account, files: Files, limit: Limit = 20, after: After = None
) -> FileList:
    """The account's files (audio made by `text_to_speech`), newest first."""
    found = await files.files(account, PageRequest(limit=limit, after=after))
    return FileList.of(found, [FileOut.of(f) for f in found.items], lambda f: f.id)


@router.get("/files/{file_id}", responses=errors(404))
async def get_file(file_id: str, account: Account, files: Files) -> FileOut:
    """A file's metadata (audio made by `text_to_speech`), with the URL of its content."""
    return FileOut.of(await files.file(account, file_id))


@router.get(
    "/files/{file_id}/content",
    response_class=Response,
    responses={
        200: {"description": "The bytes (`audio/wav` for speech).", "content": {"*/*": {}}},
        **errors(404),
    },
)
async def get_file_content(file_id: str, account: Account, files: Files) -> Response:
    """The file's bytes, with its content type."""
    record, data = await files.content(account, file_id)
    disposition = f'inline; filename="{record.filename}"'
    return Response(
        data, media_type=record.content_type, headers={"Content-Disposition": disposition}
    )


@router.post("/documents", status_code=201, responses=errors(400, 413, 415))
async def upload_document(
    account: Account,
    documents: Documents,
    file: Annotated[UploadFile, File(description="A .txt, .md or .pdf file.")],
    title: Annotated[str | None, Form(description="Defaults to the file name.")] = None,
) -> DocumentOut:
    """Add a document (plain text, Markdown or PDF) to the account's `rag_search` corpus."""
    # One byte past the limit is enough to know the upload is too large.
    data = await file.read(documents.max_bytes + 1)
    upload = Upload(data, file.filename, file.content_type, title)
    return DocumentOut.of(await documents.add(account, upload))


@router.get("/documents", responses=errors(400))
async def list_documents(
    account: Account, documents: Documents, limit: Limit = 20, after: After = None
) -> DocumentList:
    found = await documents.documents(account, PageRequest(limit=limit, after=after))
    return DocumentList.of(found, [DocumentOut.of(d) for d in found.items], lambda d: d.id)


@router.get("/documents/{document_id}", responses=errors(404))
async def get_document(document_id: str, account: Account, documents: Documents) -> DocumentOut:
    return DocumentOut.of(await documents.document(account, document_id))


@router.delete("/documents/{document_id}", responses=errors(404))
async def delete_document(document_id: str, account: Account, documents: Documents) -> DeletedOut:
    """Delete the document and its chunks; `rag_search` stops finding it at once."""
    await documents.delete(account, document_id)
    return DeletedOut(id=document_id)
