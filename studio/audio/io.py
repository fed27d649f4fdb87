"""Reading audio files for the pipeline through PyAV (FFmpeg): checked headers, capped decoding, streaming.

Every file is probed before any sample is decoded (``probe_audio``): a sample rate outside 8 kHz..384 kHz (a damaged
header: a WAV claiming 1 Hz would otherwise decode for minutes), a claimed length over the cap or a file over the
size cap is refused at once with one line that says what to do. Decoding streams (``stream_audio``) in blocks of
about a second, so memory stays bounded for a file of any length and progress moves with the decoded time:
- the channels are averaged into mono here, in float32 (a file whose channels cancel, L = -R, falls back to its first
  channel with a warning); a channel that has stayed silent (more than 40 dB under the loudest) is left out of the
  mix, so that a mono microphone recorded into one side of a stereo file keeps its level (with a warning naming it);
- a DC offset (a mean level over ``DC_OFFSET_LEVEL`` in a block) is removed from then on by a first-order high-pass
  at ``DC_CUTOFF_HZ``, which keeps every sample (the timeline's length is unchanged); a recording without one is
  not filtered;
- the program audio is 48 kHz (broadcast): a 48 kHz recording passes through untouched, any other rate is resampled
  by FFmpeg's swresample; the analysis audio (the motion models' input) is 16 kHz;
- clipping (more than 0.1 % of samples at full scale) and near-silence are reported in ``AudioStats``; ``load_audio``
  refuses a silent file (nothing to lip-sync) and warns about a clipped one.
``load_audio`` gathers the blocks of a segment (capped at ``LOAD_MAX_SECONDS``); ``analysis_chunks`` gives only the
16 kHz blocks, for analysing long files with true progress.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from studio.errors import InputError

log = logging.getLogger(__name__)

PROGRAM_RATE_HZ = 48_000
ANALYSIS_RATE_HZ = 16_000
MIN_SOURCE_RATE_HZ = 8_000
MAX_SOURCE_RATE_HZ = 384_000
MAX_CHANNELS = 32
STREAM_MAX_SECONDS = 4 * 3600.0  # streaming analysis of a long recording
LOAD_MAX_SECONDS = 3600.0  # a segment loaded whole: 48 kHz + 16 kHz float32 = 0.9 GB at this length
MAX_FILE_BYTES = 8 * 1024**3
MIN_SECONDS = 0.1
SILENCE_PEAK = 10 ** (-60 / 20)  # -60 dBFS: nothing a listener or a motion model can use
CLIP_LEVEL = 0.999
CLIP_SHARE = 0.001
DEAD_CHANNEL_RATIO = 10 ** (-40 / 20)  # a channel this far under the loudest one adds nothing but halves the level
DC_OFFSET_LEVEL = 10 ** (-54 / 20)  # a block mean over this (0.2 % of full scale) is an offset, not speech
DC_CUTOFF_HZ = 5.0

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class AudioInfo:
    """What a file's header claims, checked (``probe_audio``)."""

    path: Path
    codec: str
    source_rate_hz: int
    channels: int
    duration_s: float | None  # None where the container does not say (decoding counts it)
    size_bytes: int


@dataclass
class AudioStats:
    """Levels measured while decoding (mono, after the downmix)."""

    n_samples: int = 0  # at the source rate
    peak: float = 0.0
    n_clipped: int = 0
    cancelled_channels: bool = False  # the channels cancelled in the mix: the first channel was used
    channel_peaks: np.ndarray | None = None  # per channel, so far
    silent_channels: tuple[int, ...] = ()  # left out of the mix (0-based), as of the last block
    dc_offset: float = 0.0  # the mean level of the first block found with an offset (0: none, nothing filtered)

    @property
    def clipped_share(self) -> float:
        return self.n_clipped / max(1, self.n_samples)


@dataclass(frozen=True)
class AudioBlock:
    """A block of decoded audio: the same stretch of time at the program and the analysis rate."""

    program: np.ndarray  # N, float32 at PROGRAM_RATE_HZ
    analysis: np.ndarray  # M, float32 at ANALYSIS_RATE_HZ
    start_s: float  # source time of the block's first sample


@dataclass(frozen=True)
class DecodedAudio:
    """A whole file: 48 kHz program audio, 16 kHz analysis audio (both mono float32 in -1..1)."""

    program_48k: np.ndarray
    analysis_16k: np.ndarray
    source_rate_hz: int
    duration_s: float
    channels: int = 1
    warnings: tuple[str, ...] = field(default=())


def _av():
    import av

    return av


