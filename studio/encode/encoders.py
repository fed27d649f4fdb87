"""Which H.264 encoder runs here, and the one encode (H.264 + AAC) that the hub shares among its sinks.

Choice (``choose_video_encoder``): NVENC where it really opens (PyAV's ``h264_nvenc``, else PyNvVideoCodec, whose
import raises without libnvidia-encode, so it is guarded), libx264 otherwise. The choice carries its reason in words,
for the HUD's encoder pill, ``doctor`` and the bench (``encoder_report``). Nothing here pretends: a machine without
NVENC (the H200 has none) reports "unavailable" with the error the driver or FFmpeg gave.

``StreamEncoder`` encodes program pictures (RGB, or NV12 converted on the GPU) into H.264 access units in Annex-B
form with SPS/PPS repeated on every keyframe (so any sink can start at any keyframe), and program audio into AAC-LC
frames whose first packet carries the encoder's 1024 priming samples at a negative time (the sinks decide how their
container skips them: an MP4 edit list, or a shift of the whole timeline for FLV / MPEG-TS / the browser).
"""

from __future__ import annotations

import enum
import functools
import logging
from dataclasses import dataclass
from fractions import Fraction

import av
import av.logging
import numpy as np

from studio.errors import EncoderError

log = logging.getLogger(__name__)

AAC_PRIMING_SAMPLES = 1024  # FFmpeg's AAC encoder: initial_padding, the first packet's pts is -1024
_PIX_FORMATS = ("rgb24", "yuv420p", "nv12")


class VideoEncoderKind(enum.Enum):
    """The H.264 encoders NewsStudio knows how to drive."""

    NVENC = "h264_nvenc"  # NVIDIA's hardware encoder through PyAV's FFmpeg
    PYNVVIDEOCODEC = "pynvvideocodec"  # NVIDIA's hardware encoder through PyNvVideoCodec (NVIDIA's Python binding)
    X264 = "libx264"  # software, every machine


@dataclass(frozen=True)
class EncoderChoice:
    """What encodes the video here, and why."""

    kind: VideoEncoderKind
    reason: str  # one sentence: why this one (and why not NVENC, when it is not NVENC)

    @property
    def hardware(self) -> bool:
        return self.kind is not VideoEncoderKind.X264

    @property
    def pill(self) -> str:
        """The HUD's encoder pill: short name plus the reason."""
        return f"{self.kind.value}: {self.reason}"


@functools.lru_cache(maxsize=1)
def nvenc_pyav_status() -> tuple[bool, str]:
    """(opens, reason): whether PyAV's h264_nvenc encodes a frame on this machine, tried once per process."""
    try:
        codec = av.Codec("h264_nvenc", "w")
    except (av.FFmpegError, ValueError) as exc:
        return False, f"this FFmpeg build has no h264_nvenc ({exc})"
    old_level = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)  # so that the error carries FFmpeg's own reason ("Cannot load libcuda")
    try:
        with av.logging.Capture(local=False):  # ... without printing it
            ctx = av.CodecContext.create(codec)
            ctx.width, ctx.height = 256, 256  # NVENC refuses very small frames
            ctx.pix_fmt = "nv12"
            ctx.time_base = Fraction(1, 25)
            ctx.framerate = Fraction(25, 1)
            ctx.open()
            frame = av.VideoFrame.from_ndarray(np.zeros((384, 256), np.uint8), format="nv12")
            frame.pts = 0
            ctx.encode(frame)
            ctx.encode(None)
    except (av.FFmpegError, OSError, ValueError, RuntimeError) as exc:  # no device, no driver, no NVENC on the GPU
        return False, f"h264_nvenc does not open here ({exc})"
    finally:
        av.logging.set_level(old_level)
    return True, "h264_nvenc opens on this GPU"


@functools.lru_cache(maxsize=1)
def pynvvideocodec_status() -> tuple[bool, str]:
    """(usable, reason) for PyNvVideoCodec: installed, importable (it raises without libnvidia-encode), and an
    encoder opens."""
    try:
        import PyNvVideoCodec as nvc
    except ImportError as exc:
        return False, f"PyNvVideoCodec is not installed ({exc})"
    except (RuntimeError, OSError) as exc:  # the import itself loads libnvidia-encode
        return False, f"PyNvVideoCodec cannot load NVIDIA's encoder library ({exc})"
    try:
        enc = nvc.CreateEncoder(256, 256, "NV12", True, codec="h264")
        enc.EndEncode()
    except Exception as exc:  # noqa: BLE001  (a foreign binding whose errors are not typed; reported in words)
        return False, f"PyNvVideoCodec's encoder does not open ({type(exc).__name__}: {exc})"
    return True, "PyNvVideoCodec opens an NVENC session"


