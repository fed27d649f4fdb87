"""Settings of the MP4 encoder (H.264 video + AAC audio)."""

from __future__ import annotations

from dataclasses import dataclass

# Sample rates the AAC encoder (and every MP4 player) accepts. Piper speaks at 22 050 Hz, microphones give
# 48 000 / 44 100 Hz: all of them are here, so in practice the audio is never resampled.
AAC_SAMPLE_RATES_HZ: tuple[int, ...] = (
    8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000,
)

# Rate used when the source rate is not one AAC accepts.
FALLBACK_AUDIO_SAMPLE_RATE_HZ = 48_000


@dataclass(frozen=True)
class EncodeSettings:
    """How ``Mp4Writer`` encodes.

    ``audio_sample_rate_hz=None`` keeps the source rate when AAC supports it (no resampling: the sample count and the
    timing of the written track are exactly the source's, and there is no resampler delay to compensate) and falls
    back to 48 kHz otherwise. Set a rate to force it.
    """

    video_codec: str = "libx264"
    preset: str = "veryfast"  # libx264 speed/size trade-off; "ultrafast" for live output on weak CPUs
    crf: int = 20  # libx264 constant quality, 0 (lossless) .. 51; 18-23 looks clean for faces
    pix_fmt: str = "yuv420p"  # what every player decodes
    gop_frames: int = 50  # keyframe interval; in fragmented mode also the longest stretch a crash can lose
    max_b_frames: int | None = None  # None = the preset's choice; fragmented (live) writers use 0 for low latency
    encoder_threads: int = 0  # libx264 threads, 0 = one per core
    audio_codec: str = "aac"
    audio_bitrate_bps: int = 128_000
    audio_sample_rate_hz: int | None = None  # None = source rate if AAC supports it, else 48 kHz

    def aac_rate_for(self, source_rate_hz: int) -> int:
        """The AAC sample rate used for a source at ``source_rate_hz``."""
        if self.audio_sample_rate_hz is not None:
            return self.audio_sample_rate_hz
        if source_rate_hz in AAC_SAMPLE_RATES_HZ:
            return source_rate_hz
        return FALLBACK_AUDIO_SAMPLE_RATE_HZ
