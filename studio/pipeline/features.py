"""The audio features an engine needs, made in stage A of the core: its audio encoder (whisper-tiny, wav2vec2-base,
HuBERT-large, Wav2Lip's mel: ``studio.generators.audio_encoders``), behind the fingerprint cache when AUDIO_CACHE is
on.

Each program item is encoded on a window grid anchored at its own first sample, so that a repeated item (a station
ident) presents the very same windows to the fingerprint cache. A window already encoded for this item (slots of the
next chunk fall in it too) is taken from a small per-stream memo, which is not the audio cache: without the memo the
plain pipeline would encode each window once per chunk, and the cache would be credited with hits it did not earn.
The microphone (no items) is one endless item from the start of the session.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict

import numpy as np

from studio.contracts import ANALYSIS_RATE_HZ, Chunk

log = logging.getLogger(__name__)

_MEMO_WINDOWS = 64
_LIVE_KEEP_S = 30.0


class FeatureStage:
    """See the module docstring. ``features(chunk, cache)`` -> K x shape_per_frame float32."""

    def __init__(self, generator, settings) -> None:
        from studio.audio.fingerprint import EncoderCallTimes, FingerprintCache

        self.encoder = generator.audio_encoder()
        self.spec = generator.info.audio
        self.fps = settings.fps
        self.cache = FingerprintCache(20_000)
        self._memo: OrderedDict[bytes, np.ndarray] = OrderedDict()  # (stream, window content) -> frames
        self.times = EncoderCallTimes()  # every encoder call made (cache misses included)
        self.frames = 0
        self._live = np.zeros(0, np.float32)  # microphone: analysis audio from _live_start on
        self._live_start = None

    def _encode(self, window: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.encoder.encode_window(window)
        self.times.add((time.perf_counter() - t0) * 1e3)
        return out

    def _encode_fn(self, cache: bool, stream: int):
        """``encode`` for one stream (a program item, or the microphone): the memo is per stream."""
        from studio.audio.features import log_mel

        def encode(window: np.ndarray) -> np.ndarray:
            key = stream.to_bytes(8, "little", signed=True) + hashlib.blake2b(window.tobytes(), digest_size=16).digest()
            got = self._memo.get(key)
            if got is not None:
                self._memo.move_to_end(key)
                return got
            if cache:  # keyed by the window's quantized log-mel (studio.audio.fingerprint); the encoder on a miss
                out = self.cache.get_or_compute(log_mel(window), lambda _mel: self._encode(window))
            else:
                out = self._encode(window)
            self._memo[key] = out
            while len(self._memo) > _MEMO_WINDOWS:
                self._memo.popitem(last=False)
            return out

        return encode

    def features(self, chunk: Chunk, cache: bool) -> np.ndarray:
        k = chunk.n
        out = np.zeros((k, *self.spec.shape_per_frame), np.float32)
        if chunk.items:
            for item in chunk.items:
                sel = np.flatnonzero((chunk.slots >= item.start_slot) & (chunk.slots < item.end_slot))
                if not len(sel):
                    continue
                times = (chunk.slots[sel] - item.start_slot) / self.fps
                out[sel] = self.encoder.features_for_slots(item.analysis_audio, times, self.fps,
                                                           encode=self._encode_fn(cache, id(item)))
        elif len(chunk.analysis):  # the microphone: one item from the session's start, the last seconds kept
            if self._live_start is None:
                self._live_start = chunk.analysis_start
            self._live = np.concatenate([self._live, chunk.analysis])
            win = int(round(2.0 * ANALYSIS_RATE_HZ))
            excess = len(self._live) - int(_LIVE_KEEP_S * ANALYSIS_RATE_HZ)
            if excess > 0:  # drop whole windows so that the grid stays where it was
                drop = excess // win * win
                self._live = self._live[drop:]
                self._live_start += drop
            t0 = self._live_start / ANALYSIS_RATE_HZ
            times = chunk.slots / self.fps - t0
            out[:] = self.encoder.features_for_slots(self._live, times, self.fps, encode=self._encode_fn(cache, -1))
        self.frames += k
        return out

    def stats(self) -> dict[str, float]:
        """Cache hits and misses, and what the hits saved: each hit one encoder call, at the median time of the calls
        after the first (the first warms the encoder up and is reported apart; with one call, that call's time)."""
        st = self.cache.stats()
        per_call, calls = self.times.per_call_ms(), self.times.n
        return {"hits": st.hits, "misses": st.misses, "saved_ms": st.hits * per_call if calls else 0.0,
                "saved_ms_per_frame": (st.hits * per_call / max(1, self.frames)) if calls else 0.0,
                "encoder_ms_per_call": per_call, "encoder_first_call_ms": self.times.first_ms,
                "encoder_calls": calls}
