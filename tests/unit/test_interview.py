"""Interview mode without a sound card: the guest's microphone ring fed slot by slot with human speech, the host's
turns synthetic speech with phone timings; the source's mix, its turn-taking and both rows' motion are checked on
exactly what the core would get."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from studio.contracts import PROGRAM_RATE_HZ, Pacing, ProgramFormat
from studio.contracts.coeffs import Coeff
from studio.pipeline.interview import GUEST, HOST, Floor, InterviewSettings, split_turns

FPS = 25.0
SLOT = int(PROGRAM_RATE_HZ / FPS)  # program samples a slot
ALSA = Path("/usr/share/sounds/alsa")


def test_turns_end_at_paragraphs_and_after_questions() -> None:
    script = "Good evening.  What did you\nsee at the river? And then?\n\n  Thank you.\n"
    assert split_turns(script) == ["Good evening. What did you see at the river?", "And then?", "Thank you."]
    assert split_turns("  \n\n ") == []


def test_the_floor_waits_for_the_answer_and_its_pause() -> None:
    s = InterviewSettings(open_after_s=0.5, min_answer_s=0.3, answer_pause_s=0.4, wait_s=6.0)
    f = Floor(s, frame_s=0.1)
    f.hear([False] * 5)
    assert f.host_may_speak(0.5)  # the host opens
    f.host_turn(end_s=2.0)
    f.hear([False] * 15)  # heard up to 2.0 s
    assert not f.host_may_speak(1.5)  # its own turn runs
    assert not f.host_may_speak(2.0)  # no answer yet
    f.hear([True] * 10)  # the guest answers 1 s
    assert f.who(host_speaking=False) == GUEST
    assert not f.host_may_speak(3.0)  # still speaking
    f.hear([False] * 3)
    assert not f.host_may_speak(3.3)  # paused 0.3 s: not yet
    f.hear([False] * 1)
    assert f.host_may_speak(3.4)
    assert f.who(host_speaking=False) == GUEST  # the floor stays with who spoke last
    f.host_turn(end_s=5.0)
    f.hear([False] * 60)
    assert not f.host_may_speak(10.9) and f.host_may_speak(11.0)  # no answer: the host goes on after wait_s


def _speech_48k() -> np.ndarray:
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    parts = []
    for name in ("Front_Center.wav", "Front_Left.wav"):
        if not (ALSA / name).is_file():
            pytest.skip("alsa-utils speech clips missing: apt-get install alsa-utils")
        rate, x = wavfile.read(ALSA / name)
        x = x.astype(np.float32) / 32768.0
        x = x.mean(axis=1) if x.ndim > 1 else x
        parts += [resample_poly(x, PROGRAM_RATE_HZ, rate).astype(np.float32), np.zeros(PROGRAM_RATE_HZ // 4,
                                                                                        np.float32)]
    return np.concatenate(parts)


def _host_turn(seconds: float = 1.6):
    """Synthetic host speech: 'ma' syllables, the vowel loud, with their phone timings."""
    from studio.pipeline.sources import ProgramItem
    from studio.speech.types import PhonemeTiming

    phones, t = [], 0.0
    while t + 0.3 <= seconds:
        phones += [PhonemeTiming("m", t, t + 0.08), PhonemeTiming("a", t + 0.08, t + 0.3, stress=1)]
        t += 0.3

    def audio(rate: int) -> np.ndarray:
        tt = np.arange(int(seconds * rate)) / rate
        loud = np.zeros_like(tt)
        for p in phones:
            loud[(tt >= p.start_s) & (tt < p.end_s)] = 0.5 if p.phoneme == "a" else 0.05
        return (loud * np.sin(2 * np.pi * 180 * tt) * (1 + 0.5 * np.sin(2 * np.pi * 540 * tt))).astype(np.float32)

    return ProgramItem(program_audio=audio(PROGRAM_RATE_HZ), analysis_audio=audio(16000), phonemes=tuple(phones))


def _run(mic_audio: np.ndarray, turns, settings: InterviewSettings):
    """Every chunk of a run over ``mic_audio`` (one slot a chunk), with the motion of each."""
    import threading

    from studio.audio.ringbuffer import AudioRing
    from studio.audio.settings import AudioEngine
    from studio.pipeline.interview import InterviewMotion, InterviewSource
    from studio.pipeline.sources import MicSource

    ring = AudioRing(len(mic_audio) + 10 * SLOT, PROGRAM_RATE_HZ)
    source = InterviewSource(MicSource(types.SimpleNamespace(ring=ring)), settings)
    motion = InterviewMotion(AudioEngine.POCKETSPHINX, motion_thread=False)
    for t in turns:
        source.add_turn(t)
    fmt = ProgramFormat(width=512, height=256, fps=FPS, rows=2)
    source.open(fmt)
    motion.open(fmt)
    pace = Pacing(max_frames=1, cost_s_per_frame=0.01, stop=threading.Event(), lead_s=motion.lead_s)
    lead = int(round(motion.lead_s * PROGRAM_RATE_HZ))
    chunks, coeffs, written = [], [], 0
    for k in range((len(mic_audio) - lead) // SLOT):
        upto = k * SLOT + lead  # exactly what slot k needs
        ring.write(mic_audio[written:upto])
        written = upto
        chunk = source.next_chunk(pace)
        assert [int(s) for s in chunk.slots] == [k]
        coeffs.append(motion.motion(chunk))
        chunks.append(chunk)
    motion.close()
    return source, motion, chunks, np.concatenate(coeffs)


def _mouth(c: np.ndarray) -> np.ndarray:
    return c[..., Coeff.JAW_OPEN] + c[..., Coeff.LIP_PART]


def test_interview_mixes_in_sync_takes_turns_and_each_row_listens() -> None:
    speech = _speech_48k()
    settings = InterviewSettings(open_after_s=0.2, answer_pause_s=0.4)
    guest_at = int(2.4 * PROGRAM_RATE_HZ)  # after the host's first turn (0.2 .. 1.8 s)
    mic = np.concatenate([np.zeros(guest_at, np.float32), speech, np.zeros(3 * PROGRAM_RATE_HZ, np.float32)])
    turns = [_host_turn(), _host_turn()]
    source, motion, chunks, coeffs = _run(mic, turns, settings)
    n = len(chunks)

    # turn-taking: the host opens, then waits for the guest's answer and its pause
    assert [p.number for p in source.placed] == [1, 2]
    first, second = source.placed
    assert first.start_slot == round(settings.open_after_s * FPS)
    guest_end_slot = (guest_at + len(speech)) / SLOT
    voiced = np.flatnonzero(np.abs(speech) > 0.01)
    speech_end_slot = (guest_at + voiced[-1]) / SLOT
    assert second.start_slot >= speech_end_slot + settings.answer_pause_s * FPS
    assert second.start_slot < guest_end_slot + 2.0 * FPS

    # the programme audio: the microphone plus the host's turns, sample for sample where they were placed
    audio = np.concatenate([c.audio for c in chunks])
    assert chunks[0].audio_start == 0
    want = mic[:len(audio)].copy()
    for p, item in zip(source.placed, turns):
        a = p.start_slot * SLOT
        want[a:a + len(item.program_audio)] += item.program_audio[:max(0, len(want) - a)]
    assert np.abs(audio - np.clip(want, -1, 1)).max() < 1e-6

    # who speaks, per chunk: the host during its turns, the guest while heard
    who = np.array([c.on_air.speaker for c in chunks])
    host_slots = np.zeros(n, bool)
    for p in source.placed:
        host_slots[p.start_slot:p.start_slot + p.n_slots] = True
    assert (who[host_slots] == HOST).all()
    g0, g1 = int(guest_at / SLOT) + 5, int(speech_end_slot)
    assert (who[g0:g1] == GUEST).mean() > 0.9
    assert all(c.on_air.row == c.on_air.speaker for c in chunks)

    # the host's mouth rests while the guest speaks, and the guest's follows the microphone
    mouth = _mouth(coeffs)  # n x 2
    assert mouth[g0:g1, HOST].max() == 0.0
    assert mouth[host_slots, HOST].mean() > 0.1
    assert mouth[host_slots, GUEST].max() < 0.05
    loud = np.array([np.sqrt(np.mean(mic[k * SLOT:(k + 1) * SLOT] ** 2)) for k in range(n)])
    span = slice(g0 - 5, g1 + 5)
    r = np.corrcoef(mouth[span, GUEST], np.log(loud[span] + 1e-4))[0, 1]
    assert r > 0.5, r

    # listeners nod at the other's phrase ends and turn toward the speaker
    assert motion.nods_cued[HOST] >= 1 and motion.nods_cued[GUEST] >= 1
    yaw = coeffs[..., Coeff.HEAD_YAW_DEG]
    late_guest = slice(g0 + 15, g1)  # the turn has eased in
    assert (yaw[late_guest, HOST] - yaw[late_guest, GUEST]).mean() > 1.0  # the host turns toward the guest's seat


def test_stop_silences_the_turn_on_air_and_drops_the_rest() -> None:
    import threading

    from studio.audio.ringbuffer import AudioRing
    from studio.pipeline.interview import InterviewSource
    from studio.pipeline.sources import MicSource

    ring = AudioRing(20 * PROGRAM_RATE_HZ, PROGRAM_RATE_HZ)
    source = InterviewSource(MicSource(types.SimpleNamespace(ring=ring)), InterviewSettings(open_after_s=0.0))
    source.cut()  # before the run: harmless
    source.add_turn(_host_turn())
    source.add_turn(_host_turn())
    source.open(ProgramFormat(width=512, height=256, fps=FPS, rows=2))
    pace = Pacing(max_frames=1, cost_s_per_frame=0.01, stop=threading.Event(), lead_s=0.04)
    audio = []
    for k in range(60):
        ring.write(np.zeros(SLOT, np.float32))
        audio.append(source.next_chunk(pace).audio)
        if k == 10:
            source.cut()
    first = source.placed[0]
    assert first.start_slot == 0 and len(source.placed) == 1 and source.waiting() == 0
    heard = np.abs(np.concatenate(audio)).reshape(60, SLOT).max(axis=1)
    assert heard[:10].max() > 0.1 and heard[12:].max() == 0.0  # silent from the slot after the stop on


def test_the_host_smiles_now_and_then_while_the_guest_talks_with_a_closed_mouth() -> None:
    """The guest answers for several seconds: the host (listening, mouth at rest) smiles at the cues of the guest's
    speech as it arrives, spread alone, never over the host's own turn; the counts reach the stats."""
    speech = _speech_48k()
    settings = InterviewSettings(open_after_s=0.2, answer_pause_s=0.4)
    guest_at = int(2.4 * PROGRAM_RATE_HZ)
    answer = np.concatenate([speech] * 4)
    mic = np.concatenate([np.zeros(guest_at, np.float32), answer, np.zeros(3 * PROGRAM_RATE_HZ, np.float32)])
    source, motion, chunks, coeffs = _run(mic, [_host_turn(), _host_turn()], settings)
    spread = coeffs[..., Coeff.LIP_SPREAD]
    host_slots = np.zeros(len(chunks), bool)
    for p in source.placed:
        host_slots[p.start_slot:p.start_slot + p.n_slots] = True
    g0, g1 = int(guest_at / SLOT), int((guest_at + len(answer)) / SLOT)
    assert motion.smiles[HOST].count >= 1 and motion.stats()["smiles_host"] == motion.smiles[HOST].count
    smiling = np.flatnonzero(spread[:, HOST] > 0.3)
    assert len(smiling) and g0 <= smiling[0] < g1 + 3 * FPS  # while (or just after) the guest speaks
    assert not host_slots[smiling].any()  # never over the host's own turn
    assert _mouth(coeffs)[smiling, HOST].max() == 0.0  # the mouth stays closed
    assert spread[:g0, HOST].max() < 0.3  # before anyone has spoken to it, no smile
