"""The cast of a rundown: round trips, old files, and errors that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studio.errors import InputError
from studio.pipeline.cast import Member, speaker_index
from studio.pipeline.rundown import Segment, load_cast, load_rundown, save_rundown


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_cast_and_speakers_round_trip(tmp_path: Path) -> None:
    (tmp_path / "faces").mkdir()
    cast = (Member("Anna", tmp_path / "faces" / "anna.png", "piper:joe"), Member("Ben", None, "espeak:en-us"))
    segs = [Segment("One", "Hello.", anchor="Anna"), Segment("Two", "Good night.", "espeak:en-us", anchor="Ben"),
            Segment("Three", "Back to Anna.")]
    path = save_rundown(segs, tmp_path / "r.json", cast=cast)
    raw = json.loads(path.read_text())
    assert raw["cast"] == {"Anna": {"portrait": "faces/anna.png", "voice": "piper:joe"}, "Ben": {"voice": "espeak:en-us"}}
    assert [s.get("anchor") for s in raw["segments"]] == ["Anna", "Ben", None]
    assert load_rundown(path) == segs
    assert load_cast(path) == cast
    assert speaker_index(cast, "Ben") == 1 and speaker_index(cast, None) == 0


def test_a_rundown_without_a_cast_still_loads(tmp_path: Path) -> None:
    path = _write(tmp_path / "old.json", {"version": 1, "segments": [{"title": "A", "text": "Hi.", "voice": "piper:joe"}]})
    assert load_rundown(path) == [Segment("A", "Hi.", "piper:joe")]
    assert load_cast(path) == ()


@pytest.mark.parametrize("data, words", [
    ({"cast": {"A": {}, "B": {}, "C": {}, "D": {}, "E": {}}, "segments": []}, "up to 4"),
    ({"cast": {"A": {}}, "segments": [{"text": "x", "anchor": "Zed"}]}, "not in the cast"),
    ({"segments": [{"text": "x", "anchor": "Zed"}]}, "has no cast"),
    ({"cast": ["A"], "segments": []}, "must be an object"),
    ({"cast": {"A": {"portrait": 3}}, "segments": []}, "image path"),
])
def test_bad_casts_say_what_to_do(tmp_path: Path, data: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        load_cast(_write(tmp_path / "bad.json", data))


def test_saving_without_a_cast_keeps_the_files_cast(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.json", {"cast": {"Anna": {"voice": "piper:joe"}},
                                        "segments": [{"text": "Hi.", "anchor": "Anna"}]})
    segs = load_rundown(path)
    save_rundown([*segs, Segment("Two", "Bye.")], path)  # an editor that knows nothing of the cast
    assert load_cast(path) == (Member("Anna", None, "piper:joe"),)
    assert load_rundown(path)[0].anchor == "Anna"
    save_rundown([Segment("One", "Hi.")], path, cast=())  # an explicit empty cast removes it
    assert load_cast(path) == ()
