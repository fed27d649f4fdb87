"""The rundown file: the shipped default, round trips, and errors that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studio.errors import InputError
from studio.pipeline.rundown import DEFAULT_RUNDOWN, Segment, load_rundown, parse_rundown, save_rundown


def test_default_rundown_has_short_news_segments() -> None:
    segs = load_rundown(DEFAULT_RUNDOWN)
    assert 5 <= len(segs) <= 6
    for s in segs:
        assert s.title and 5 <= s.word_count <= 40
        assert ":" in s.voice


def test_round_trip(tmp_path: Path) -> None:
    segs = [Segment("One", "Hello there.", "espeak:en-us"), Segment("Two", "Good night, and good luck.")]
    path = save_rundown(segs, tmp_path / "r.json")
    assert load_rundown(path) == segs
    assert not (tmp_path / ".r.json.tmp").exists()


def test_missing_voice_gets_the_default_and_missing_title_a_number() -> None:
    segs = parse_rundown({"segments": [{"text": "Hi."}]})
    assert segs == [Segment("Segment 1", "Hi.", "piper:joe")]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"segments": [{"title": "x"}]}), json.dumps([1, 2])])
def test_bad_files_raise_input_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError):
        load_rundown(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_rundown(tmp_path / "nope.json")
