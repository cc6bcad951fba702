"""Pure helpers of the built-in tools: chunking, search terms, WAV encoding, speech."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest

from juru.tools.chunking import chunk_text
from juru.tools.search_terms import search_terms
from juru.tools.speech import EspeakSynthesizer, SpeechError, wav_bytes


def test_chunks_keep_headings_with_their_sections_and_respect_the_limit() -> None:
    text = "# One\n\nAlpha para.\n\nBeta para.\n\n## Two\n\nGamma para.\r\n\r\n" + "word " * 100
    chunks = chunk_text(text, limit=120)
    assert chunks[0] == "# One\n\nAlpha para.\n\nBeta para."
    assert chunks[1].startswith("## Two\n\nGamma para.")
    assert all(len(chunk) <= 120 for chunk in chunks)
    assert " ".join(" ".join(chunks).split()).count("word") == 100


def test_a_word_longer_than_the_limit_is_cut() -> None:
    assert chunk_text("x" * 25, limit=10) == ["x" * 10, "x" * 10, "x" * 5]
    assert chunk_text(" \n\n \n") == []


def test_search_terms_drop_stop_words_in_both_languages_and_fold_plurals() -> None:
    assert search_terms("How do I get my REFUNDS back?") == ["get", "refund", "back"]
    assert search_terms("Berapa hari cuti tahunan yang saya dapat?") == ["hari", "cuti", "tahunan"]
    assert search_terms('"x" OR NEAR(a_b)* -- ; drop') == ["near", "drop"]


def test_wav_header_matches_its_samples() -> None:
    data = wav_bytes(b"\x01\x00" * 22050, 22050)
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getnframes(), reader.getframerate(), reader.getnchannels()) == (
            22050,
            22050,
            1,
        )


def test_english_and_indonesian_are_spoken() -> None:
    synthesizer = EspeakSynthesizer()
    english = synthesizer.synthesize("Good morning, everyone.", "en")
    indonesian = synthesizer.synthesize("Selamat pagi, semuanya.", "id", "m3")
    assert english.sample_rate == indonesian.sample_rate == 22050
    assert 0.8 < english.duration_seconds < 4 and 0.8 < indonesian.duration_seconds < 4
    assert english.wav != indonesian.wav


@pytest.mark.parametrize(
    ("language", "voice", "message"),
    [
        ("xx", None, "unknown language"),
        ("en", "nobody", "unknown voice"),
        ("../en", None, "unknown language"),
    ],
)
def test_unknown_languages_and_voices_are_refused(
    language: str, voice: str | None, message: str
) -> None:
    with pytest.raises(SpeechError, match=message):
        EspeakSynthesizer().synthesize("hi", language, voice)


def test_a_missing_library_is_a_speech_error(tmp_path: Path) -> None:
    with pytest.raises(SpeechError, match="cannot be loaded"):
        EspeakSynthesizer(tmp_path / "libespeak-ng.so").synthesize("hi")
