"""Offline speech synthesis with eSpeak NG, called through ctypes.

The library and its voice data come from the `espeakng-loader` wheel, so no system package is
needed; `JURU_TTS_LIBRARY` points at another build. eSpeak keeps process-wide state, so each
library is loaded once per process and synthesis is serialised by a lock.
"""

from __future__ import annotations

import ctypes
import io
import re
import shutil
import tempfile
import threading
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AUDIO_OUTPUT_SYNCHRONOUS = 2
POS_CHARACTER = 1
ESPEAK_CHARS_UTF8 = 1
# Without it eSpeak calls exit() when it cannot initialise, taking the server with it.
INITIALIZE_DONT_EXIT = 0x8000
# eSpeak copies the data path into a fixed buffer of 160 bytes.
MAX_DATA_PATH = 150
_LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]{2,8})*$")
_VARIANT_RE = re.compile(r"^[A-Za-z0-9_]{1,32}$")
_SYNTH_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class SpeechError(RuntimeError):
    """Speech could not be made (engine missing, unknown language or voice, engine failure)."""


@dataclass(frozen=True)
class Speech:
    """16-bit mono PCM audio as a WAV file."""

    wav: bytes
    sample_rate: int
    samples: int

    @property
    def duration_seconds(self) -> float:
        return self.samples / self.sample_rate


def wav_bytes(pcm: bytes, sample_rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(sample_rate)
        writer.writeframes(pcm)
    return out.getvalue()


def _wheel_paths() -> tuple[Path, Path]:
    try:
        import espeakng_loader
    except ImportError as error:
        raise SpeechError(f"the espeakng-loader package is not installed: {error}") from None
    return Path(espeakng_loader.get_library_path()), Path(espeakng_loader.get_data_path())


def _short_data_path(data: Path) -> Path:
    """The voice data at a path short enough for eSpeak (a copy in the temp dir if needed)."""
    if len(str(data)) < MAX_DATA_PATH:
        return data
    copy = Path(tempfile.gettempdir()) / "juru-espeak-ng-data"
    if not (copy / "phontab").exists():
        shutil.copytree(data, copy, dirs_exist_ok=True)
    return copy


class _Espeak:
    """One loaded and initialised eSpeak NG library."""

    def __init__(self, library: Path, data: Path) -> None:
        try:
            self.lib = ctypes.CDLL(str(library))
        except OSError as error:
            raise SpeechError(f"the speech engine cannot be loaded: {error}") from None
        self.lib.espeak_Initialize.restype = ctypes.c_int
        self.lib.espeak_Initialize.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        data = _short_data_path(data)
        rate = self.lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data).encode(), INITIALIZE_DONT_EXIT
        )
        if rate <= 0:
            raise SpeechError(f"the speech engine did not start (code {rate})")
        self.sample_rate = rate
        self.variants = {path.name for path in (data / "voices" / "!v").iterdir()}
        self._pcm: list[bytes] = []
        # Kept on the object: ctypes must not free the callback while eSpeak holds it.
        self._callback = _SYNTH_CALLBACK(self._collect)
        self.lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, samples: Any, count: int, _events: Any) -> int:
        if count > 0:
            self._pcm.append(ctypes.string_at(samples, count * 2))
        return 0

    def synthesize(self, text: str, language: str, variant: str | None) -> Speech:
        if not _LANGUAGE_RE.match(language):
            raise SpeechError(f"unknown language {language!r}")
        if variant is not None and (not _VARIANT_RE.match(variant) or variant not in self.variants):
            raise SpeechError(f"unknown voice {variant!r}")
        name = language if variant is None else f"{language}+{variant}"
        if self.lib.espeak_SetVoiceByName(name.encode()) != 0:
            raise SpeechError(f"unknown language {language!r}")
        self._pcm = []
        encoded = text.encode()
        status = self.lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None
        )
        if status != 0:
            raise SpeechError(f"the speech engine failed (code {status})")
        pcm = b"".join(self._pcm)
        self._pcm = []
        return Speech(wav_bytes(pcm, self.sample_rate), self.sample_rate, len(pcm) // 2)


_loaded: dict[Path, _Espeak] = {}
_lock = threading.Lock()


class EspeakSynthesizer:
    """Speech from eSpeak NG; the library loads on first use (its failure is a `SpeechError`)."""

    def __init__(self, library: Path | None = None) -> None:
        self.library = library

    def _engine(self) -> _Espeak:
        wheel_library, data = _wheel_paths()
        library = self.library or wheel_library
        if library not in _loaded:
            if not library.exists():
                raise SpeechError(f"the speech engine cannot be loaded: no file {library}")
            _loaded[library] = _Espeak(library, data)
        return _loaded[library]

    def synthesize(self, text: str, language: str = "en", voice: str | None = None) -> Speech:
        """WAV audio of `text` (blocking: call it in a thread)."""
        with _lock:
            return self._engine().synthesize(text, language, voice)
