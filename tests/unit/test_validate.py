"""Argument checks that run before any work: one InputError line each, saying what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studio.errors import InputError
from studio.validate import (
    available_memory_bytes,
    check_fps,
    check_output_path,
    check_render_memory,
    check_seconds,
    check_seed,
    check_size,
    check_timings_path,
    estimate_render_memory,
)


def _one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("size", [64, 512, 2160])
def test_size_ok(size: int) -> None:
    assert check_size(size) == size


@pytest.mark.parametrize("size, hint", [(513, "512"), (4096, "2160"), (0, "64"), (-2, "64"), (63, "64")])
def test_size_refused(size: int, hint: str) -> None:
    with pytest.raises(InputError) as exc:
        check_size(size)
    assert f"e.g. {hint}" in _one_line(exc)


def test_seed() -> None:
    assert check_seed(0) == 0 and check_seed(2**32 - 1) == 2**32 - 1
    for bad in (-1, 2**32):
        with pytest.raises(InputError, match="from 0 to 4294967295"):
            check_seed(bad)


def test_fps() -> None:
    assert check_fps(30) == 30.0
    for bad in (24, 0, float("nan"), float("inf"), -25):
        with pytest.raises(InputError, match="use 25, 30, 50 or 60"):
            check_fps(bad)
    with pytest.raises(InputError, match="not a number"):
        check_fps("fast")  # type: ignore[arg-type]


def test_seconds() -> None:
    assert check_seconds(10) == 10.0
    for bad in (0, -1, float("nan"), 86401):
        with pytest.raises(InputError, match="out of range"):
            check_seconds(bad)


def test_output_path(tmp_path: Path) -> None:
    assert check_output_path(tmp_path / "a.mp4") == tmp_path / "a.mp4"
    with pytest.raises(InputError, match="must end in .mp4"):
        check_output_path(tmp_path / "a.mov")
    with pytest.raises(InputError, match="does not exist"):
        check_output_path(tmp_path / "missing" / "a.mp4")
    (tmp_path / "dir.mp4").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        check_output_path(tmp_path / "dir.mp4")
    src = tmp_path / "in.mp4"
    src.write_bytes(b"x")
    with pytest.raises(InputError, match="also an input"):
        check_output_path(src, inputs=[None, src])


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_output_folder_not_writable(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InputError, match="Cannot write"):
            check_output_path(ro / "a.mp4")
    finally:
        ro.chmod(0o700)


def test_timings_path(tmp_path: Path) -> None:
    out = tmp_path / "a.mp4"
    assert check_timings_path(None, out) is None
    assert check_timings_path(tmp_path / "t.json", out) == tmp_path / "t.json"
    with pytest.raises(InputError, match="both name"):
        check_timings_path(out, out)
    with pytest.raises(InputError, match="both name"):  # the same file by another spelling
        check_timings_path(tmp_path / "sub" / ".." / "a.mp4", out)
    with pytest.raises(InputError, match="does not exist"):
        check_timings_path(tmp_path / "nowhere" / "t.json", out)
    with pytest.raises(InputError, match="must end in .json"):
        check_timings_path(tmp_path / "t.txt", out)


def test_timings_hard_link_to_out(tmp_path: Path) -> None:
    out = tmp_path / "a.mp4"
    out.write_bytes(b"finished video")
    os.link(out, tmp_path / "t.json")
    with pytest.raises(InputError, match="both name"):
        check_timings_path(tmp_path / "t.json", out)


def test_memory_estimate_grows_with_the_pixels() -> None:
    small = estimate_render_memory(512, (512, 512), 8, available_bytes=1 << 40)
    large = estimate_render_memory(1024, (1024, 1024), 8, available_bytes=1 << 40)
    assert 3.9 < large.total_bytes / small.total_bytes < 4.1
    assert small.fits and small.where == "RAM"


def test_memory_refused_with_the_reason() -> None:
    with pytest.raises(InputError) as exc:
        check_render_memory(2160, (2160, 2160), 8, available_bytes=2_000_000_000)
    text = _one_line(exc)
    assert "needs about" in text and "2.0 GB free" in text and "--size" in text
    suggested = int(text.split("use --size ")[1].split()[0])
    est = estimate_render_memory(suggested, (suggested, suggested), 8, available_bytes=2_000_000_000)
    assert est.fits and suggested % 2 == 0


def test_memory_accepted_when_it_fits() -> None:
    est = check_render_memory(512, (512, 512), 8, available_bytes=64 << 30)
    assert est.fits and est.total_bytes > 0


def test_available_ram_is_measured() -> None:
    free, where = available_memory_bytes("cpu")
    assert where == "RAM" and free > 0
