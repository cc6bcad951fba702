"""The `text_to_speech` built-in tool: eSpeak NG speech stored as a WAV file of the account."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from juru.core.ids import new_id
from juru.files.storage import FileStorage
from juru.store.database import Database
from juru.store.files import insert_file
from juru.tools.errors import BuiltinToolError
from juru.tools.speech import EspeakSynthesizer, SpeechError

NAME = "text_to_speech"
DEFAULT_LANGUAGE = "en"
SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Turn text into spoken audio (speech synthesis) and save it as a WAV "
        "file; returns the file id, its URL, the format and the duration in seconds.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to say."},
                "language": {
                    "type": "string",
                    "description": "Language code: 'en' (English, the default), 'id' "
                    "(Indonesian), or another eSpeak NG language such as 'ms' or 'fr'.",
                },
                "voice": {
                    "type": "string",
                    "description": "Optional voice variant: 'f1'..'f5' (female), 'm1'..'m7' "
                    "(male), and other eSpeak NG variants.",
                },
            },
            "required": ["text"],
        },
    },
}


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    language: str
    voice: str | None


def _optional_string(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BuiltinToolError(f"{name} must be a string")
    return value.strip()


def parse_request(args: dict[str, Any], max_characters: int) -> SpeechRequest:
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        raise BuiltinToolError("text must be a non-empty string")
    if len(text) > max_characters:
        raise BuiltinToolError(
            f"text has {len(text)} characters; at most {max_characters} can be spoken at once"
        )
    language = (_optional_string(args, "language") or DEFAULT_LANGUAGE).lower()
    return SpeechRequest(text, language, _optional_string(args, "voice"))


def list_price(request: SpeechRequest, rupiah_per_1k_characters: Decimal) -> Decimal:
    return Decimal(len(request.text)) * rupiah_per_1k_characters / 1000


@dataclass(frozen=True)
class SpeechTarget:
    """Where the audio goes: whose file it is, the run that made it, and when."""

    engine: Database
    storage: FileStorage
    account_id: str
    run_id: str | None
    now: datetime


async def speak(
    request: SpeechRequest, synthesizer: EspeakSynthesizer, target: SpeechTarget
) -> dict[str, Any]:
    """Synthesize, store the WAV as the account's file, and describe it for the model."""
    try:
        # eSpeak blocks for about a tenth of the audio's length: keep it off the event loop.
        speech = await asyncio.to_thread(
            synthesizer.synthesize, request.text, request.language, request.voice
        )
    except SpeechError as error:
        raise BuiltinToolError(str(error)) from None
    file_id = new_id("file")
    key = f"{target.account_id}/{file_id}.wav"
    await target.storage.save(key, speech.wav)
    record = await insert_file(
        target.engine,
        {
            "id": file_id,
            "account_id": target.account_id,
            "run_id": target.run_id,
            "purpose": NAME,
            "filename": "speech.wav",
            "content_type": "audio/wav",
            "size_bytes": len(speech.wav),
            "duration_seconds": round(speech.duration_seconds, 3),
            "storage_key": key,
            "created_at": target.now,
        },
    )
    return {
        "file_id": record.id,
        "url": f"/v1/files/{record.id}/content",
        "format": "wav",
        "content_type": record.content_type,
        "duration_seconds": record.duration_seconds,
        "language": request.language,
        "voice": request.voice,
        "characters": len(request.text),
    }