def choose_video_encoder(prefer_hardware: bool = True) -> EncoderChoice:
    """NVENC through PyAV where it opens, libx264 otherwise (see the module docstring)."""
    if not prefer_hardware:
        return EncoderChoice(VideoEncoderKind.X264, "software encoding chosen in the settings")
    ok, why = nvenc_pyav_status()
    if ok:
        return EncoderChoice(VideoEncoderKind.NVENC, why)
    nv_ok, nv_why = pynvvideocodec_status()
    if nv_ok:
        # PyNvVideoCodec opens but PyAV's FFmpeg cannot drive NVENC: say so; the hub encodes with libx264, since
        # the PyNvVideoCodec path cannot be exercised on any machine of this project (none has NVENC).
        return EncoderChoice(VideoEncoderKind.X264, f"NVENC only through PyNvVideoCodec ({nv_why}), which the hub "
                                                    f"does not drive yet; {why}")
    return EncoderChoice(VideoEncoderKind.X264, f"NVENC unavailable: {why}")


def encoder_report() -> list[str]:
    """One line per hardware / software H.264 encoder, for ``doctor`` ("NVENC: unavailable: <reason>")."""
    ok, why = nvenc_pyav_status()
    nv_ok, nv_why = pynvvideocodec_status()
    lines = [
        f"NVENC (PyAV h264_nvenc): {'available' if ok else 'unavailable'}: {why}",
        f"NVENC (PyNvVideoCodec): {'available' if nv_ok else 'unavailable'}: {nv_why}",
    ]
    try:
        av.Codec("libx264", "w")
        lines.append("libx264: available (software)")
    except (av.FFmpegError, ValueError) as exc:
        lines.append(f"libx264: unavailable: {exc}")
    choice = choose_video_encoder()
    lines.append(f"streams and recordings use: {choice.kind.value}")
    return lines


# -- the shared encode -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamEncodeSettings:
    """One encode per distinct value of this: the hub shares an encode among sinks whose settings are equal."""

    # 0: by the picture (``video_kbps``): about 2.5 Mbit/s at 720p25, more for 1080p and 50/60 fps, so that a
    # recording at 1080p60 is not starved; a positive value is used as it is
    video_bitrate_kbps: int = 0
    # ultrafast: the studio renders on the same cores; at 720p it is about a third of veryfast's cost (measured
    # on the 2-core machine with the stream check's picture), and 2.5 Mbit/s hides its lower efficiency
    x264_preset: str = "ultrafast"
    x264_tune: str = "zerolatency"  # no lookahead, no B-frames, sliced threads: one frame in, one access unit out
    keyframe_interval_s: float = 2.0  # RTMP servers and players expect 2 s or less
    encoder_threads: int = 0  # 0 = libx264 decides (one per core)
    audio_bitrate_kbps: int = 128
    prefer_hardware: bool = True

    def __post_init__(self) -> None:
        if self.video_bitrate_kbps < 0 or self.audio_bitrate_kbps <= 0:
            raise ValueError("bitrates must be positive (a video bitrate of 0: chosen by the picture)")
        if self.keyframe_interval_s <= 0:
            raise ValueError("keyframe_interval_s must be positive")


    def video_kbps(self, width: int, height: int, fps: float) -> int:
        """The video bitrate for a picture: the setting, or (0) 0.11 bit a pixel a frame (2.5 Mbit/s at 720p25,
        13.7 at 1080p60), held within 1.5 to 12 Mbit/s."""
        if self.video_bitrate_kbps:
            return self.video_bitrate_kbps
        return int(min(12_000, max(1_500, round(0.11 * width * height * fps / 1000))))


@dataclass(frozen=True)
class EncodedPacket:
    """One encoded access unit (video) or AAC frame (audio) on the program timeline."""

    video: bool
    data: bytes  # video: Annex-B access unit (SPS/PPS in front on keyframes); audio: one raw AAC frame
    pts: int  # in ``time_base``; video: frames since the hub's first slot; audio: samples (first = -1024)
    duration: int  # in ``time_base``
    time_base: Fraction
    keyframe: bool
    capture_ns: int = 0  # monotonic ns of the capture stamp: heard_ns or when the core finished the frame (audio: of
    # the frame whose samples completed the packet)

    @property
    def pts_s(self) -> float:
        return float(self.pts * self.time_base)


def avc_codec_string(access_unit: bytes) -> str | None:
    """WebCodecs / RFC 6381 codec string ("avc1.PPCCLL") from the SPS of an Annex-B access unit; None without one."""
    for nal in split_annexb(access_unit):
        if nal and nal[0] & 0x1F == 7 and len(nal) >= 4:
            return f"avc1.{nal[1]:02x}{nal[2]:02x}{nal[3]:02x}"
    return None


