"""The neural engine on the live microphone path: the mouth of every frame is out once the stated lead of audio
after it is in the ring, streaming in small blocks gives the offline engine's numbers, silence closes the mouth."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from studio.audio.ringbuffer import AudioRing
from studio.audio.settings import MicMotionSettings
from studio.neural.engine import SAMPLES_PER_FRAME, NeuralMotionEngine
from studio.neural.mic import NeuralMicMotionSource
from studio.neural.model import Audio2Motion, ModelConfig
from studio.neural.settings import Backend, NeuralSettings
from studio.contracts.coeffs import MOUTH_COEFFS

RATE = 16000


def _engine(vad_gate: bool = False) -> NeuralMotionEngine:
    torch.manual_seed(3)
    m = Audio2Motion(ModelConfig(enc_channels=16, d_model=32, n_layers=2, n_heads=2, window=8, dropout=0.0)).eval()
    return NeuralMotionEngine(NeuralSettings(backend=Backend.TORCH, fingerprint_capacity=0, vad_gate=vad_gate), model=m)


def _voice_like(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    rng = np.random.default_rng(0)
    syll = (np.sin(2 * np.pi * 4 * t) > 0).astype(np.float32)
    return (0.2 * syll * (np.sin(2 * np.pi * 150 * t) + 0.3 * rng.standard_normal(len(t)))).astype(np.float32)


def _human_voice() -> np.ndarray:
    """alsa-utils' "Front Center" (a human voice; installers/setup.sh) with 0.5 s of silence either side."""
    from pathlib import Path

    from studio.audio.io import load_audio_file

    clip = Path("/usr/share/sounds/alsa/Front_Center.wav")
    if not clip.exists():
        pytest.skip("alsa-utils sound clips not installed")
    voice, _ = load_audio_file(clip)
    pause = np.zeros(RATE // 2, np.float32)
    return np.concatenate([pause, voice, pause])


@pytest.mark.parametrize("block, vad_gate", [(160, False), (441, False), (1024, False), (441, True), (1024, True)])
def test_each_frame_is_out_once_its_lead_has_arrived_and_matches_offline(block: int, vad_gate: bool) -> None:
    """Without the VAD gate on a voice-like signal (Silero would call it silence throughout); with it on a human
    voice: the gate needs no audio beyond the model's lead, so frames come out as early and equal the offline ones."""
    eng = _engine(vad_gate)
    audio = _human_voice() if vad_gate else _voice_like(3.0)
    ring = AudioRing(RATE * 20, RATE)
    src = NeuralMicMotionSource(ring, MicMotionSettings(), engine=eng)
    lead = int(round(src.min_lead_s * RATE))
    mouths = []
    for a in range(0, len(audio), block):
        ring.write(audio[a:a + block])
        src.pump()
        written = ring.total_written
        # every frame whose start + lead is in the ring must be out (but the stream's first frame, which waits for
        # the first full encoder window: 40 ms more)
        due = (written - lead) // SAMPLES_PER_FRAME + 1 if written >= lead + SAMPLES_PER_FRAME else 0
        assert len(src._mouth) + src._first_kept >= min(due, len(audio) // SAMPLES_PER_FRAME)
    for j in range(len(src._mouth)):
        mouths.append(src.mouth_at((j * SAMPLES_PER_FRAME + 1) / RATE))
    offline = eng.motion(audio).mouth
    n = len(mouths)
    assert n >= len(audio) // SAMPLES_PER_FRAME - 5
    assert np.abs(np.stack(mouths) - offline[:n]).max() < 1e-4
    assert src.stats().frames_missing == 0
    if vad_gate:  # the pauses were put to rest, the words were not
        assert 0 < src._session.frames_gated < n


def test_silence_keeps_the_mouth_still_and_the_sieve_quiet() -> None:
    ring = AudioRing(RATE * 20, RATE)
    src = NeuralMicMotionSource(ring, MicMotionSettings(), engine=_engine())
    ring.write(np.zeros(RATE * 2, np.float32))
    out = np.stack([src.frame(t) for t in np.arange(0, 1.7, 0.04)])
    idx = [int(c) for c in MOUTH_COEFFS]
    assert np.ptp(out[5:, idx], axis=0).max() < 0.02  # the model's output settles on one shape in silence
    assert not src.speaking_at(1.0)
    assert src.stats().recognizer_share == 1.0  # the model hears every sample, silence too


def test_the_live_voice_stays_out_of_the_shared_fingerprint_cache() -> None:
    from studio.audio.fingerprint import FingerprintCache

    eng = _engine()
    eng.fingerprints = FingerprintCache(1000)
    ring = AudioRing(RATE * 20, RATE)
    src = NeuralMicMotionSource(ring, MicMotionSettings(), engine=eng)
    ring.write(_voice_like(1.0))
    assert src.pump() > 0
    assert len(eng.fingerprints) == 0
    eng.motion(_voice_like(1.0))  # a rendered segment does use it
    assert len(eng.fingerprints) > 0


def test_the_worker_thread_runs_the_model_as_audio_arrives_with_the_same_numbers() -> None:
    """With ``start_worker()`` the frames are made without anyone calling ``frame()``/``pump()``, and they equal the
    offline engine's; ``frame()`` still finishes what the worker has not done; ``stop_worker()`` ends the thread."""
    import time

    eng = _engine()
    audio = _voice_like(2.0)
    ring = AudioRing(RATE * 20, RATE)
    src = NeuralMicMotionSource(ring, MicMotionSettings(), engine=eng)
    src.start_worker(period_s=0.002)
    try:
        for a in range(0, len(audio), 1024):
            ring.write(audio[a:a + 1024])
            time.sleep(0.002)
        deadline = time.monotonic() + 30
        want = (len(audio) - int(round(src.min_lead_s * RATE))) // SAMPLES_PER_FRAME
        while src._first_kept + len(src._mouth) < want and time.monotonic() < deadline:
            time.sleep(0.01)
        assert src._first_kept + len(src._mouth) >= want  # the worker made them: nobody called pump() or frame()
        worker = src._worker
        assert worker is not None and worker.is_alive()
        src.frame(1.0)  # the clock's call: reads what is ready (and finishes what is not)
    finally:
        src.stop_worker()
    assert not worker.is_alive() and src._worker is None
    mouths = np.stack([src.mouth_at((j * SAMPLES_PER_FRAME + 1) / RATE) for j in range(len(src._mouth))])
    assert np.abs(mouths - eng.motion(audio).mouth[:len(mouths)]).max() < 1e-4
    assert src.worker_error == "" and src.stats().frames_missing == 0
    assert src.stats().recognizer.cpu_ms_per_chunk_median > 0  # the model's time per frame, measured by the worker


def test_a_source_dropped_without_stop_worker_ends_its_thread() -> None:
    import gc
    import time

    src = NeuralMicMotionSource(AudioRing(RATE * 2, RATE), MicMotionSettings(), engine=_engine())
    src.start_worker(period_s=0.002)
    worker = src._worker
    assert worker is not None and worker.is_alive()
    del src
    gc.collect()
    worker.join(timeout=5)
    assert not worker.is_alive()


def test_the_inline_kv_probe_times_the_uncached_step_and_changes_no_frame() -> None:
    """``kv_probe="inline"``: every KV_PROBE_PERIOD_S of the stream the step is also run without the cache over the
    stream's tokens so far and both are timed; the frames are those of a session without the probe; no probe without
    the cache."""
    from studio.neural.engine import KV_PROBE_PERIOD_S
    from studio.neural.constants import FPS

    eng = _engine()
    audio = _voice_like(6.0)
    plain = eng.session(kv_probe="")
    probed = eng.session(kv_probe="inline")
    m0 = np.concatenate([plain.push(audio)[0], plain.flush()[0]])
    m1 = np.concatenate([probed.push(audio)[0], probed.flush()[0]])
    np.testing.assert_array_equal(m0, m1)
    assert probed.kv_probe_count >= 2 and not plain.kv_probes
    tokens = [p[2] for p in probed.kv_probes]
    assert tokens[0] == int(KV_PROBE_PERIOD_S * FPS) and tokens == sorted(tokens)  # the stream so far, growing
    assert all(c > 0 and u > 0 for c, u, _ in probed.kv_probes)
    saved, n = probed.kv_saved_ms()
    assert math.isfinite(saved) and n in tokens
    uncached = eng.session(kv_cache=False, kv_probe="inline")
    uncached.push(audio)
    assert uncached.kv_probe_count == 0


def test_the_microphone_kv_probe_measures_the_live_stream() -> None:
    """The live source's probe (its own thread calls it every few seconds) times the current stream uncached; the
    microphone motion source reports the saving per output frame; switching the cache off stops the probes."""
    eng = _engine()
    audio = _voice_like(3.0)
    ring = AudioRing(RATE * 20, RATE)
    src = NeuralMicMotionSource(ring, MicMotionSettings(), engine=eng)
    assert src.probe_kv() == 0.0 and not math.isfinite(src.kv_saved_ms()[0])  # nothing heard yet
    ring.write(audio)
    made = src.pump()
    assert src.probe_kv() > 0
    saved, tokens = src.kv_saved_ms()
    assert math.isfinite(saved) and tokens == made
    src.set_options(kv_cache=False, skip_silence=False)
    ring.write(audio)
    src.pump()
    assert src.probe_kv() == 0.0 and len(src._kv_probes) == 1
