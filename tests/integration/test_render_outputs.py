"""`main.py render` never reports a file it did not finish: full disks (a real small tmpfs), outputs that cannot
open, and two commands writing the same path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLIP = Path("/usr/share/sounds/alsa/Front_Center.wav")


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "main.py"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _speech(folder: Path, repeats: int) -> Path:
    """A speech recording of ``repeats`` times the ALSA test clip (1.4 s each)."""
    from scipy.io import wavfile

    if not CLIP.is_file():
        pytest.skip("alsa-utils speech clip missing: apt-get install alsa-utils")
    rate, x = wavfile.read(CLIP)
    out = folder / f"speech{repeats}.wav"
    wavfile.write(out, rate, np.concatenate([x] * repeats))
    return out


def _said(stderr: str) -> list[str]:
    """What the command said besides its progress lines."""
    return [line for line in stderr.splitlines() if line.split(":", 1)[0] not in ("anchor", "speech", "audio",
                                                                                     "render")]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1200 KiB tmpfs (a real full disk); skipped where mounting is not allowed (not root)."""
    point = tmp_path / "disk"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_a_disk_that_fills_mid_render_ends_it_with_one_line_naming_the_kept_part(tiny_disk: Path,
                                                                                tmp_path: Path) -> None:
    audio = _speech(tmp_path, 12)  # 17 s: about 5 MB of video, four times the disk
    proc = _run("render", "--audio", str(audio), "--out", str(tiny_disk / "out.mp4"))
    said = _said(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(said) == 1 and said[0].startswith("error: ") and "full" in said[0], said
    assert str(tiny_disk / "out-recovered.mp4") in said[0]
    assert "Traceback" not in proc.stderr and "wrote" not in proc.stderr
    assert "render: 100%" not in proc.stderr  # the work stopped at the failure, not at the last frame
    assert not (tiny_disk / "out.mp4").exists() and not list(tiny_disk.glob(".*.part"))
    with av.open(str(tiny_disk / "out-recovered.mp4")) as c:
        assert sum(1 for _ in c.decode(video=0)) >= 25  # what was kept plays


def test_a_full_disk_before_the_render_leaves_no_file(tiny_disk: Path, tmp_path: Path) -> None:
    audio = _speech(tmp_path, 1)
    free = os.statvfs(tiny_disk)
    (tiny_disk / "filler").write_bytes(bytes(free.f_bavail * free.f_frsize - 16_384))
    proc = _run("render", "--audio", str(audio), "--out", str(tiny_disk / "out.mp4"))
    said = _said(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(said) == 1 and said[0].startswith("error: ") and "full" in said[0], said
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]  # no 0-byte out.mp4, nothing hidden


_HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    kind, out = sys.argv[1], Path(sys.argv[2])
    if kind == "claim":
        from studio.encode.claim import claim_output
        held = claim_output(out)
    else:
        from studio.encode.mp4 import partial_path_for
        from studio.encode.recovery import hold_partial
        held = hold_partial(partial_path_for(out))
    print("ready", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def holder():
    procs: list[subprocess.Popen] = []

    def start(kind: str, out: Path) -> None:
        p = subprocess.Popen([sys.executable, "-c", _HOLD, kind, str(out)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_second_command_for_the_same_output_refuses_at_start(tmp_path: Path, holder) -> None:
    out = tmp_path / "same.mp4"
    holder("claim", out)  # another render of the same --out, still running
    proc = _run("render", "--audio", str(_speech(tmp_path, 1)), "--out", str(out))
    said = _said(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(said) == 1 and "Another command is writing" in said[0] and str(out) in said[0], said
    assert "render:" not in proc.stderr and not out.exists()  # refused before any work


def test_an_output_that_cannot_open_is_an_error_not_a_warning(tmp_path: Path, holder) -> None:
    out = tmp_path / "busy.mp4"
    holder("partial", out)  # the studio (say) is writing this very file
    proc = _run("render", "--audio", str(_speech(tmp_path, 1)), "--out", str(out))
    said = [line for line in _said(proc.stderr) if not line.startswith("note:")]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(said) == 1 and "being written" in said[0], said
    assert "wrote" not in proc.stderr and not out.exists()