def probe_audio(path: Path | str, max_seconds: float = STREAM_MAX_SECONDS,
                max_bytes: int = MAX_FILE_BYTES) -> AudioInfo:
    """Open ``path`` and check its header (sample rate, channels, claimed length, file size); decodes nothing."""
    av = _av()
    path = Path(path)
    if not path.exists():
        raise InputError(f"Audio file not found: {path}. Check the path.")
    if not path.is_file():
        raise InputError(f"{path} is not a file: give a WAV, MP3, FLAC or OGG recording.")
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(f"{path.name} is {size / 1024**3:.1f} GB, over the {max_bytes / 1024**3:.0f} GB limit: cut it "
                         "into shorter segments or compress it (FLAC, MP3).")
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise InputError(f"{path.name} has no audio track: give a WAV, MP3 or other audio file.")
            stream = container.streams.audio[0]
            ctx = stream.codec_context
            rate = int(ctx.sample_rate or stream.sample_rate or 0)
            channels = int(ctx.channels or 0)
            codec = ctx.name
            duration = None
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                duration = container.duration / 1_000_000  # AV_TIME_BASE
    except InputError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise InputError(f"Cannot decode {path.name} as audio ({_reason(exc)}): give a WAV, MP3, FLAC or OGG "
                         "file.") from exc
    if not MIN_SOURCE_RATE_HZ <= rate <= MAX_SOURCE_RATE_HZ:
        raise InputError(f"{path.name} claims a sample rate of {rate} Hz, outside {MIN_SOURCE_RATE_HZ // 1000}-"
                         f"{MAX_SOURCE_RATE_HZ // 1000} kHz: its header is damaged; export it again as a 16-48 kHz "
                         "WAV.")
    if not 1 <= channels <= MAX_CHANNELS:
        raise InputError(f"{path.name} claims {channels} audio channels: its header is damaged; export it again as a "
                         "mono or stereo WAV.")
    if duration is not None and duration > max_seconds:
        raise InputError(f"{path.name} lasts {_hms(duration)}, over the {_hms(max_seconds)} limit: cut it into "
                         "shorter segments.")
    return AudioInfo(path, codec, rate, channels, duration, size)


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return text.split(":")[0].strip() or type(exc).__name__


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _MonoResampler:
    """Mono float32 at the source rate -> mono float32 at ``rate`` (swresample; a no-op at the same rate)."""

    def __init__(self, source_rate_hz: int, rate_hz: int) -> None:
        self.source_rate_hz = source_rate_hz
        self._pts = 0
        self._resampler = None
        if rate_hz != source_rate_hz:
            self._resampler = _av().AudioResampler(format="flt", layout="mono", rate=rate_hz)

    def __call__(self, mono: np.ndarray | None) -> np.ndarray:
        av = _av()
        if self._resampler is None:
            return np.zeros(0, np.float32) if mono is None else mono
        frame = None
        if mono is not None:
            if mono.size == 0:
                return np.zeros(0, np.float32)
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(mono[None, :]), format="flt", layout="mono")
            frame.sample_rate = self.source_rate_hz
            frame.pts = self._pts
            frame.time_base = Fraction(1, self.source_rate_hz)
            self._pts += mono.size
        out = [f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame)]
        return np.concatenate(out).astype(np.float32, copy=False) if out else np.zeros(0, np.float32)


class _DcBlocker:
    """A first-order high-pass (y[n] = x[n] - x[n-1] + r y[n-1]) switched on by the first block with a DC offset;
    until then the samples pass untouched. Its state carries from block to block; it starts as if the offset had
    always been there, so that switching it on makes no click."""

    def __init__(self, rate_hz: int, stats: AudioStats) -> None:
        self.r = math.exp(-2 * math.pi * DC_CUTOFF_HZ / rate_hz)
        self.stats = stats
        self.zi: np.ndarray | None = None

    def __call__(self, mono: np.ndarray) -> np.ndarray:
        if mono.size == 0:
            return mono
        if self.zi is None:
            mean = float(mono.mean(dtype=np.float64))
            if abs(mean) <= DC_OFFSET_LEVEL:
                return mono
            self.stats.dc_offset = mean
            self.zi = np.array([-self.r * mean])  # the state after a constant input of ``mean`` (output 0)
        from scipy.signal import lfilter

        y, self.zi = lfilter([1.0, -1.0], [1.0, -self.r], mono.astype(np.float64), zi=self.zi)
        return y.astype(np.float32)


