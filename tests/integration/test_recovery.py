"""Crash recovery with real fragmented MP4s: cut recordings become visible, playable files; nothing is overwritten;
a recording still being written is left alone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import av
import numpy as np
import pytest

from studio.encode import EncodeSettings, Mp4Writer, partial_path_for, recover_partial
from studio.encode.recovery import RecoveryAction, recover_folder, recover_for_output
from studio.errors import OutputPathError

REPO_ROOT = Path(__file__).resolve().parents[2]
SIZE, FPS, RATE = 64, 25, 48_000


def _frames_decoded(path: Path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def _cut_recording(folder: Path, name: str, n_frames: int, fragmented: bool = True) -> Path:
    """The partial file of a writer that was cut after ``n_frames`` (a copy of its partial, taken mid-write)."""
    scratch = folder / "scratch"
    scratch.mkdir(exist_ok=True)
    writer = Mp4Writer(scratch / name, SIZE, SIZE, FPS, RATE, EncodeSettings(gop_frames=10), fragmented=fragmented)
    for i in range(n_frames):
        writer.write_video(np.full((SIZE, SIZE, 3), (i * 7) % 256, np.uint8))
        writer.write_audio(np.zeros(RATE // FPS, np.float32))
    partial = partial_path_for(folder / name)
    shutil.copyfile(writer.partial_path, partial)
    writer.abort()
    with open(partial, "ab") as f:  # the fragment the crash cut: a box header promising more than is there
        f.write(b"\x00\x00\x10\x00moof" + bytes(100))
    return partial


def test_cut_recording_is_recovered_beside_existing_files(tmp_path: Path) -> None:
    partial = _cut_recording(tmp_path, "lk.mp4", 60)
    (tmp_path / "lk.mp4").write_bytes(b"yesterday's show")
    (tmp_path / "lk-recovered.mp4").write_bytes(b"an earlier recovery")
    notes = recover_folder(tmp_path)
    assert [n.action for n in notes] == [RecoveryAction.RECOVERED]
    note = notes[0]
    assert note.path == tmp_path / "lk-recovered-2.mp4" and not partial.exists()
    assert (tmp_path / "lk.mp4").read_bytes() == b"yesterday's show"
    assert (tmp_path / "lk-recovered.mp4").read_bytes() == b"an earlier recovery"
    assert note.bytes_dropped == 108 and note.duration_s is not None and note.duration_s >= 1.0
    assert "lk-recovered-2.mp4" in note.message and "\n" not in note.message
    assert note.as_pair() == (note.message, note.path)
    assert _frames_decoded(note.path) >= 25
    assert recover_folder(tmp_path) == []


def test_unplayable_leftovers_are_removed_with_a_note(tmp_path: Path) -> None:
    plain = _cut_recording(tmp_path, "render.mp4", 30, fragmented=False)  # moov comes at the end: nothing to keep
    early = tmp_path / ".early.mp4.part"
    early.write_bytes(b"\x00\x00\x00\x20ftypisom" + bytes(24))  # killed before the first fragment
    notes = recover_for_output(tmp_path / "next.mp4")
    assert sorted(n.action.value for n in notes) == ["removed", "removed"]
    assert not plain.exists() and not early.exists()
    assert all("Removed" in n.message and n.path is None for n in notes)


def test_new_writer_recovers_instead_of_destroying(tmp_path: Path) -> None:
    """`live --out lk.mp4` after a killed `live --out lk.mp4` used to truncate the cut recording."""
    _cut_recording(tmp_path, "lk.mp4", 40)
    with Mp4Writer(tmp_path / "lk.mp4", SIZE, SIZE, FPS, RATE, fragmented=True) as writer:
        writer.write_video(np.zeros((SIZE, SIZE, 3), np.uint8))
        writer.write_audio(np.zeros(RATE // FPS, np.float32))
    assert _frames_decoded(tmp_path / "lk-recovered.mp4") >= 20
    assert _frames_decoded(tmp_path / "lk.mp4") == 1


def test_recover_partial_keeps_its_contract(tmp_path: Path) -> None:
    _cut_recording(tmp_path, "a.mp4", 30)
    assert recover_partial(tmp_path / "a.mp4") == tmp_path / "a-recovered.mp4"
    assert recover_partial(tmp_path / "a.mp4") is None


_WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from studio.encode import EncodeSettings, Mp4Writer

    writer = Mp4Writer(sys.argv[1], 64, 64, 25, 48000, EncodeSettings(gop_frames=10), fragmented=True)
    for i in range(100000):
        writer.write_video(np.full((64, 64, 3), i % 256, np.uint8))
        writer.write_audio(np.zeros(1920, np.float32))
        if i == 40:
            print("ready", flush=True)
            sys.stdin.readline()  # hold here, mid-recording, until the test has looked
    """
)


def test_live_recording_is_left_alone_then_recovered_after_kill(tmp_path: Path) -> None:
    out = tmp_path / "live.mp4"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(out)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        partial = partial_path_for(out)
        size = partial.stat().st_size
        notes = recover_folder(tmp_path)
        assert [n.action for n in notes] == [RecoveryAction.IN_USE]
        assert partial.stat().st_size == size  # untouched
        with pytest.raises(OutputPathError, match="Another recording"):
            Mp4Writer(out, SIZE, SIZE, FPS, RATE, fragmented=True)
        assert partial.exists()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    notes = recover_folder(tmp_path)
    assert [n.action for n in notes] == [RecoveryAction.RECOVERED]
    assert _frames_decoded(notes[0].path) >= 20


