"""The farm's plan and segment files, without Ray: seeds, bad segments, verification on resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from studio.errors import InputError
from studio.farm import store
from studio.farm.plan import plan_rundowns, segment_seed
from studio.pipeline.settings import CoreSettings


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_seeds_depend_on_the_bulletin_and_the_place_only():
    assert segment_seed("news", 2, 0) == segment_seed("news", 2, 0)
    assert len({segment_seed("news", i, 0) for i in range(50)}) == 50
    assert segment_seed("news", 2, 0) != segment_seed("news", 2, 1) != segment_seed("other", 2, 1)


def test_bad_segments_are_named_and_the_rest_planned(tmp_path, hopper_path):
    shutil.copy(hopper_path, tmp_path / "hopper.jpg")
    rd = _write(tmp_path / "Evening News.json", {"anchor": "hopper.jpg", "segments": [
        {"title": "A", "text": "Hello."},
        {"title": "B", "text": "Hi.", "voice": "piper:nobody"},
        {"title": "C", "text": "Bye.", "anchor": "missing.png"},
    ]})
    plan = plan_rundowns([rd], CoreSettings())
    assert list(plan.bulletins) == ["Evening_News"]
    [job] = plan.jobs
    assert job.index == 0 and job.anchor_path == str((tmp_path / "hopper.jpg").resolve())
    reasons = {r.name: r.reason for r in plan.rejected}
    assert set(reasons) == {"Evening_News#2", "Evening_News#3"}
    assert "nobody" in reasons["Evening_News#2"] and "missing.png" in reasons["Evening_News#3"]


def test_nothing_to_make_is_one_clear_error(tmp_path):
    rd = _write(tmp_path / "x.json", {"segments": [{"text": "Hi.", "voice": "piper:nobody"}]})
    with pytest.raises(InputError, match="No segment"):
        plan_rundowns([rd], CoreSettings())
    with pytest.raises(InputError, match="not found"):
        plan_rundowns([tmp_path / "nope.json"], CoreSettings())


def test_a_folder_gives_its_rundowns_in_order(tmp_path):
    for name in ("b", "a"):
        _write(tmp_path / f"{name}.json", {"segments": [{"text": "Hello."}]})
    assert list(plan_rundowns([tmp_path], CoreSettings()).bulletins) == ["a", "b"]
