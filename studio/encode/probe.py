"""What PyAV's FFmpeg can encode here, and what an MP4 holds."""

from __future__ import annotations

import functools
import os
import logging
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from studio.errors import InputError

log = logging.getLogger(__name__)

# H.264 / HEVC / AV1 encoders worth trying, preferred first within each family.
VIDEO_ENCODER_CANDIDATES: tuple[str, ...] = (
    "libx264", "h264_nvenc", "h264_qsv", "h264_vaapi", "h264_videotoolbox", "libopenh264",
    "libx265", "hevc_nvenc", "hevc_qsv", "hevc_vaapi", "hevc_videotoolbox",
    "libsvtav1", "libaom-av1", "librav1e", "av1_nvenc", "av1_qsv", "av1_vaapi",
)


def _encoder_opens(name: str) -> bool:
    """True if ``name`` exists in this FFmpeg and really encodes a tiny frame (hardware encoders fail without one)."""
    try:
        codec = av.Codec(name, "w")
    except (av.FFmpegError, ValueError) as exc:  # not compiled into this FFmpeg
        log.debug("encoder %s is not in this FFmpeg: %s", name, exc)
        return False
    try:
        ctx = av.CodecContext.create(codec)
        ctx.width, ctx.height = 256, 256  # nvenc refuses very small frames
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, 25)
        ctx.framerate = Fraction(25, 1)
        if name == "libx265":
            ctx.options = {"x265-params": "log-level=none"}  # x265 prints its banner to stderr otherwise
        if name == "libsvtav1":
            os.environ.setdefault("SVT_LOG", "1")  # errors only: SVT-AV1 prints a banner to stderr otherwise
        ctx.open()
        frame = av.VideoFrame.from_ndarray(np.zeros((256, 256, 3), np.uint8), format="rgb24").reformat(format="yuv420p")
        frame.pts = 0
        ctx.encode(frame)
        ctx.encode(None)
        return True
    except (av.FFmpegError, OSError, ValueError, RuntimeError) as exc:  # no device, no driver, no licence
        log.debug("encoder %s does not open here: %s", name, exc)
        return False


@functools.lru_cache(maxsize=1)
def _available() -> tuple[str, ...]:
    found = tuple(name for name in VIDEO_ENCODER_CANDIDATES if _encoder_opens(name))
    log.info("video encoders that open here: %s", ", ".join(found) or "none")
    return found


def available_video_encoders() -> list[str]:
    """The H.264 / HEVC / AV1 encoders that open on this machine (tried once per process, then cached)."""
    return list(_available())


@dataclass(frozen=True)
class MediaInfo:
    """What an MP4 holds; a missing track leaves its fields None."""

    video_codec: str | None
    width: int | None
    height: int | None
    fps: float | None
    n_video_frames: int
    video_duration_s: float | None  # first frame's display time to the end of the last frame
    audio_codec: str | None
    audio_sample_rate_hz: int | None
    audio_duration_s: float | None  # presented audio (encoder priming excluded)


def probe_mp4(path: Path | str) -> MediaInfo:
    """Read the tracks of ``path`` by demuxing every packet (no decoding): exact also for fragmented files."""
    path = Path(path)
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise InputError(f"Cannot read {path} as a video file ({exc}): check the path.") from exc
    with container:
        video = container.streams.video[0] if container.streams.video else None
        audio = container.streams.audio[0] if container.streams.audio else None
        n_video = 0
        v_start: int | None = None
        v_end: int | None = None
        a_end: int | None = None
        a_start: int | None = None
        streams = [s for s in (video, audio) if s is not None]
        try:
            for packet in container.demux(streams):
                if packet.pts is None:
                    continue  # the flush packet at the end
                end = packet.pts + (packet.duration or 0)
                if packet.stream is video:
                    n_video += 1
                    v_start = packet.pts if v_start is None else min(v_start, packet.pts)
                    v_end = end if v_end is None else max(v_end, end)
                else:
                    a_start = packet.pts if a_start is None else min(a_start, packet.pts)
                    a_end = end if a_end is None else max(a_end, end)
        except av.FFmpegError as exc:
            raise InputError(f"{path} is damaged ({exc}): write it again.") from exc

        video_duration_s = None
        if video is not None and v_start is not None and v_end is not None:
            video_duration_s = float((v_end - v_start) * video.time_base)
        audio_duration_s = None
        if audio is not None and a_start is not None and a_end is not None:
            # Priming packets sit at negative times and are skipped by players.
            audio_duration_s = float((a_end - max(a_start, 0)) * audio.time_base)
        rate = (video.average_rate or video.guessed_rate) if video is not None else None
        return MediaInfo(
            video_codec=video.codec_context.name if video is not None else None,
            width=video.codec_context.width if video is not None else None,
            height=video.codec_context.height if video is not None else None,
            fps=float(rate) if rate else None,
            n_video_frames=n_video,
            video_duration_s=video_duration_s,
            audio_codec=audio.codec_context.name if audio is not None else None,
            audio_sample_rate_hz=audio.codec_context.sample_rate if audio is not None else None,
            audio_duration_s=audio_duration_s,
        )


def read_video_frames(path: Path | str) -> list[np.ndarray]:
    """Every decoded video frame of a file as H x W x 3 uint8 RGB (for tests and measurements)."""
    try:
        with av.open(str(path)) as container:
            return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    except (av.FFmpegError, OSError) as exc:
        raise InputError(f"Cannot decode the video of {path}: {exc}") from exc