def _downmix(planes: np.ndarray, stats: AudioStats) -> np.ndarray:
    """channels x N float -> N mono float32 (the mean of the channels that are not silent; the first channel where
    the channels cancel)."""
    if planes.shape[0] == 1:
        return planes[0].astype(np.float32, copy=False)
    if planes.shape[1]:
        peaks = np.abs(planes).max(axis=1)
        stats.channel_peaks = peaks if stats.channel_peaks is None else np.maximum(stats.channel_peaks, peaks)
        loudest = float(stats.channel_peaks.max())
        live = stats.channel_peaks > max(SILENCE_PEAK, loudest * DEAD_CHANNEL_RATIO)
        stats.silent_channels = tuple(int(i) for i in np.flatnonzero(~live)) if loudest > SILENCE_PEAK else ()
        if stats.silent_channels:
            planes = planes[live]
            if planes.shape[0] == 1:
                return planes[0].astype(np.float32, copy=False)
    mono = planes.mean(axis=0, dtype=np.float64).astype(np.float32)
    loud = float(np.abs(planes).max()) if planes.size else 0.0
    if loud > SILENCE_PEAK and float(np.abs(mono).max()) < 0.05 * loud:
        stats.cancelled_channels = True
        return planes[0].astype(np.float32, copy=False)
    return mono


def stream_audio(path: Path | str, progress: Progress | None = None, max_seconds: float = STREAM_MAX_SECONDS,
                 block_s: float = 1.0, stats: AudioStats | None = None,
                 info: AudioInfo | None = None) -> Iterator[AudioBlock]:
    """Decode ``path`` in blocks of about ``block_s`` seconds (48 kHz program + 16 kHz analysis, mono).

    Memory is bounded by the block size; ``progress(fraction, message)`` follows the decoded time (against the
    header's length; where the header does not say, against the size of the file read so far). Decoding stops with
    an InputError once ``max_seconds`` have been decoded. ``stats`` (if given) collects peak and clipping."""
    av = _av()
    info = info or probe_audio(path, max_seconds)
    stats = stats if stats is not None else AudioStats()
    report = progress or (lambda fraction, message: None)
    rate = info.source_rate_hz
    to_program = _MonoResampler(rate, PROGRAM_RATE_HZ)
    to_analysis = _MonoResampler(rate, ANALYSIS_RATE_HZ)
    dc_block = _DcBlocker(rate, stats)
    block_n = max(1, int(block_s * rate))
    pending: list[np.ndarray] = []
    pending_n = 0
    done_n = 0
    max_n = int(max_seconds * rate)
    name = info.path.name

    report(0.0, f"reading {name}")
    try:
        with av.open(str(info.path)) as container:
            stream = container.streams.audio[0]
            # native format, native layout: only the sample format changes here (planar float); the mix is ours
            planar = av.AudioResampler(format="fltp", rate=rate)
            last_report = -1.0
            for packet in container.demux(stream):
                for frame in packet.decode():
                    if frame.sample_rate != rate:
                        raise InputError(f"{name} changes its sample rate midway ({rate} -> {frame.sample_rate} "
                                         "Hz): export it again as one WAV.")
                    for out in planar.resample(frame):
                        planes = out.to_ndarray()  # channels x n
                        mono = _downmix(planes.reshape(planes.shape[0], -1), stats)
                        peak = float(np.abs(mono).max()) if mono.size else 0.0
                        stats.peak = max(stats.peak, peak)
                        stats.n_clipped += int(np.count_nonzero(np.abs(mono) >= CLIP_LEVEL)) if peak >= CLIP_LEVEL else 0
                        stats.n_samples += mono.size
                        pending.append(mono)
                        pending_n += mono.size
                if stats.n_samples > max_n:
                    raise InputError(f"{name} is longer than the {_hms(max_seconds)} limit: cut it into shorter "
                                     "segments.")
                if pending_n >= block_n:
                    mono = np.concatenate(pending)
                    pending, pending_n = [], 0
                    mono = np.clip(dc_block(mono), -1.0, 1.0)
                    block = AudioBlock(to_program(mono), to_analysis(mono), done_n / rate)
                    done_n += mono.size
                    yield block
                    if info.duration_s:
                        fraction = min(0.99, done_n / rate / info.duration_s)
                    else:
                        fraction = min(0.99, (packet.pos or 0) / max(1, info.size_bytes))
                    if fraction - last_report >= 0.01:
                        last_report = fraction
                        report(fraction, f"read {_hms(done_n / rate)} of {name}")
            tail = np.clip(dc_block(np.concatenate(pending)), -1.0, 1.0) if pending else np.zeros(0, np.float32)
            start_s = done_n / rate
            done_n += tail.size
            last = AudioBlock(np.concatenate([to_program(tail), to_program(None)]),
                              np.concatenate([to_analysis(tail), to_analysis(None)]), start_s)
            if last.program.size or last.analysis.size:
                yield last
    except InputError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise InputError(f"Cannot decode {name} as audio ({_reason(exc)}): the file is damaged; export it again "
                         "as WAV or FLAC.") from exc
    report(1.0, f"read {_hms(done_n / rate)} of {name}")


