"""Atomic MP4 writer: H.264 video + AAC audio with zero audio/video offset.

Why it is built this way:
- Atomic: everything is written to a hidden partial file next to the target (``.name.mp4.part``) and renamed onto the
  final name only after a successful ``close()``, so a half-written output never looks like a finished file. The
  writer holds an exclusive lock on its partial file; a partial a crash left under the same name is recovered
  (``studio.encode.recovery``) before a new writer starts, never truncated.
- A/V sync: AAC encoders prepend ``initial_padding`` (1024) priming samples. FFmpeg's AAC encoder hands those out with
  negative timestamps (first packet pts = -1024) and we mux them unchanged, so the MP4 muxer writes an edit list that
  tells the player to skip them. Measured by decoding what we write and cross-correlating it with the source: offset
  0 samples (tests/integration/test_mp4.py). The last AAC packet carries the short remaining duration, so the track
  is exactly as long as the source.
- Fragmented mode (live recordings): ``frag_keyframe+empty_moov+default_base_moof`` so that everything written before a
  crash still plays, plus ``delay_moov`` so that the header, written when the first fragment is cut, can still carry
  the priming edit list (with a plain ``empty_moov`` the audio plays 1024 samples late: measured). Fragmented writers
  use no B-frames unless told otherwise: lower latency, and no video edit list for old players to misread.
"""

from __future__ import annotations

import errno
import logging
import os
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import av
import numpy as np

from studio.encode.settings import EncodeSettings
from studio.errors import EncoderError, OutputPathError

log = logging.getLogger(__name__)

_PATH_ERRNOS = {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}
_FRAGMENTED_MOVFLAGS = "frag_keyframe+empty_moov+default_base_moof+delay_moov"
_PLAIN_MOVFLAGS = "faststart"


def partial_path_for(path: Path | str) -> Path:
    """The hidden file a writer for ``path`` writes into until ``close()`` (``dir/.name.mp4.part``)."""
    path = Path(path)
    return path.with_name(f".{path.name}.part")


def claim_partial(path: Path):
    """Lock the partial file of ``path`` for its writer (``recovery.PartialLock``); a partial a crash left under this
    name is recovered first (never truncated), and one another writer is still writing is refused."""
    from studio.encode.recovery import RecoveryAction, hold_partial, recover_file

    partial = partial_path_for(path)
    if partial.exists():
        note = recover_file(partial)
        if note.action is RecoveryAction.IN_USE:
            raise OutputPathError(f"Another recording is being written to {path} right now: choose another "
                                  "output name.")
        log.warning("%s", note.message)
    try:
        return hold_partial(partial)
    except OSError as exc:
        if _is_path_error(exc, path):
            raise _path_error(exc, path) from exc
        raise OutputPathError(f"Another recording is being written to {path} right now: choose another "
                              "output name.") from exc


def _path_error(exc: OSError, path: Path) -> OutputPathError:
    """A user-facing ``OutputPathError`` for an OS error on ``path`` (the caller raises it ``from exc``)."""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return OutputPathError(f"The disk holding {path.parent} is full: free some space or choose another folder.")
    if code in (errno.ENOENT, errno.ENOTDIR):
        return OutputPathError(f"The folder {path.parent} does not exist: create it or choose another output path.")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputPathError(f"Cannot write to {path.parent}: choose a folder you may write to.")
    return OutputPathError(f"Cannot write {path} ({exc.strerror or exc}): choose another output path.")


def _is_path_error(exc: BaseException, path: Path) -> bool:
    """True for a full disk, or an OS error about ``path`` / its partial file (not, say, a GPU encoder's EPERM)."""
    if not isinstance(exc, OSError) or exc.errno not in _PATH_ERRNOS:
        return False
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    names = f"{exc.filename or ''} {exc.filename2 or ''}"
    return str(partial_path_for(path)) in names or str(path) in names