_FULL_DISK = textwrap.dedent("""
    import resource, sys, time
    from pathlib import Path
    import numpy as np
    from studio.encode.recorder import RecorderOutput
    from studio.errors import StudioError
    from studio.contracts import ProgramBatch, ProgramFormat

    out = Path(sys.argv[1])
    cap = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))  # the encoder child inherits it: writes past cap fail
    fmt = ProgramFormat(160, 96, 25.0)
    rec = RecorderOutput(out, fragmented=True, block=True)
    rec.open(fmt)
    rng = np.random.default_rng(0)
    failed = ""
    for k in range(400):  # 64 s of noise: far more than the cap holds
        slots = np.arange(4 * k, 4 * k + 4)
        a0, a1 = fmt.samples_at(4 * k), fmt.samples_at(4 * k + 4)
        try:
            rec.write(ProgramBatch(slots=slots, pts_s=slots / fmt.fps,
                                   frames=rng.integers(0, 255, (4, fmt.height, fmt.width, 3), np.uint8),
                                   audio=np.zeros(a1 - a0, np.float32), audio_start=a0))
        except StudioError as exc:
            failed = str(exc)
            break
        time.sleep(0.002)
    try:
        rec.close()
    except StudioError as exc:
        failed = failed or str(exc)
    print("FAILED", failed)
    print("KEPT", rec.salvaged or "-")
""")


def test_a_recording_cut_by_a_full_disk_keeps_its_playable_part(tmp_path: Path) -> None:
    """The encoder's writes fail part-way (a file-size limit stands in for a full disk): the recorder reports it, and
    what was written until then is a visible, playable file, not deleted."""
    out = tmp_path / "show.mp4"
    run = subprocess.run([sys.executable, "-c", _FULL_DISK, str(out), str(3_000_000)], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.strip().splitlines() if " " in line)
    assert lines.get("FAILED"), run.stdout  # the failure was reported
    kept = Path(lines["KEPT"])
    assert kept.parent == tmp_path and kept.is_file() and not kept.name.startswith("."), run.stdout
    assert 0 < kept.stat().st_size <= 3_000_000
    assert _frames_decoded(kept) >= 25  # at least a second of it plays
    assert not list(tmp_path.glob(".*.part"))


_RECORDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from studio.encode.recorder import RecorderOutput
    from studio.contracts import ProgramBatch, ProgramFormat

    fmt = ProgramFormat(160, 96, 25.0)
    rec = RecorderOutput(Path(sys.argv[1]), fragmented=True, block=True)
    rec.open(fmt)
    for k in range(10 ** 6):  # until killed
        slots = np.arange(4 * k, 4 * k + 4)
        a0, a1 = fmt.samples_at(4 * k), fmt.samples_at(4 * k + 4)
        rec.write(ProgramBatch(slots=slots, pts_s=slots / fmt.fps, frames=np.full((4, 96, 160, 3), k % 255, np.uint8),
                               audio=np.zeros(a1 - a0, np.float32), audio_start=a0))
        if k == 25:
            print("ready", flush=True)
        time.sleep(0.01)
""")


def test_a_recording_whose_program_was_killed_is_kept_and_announced_next_time(tmp_path: Path) -> None:
    """kill -9 of the program: its encoder child keeps the playable part (nobody left to tell), and the next start
    announces it once."""
    import time

    out = tmp_path / "take.mp4"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _RECORDER, str(out)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    kept = tmp_path / "take-recovered.mp4"
    deadline = time.monotonic() + 60
    notes = recover_folder(tmp_path)
    while not any(n.action is RecoveryAction.RECOVERED for n in notes) and time.monotonic() < deadline:
        assert all(n.action is RecoveryAction.IN_USE for n in notes)  # the child is still keeping it
        time.sleep(0.1)
        notes = recover_folder(tmp_path)
    assert [(n.action, n.path) for n in notes] == [(RecoveryAction.RECOVERED, kept)]
    assert "take-recovered.mp4" in notes[0].message and _frames_decoded(kept) >= 20
    assert recover_folder(tmp_path) == []  # announced once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["take-recovered.mp4"]


def test_a_writer_keeping_its_cut_file_holds_it_until_it_is_moved(tmp_path: Path, monkeypatch) -> None:
    """A writer that fails mid-recording keeps its playable part (salvage); a recovery started elsewhere meanwhile (the
    studio's next start while the orphaned encoder is still finishing) must see the file in use, not recover it too
    and then report a failure for the file it moved. The other recovery is run at the moment the writer moves it."""
    from studio.encode import recovery

    out = tmp_path / "take.mp4"
    writer = Mp4Writer(out, SIZE, SIZE, FPS, RATE, EncodeSettings(gop_frames=10), fragmented=True)
    for i in range(30):
        writer.write_video(np.full((SIZE, SIZE, 3), (i * 7) % 256, np.uint8))
        writer.write_audio(np.zeros(RATE // FPS, np.float32))
    seen = []
    real_claim = recovery._claim

    def claim_while_another_looks(partial, path):
        if not seen:  # once: another program's recovery, right before the writer moves the file
            seen.append(None)
            seen[:] = recover_folder(tmp_path) or ["nothing"]
        return real_claim(partial, path)

    monkeypatch.setattr(recovery, "_claim", claim_while_another_looks)
    kept = writer.salvage()
    assert kept == tmp_path / "take-recovered.mp4" and _frames_decoded(kept) > 0
    assert [n.action for n in seen] == [RecoveryAction.IN_USE]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["take-recovered.mp4"]
