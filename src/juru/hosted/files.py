"""Files of an account: metadata and content (made by built-in tools, such as speech)."""

from __future__ import annotations

from dataclasses import dataclass

from juru.core.errors import not_found
from juru.files.storage import FileStorage
from juru.store.database import Database
from juru.store.files import get_file, list_files
from juru.store.pages import Page, PageRequest
from juru.store.records import FileRecord


@dataclass
class FileService:
    engine: Database
    storage: FileStorage

    async def file(self, account_id: str, file_id: str) -> FileRecord:
        found = await get_file(self.engine, account_id, file_id)
        if found is None:
            raise not_found("file", file_id)
        return found

    async def files(self, account_id: str, page: PageRequest) -> Page[FileRecord]:
        return await list_files(self.engine, account_id, page)

    async def content(self, account_id: str, file_id: str) -> tuple[FileRecord, bytes]:
        """The file's row and its bytes (404 when either is missing)."""
        record = await self.file(account_id, file_id)
        try:
            data = await self.storage.read(record.storage_key)
        except FileNotFoundError:
            raise not_found("file content of", file_id) from None
        return record, data
