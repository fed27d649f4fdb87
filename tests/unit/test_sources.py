"""The core's sources and the recorder, without a sound card: the microphone's frame clock (due slots, drops, silence
on stalls, latency, audio continuity), the program's timeline (offline and on a fake clock), the recorder's A/V
alignment, and the microphone motion sources on silent, normal and clipped input."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest

from studio.audio.capture import CaptureStatus
from studio.audio.ringbuffer import AudioRing
from studio.audio.settings import AudioEngine
from studio.contracts import ANALYSIS_RATE_HZ as ANALYSIS_RATE
from studio.contracts import PROGRAM_RATE_HZ, OnAir, Pacing, ProgramBatch, ProgramFormat
from studio.pipeline.sources import MicSource, ProgramItem, ProgramSource

RATE = 16000
FPS = 25.0
FMT = ProgramFormat(width=64, height=64, fps=FPS)
SPF = int(RATE / FPS)  # analysis samples per frame slot (640)


class FakeCapture:
    """Stands in for MicCapture: the test writes the 'microphone' audio into the ring itself."""

    def __init__(self) -> None:
        self.ring = AudioRing(RATE * 10, RATE)
        self.status = CaptureStatus.STOPPED
        self.last_error = ""
        self.device = None

    def start(self) -> None:
        self.status = CaptureStatus.RUNNING

    def stop(self) -> None:
        self.status = CaptureStatus.STOPPED


class FakeClock:
    """A program clock the test moves by hand."""

    def __init__(self, t_s: float = 0.0) -> None:
        self.t = t_s

    def now_s(self) -> float:
        return self.t


def _pace(k: int = 1, cost_s: float = 0.0, lead_s: float = 0.0) -> Pacing:
    return Pacing(max_frames=k, cost_s_per_frame=cost_s, stop=threading.Event(), lead_s=lead_s)


def _mic(lead_s: float = 0.04, stall_ms: float = 60_000.0) -> tuple[MicSource, FakeCapture]:
    cap = FakeCapture()
    src = MicSource(cap, lead_s=lead_s, stall_ms=stall_ms)
    src.open(FMT)
    return src, cap


def _due(src: MicSource, lead_s: float | None = None) -> bool:
    return src.seconds_until_due(lead_s) == 0.0


# -- the microphone -----------------------------------------------------------------------------------------------------

def test_only_the_newest_due_slots_are_produced_and_the_rest_counted_as_dropped() -> None:
    src, cap = _mic()
    assert not _due(src)  # no audio yet: nothing is due
    cap.ring.write(np.zeros(RATE // 2, np.float32))  # 0.5 s at once, as after a hiccup
    a = src.next_chunk(_pace(1))
    lead = int(0.040 * RATE)
    newest = (RATE // 2 - lead) * int(FPS) // RATE  # the newest slot whose audio (+ lead) is in
    assert a.slots.tolist() == [newest]
    assert a.skipped == 0  # the run's first chunk: the slots before it were never due to it (start-up, a restart)
    assert not _due(src)  # the next one is not due yet
    cap.ring.write(np.zeros(SPF, np.float32))  # one more frame period of audio
    b = src.next_chunk(_pace(1))
    assert b.slots.tolist() == [newest + 1] and b.skipped == 0
    cap.ring.write(np.zeros(RATE // 2, np.float32))
    c = src.next_chunk(_pace(4))  # a chunk of up to 4: the newest 4 due slots, the ones passed over counted
    last = (RATE + SPF - lead) * int(FPS) // RATE
    assert c.slots.tolist() == list(range(last - 3, last + 1)) and c.skipped == last - 3 - (newest + 2)


def test_a_loop_one_slot_behind_catches_up_once_then_drops() -> None:
    src, cap = _mic()
    cap.ring.write(np.zeros(RATE // 2, np.float32))
    a = int(src.next_chunk(_pace(1)).slots[0])
    cap.ring.write(np.zeros(2 * SPF, np.float32))  # two slots came due while the loop made one frame
    b = src.next_chunk(_pace(1))
    assert b.slots.tolist() == [a + 1, a + 2] and b.skipped == 0  # caught up: both made, nothing dropped
    cap.ring.write(np.zeros(2 * SPF, np.float32))  # behind again at once: no second catch-up in a row
    c = src.next_chunk(_pace(1))
    assert c.slots.tolist() == [a + 4] and c.skipped == 1
    cap.ring.write(np.zeros(3 * SPF, np.float32))  # two slots behind: dropped, not caught up
    d = src.next_chunk(_pace(1))
    assert d.slots.tolist() == [a + 7] and d.skipped == 2
    cap.ring.write(np.zeros(2 * SPF, np.float32))
    assert src.next_chunk(_pace(1)).slots.tolist() == [a + 8, a + 9]  # one behind after a chunk in time: caught up
    quiet, cap2 = _mic()
    quiet.catch_up = False
    cap2.ring.write(np.zeros(RATE // 2, np.float32))
    first = int(quiet.next_chunk(_pace(1)).slots[0])
    cap2.ring.write(np.zeros(2 * SPF, np.float32))
    e = quiet.next_chunk(_pace(1))
    assert e.slots.tolist() == [first + 2] and e.skipped == 1


def test_microphone_audio_is_contiguous_across_chunks_and_over_skipped_slots() -> None:
    src, cap = _mic()
    x = np.random.default_rng(1).uniform(-0.5, 0.5, 2 * RATE).astype(np.float32)
    chunks = []
    edges = np.cumsum([0] + [1000, 4000] * 6)  # uneven blocks, some longer than a chunk of 3 slots: slots skipped
    for i, j in zip(edges[:-1], edges[1:]):
        cap.ring.write(x[i:j])
        if _due(src):
            chunks.append(src.next_chunk(_pace(3)))
    assert len(chunks) > 5 and sum(c.skipped for c in chunks) > 0
    for c, d in zip(chunks[:-1], chunks[1:]):
        assert d.analysis_start == c.analysis_start + len(c.analysis)
        assert d.audio_start == c.audio_start + len(c.audio)
        assert d.slots[0] == c.slots[-1] + 1 + d.skipped
    for c in chunks:
        assert len(c.audio) == 3 * len(c.analysis) and c.audio_start == 3 * c.analysis_start
    heard = np.concatenate([c.analysis for c in chunks])
    assert chunks[0].analysis_start == 0
    np.testing.assert_array_equal(heard, x[:len(heard)])  # what the microphone heard, sample for sample
    end = chunks[-1].slots[-1] + 1
    assert len(heard) == round(end * RATE / FPS)  # the audio reaches the end of the last slot


class _CountingRing(AudioRing):
    """A ring that counts the samples read out of it."""

    samples_read = 0

    def read(self, start_sample: int, n: int):
        self.samples_read += n
        return super().read(start_sample, n)


def test_the_microphone_ring_is_read_once_at_the_programs_rate() -> None:
    """capture -> ring -> source: each ring sample is read once; at the program's rate (the capture's default) the
    program audio is the microphone's own, sample for sample, and the analysis audio one downsampling of it."""
    rate = PROGRAM_RATE_HZ
    cap = FakeCapture()
    cap.ring = _CountingRing(rate * 10, rate)
    src = MicSource(cap)
    src.open(FMT)
    t = np.arange(2 * rate) / rate
    x = (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    chunks = []
    for i in range(0, len(x), rate // 100):  # 10 ms blocks, as the sound card delivers them
        cap.ring.write(x[i:i + rate // 100])
        while _due(src):
            chunks.append(src.next_chunk(_pace(3)))
    assert cap.ring.samples_read == cap.ring.total_written  # every sample read, none twice
    program = np.concatenate([c.audio for c in chunks])
    np.testing.assert_array_equal(program, x[:len(program)])  # no resampling on the program's way
    analysis = np.concatenate([c.analysis for c in chunks])
    assert len(analysis) == -(-len(program) // 3) and chunks[0].analysis_start == 0
    for c, d in zip(chunks[:-1], chunks[1:]):
        assert d.analysis_start == c.analysis_start + len(c.analysis) and d.audio_start == c.audio_start + len(c.audio)
        assert d.fresh_start == c.fresh_start + len(c.fresh)
    fresh = np.concatenate([c.fresh for c in chunks])
    np.testing.assert_array_equal(fresh[:len(analysis)], analysis)  # what the motion source hears: the same audio
    for c in chunks:  # each chunk brings the audio up to the lead past its last slot's start
        assert c.fresh_start + len(c.fresh) >= round(c.slots[-1] * ANALYSIS_RATE / FPS) + 0.04 * ANALYSIS_RATE
    t16 = np.arange(len(analysis)) / ANALYSIS_RATE - 31 / rate  # the 48 -> 16 kHz low-pass: 31 samples late
    steady = slice(ANALYSIS_RATE // 10, None)  # past the filter's start
    assert np.max(np.abs(analysis[steady] - 0.5 * np.sin(2 * np.pi * 440.0 * t16)[steady])) < 0.01


def test_the_microphone_motion_source_hears_the_chunks_alone() -> None:
    """source -> motion: the motion source needs nothing but the chunks (no source, no ring of the capture)."""
    from studio.contracts import Chunk
    from studio.contracts.coeffs import Coeff
    from studio.pipeline.motion import MicMotion

    motion = MicMotion(engine=AudioEngine.POCKETSPHINX, motion_thread=False)
    motion.open(FMT)  # a motion source is opened with the format alone
    speech = np.concatenate([np.zeros(RATE // 2, np.float32), _speech_16k()])
    lead = int(motion.lead_s * RATE)
    jaw = []
    try:
        for k in range((len(speech) - lead) // SPF):  # one slot a chunk, its audio ahead of it by the lead
            heard_until = (k + 1) * SPF + lead
            fresh = speech[max(0, heard_until - SPF):heard_until] if k else speech[:heard_until]
            chunk = Chunk(index=k, slots=np.array([k]), audio=np.zeros(3 * SPF, np.float32), audio_start=3 * k * SPF,
                          analysis=speech[k * SPF:(k + 1) * SPF], analysis_start=k * SPF, fresh=fresh,
                          fresh_start=heard_until - len(fresh))
            jaw.append(motion.motion(chunk)[0, Coeff.JAW_OPEN])
            motion.motion(chunk)  # the same chunk twice: heard once
    finally:
        motion.close()
    jaw = np.array(jaw)
    assert motion.heard.total_written == (len(jaw) * SPF + lead)
    assert jaw[:10].max() == 0.0 and jaw.max() > 0.2  # lips closed in the silence, open for the speech


def test_latency_runs_from_the_arrival_of_the_shown_sample() -> None:
    from studio.pipeline.outputs import LatencyMeter

    src, cap = _mic()
    arrived = time.monotonic_ns() - 100_000_000  # the audio entered the ring 100 ms ago
    cap.ring.write(np.zeros(RATE // 5, np.float32), arrival_ns=arrived)
    c = src.next_chunk(_pace(2))
    assert c.heard_ns.tolist() == [arrived] * c.n
    meter = LatencyMeter()
    meter.write(ProgramBatch(slots=c.slots, pts_s=c.slots / FPS, frames=np.zeros((c.n, 8, 8, 3), np.uint8),
                             audio=c.audio, audio_start=c.audio_start, heard_ns=c.heard_ns,
                             finished_ns=time.monotonic_ns()))
    assert meter.frames == c.n and meter.percentile(50) >= 100.0


def test_a_silent_microphone_lets_the_clock_run_on_as_silence() -> None:
    src, cap = _mic(stall_ms=20.0)
    time.sleep(0.2)  # no audio at all (a device lost, or a stream not delivering yet)
    a = src.next_chunk(_pace(1))
    assert a is not None and a.heard_ns.tolist() == [0]  # nothing was heard: no latency to report
    assert not a.analysis.any()
    assert src.silence_samples > 0.1 * RATE
    cap.ring.write(np.full(RATE // 5, 0.25, np.float32))  # audio comes back: its slots follow the silence
    b = src.next_chunk(_pace(1))
    assert b.slots[0] > a.slots[0] and b.heard_ns[0] > 0
    assert b.analysis_start == a.analysis_start + len(a.analysis)  # the silence and the audio are one timeline
    assert b.analysis[-1] == np.float32(0.25)


def test_a_microphone_that_stops_delivering_drops_no_frame() -> None:
    """The stall's silence comes at once (``stall_ms`` of it): its slots are produced in order, a chunk at a time,
    instead of being skipped as if the loop had fallen behind (the soak's 3 drops when the sound server died)."""
    src, cap = _mic(stall_ms=100.0)
    cap.ring.write(np.zeros(RATE // 5, np.float32))
    chunks = [src.next_chunk(_pace(2))]
    time.sleep(0.35)  # the device stops delivering
    for _ in range(6):
        chunks.append(src.next_chunk(_pace(2)))
    assert sum(c.skipped for c in chunks) == 0
    slots = np.concatenate([c.slots for c in chunks])
    np.testing.assert_array_equal(slots, np.arange(slots[0], slots[0] + len(slots)))
    assert max(c.n for c in chunks) <= 2 and src.silence_samples >= 0.25 * RATE
    cap.ring.write(np.zeros(RATE // 2, np.float32))  # behind for another reason once the silence is produced: counted
    assert any(src.next_chunk(_pace(1)).skipped > 0 for _ in range(20))


def test_a_restarted_run_counts_no_drops_and_keeps_the_audio_going() -> None:
    """A core restart opens the same source again: the slots that passed meanwhile are skipped, not counted as
    dropped, and the audio stays one timeline (a recording goes on across the restart)."""
    src, cap = _mic()
    cap.ring.write(np.zeros(RATE // 5, np.float32))
    a = src.next_chunk(_pace(1))
    cap.ring.write(np.zeros(RATE // 2, np.float32))  # the core was down for half a second
    src.open(FMT)
    b = src.next_chunk(_pace(1))
    assert b.slots[0] > a.slots[0] + 10 and b.skipped == 0
    assert b.analysis_start == a.analysis_start + len(a.analysis)
    cap.ring.write(np.zeros(RATE // 2, np.float32))
    assert src.next_chunk(_pace(1)).skipped > 0  # behind within a run: counted


def test_a_stopped_source_returns_none() -> None:
    src, _ = _mic()
    pace = _pace(1)
    pace.stop.set()
    assert src.next_chunk(pace) is None


# -- the program timeline -------------------------------------------------------------------------------------------------

def _item(seconds: float, title: str, level: float = 0.1) -> ProgramItem:
    n = int(seconds * RATE)
    return ProgramItem(program_audio=np.full(3 * n, level, np.float32), analysis_audio=np.full(n, level, np.float32),
                       on_air=OnAir(title=title))


def test_offline_program_hands_out_consecutive_chunks_until_the_end() -> None:
    first, second = _item(0.5, "one", 0.1), _item(0.33, "two", 0.2)
    src = ProgramSource([first, second])
    assert not src.live
    src.open(FMT)
    chunks = []
    while (c := src.next_chunk(_pace(8))) is not None:
        chunks.append(c)
    total = math.ceil(0.5 * FPS) + math.ceil(0.33 * FPS)
    slots = np.concatenate([c.slots for c in chunks])
    assert slots.tolist() == list(range(total)) and all(c.skipped == 0 for c in chunks)
    assert src.progress() == 1.0 and src.next_chunk(_pace(8)) is None
    for c, d in zip(chunks[:-1], chunks[1:]):
        assert d.audio_start == c.audio_start + len(c.audio)
        assert d.analysis_start == c.analysis_start + len(c.analysis)
    audio = np.concatenate([c.audio for c in chunks])
    assert len(audio) == FMT.samples_at(total)
    np.testing.assert_allclose(audio[:len(first.program_audio)], 0.1)
    s2 = FMT.samples_at(second.start_slot)
    assert second.start_slot == first.end_slot  # offline items follow each other without a gap
    np.testing.assert_allclose(audio[s2:s2 + len(second.program_audio)], 0.2)
    assert not audio[len(first.program_audio):s2].any()  # the rest of the first item's last slot is silence
    assert chunks[0].seg_start  # no keyframe is carried into a program from before it
    titles = {int(s): c.on_air.title for c in chunks for s in c.slots}
    assert titles[0] == "one" and titles[total - 1] == "two"


def test_the_speaker_is_known_slot_by_slot_and_held_over_a_gap() -> None:
    """A turn changes the speaker on its own slot, and a chunk ends where the next turn begins (a chunk is on air as
    one segment: the new speaker's strap comes on the turn's first frame); slots no segment covers (a gap, nothing
    yet) keep the speaker before them: a programme cut to the speaker does not cut away while nobody speaks."""
    src = ProgramSource()
    src.open(FMT)
    for who, gap, now in ((1, False, 3), (2, False, None), (1, True, None)):
        item = _item(0.3, f"row {who}")  # 8 slots
        item.on_air = OnAir(title=item.on_air.title, speaker=who)
        src.schedule(item, gap=gap, now_slot=now)
    chunks = []
    while (c := src.next_chunk(_pace(8))) is not None:
        chunks.append(c)
    speakers = np.concatenate([c.speaker_rows() for c in chunks])
    assert speakers.tolist() == [0] * 3 + [1] * 8 + [2] * 8 + [2] * 12 + [1] * 8
    assert [c.slots[0] for c in chunks[:4]] == [0, 3, 11, 19]  # the first turn at slot 3, then every 8 slots
    for c in chunks[1:3]:
        assert c.speaker_rows().tolist() == [c.on_air.speaker] * len(c.slots)
    assert chunks[1].on_air.speaker == 1 and chunks[2].on_air.speaker == 2


def test_a_fed_program_waits_for_its_next_item_and_forgets_what_it_handed_out() -> None:
    """A long script is spoken while the render runs: the source waits for the next section instead of ending, and
    keeps only the items it has not handed out yet (memory stays bounded whatever the script's length)."""
    items = [_item(3.0, f"s{k}", 0.1 * (k + 1)) for k in range(4)]
    src = ProgramSource([items[0]])
    src.feed()
    src.open(FMT)
    got = []
    for k in range(1, 4):
        while (c := src.next_chunk(_pace(5))) is not None and c.slots[-1] + 1 < src.total_slots:
            got.append(c)
        got.append(c)
        assert _blocks(src, _pace(5))  # waits for more (a stopped wait returns None)
        src.schedule(items[k], gap=False, now_slot=0)
        assert items[k].start_slot == items[k - 1].end_slot
        assert len(src.items()) <= 2  # the ones handed out more than 2 s ago are forgotten
    src.fed()
    while (c := src.next_chunk(_pace(5))) is not None:
        got.append(c)
    slots = np.concatenate([c.slots for c in got])
    assert slots.tolist() == list(range(4 * 75))
    audio = np.concatenate([c.audio for c in got])
    for k in range(4):
        np.testing.assert_allclose(audio[FMT.samples_at(75 * k):FMT.samples_at(75 * k + 75)], 0.1 * (k + 1))


def _live_source(clock: FakeClock) -> ProgramSource:
    src = ProgramSource(clock=clock, endless=True)
    src.open(FMT)
    return src


def _blocks(src: ProgramSource, pace: Pacing) -> bool:
    """Whether ``next_chunk`` waits (for the clock) instead of handing out a chunk: it is asked on a thread that is then
    told to stop; a source that waited returns None."""
    got: list = []
    t = threading.Thread(target=lambda: got.append(src.next_chunk(pace)))
    t.start()
    t.join(0.2)
    pace.stop.set()
    t.join(10)
    return got == [None]


def test_live_program_renders_about_one_chunk_ahead_and_skips_when_behind() -> None:
    clock = FakeClock(0.0)
    src = _live_source(clock)
    k, cost = 4, 0.01
    a = src.next_chunk(_pace(k, cost))
    assert a.skipped == 0  # the start of a run drops nothing
    ahead = math.ceil((clock.t + 1.25 * cost * k + 0.005) * FPS)  # the earliest slot a chunk can be ready for
    assert a.slots[0] == ahead
    b = src.next_chunk(_pace(k, cost))
    assert b.slots[0] == a.slots[-1] + 1 and b.skipped == 0
    assert _blocks(src, _pace(k, cost))  # the clock stands still: no more than about one chunk ahead of it
    assert src.next_slot <= ahead + 2 * k
    clock.t = 0.2
    c = src.next_chunk(_pace(k, cost))
    assert c.slots[0] == b.slots[-1] + 1 and c.skipped == 0
    clock.t = 2.0  # the loop fell behind by almost two seconds
    d = src.next_chunk(_pace(k, cost))
    assert d.slots[0] == math.ceil((2.0 + 1.25 * cost * k + 0.005) * FPS)
    assert d.skipped == d.slots[0] - (c.slots[-1] + 1) > 0  # skipped and counted, never queued up
    assert d.audio_start == c.audio_start + len(c.audio)  # the program audio goes on over the skipped slots


def test_resync_after_a_pause_in_production_is_not_a_drop() -> None:
    clock = FakeClock(0.0)
    src = _live_source(clock)
    src.next_chunk(_pace(4, 0.01))
    clock.t = 5.0  # production paused (a core restart, the microphone mode) while the clock ran on
    src.resync()
    c = src.next_chunk(_pace(4, 0.01))
    assert c.skipped == 0 and c.slots[0] >= 5.0 * FPS


def test_live_program_schedules_speech_ahead_of_the_clock_and_cuts_it() -> None:
    clock = FakeClock(1.0)
    src = _live_source(clock)
    one = src.schedule(_item(1.0, "one"))
    assert one.start_slot >= math.ceil((1.0 + src.lead_ms / 1000) * FPS)  # never in the past
    two = src.schedule(_item(1.0, "two"))
    assert two.start_slot == one.end_slot + round(src.gap_ms / 1000 * FPS)  # a gap between two segments
    assert src.busy_until_slot() == two.end_slot
    cut_at = one.start_slot + 10
    assert src.cut(cut_at) == cut_at
    assert src.items() == [one] and one.end_slot == cut_at and src.busy_until_slot() == cut_at
    cut_sample = FMT.samples_at(cut_at)
    before = src.program.read(FMT.samples_at(one.start_slot), cut_sample - FMT.samples_at(one.start_slot))
    assert (before > 0).all() and not src.program.read(cut_sample, 3 * PROGRAM_RATE_HZ).any()
    src.next_chunk(_pace(4, 0.01))
    assert src.cut(0) == src.next_slot  # never before what was already handed out


# -- the recorder -----------------------------------------------------------------------------------------------------------

def _program_batches(n: int, missing: tuple[int, ...], per: int = 5) -> list[ProgramBatch]:
    """Slots 0..n-1 in batches of ``per`` (``missing`` ones left out, as a loop that fell behind), slot 25 white and a
    click in the audio at 1.0 s; the audio covers every slot, missing or not, and goes on after the last one."""
    audio = np.zeros(FMT.samples_at(n) + 777, np.float32)  # more audio than frames: trimmed to the video
    audio[PROGRAM_RATE_HZ:PROGRAM_RATE_HZ + 240] = 0.9
    out = []
    for i in range(0, n, per):
        slots = np.array([s for s in range(i, min(n, i + per)) if s not in missing], np.int64)
        a0, a1 = FMT.samples_at(i), FMT.samples_at(min(n, i + per)) if i + per < n else len(audio)
        frames = np.stack([np.full((64, 64, 3), 255 if s == 25 else 0, np.uint8) for s in slots]) if len(slots) \
            else np.zeros((0, 64, 64, 3), np.uint8)
        out.append(ProgramBatch(slots=slots, pts_s=slots / FPS, frames=frames, audio=audio[a0:a1], audio_start=a0))
    return out


def _decode(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with av.open(str(path)) as c:
        luma = np.array([f.to_ndarray(format="gray").mean() for f in c.decode(c.streams.video[0])])
    with av.open(str(path)) as c:
        res = av.AudioResampler(format="flt", layout="mono", rate=PROGRAM_RATE_HZ)
        got = np.concatenate([o.to_ndarray().reshape(-1) for f in c.decode(c.streams.audio[0])
                              for o in res.resample(f)])
    return luma, got


@pytest.mark.parametrize("missing", [(), (10, 11, 12)])
def test_recorder_keeps_the_click_and_the_flash_on_the_same_frame(tmp_path: Path, missing: tuple[int, ...]) -> None:
    from studio.encode.recorder import RecorderOutput

    n = 50
    rec = RecorderOutput(tmp_path / "sync.mp4", fragmented=True, queue_frames=n)
    rec.open(FMT)
    for b in _program_batches(n, missing):
        rec.write(b)
    path = rec.close()
    assert rec.repeated == len(missing) and rec.dropped == 0 and rec.frames == n - len(missing)
    luma, got = _decode(path)
    assert len(luma) == n
    assert int(np.argmax(luma)) == 25
    click_frame = int(np.argmax(np.abs(got))) / PROGRAM_RATE_HZ * FPS
    assert abs(click_frame - 25) < 0.25, click_frame
    assert abs(len(got) - n / FPS * PROGRAM_RATE_HZ) < 1100  # equal track lengths (AAC frames of 1024)
    assert not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize("block", [True, False])
def test_a_recorder_that_falls_behind_drops_frames_never_audio(tmp_path: Path, block: bool) -> None:
    """Two frames of room: blocking (offline) keeps every frame; dropping (live) repeats pictures instead of queueing
    them, and the audio stays whole and in place."""
    from studio.encode.recorder import RecorderOutput

    n = 50
    rec = RecorderOutput(tmp_path / "behind.mp4", fragmented=True, queue_frames=2, block=block)
    rec.open(FMT)
    batches = _program_batches(n + 1, (), per=n)  # one batch of 50 slots at once, then slot 50 alone
    rec.write(batches[0])
    deadline = time.monotonic() + 60
    while rec.frames < (n if block else 2) and time.monotonic() < deadline:  # the encoder takes what it was given
        time.sleep(0.01)
    rec.write(batches[1])
    path = rec.close()
    luma, got = _decode(path)
    assert len(luma) == n + 1
    if block:
        assert rec.dropped == rec.repeated == 0 and int(np.argmax(luma)) == 25
    else:
        assert rec.dropped == n - 2 and rec.repeated == n - 2 and luma.max() < 10  # the flash was among the drops
    click_frame = int(np.argmax(np.abs(got))) / PROGRAM_RATE_HZ * FPS
    assert abs(click_frame - 25) < 0.25, click_frame  # the audio kept its place either way
    assert abs(len(got) - (n + 1) / FPS * PROGRAM_RATE_HZ) < 1100


# -- motion from the microphone ---------------------------------------------------------------------------------------------

def _speech_16k() -> np.ndarray:
    from math import gcd

    from scipy.io import wavfile
    from scipy.signal import resample_poly

    clip = Path("/usr/share/sounds/alsa/Front_Center.wav")
    if not clip.is_file():
        pytest.skip("alsa-utils speech clip missing: apt-get install alsa-utils")
    rate, x = wavfile.read(clip)
    g = gcd(rate, RATE)
    return resample_poly(x.astype(np.float32) / 32768.0, RATE // g, rate // g).astype(np.float32)


@pytest.mark.parametrize("engine", list(AudioEngine))
@pytest.mark.parametrize("gain", [0.0, 1.0, 20.0])  # silent, normal, hard-clipped input
def test_silent_normal_and_clipped_input_give_sane_mouths(gain: float, engine: AudioEngine) -> None:
    from studio.pipeline.motion import MicMotion
    from studio.pipeline.settings import Optimization
    from studio.contracts.coeffs import Coeff

    src, cap = _mic()
    motion = MicMotion(engine=engine, motion_thread=False)
    motion.open(FMT)
    audio = np.clip(_speech_16k() * gain, -1.0, 1.0)
    coeffs = []
    try:
        for i in range(0, audio.size, 160):  # 10 ms blocks, as the sound card delivers them
            cap.ring.write(audio[i:i + 160])
            while _due(src, motion.lead_s):
                chunk = src.next_chunk(_pace(1, lead_s=motion.lead_s))
                chunk.optimizations = frozenset({Optimization.KV_CACHE})
                coeffs.append(motion.motion(chunk))
        stats = motion.stats()
    finally:
        motion.close()
    c = np.concatenate(coeffs)
    jaw = c[:, Coeff.JAW_OPEN]
    assert len(jaw) > 20 and np.isfinite(c).all()
    assert ((jaw >= 0) & (jaw <= 1)).all()
    if gain == 0.0:
        assert jaw.max() == 0.0  # lips closed in silence
        assert stats["sieve_frames_skipped"] == stats["sieve_frames_seen"] > 0  # the sieve heard no speech at all
    else:
        assert jaw.max() > 0.2  # the mouth opens for speech, clipped or not


def test_neural_engine_waits_for_its_lead_and_falls_back_when_its_weights_are_missing(monkeypatch) -> None:
    from studio.errors import ModelLoadError
    from studio.pipeline.motion import MicMotion
    from studio.pipeline.settings import Optimization

    src, cap = _mic()
    motion = MicMotion(engine=AudioEngine.NEURAL, motion_thread=True)
    motion.open(FMT)
    try:
        assert motion.engine is AudioEngine.NEURAL and motion.note == ""
        assert motion.src._worker is not None  # the model runs on its own thread while the source runs
        lead = int(round(motion.src.min_lead_s * RATE))
        assert motion.lead_s == motion.src.min_lead_s > 0.04  # not the 40 ms default lead
        cap.ring.write(np.zeros(RATE // 2, np.float32))
        chunk = src.next_chunk(_pace(1, lead_s=motion.lead_s))  # the core passes the motion source's look-ahead
        assert src.lead == lead
        assert chunk.slots.tolist() == [(RATE // 2 - lead) * int(FPS) // RATE]
        chunk.optimizations = frozenset({Optimization.KV_CACHE})
        motion.motion(chunk)
        assert motion.stats()["frames_missing"] == 0
    finally:
        motion.close()
    assert motion.src._worker is None

    def no_weights():
        raise ModelLoadError("Audio-to-motion weights not found.")

    monkeypatch.setattr("studio.neural.mic.default_engine", no_weights)
    src2, _ = _mic()
    fallback = MicMotion(engine=AudioEngine.NEURAL, motion_thread=False)
    fallback.open(FMT)
    assert fallback.engine is AudioEngine.POCKETSPHINX
    assert "weights not found" in fallback.note and "pocketsphinx" in fallback.note
    assert fallback.lead_s == 0.04


def test_baseline_chunks_do_not_restart_the_live_neural_model() -> None:
    """The studio measures compute saved with baseline chunks that have the sieve off; the microphone's model keeps
    the producer's options (a restart would close the mouth until the model has its lead of audio again)."""
    from studio.pipeline.motion import MicMotion
    from studio.pipeline.settings import Optimization

    src, cap = _mic()
    motion = MicMotion(engine=AudioEngine.NEURAL, motion_thread=False)
    motion.open(FMT)
    normal = frozenset({Optimization.KV_CACHE, Optimization.SILENCE_SIEVE})
    sessions = set()
    try:
        audio = _speech_16k()
        for i in range(0, audio.size, 160):
            cap.ring.write(audio[i:i + 160])
            while _due(src, motion.lead_s):
                chunk = src.next_chunk(_pace(1, lead_s=motion.lead_s))
                chunk.plain = chunk.index % 2 == 1  # every other chunk a baseline: generation flags off
                chunk.optimizations = normal - {Optimization.SILENCE_SIEVE} if chunk.plain else normal
                motion.motion(chunk)
                sessions.add(id(motion.src._session))
    finally:
        motion.close()
    assert len(sessions) == 1


def test_the_preview_forgets_frames_of_a_clock_it_leaves():
    """The switch to the microphone: frames the script's core made on the program clock and not shown yet are due in
    program seconds; against the microphone's monotonic time they were all due at once, and all but one counted as
    superseded (3 drops at every switch in the soak). A change of clock forgets them, as a cut does."""
    from studio.pipeline.outputs import PreviewOutput

    clock = FakeClock(0.0)
    preview = PreviewOutput(clock=clock)
    preview.open(FMT)
    try:
        frames = np.zeros((4, 64, 64, 3), np.uint8)
        preview.write(ProgramBatch(slots=np.arange(25, 29), pts_s=np.arange(25, 29) / FPS, frames=frames,
                                   audio=np.zeros(0, np.float32), audio_start=0))
        time.sleep(0.1)
        assert preview.latest_frame() is None  # due at 1.0 s; the program clock stands at 0
        preview.set_clock(None)
        time.sleep(0.1)
        assert preview.superseded == 0 and preview.latest_frame() is None
        preview.write(ProgramBatch(slots=np.arange(0, 2), pts_s=np.arange(0, 2) / FPS, frames=frames[:2],
                                   audio=np.zeros(0, np.float32), audio_start=0))
        deadline = time.monotonic() + 5
        while (preview.latest_frame() is None or preview.latest_frame().index != 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert preview.latest_frame().index == 1 and preview.superseded == 0  # as they come, one per frame period
    finally:
        preview.close()


def test_the_preview_wakes_its_listener_when_a_new_frame_is_the_latest() -> None:
    """``on_present`` is called on the present thread each time a new frame becomes the latest (the window shows it
    then, not at its next tick), and only then."""
    import threading

    from studio.pipeline.outputs import PreviewOutput

    preview = PreviewOutput(clock=None)
    woken: list[int] = []
    got = threading.Event()

    def wake() -> None:
        woken.append(preview.latest_frame().index)
        got.set()

    preview.on_present = wake
    preview.open(FMT)
    try:
        time.sleep(0.1)
        assert not woken  # nothing shown, nothing to wake for
        frames = np.zeros((1, 64, 64, 3), np.uint8)
        preview.write(ProgramBatch(slots=np.arange(7, 8), pts_s=np.arange(7, 8) / FPS, frames=frames,
                                   audio=np.zeros(0, np.float32), audio_start=0))
        assert got.wait(5)
        time.sleep(0.1)
        assert woken == [7]
    finally:
        preview.close()


def test_an_item_queued_before_the_source_opens_is_placed_at_open_as_if_given_at_creation() -> None:
    """A render makes its core before its speech is ready (the speech is synthesized meanwhile) and queues the item
    then: the program is the same as with the item given up front; queueing into an open source is refused."""
    given, queued = ProgramSource([_item(0.5, "a")]), ProgramSource()
    queued.queue(_item(0.5, "a"))
    for src in (given, queued):
        src.open(FMT)
    assert queued.total_slots == given.total_slots > 0
    with pytest.raises(RuntimeError, match="schedule"):
        queued.queue(_item(0.5, "b"))
