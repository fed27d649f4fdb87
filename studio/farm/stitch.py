"""The bulletin from its segments, in order: H.264 packets remuxed (never re-encoded), one continuous AAC track.

Video: each segment is a closed H.264 stream starting on a keyframe; where every segment carries the same codec
parameters (size, profile, SPS/PPS: the same encoder settings), its packets are copied with their timestamps shifted by
the frames before it. Where they differ, the segments are decoded and encoded again as one stream (and the report
says so). Audio: AAC cannot be cut and joined packet for packet (each segment opens with 1024 priming samples that
would overlap the previous one's tail), so each segment's audio is decoded (the priming skipped), cut or padded to the
exact length of its video, and encoded once as one track: sample ``k`` of the bulletin plays at ``k / 48000`` s,
segment ``i`` starts at exactly the time its first frame does, and the sync holds across every join.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from studio.encode.mp4 import _is_path_error, _path_error, partial_path_for
from studio.errors import EncoderError
from studio.farm.store import AUDIO_RATE_HZ

log = logging.getLogger(__name__)

# FFmpeg's AAC encoder at 128 kb/s mono put a frame at twice the amplitude (error 0.57 on a 0.52 peak) when it
# encoded a decoded Piper segment again; at 192 kb/s the same audio came back within 0.002 of the segment's.
AUDIO_BITRATE_BPS = 192_000


@dataclass(frozen=True)
class StitchReport:
    path: Path
    n_frames: int
    duration_s: float
    remuxed: bool  # True: video packets copied; False: re-encoded (the segments' encoder settings differed)
    seconds: float


def _segment_audio(path: Path, n_samples: int) -> np.ndarray:
    """The decoded mono audio of a segment, cut or zero-padded to ``n_samples``."""
    with av.open(str(path)) as c:
        chunks = [f.to_ndarray()[0] for f in c.decode(audio=0)]  # fltp: channels x samples; the first (mono)
    pcm = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    if pcm.size >= n_samples:
        return pcm[:n_samples]
    return np.concatenate([pcm, np.zeros(n_samples - pcm.size, np.float32)])


def _params(path: Path) -> tuple:
    with av.open(str(path)) as c:
        cc = c.streams.video[0].codec_context
        return cc.name, cc.width, cc.height, cc.pix_fmt, bytes(cc.extradata or b"")


def stitch(segments: list[Path], n_frames: list[int], fps: float, out: Path) -> StitchReport:
    """Join ``segments`` (in order; ``n_frames`` each) into ``out``, written to a hidden partial file first and
    renamed when complete."""
    t0 = time.perf_counter()
    if not segments:
        raise EncoderError(f"No segments to join into {out.name}.")
    same = len({_params(p) for p in segments}) == 1
    partial = partial_path_for(out)
    try:
        if same:
            _remux(segments, n_frames, fps, partial)
        else:
            log.info("the segments of %s differ in encoder settings: re-encoding", out.name)
            _reencode(segments, n_frames, fps, partial)
        os.replace(partial, out)
    except BaseException as exc:
        partial.unlink(missing_ok=True)
        if _is_path_error(exc, out):
            raise _path_error(exc, out) from exc  # type: ignore[arg-type]
        if isinstance(exc, (av.FFmpegError, OSError)):
            raise EncoderError(f"Joining the segments into {out.name} failed: {exc}") from exc
        raise
    total = sum(n_frames)
    return StitchReport(path=out, n_frames=total, duration_s=total / fps, remuxed=same,
                        seconds=time.perf_counter() - t0)


def _remux(segments: list[Path], n_frames: list[int], fps: float, partial: Path) -> None:
    rate = Fraction(fps).limit_denominator(1001)
    with av.open(str(partial), "w", format="mp4", options={"movflags": "faststart"}) as dst:
        with av.open(str(segments[0])) as first:
            vout = dst.add_stream_from_template(first.streams.video[0])
            vout.time_base = first.streams.video[0].time_base
        aout = dst.add_stream("aac", rate=AUDIO_RATE_HZ, layout="mono")
        aout.codec_context.bit_rate = AUDIO_BITRATE_BPS
        encoder = _AacTrack(dst, aout)
        frames_before = 0
        for path, n in zip(segments, n_frames):
            with av.open(str(path)) as src:
                vin = src.streams.video[0]
                offset = int(round(Fraction(frames_before) / rate / vin.time_base))
                for packet in src.demux(vin):
                    if packet.pts is None:
                        continue  # the demuxer's flush packet
                    packet.pts += offset
                    packet.dts += offset
                    packet.stream = vout
                    dst.mux(packet)
            encoder.push(_segment_audio(path, _samples(frames_before + n, rate) - _samples(frames_before, rate)))
            frames_before += n
        encoder.finish()


def _reencode(segments: list[Path], n_frames: list[int], fps: float, partial: Path) -> None:
    from studio.encode.mp4 import Mp4Writer

    rate = Fraction(fps).limit_denominator(1001)
    _, width, height, _, _ = _params(segments[0])
    writer = Mp4Writer(partial.with_name(partial.name + ".mp4"), width, height, fps, AUDIO_RATE_HZ)
    frames_before = 0
    try:
        for path, n in zip(segments, n_frames):
            with av.open(str(path)) as src:
                for i, frame in enumerate(src.decode(video=0)):
                    if i < n:
                        img = frame.to_ndarray(format="rgb24")
                        if img.shape[:2] != (height, width):
                            img = frame.reformat(width=width, height=height, format="rgb24").to_ndarray()
                        writer.write_video(img)
            writer.write_audio(_segment_audio(path, _samples(frames_before + n, rate) - _samples(frames_before, rate)))
            frames_before += n
        done = writer.close()
    except BaseException:
        writer.abort()
        raise
    os.replace(done, partial)


def _samples(frames: int, rate: Fraction) -> int:
    """Audio samples from the start to frame ``frames``'s display time (exact for 25/30/50/60, rounded for NTSC)."""
    return int(round(Fraction(frames) / rate * AUDIO_RATE_HZ))


class _AacTrack:
    """One AAC encoder fed any lengths of mono float audio, in 1024-sample frames from pts 0 (the muxer's edit list
    hides the encoder's priming, as in ``studio.encode.mp4``)."""

    def __init__(self, container, stream) -> None:
        self.container = container
        self.stream = stream
        self.pts = 0
        self.buf = np.zeros(0, np.float32)
        self.frame_size = 1024

    def push(self, pcm: np.ndarray) -> None:
        buf = np.concatenate([self.buf, pcm])
        n_full = buf.size // self.frame_size * self.frame_size
        for start in range(0, n_full, self.frame_size):
            self._encode(buf[start:start + self.frame_size])
        self.buf = buf[n_full:]

    def finish(self) -> None:
        if self.buf.size:
            self._encode(self.buf)
        for packet in self.stream.encode(None):
            self.container.mux(packet)

    def _encode(self, chunk: np.ndarray) -> None:
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk[None, :]), format="flt", layout="mono")
        frame.sample_rate = AUDIO_RATE_HZ
        frame.pts = self.pts
        frame.time_base = Fraction(1, AUDIO_RATE_HZ)
        self.pts += chunk.size
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