def split_annexb(data: bytes) -> list[bytes]:
    """The NAL units of an Annex-B byte stream (start codes removed)."""
    out: list[bytes] = []
    i, n = 0, len(data)
    starts: list[int] = []
    while i + 3 <= n:
        if data[i] == 0 and data[i + 1] == 0 and data[i + 2] == 1:
            starts.append(i + 3)
            i += 3
        else:
            i += 1
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else n
        while end > s and data[end - 1] == 0 and k + 1 < len(starts):  # the 4-byte start code's leading zero
            end -= 1
        out.append(data[s:end])
    return out


class StreamEncoder:
    """H.264 + AAC for the program (see the module docstring). Not thread-safe: the hub's encode thread owns it."""

    def __init__(self, width: int, height: int, fps: float, audio_rate_hz: int,
                 settings: StreamEncodeSettings | None = None, choice: EncoderChoice | None = None) -> None:
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise ValueError(f"width and height must be positive and even (4:2:0 video), got {width}x{height}")
        self.width, self.height, self.fps, self.audio_rate_hz = width, height, fps, audio_rate_hz
        self.settings = settings or StreamEncodeSettings()
        self.choice = choice or choose_video_encoder(self.settings.prefer_hardware)
        self.rate = Fraction(fps).limit_denominator(1001)
        self.video_time_base = 1 / self.rate
        self.audio_time_base = Fraction(1, audio_rate_hz)
        self._video: av.VideoCodecContext | None = None
        self._pix_fmt = ""
        self._audio = self._open_audio()
        self.aac_config = bytes(self._audio.extradata or b"")  # AudioSpecificConfig (MP4 / FLV / WebCodecs)
        self._audio_buf = np.zeros(0, np.float32)
        self._audio_pts = 0
        self.frames_in = 0
        self.video_bytes = 0
        self.audio_bytes = 0

    # -- set-up -----------------------------------------------------------------------------------------------------

    def _open_video(self, pix_fmt: str) -> av.VideoCodecContext:
        s = self.settings
        kbps = s.video_kbps(self.width, self.height, self.fps)
        kind = self.choice.kind if self.choice.kind is VideoEncoderKind.NVENC else VideoEncoderKind.X264
        try:
            ctx = av.CodecContext.create(kind.value, "w")
            ctx.width, ctx.height = self.width, self.height
            ctx.pix_fmt = pix_fmt
            ctx.time_base = self.video_time_base
            ctx.framerate = self.rate
            ctx.gop_size = max(1, round(s.keyframe_interval_s * self.fps))
            ctx.max_b_frames = 0  # live: presentation order = decode order, no reordering delay
            ctx.bit_rate = kbps * 1000
            # BT.709, limited range, written into the SPS: what the GPU conversion (studio.encode.colour) makes and
            # what the CPU path asks swscale for, so that players show the same colours either way
            ctx.colorspace = ctx.color_primaries = ctx.color_trc = 1  # AVCOL_SPC / PRI / TRC_BT709
            ctx.color_range = 1  # AVCOL_RANGE_MPEG (16..235)
            if kind is VideoEncoderKind.X264:
                ctx.thread_count = s.encoder_threads
                # vbv: a bounded bitrate that receivers and network links can follow
                ctx.options = {"preset": s.x264_preset, "tune": s.x264_tune,
                               "x264-params": f"vbv-maxrate={kbps}:vbv-bufsize={kbps}"}
            else:
                ctx.options = {"preset": "p3", "tune": "ll", "forced-idr": "1", "zerolatency": "1"}
            # No GLOBAL_HEADER flag: SPS/PPS are repeated in-band on every keyframe (Annex B), so that every sink
            # (a receiver that reconnects, a browser that joins) can start at any keyframe.
            ctx.open()
        except (av.FFmpegError, ValueError) as exc:
            raise EncoderError(f"Cannot start the {kind.value} video encoder at {self.width}x{self.height}: {exc}. "
                               "Choose software encoding or another size.") from exc
        log.info("video encoder %s %dx%d @ %s fps, %s, %d kbps", kind.value, self.width, self.height, self.rate,
                 pix_fmt, kbps)
        return ctx

    def _open_audio(self) -> av.AudioCodecContext:
        try:
            ctx = av.CodecContext.create("aac", "w")
            ctx.sample_rate = self.audio_rate_hz
            ctx.layout = "mono"
            ctx.format = "fltp"
            ctx.bit_rate = self.settings.audio_bitrate_kbps * 1000
            ctx.time_base = self.audio_time_base
            ctx.open()
        except (av.FFmpegError, ValueError) as exc:
            raise EncoderError(f"Cannot start the AAC encoder at {self.audio_rate_hz} Hz: {exc}") from exc
        return ctx

    @property
    def aac_frame_samples(self) -> int:
        return self._audio.frame_size or 1024

    # -- video ------------------------------------------------------------------------------------------------------

    def encode_picture(self, picture: np.ndarray, pix: str, index: int, keyframe: bool = False,
                       capture_ns: int = 0) -> list[EncodedPacket]:
        """Encode one picture as frame ``index`` of the timeline; ``pix``: "rgb24" (H x W x 3), "yuv420p" (I420,
        (H * 3 / 2) x W, converted by the core off the interpreter lock) or "nv12" (the same size); ``keyframe``
        forces an IDR (a sink joined)."""
        if pix not in _PIX_FORMATS:
            raise ValueError(f"pictures come as one of {', '.join(_PIX_FORMATS)}, not {pix!r}")
        if self._video is None:
            # YUV from the core goes to the encoder as it is (libx264 and NVENC take both I420 and NV12); RGB is
            # converted to what the encoder reads natively
            if pix != "rgb24":
                self._pix_fmt = pix
            else:
                self._pix_fmt = "nv12" if self.choice.kind is VideoEncoderKind.NVENC else "yuv420p"
            self._video = self._open_video(self._pix_fmt)
        if pix != self._pix_fmt:
            # swscale on this thread (the CPU path), reading the picture where it lies (a frame made by reformat
            # goes to the encoder: copying the picture into a frame first cost as much as the conversion, 3 ms at
            # 720p); its default matrix is BT.601: ask for BT.709
            frame = av.VideoFrame.from_numpy_buffer(picture, format=pix).reformat(format=self._pix_fmt,
                                                                                  dst_colorspace="ITU709")
        else:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(picture), format=pix)
        frame.pts = index
        frame.time_base = self.video_time_base
        if keyframe:
            frame.pict_type = av.video.frame.PictureType.I
        self.frames_in += 1
        return self._packets(self._video, frame, video=True, capture_ns=capture_ns)

    # -- audio ------------------------------------------------------------------------------------------------------

    def encode_audio(self, samples: np.ndarray, capture_ns: int = 0) -> list[EncodedPacket]:
        """Append program audio (float32 mono at ``audio_rate_hz``, contiguous); returns the AAC frames completed,
        stamped ``capture_ns`` (when the samples that completed them were captured)."""
        buf = np.concatenate([self._audio_buf, samples.astype(np.float32, copy=False)]) if self._audio_buf.size \
            else samples.astype(np.float32, copy=False)
        n = self.aac_frame_samples
        out: list[EncodedPacket] = []
        n_full = buf.size // n * n
        for start in range(0, n_full, n):
            out += self._encode_audio_frame(buf[start:start + n], capture_ns)
        self._audio_buf = buf[n_full:].copy()
        return out

    def _encode_audio_frame(self, chunk: np.ndarray, capture_ns: int = 0) -> list[EncodedPacket]:
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk[None, :]), format="fltp", layout="mono")
        frame.sample_rate = self.audio_rate_hz
        frame.pts = self._audio_pts
        frame.time_base = self.audio_time_base
        self._audio_pts += chunk.size
        return self._packets(self._audio, frame, video=False, capture_ns=capture_ns)

    # -- both -------------------------------------------------------------------------------------------------------

    def _packets(self, ctx: av.CodecContext, frame: av.frame.Frame | None, video: bool,
                 capture_ns: int = 0) -> list[EncodedPacket]:
        try:
            packets = ctx.encode(frame)
        except (av.FFmpegError, ValueError) as exc:
            raise EncoderError(f"Encoding the {'video' if video else 'audio'} failed: {exc}") from exc
        out = []
        tb = self.video_time_base if video else self.audio_time_base
        for p in packets:
            if p.pts is None:
                continue
            data = bytes(p)
            if video:
                self.video_bytes += len(data)
            else:
                self.audio_bytes += len(data)
            dur = p.duration or (1 if video else self.aac_frame_samples)
            out.append(EncodedPacket(video=video, data=data, pts=int(p.pts), duration=int(dur), time_base=tb,
                                     keyframe=bool(p.is_keyframe) if video else True, capture_ns=capture_ns))
        return out

    def flush(self) -> list[EncodedPacket]:
        """The last packets of both encoders (the short last AAC frame included)."""
        out: list[EncodedPacket] = []
        if self._audio_buf.size:
            out += self._encode_audio_frame(self._audio_buf)
            self._audio_buf = np.zeros(0, np.float32)
        out += self._packets(self._audio, None, video=False)
        if self._video is not None:
            out += self._packets(self._video, None, video=True)
        return out

    def close(self) -> None:
        """Nothing to release (the codec contexts go with the object); ``ChildEncoder`` ends its process here."""
