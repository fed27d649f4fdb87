"""Segment files: written under a name of their own, verified, committed once, found again on resume.

Layout under the output folder: ``.segments/<bulletin>/<NNN>.mp4`` plus ``<NNN>.json`` (its record: fingerprint,
frames, worker). A worker renders to ``<NNN>.<node>-<pid>.mp4`` (the recorder's own hidden ``.part`` file while it
writes), probes it, then commits it with a hard link: the link fails if another attempt committed first, so a segment
is never written twice. A segment counts as done only when its MP4 and its record exist, the record's fingerprint
matches the job, and probing the MP4 finds the recorded frames and the audio; anything else is redone.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

from studio.errors import InputError, OutputPathError

log = logging.getLogger(__name__)

SEGMENTS_DIR = ".segments"
AUDIO_RATE_HZ = 48_000


@dataclass(frozen=True)
class SegmentRecord:
    fingerprint: str
    n_frames: int
    fps: float
    node: str
    device: str
    seconds: float  # wall time of the render on the worker
    stage_s: dict
    size_bytes: int = 0  # of the committed MP4: a file cut short under the final name shows here first


def segment_dir(out_dir: Path, bulletin: str) -> Path:
    return Path(out_dir) / SEGMENTS_DIR / bulletin


def final_path(out_dir: Path, bulletin: str, index: int) -> Path:
    return segment_dir(out_dir, bulletin) / f"{index:03d}.mp4"


def record_path(out_dir: Path, bulletin: str, index: int) -> Path:
    return segment_dir(out_dir, bulletin) / f"{index:03d}.json"


def attempt_path(out_dir: Path, bulletin: str, index: int, node: str, pid: int) -> Path:
    """The file one attempt writes (the node and process id in the name: no two attempts share it)."""
    safe_node = "".join(c if c.isalnum() else "_" for c in node)[-24:]
    return segment_dir(out_dir, bulletin) / f"{index:03d}.{safe_node}-{pid}.mp4"


def verify(path: Path, n_frames: int | None = None) -> int:
    """Probe a segment MP4: H.264 video, 48 kHz AAC, and ``n_frames`` frames when given; returns the frame count.
    Raises InputError when the file is not a complete segment."""
    from studio.encode.probe import probe_mp4

    info = probe_mp4(path)
    if info.video_codec is None or info.n_video_frames == 0:
        raise InputError(f"{path.name} has no video")
    if info.audio_codec != "aac" or info.audio_sample_rate_hz != AUDIO_RATE_HZ:
        raise InputError(f"{path.name} has no 48 kHz AAC audio")
    if n_frames is not None and info.n_video_frames != n_frames:
        raise InputError(f"{path.name} has {info.n_video_frames} frames, not {n_frames}")
    if (info.audio_duration_s or 0.0) < (info.video_duration_s or 0.0) - 1024 / AUDIO_RATE_HZ:
        raise InputError(f"{path.name} has {info.audio_duration_s or 0:.3f} s of audio for "
                         f"{info.video_duration_s:.3f} s of video")
    return info.n_video_frames


def commit(attempt: Path, out_dir: Path, bulletin: str, index: int, record: SegmentRecord) -> bool:
    """Make ``attempt`` the segment's file; False (and ``attempt`` removed) when another attempt got there first."""
    final = final_path(out_dir, bulletin, index)
    rec = record_path(out_dir, bulletin, index)
    tmp_rec = attempt.with_suffix(".json")
    try:
        record = replace(record, size_bytes=attempt.stat().st_size)
        tmp_rec.write_text(json.dumps(record.__dict__, indent=1))
        try:
            os.link(attempt, final)
        except FileExistsError:
            log.info("%s was committed by another attempt; this one is discarded", final.name)
            tmp_rec.unlink(missing_ok=True)
            return False
        finally:
            attempt.unlink(missing_ok=True)
        os.replace(tmp_rec, rec)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutputPathError(f"The disk holding {out_dir} is full: free some space or choose another folder.") \
                from exc
        raise OutputPathError(f"Cannot write the segment {final} ({exc.strerror}): choose a folder you may "
                              "write to.") from exc
    return True


def load_done(out_dir: Path, bulletin: str, index: int, fingerprint: str) -> SegmentRecord | None:
    """The record of a finished, verified segment matching ``fingerprint``; None (and stale files removed) otherwise."""
    final = final_path(out_dir, bulletin, index)
    rec = record_path(out_dir, bulletin, index)
    try:
        record = SegmentRecord(**json.loads(rec.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        if final.exists():
            log.info("%s has no valid record (%s): it is made again", final, exc)
        _remove(final, rec)
        return None
    if record.fingerprint != fingerprint:
        log.info("%s was made with other settings: it is made again", final)
        _remove(final, rec)
        return None
    try:
        if final.stat().st_size != record.size_bytes:
            raise InputError(f"{final.name} is {final.stat().st_size} bytes, not the {record.size_bytes} written")
        verify(final, record.n_frames)
    except (InputError, OSError) as exc:
        log.info("%s is not a complete segment (%s): it is made again", final, exc)
        _remove(final, rec)
        return None
    return record


def clear_attempts(out_dir: Path, bulletin: str) -> int:
    """Remove what interrupted attempts left (attempt files, their records, the recorder's partial files)."""
    folder = segment_dir(out_dir, bulletin)
    n = 0
    if not folder.is_dir():
        return 0
    for p in folder.iterdir():
        parts = p.name.split(".")
        is_final = len(parts) == 2 and parts[0].isdigit() and parts[1] in ("mp4", "json")
        if not is_final:
            p.unlink(missing_ok=True)
            n += 1
    return n


def _remove(*paths: Path) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot remove %s: %s", p, exc)


def load_fps(out_dir: Path, bulletin: str, index: int) -> float:
    return float(json.loads(record_path(out_dir, bulletin, index).read_text())["fps"])