def analysis_chunks(path: Path | str, progress: Progress | None = None,
                    max_seconds: float = STREAM_MAX_SECONDS, block_s: float = 1.0) -> Iterator[np.ndarray]:
    """The 16 kHz mono analysis audio of ``path`` in blocks of about ``block_s`` seconds (bounded memory)."""
    for block in stream_audio(path, progress, max_seconds, block_s):
        if block.analysis.size:
            yield block.analysis


def load_audio(path: Path | str, progress: Progress | None = None,
               max_seconds: float = LOAD_MAX_SECONDS) -> DecodedAudio:
    """A whole file as 48 kHz program audio and 16 kHz analysis audio (mono float32), checked and capped.

    Raises InputError (one line) for a missing, damaged, too long, too short or silent file; a clipped recording
    is kept, with a warning in ``DecodedAudio.warnings`` (and the log)."""
    info = probe_audio(path, max_seconds)
    stats = AudioStats()
    est_s = info.duration_s if info.duration_s is not None else 60.0
    program = _Growing(int(est_s * PROGRAM_RATE_HZ) + PROGRAM_RATE_HZ)
    analysis = _Growing(int(est_s * ANALYSIS_RATE_HZ) + ANALYSIS_RATE_HZ)
    for block in stream_audio(info.path, progress, max_seconds, stats=stats, info=info):
        program.append(block.program)
        analysis.append(block.analysis)
    name = info.path.name
    duration = stats.n_samples / info.source_rate_hz
    if duration < MIN_SECONDS:
        raise InputError(f"{name} holds {duration:.2f} s of audio: give a recording of at least {MIN_SECONDS} s.")
    if stats.peak < SILENCE_PEAK:
        level = -math.inf if stats.peak <= 0 else 20 * math.log10(stats.peak)
        raise InputError(f"{name} is silent (peak {level:.0f} dBFS): give a recording with speech in it.")
    warnings = []
    if stats.clipped_share > CLIP_SHARE:
        warnings.append(f"{name} is clipped ({stats.clipped_share * 100:.1f} % of samples at full scale): the mouth "
                        "will follow it, but record it again at a lower level for clean sound.")
    if stats.cancelled_channels:
        warnings.append(f"{name}'s channels cancel each other when mixed (one is inverted): its first channel is "
                        "used.")
    if stats.silent_channels:
        dead = ", ".join(str(i + 1) for i in stats.silent_channels)
        used = ", ".join(str(i + 1) for i in range(info.channels) if i not in stats.silent_channels)
        warnings.append(f"{name}: channel {dead} of {info.channels} is silent; the speech is taken from channel "
                        f"{used} alone, at its own level.")
    if stats.dc_offset:
        log.info("%s has a DC offset of %.4f: removed (high-pass at %g Hz)", name, stats.dc_offset, DC_CUTOFF_HZ)
    for text in warnings:
        log.warning("%s", text)
    return DecodedAudio(program.array(), analysis.array(), info.source_rate_hz, duration, info.channels,
                        tuple(warnings))


class _Growing:
    """A float32 buffer filled block by block (preallocated from the header's length; doubles if it was short)."""

    def __init__(self, capacity: int) -> None:
        self._buf = np.empty(max(1, capacity), np.float32)
        self._n = 0

    def append(self, x: np.ndarray) -> None:
        need = self._n + x.size
        if need > self._buf.size:
            grown = np.empty(max(need, 2 * self._buf.size), np.float32)
            grown[:self._n] = self._buf[:self._n]
            self._buf = grown
        self._buf[self._n:need] = x
        self._n = need

    def array(self) -> np.ndarray:
        return self._buf[:self._n].copy() if self._n < 0.9 * self._buf.size else self._buf[:self._n]


def load_audio_file(path: Path, target_rate_hz: int = 16000) -> tuple[np.ndarray, int]:
    """Decode any audio file to mono float32 at ``target_rate_hz`` (training and evaluation tools; the header is
    checked and decoding capped as in ``load_audio``, the downmix and resampling are FFmpeg's own)."""
    av = _av()
    info = probe_audio(path, LOAD_MAX_SECONDS)
    max_n = int(LOAD_MAX_SECONDS * target_rate_hz)
    try:
        with av.open(str(info.path)) as container:
            resampler = av.AudioResampler(format="flt", layout="mono", rate=target_rate_hz)
            chunks = []
            n = 0
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    n += chunks[-1].size
                if n > max_n:
                    raise InputError(f"{info.path.name} is longer than the {_hms(LOAD_MAX_SECONDS)} limit: cut it "
                                     "into shorter segments.")
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except InputError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise InputError(f"Cannot decode {info.path.name} as audio: give a WAV, MP3, FLAC or OGG file.") from exc
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    if len(audio) < target_rate_hz // 10:
        raise InputError(f"{info.path.name} holds less than 0.1 s of audio: give a longer recording.")
    return np.clip(audio, -1.0, 1.0).astype(np.float32), target_rate_hz