class Mp4Writer:
    """Writes RGB frames and mono float audio into one MP4 (H.264 + AAC), atomically.

    Not thread-safe: one thread feeds it. Video frame ``i`` is shown at ``i / fps``; audio sample ``k`` plays at
    ``k / sample_rate_hz``. Write ``round(n_samples / sample_rate_hz * fps)`` frames for equal track lengths.
    """

    def __init__(
        self,
        path: Path | str,
        width: int,
        height: int,
        fps: float,
        sample_rate_hz: int,
        settings: EncodeSettings | None = None,
        fragmented: bool = False,
    ) -> None:
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise ValueError(f"width and height must be positive and even (4:2:0 video), got {width}x{height}")
        if fps <= 0 or sample_rate_hz <= 0:
            raise ValueError(f"fps and sample_rate_hz must be positive, got {fps} and {sample_rate_hz}")
        self.path = Path(path)
        self.partial_path = partial_path_for(self.path)
        self.width = width
        self.height = height
        self.fps = fps
        self.sample_rate_hz = sample_rate_hz
        self.settings = settings or EncodeSettings()
        self.fragmented = fragmented
        self.n_video_frames = 0
        self.n_audio_samples_in = 0  # at sample_rate_hz, as given by the caller
        self._audio_pts = 0  # samples sent to the AAC encoder, at the AAC rate
        self._audio_buf = np.zeros(0, np.float32)  # samples waiting for a full AAC frame
        self._closed = False
        self._container: av.container.OutputContainer | None = None
        self._lock = None
        self.salvaged: Path | None = None  # after a failed write: the playable part, kept (``salvage``)

        self._check_folder()
        self._claim_partial()
        try:
            self._open()
        except BaseException as exc:
            self._discard()
            if _is_path_error(exc, self.path):
                raise _path_error(exc, self.path) from exc  # type: ignore[arg-type]
            if isinstance(exc, (av.FFmpegError, ValueError)):
                raise EncoderError(f"Cannot start the encoder for {self.path}: {exc}") from exc
            raise

    # -- set-up ---------------------------------------------------------------------------------------------------

    def _check_folder(self) -> None:
        folder = self.path.parent
        if not folder.is_dir():
            raise OutputPathError(f"The folder {folder} does not exist: create it or choose another output path.")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputPathError(f"Cannot write to {folder}: choose a folder you may write to.")

    def _claim_partial(self) -> None:
        self._lock = claim_partial(self.path)

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def _open(self) -> None:
        s = self.settings
        movflags = _FRAGMENTED_MOVFLAGS if self.fragmented else _PLAIN_MOVFLAGS
        options = {"movflags": movflags}
        if self.fragmented:
            options["flush_packets"] = "1"  # push each fragment to the file at once, not when a 32 kB buffer fills
        container = av.open(str(self.partial_path), "w", format="mp4", options=options)
        self._container = container

        rate = Fraction(self.fps).limit_denominator(1001)
        video = container.add_stream(s.video_codec, rate=rate)
        video.width = self.width
        video.height = self.height
        video.pix_fmt = s.pix_fmt
        video.codec_context.time_base = 1 / rate
        video.codec_context.gop_size = s.gop_frames
        b_frames = s.max_b_frames if s.max_b_frames is not None else (0 if self.fragmented else None)
        if b_frames is not None:
            video.codec_context.max_b_frames = b_frames
        video.codec_context.thread_count = s.encoder_threads
        if s.video_codec == "libx264":
            # BT.709 throughout (HD): frames are converted with that matrix (here or on the GPU) and tagged so
            video.codec_context.options = {"preset": s.preset, "crf": str(s.crf),
                                           "x264-params": "colorprim=bt709:transfer=bt709:colormatrix=bt709"}
        self._video = video
        self._video_time_base = 1 / rate

        self.aac_rate_hz = s.aac_rate_for(self.sample_rate_hz)
        audio = container.add_stream(s.audio_codec, rate=self.aac_rate_hz, layout="mono")
        audio.codec_context.bit_rate = s.audio_bitrate_bps
        self._audio = audio
        self._resampler = (
            av.AudioResampler(format="fltp", layout="mono", rate=self.aac_rate_hz)
            if self.aac_rate_hz != self.sample_rate_hz
            else None
        )
        # Open both encoders now so that a bad codec fails here, not at the first frame.
        video.codec_context.open()
        audio.codec_context.open()
        self._aac_frame_size = audio.codec_context.frame_size or 1024
        log.debug(
            "writing %s (%dx%d @ %s fps, audio %d Hz -> AAC %d Hz, fragmented=%s)",
            self.partial_path, self.width, self.height, rate, self.sample_rate_hz, self.aac_rate_hz, self.fragmented,
        )

    # -- writing --------------------------------------------------------------------------------------------------

    def write_video(self, frames: np.ndarray) -> None:
        """Append one frame (H x W x 3) or a batch (N x H x W x 3) of uint8 RGB frames."""
        self._check_open()
        if frames.ndim == 3:
            frames = frames[None]
        if frames.ndim != 4 or frames.shape[1:] != (self.height, self.width, 3) or frames.dtype != np.uint8:
            raise ValueError(
                f"expected uint8 frames of shape [N x] {self.height} x {self.width} x 3, "
                f"got {frames.dtype} {frames.shape}"
            )
        for rgb in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(
                format="yuv420p", dst_colorspace="ITU709")
            frame.pts = self.n_video_frames
            frame.time_base = self._video_time_base
            self.n_video_frames += 1
            self._encode(self._video, frame)

    def write_video_yuv420p(self, frames: np.ndarray) -> None:
        """Append planar YUV 4:2:0 frames (N x H * 3 / 2 x W uint8, BT.709, as studio.encode.colour.rgb_to_i420
        makes them): nothing is converted here."""
        self._check_open()
        if frames.ndim == 2:
            frames = frames[None]
        if frames.ndim != 3 or frames.shape[1:] != (self.height * 3 // 2, self.width) or frames.dtype != np.uint8:
            raise ValueError(f"expected uint8 I420 frames of shape [N x] {self.height * 3 // 2} x {self.width}, "
                             f"got {frames.dtype} {frames.shape}")
        for yuv in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(yuv), format="yuv420p")
            frame.pts = self.n_video_frames
            frame.time_base = self._video_time_base
            self.n_video_frames += 1
            self._encode(self._video, frame)

    def write_video_nv12(self, frames: np.ndarray) -> None:
        """Append NV12 frames (N x H * 3 / 2 x W uint8, converted on the GPU): no RGB -> YUV conversion here."""
        self._check_open()
        if frames.ndim == 2:
            frames = frames[None]
        if frames.ndim != 3 or frames.shape[1:] != (self.height * 3 // 2, self.width) or frames.dtype != np.uint8:
            raise ValueError(f"expected uint8 NV12 frames of shape [N x] {self.height * 3 // 2} x {self.width}, "
                             f"got {frames.dtype} {frames.shape}")
        for nv in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(nv), format="nv12")
            frame.pts = self.n_video_frames
            frame.time_base = self._video_time_base
            self.n_video_frames += 1
            self._encode(self._video, frame)

    def write_audio(self, samples: np.ndarray) -> None:
        """Append mono float audio in -1..1 at ``sample_rate_hz``; any chunk length (N,)."""
        self._check_open()
        samples = np.asarray(samples)
        if samples.ndim == 2 and 1 in samples.shape:
            samples = samples.reshape(-1)
        if samples.ndim != 1 or samples.dtype.kind != "f":
            raise ValueError(f"expected mono float samples of shape (N,), got {samples.dtype} {samples.shape}")
        if samples.size == 0:
            return
        samples = samples.astype(np.float32, copy=False)
        if self._resampler is not None:
            frame = av.AudioFrame.from_ndarray(samples[None, :], format="flt", layout="mono")
            frame.sample_rate = self.sample_rate_hz
            frame.pts = self.n_audio_samples_in
            frame.time_base = Fraction(1, self.sample_rate_hz)
            self.n_audio_samples_in += samples.size
            self._push_resampled(self._resample(frame))
        else:
            self.n_audio_samples_in += samples.size
            self._push_aac_rate(samples)

    def _resample(self, frame: av.AudioFrame | None) -> list[av.AudioFrame]:
        assert self._resampler is not None
        try:
            return self._resampler.resample(frame)
        except av.FFmpegError as exc:
            raise EncoderError(f"Resampling the audio to {self.aac_rate_hz} Hz failed: {exc}") from exc

    def _push_resampled(self, frames: list[av.AudioFrame]) -> None:
        for out in frames:
            self._push_aac_rate(out.to_ndarray().reshape(-1).astype(np.float32, copy=False))

    def _push_aac_rate(self, samples: np.ndarray) -> None:
        """Queue samples at the AAC rate and encode every full AAC frame."""
        buf = np.concatenate([self._audio_buf, samples]) if self._audio_buf.size else samples
        n = self._aac_frame_size
        n_full = buf.size // n * n
        for start in range(0, n_full, n):
            self._encode_audio(buf[start : start + n])
        self._audio_buf = buf[n_full:].copy()

    def _encode_audio(self, chunk: np.ndarray) -> None:
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk[None, :]), format="flt", layout="mono")
        frame.sample_rate = self.aac_rate_hz
        frame.pts = self._audio_pts
        frame.time_base = Fraction(1, self.aac_rate_hz)
        self._audio_pts += chunk.size
        self._encode(self._audio, frame)

    def _encode(self, stream: av.stream.Stream, frame: av.frame.Frame | None) -> None:
        """Encode one frame (None flushes) and mux its packets; translate failures."""
        assert self._container is not None
        try:
            for packet in stream.encode(frame):
                self._container.mux(packet)
        except BaseException as exc:
            self._fail()
            if _is_path_error(exc, self.path):
                raise _path_error(exc, self.path) from exc  # type: ignore[arg-type]
            if isinstance(exc, (av.FFmpegError, ValueError)):
                raise EncoderError(f"Encoding {self.path.name} failed: {exc}") from exc
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"Mp4Writer for {self.path} is already closed")

    # -- finishing ------------------------------------------------------------------------------------------------

    def close(self) -> Path:
        """Flush both encoders, finalize the MP4 and rename it onto the final path; returns that path."""
        self._check_open()
        if self._resampler is not None:
            self._push_resampled(self._resample(None))
        if self._audio_buf.size:
            self._encode_audio(self._audio_buf)  # AAC takes a short last frame
            self._audio_buf = np.zeros(0, np.float32)
        self._encode(self._video, None)
        self._encode(self._audio, None)
        assert self._container is not None
        try:
            self._container.close()
            self._container = None
            os.replace(self.partial_path, self.path)
            self._release()
        except BaseException as exc:
            self._fail()
            if _is_path_error(exc, self.path):
                raise _path_error(exc, self.path) from exc  # type: ignore[arg-type]
            if isinstance(exc, av.FFmpegError):
                raise EncoderError(f"Finishing {self.path.name} failed: {exc}") from exc
            raise
        self._closed = True
        log.info(
            "wrote %s: %d frames, %.3f s of audio", self.path, self.n_video_frames,
            self.n_audio_samples_in / self.sample_rate_hz,
        )
        return self.path

    def abort(self) -> None:
        """Stop without producing an output: the partial file is removed. Safe to call more than once."""
        self._closed = True
        self._discard()

    def _fail(self) -> None:
        """A write failed (a full disk, an encoder error): keep the playable part of a fragmented file, drop the rest."""
        if self.fragmented:
            self.salvaged = self.salvage()
        else:
            self.abort()

    def salvage(self) -> Path | None:
        """After a failure mid-recording (a full disk, a failed encoder): keep what is playable of a fragmented file
        as a visible file (``studio.encode.recovery``: cut at the last whole fragment, never overwriting) instead of
        removing it. Returns that file, or None when nothing playable was written (the partial is then removed)."""
        if self._closed:
            return self.salvaged
        if not self.fragmented:
            self.abort()
            return None
        from studio.encode.recovery import RecoveryAction, recover_file

        self._closed = True
        container, self._container = self._container, None
        if container is not None:
            try:
                container.close()  # may fail again on a full disk: the fragments written so far stay whole
            except (av.FFmpegError, OSError, ValueError) as exc:
                log.debug("closing a failed container: %s", exc)
        try:
            if not self.partial_path.exists():
                return None
            # still under this writer's lock: a recovery started elsewhere meanwhile (the next start of the studio
            # after a crash) leaves the file to this one instead of racing it for the same file
            note = recover_file(self.partial_path, holding_lock=True)
        finally:
            self._release()
        log.info("%s", note.message)
        return note.path if note.action is RecoveryAction.RECOVERED else None

    def _discard(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            try:
                container.close()
            except (av.FFmpegError, OSError, ValueError) as exc:
                log.debug("closing an aborted container failed: %s", exc)
        try:
            self.partial_path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove the partial file %s: %s", self.partial_path, exc)
        self._release()

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()


# -- crash recovery -------------------------------------------------------------------------------------------------


def recover_partial(path: Path | str) -> Path | None:
    """Turn the partial file a crashed fragmented writer left for ``path`` into ``name-recovered.mp4``.

    Keeps the header and every complete fragment (the one the crash cut off is dropped); never overwrites a file.
    Returns the recovered file, or None when there is no partial file, when a live writer still holds it, or when it
    held nothing playable (a crash before the first fragment, or a non-fragmented recording: it is removed).
    ``studio.encode.recovery`` does the work and says what happened to every partial in a folder.
    """
    from studio.encode.recovery import RecoveryAction, recover_file

    partial = partial_path_for(path)
    if not partial.is_file():
        return None
    note = recover_file(partial)
    log.log(logging.WARNING if note.action is RecoveryAction.REMOVED else logging.INFO, "%s", note.message)
    return note.path if note.action is RecoveryAction.RECOVERED else None
