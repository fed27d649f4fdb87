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


def test_progress_shows_done_total_eta_and_nodes_once_per_change():
    import io

    from studio.farm.console import ConsoleProgress, progress_line
    from studio.farm.driver import FarmProgress

    p = FarmProgress(done=3, total=8, failed=1, running=2, elapsed_s=65, eta_s=125, per_node={"a/1": 2, "b/2": 1},
                     message="news#3 made on b/2 in 1.0 s")
    line = progress_line(p)
    assert "3/8 segments" in line and "1 not made" in line and "ETA 02:05" in line and "a/1:2 b/2:1" in line
    out = io.StringIO()
    console = ConsoleProgress(out)
    console.show(p)
    console.show(FarmProgress(3, 8, 1, 2, 66, 124, {"a/1": 2, "b/2": 1}, p.message))  # only the clock moved
    assert out.getvalue().count("3/8 segments") == 1 and out.getvalue().count("news#3 made") == 1
