"""The encode hub: one H.264 + AAC encode of the program, fanned out to every sink that wants that format.

    core --ProgramBatch--> EncodeHub.submit --bounded queue--> encode thread --EncodedPacket--> Sink* (own threads)
                                                                                                MP4 file, RTMP/FLV,
                                                                                                MPEG-TS, WebSocket

- One encode per format: outputs with equal ``(ProgramFormat, StreamEncodeSettings)`` share a hub (``acquire_hub``);
  several outputs may hand it the same batch, it takes each slot and each audio sample once.
- Timeline as in the recorder: frame ``i`` of the encode is program slot ``first_slot + i``; a slot with no picture
  (dropped upstream, or here because the encoder fell behind) repeats the previous picture, so video covers the
  timeline and stays in step with the audio, which is never dropped.
- Never blocks the core (unless ``block=True``, for offline renders where every frame must be kept): a full queue
  drops pictures and counts them.
- Sinks may be added and removed while it runs (``add_sink`` / ``remove_sink``). A sink starts at a keyframe (the
  hub forces one when a sink joins or reconnects) with the AAC frame before it as priming, and has its own bounded
  queue: a sink that falls behind drops video up to the next keyframe (counted), never stalling the others.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections import deque
from fractions import Fraction

import numpy as np

from studio.encode.encoder_process import ChildEncoder
from studio.encode.encoders import EncodedPacket, StreamEncoder, StreamEncodeSettings
from studio.errors import EncoderError, StudioError
from studio.contracts import (
    Output,
    OutputState,
    OutputStats,
    ProgramBatch,
    ProgramFormat,
)
from studio.contracts import RateMeter

log = logging.getLogger(__name__)


class Sink(abc.ABC):
    """Receives the hub's packets on its own thread, from a keyframe on, behind a bounded queue."""

    def __init__(self, label: str, max_queue_frames: int = 50) -> None:
        self.label = label
        self.max_queue_frames = max_queue_frames
        self.block = False  # True (offline renders): a full queue waits for room instead of dropping
        self.state = OutputState.STARTING
        self.detail = label
        self.frames_sent = 0
        self.dropped = 0  # video frames this sink lost (it fell behind, or its receiver was away)
        self.audio_dropped = 0
        self.fps_meter = RateMeter()
        self._bytes: deque[tuple[float, int]] = deque()  # (when, bytes sent) over the last 2 s
        self._bytes_lock = threading.Lock()
        self._cond = threading.Condition()
        self._q: deque[EncodedPacket] = deque()
        self._queued_video = 0
        self._pending_audio: deque[EncodedPacket] = deque(maxlen=256)  # sound before the first keyframe (5 s)
        self._waiting_key = True
        self._started = False  # a run has begun once (later waits for a keyframe lose frames)
        self._closing = False
        self._thread: threading.Thread | None = None
        self._hub: EncodeHub | None = None
        self.origin_s: Fraction | None = None  # program time (since the hub's first slot) of this run's first frame
        self._audio_origin = 0  # the same, in program samples
        self.error: BaseException | None = None
        self.result: object = None
        self.pace = False  # send no faster than real time (a file render feeding a live receiver)
        self._pace_origin: Fraction | None = None  # the run the wall-clock origin below belongs to
        self._pace_wall0 = 0.0

    # -- hub side ---------------------------------------------------------------------------------------------------

    def _attach(self, hub: EncodeHub) -> None:
        self._hub = hub
        self._thread = threading.Thread(target=self._loop, name=f"sink-{self.label}", daemon=True)
        self._thread.start()

    def offer(self, pkt: EncodedPacket) -> None:
        """Queue a packet without blocking (called by the hub's encode thread)."""
        with self._cond:
            if self._closing:
                return
            if pkt.video:
                if self._waiting_key:
                    if not pkt.keyframe:
                        if self._started:
                            self.dropped += 1  # lost while waiting for a keyframe (after a drop, while away)
                        return  # before the first start nothing is lost: it waits for the keyframe it asked for
                    self._start_at(pkt)
                elif self._queued_video >= self.max_queue_frames:
                    while self.block and self._queued_video >= self.max_queue_frames and not self._closing \
                            and not self._waiting_key:
                        self._cond.wait(0.1)  # the hub (and so the core) waits for this sink
                    if self._closing or self._waiting_key:
                        self.dropped += self._waiting_key  # its receiver went away while it waited
                        return
                    if self._queued_video >= self.max_queue_frames:
                        self._drop_to_next_key()
                        return
                self._q.append(pkt)
                self._queued_video += 1
            else:
                if self._waiting_key:
                    self._pending_audio.append(pkt)
                    return
                if pkt.pts <= self._audio_origin - 2 * pkt.duration:
                    return  # before this run's priming frame
                if len(self._q) >= 4 * self.max_queue_frames:
                    self.audio_dropped += 1
                    return
                self._q.append(pkt)
            self._cond.notify()

    def _start_at(self, key: EncodedPacket) -> None:
        """Begin sending at keyframe ``key``, with the AAC frame(s) just before it (the decoder's priming). The
        first keyframe of a run sets its origin; after a drop the run (and its timestamps) go on."""
        self._waiting_key = False
        self._started = True
        if self.origin_s is None:
            assert self._hub is not None
            self.origin_s = key.pts * key.time_base
            self._audio_origin = round(self.origin_s * self._hub.fmt.audio_rate_hz)
        for a in self._pending_audio:
            if a.pts > self._audio_origin - 2 * a.duration:
                self._q.append(a)
        self._pending_audio.clear()

    def _drop_to_next_key(self) -> None:
        """The queue is full: drop the queued video (counted) and wait for a keyframe, keeping the audio."""
        self.dropped += self._queued_video + 1
        self._pending_audio.extend(p for p in self._q if not p.video)
        self._q.clear()
        self._queued_video = 0
        self._waiting_key = True
        if self._hub is not None:
            self._hub.request_keyframe()

    def restart(self, keyframe_now: bool = True) -> None:
        """Start a new run (new timestamps) at the next keyframe: the sink's receiver went away. ``keyframe_now``:
        ask the hub for one at once (else the next scheduled keyframe, or the next ``restart``, starts it)."""
        with self._cond:
            self.dropped += self._queued_video
            self._q.clear()
            self._queued_video = 0
            self._waiting_key = True
            self.origin_s = None
        if keyframe_now and self._hub is not None:
            self._hub.request_keyframe()

    def close(self, timeout_s: float = 10.0) -> object:
        """Send what is queued, finish (a file sink renames its file) and stop the thread; returns ``result``."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("sink %s did not finish within %.0f s", self.label, timeout_s)
        if self.error is not None and isinstance(self.error, StudioError):
            raise self.error
        return self.result

    # -- sink thread ------------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    if not self._q and not self._closing:
                        self._cond.wait(0.5)
                    if not self._q:
                        if self._closing:
                            break
                        pkt = None
                    else:
                        pkt = self._q.popleft()
                        if pkt.video:
                            self._queued_video -= 1
                            self._cond.notify_all()  # room for a blocked offer
                    origin = self.origin_s
                if pkt is None:
                    self.idle()  # outside the lock: it may block (a reconnect attempt)
                    continue
                if origin is None:
                    continue  # a restart cleared the run this packet belonged to
                rel = pkt.pts * pkt.time_base - origin
                if self.pace:
                    self._wait_for(origin, float(rel))
                n = self.send(pkt, rel)
                if n:
                    self._count(pkt, n)
            self.finish()
        except BaseException as exc:  # handed to close() and shown in the stats
            self.error = exc
            self.state = OutputState.FAILED
            self.detail = str(exc) if isinstance(exc, StudioError) else f"{self.label}: {exc}"
            with self._cond:  # nothing more is taken: a blocked offer returns, later ones are dropped
                self._closing = True
                self._q.clear()
                self._queued_video = 0
                self._cond.notify_all()
            if isinstance(exc, StudioError):  # said in words by whoever owns the sink; the details go to the log
                log.info("sink %s failed: %s", self.label, exc, exc_info=True)
            else:
                log.exception("sink %s failed", self.label)

    def _wait_for(self, origin: Fraction, rel_s: float) -> None:
        """Pacing: hold a packet until its time on the wall clock, counted from this run's first packet."""
        now = time.monotonic()
        if self._pace_origin != origin:
            self._pace_origin, self._pace_wall0 = origin, now - max(0.0, rel_s)
        delay = self._pace_wall0 + rel_s - now
        if delay > 0:
            time.sleep(delay)

    def _count(self, pkt: EncodedPacket, n: int) -> None:
        now = time.monotonic()
        with self._bytes_lock:
            self._bytes.append((now, n))
            while self._bytes and self._bytes[0][0] < now - 2.0:
                self._bytes.popleft()
        if pkt.video:
            self.frames_sent += 1
            self.fps_meter.tick(now)

    def bitrate_kbps(self) -> float:
        now = time.monotonic()
        with self._bytes_lock:
            recent = [n for t, n in self._bytes if t >= now - 2.0]
        return sum(recent) * 8 / 2.0 / 1000 if recent else 0.0

    @abc.abstractmethod
    def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
        """Write one packet; ``rel_s``: its time since this run's first frame (the AAC priming frame is negative).
        Returns the bytes sent (0: not sent). Runs on the sink's thread; may block."""

    def finish(self) -> None:
        """The queue is drained and the sink closes (on its thread)."""

    def idle(self) -> None:
        """Called about twice a second while nothing is queued (reconnect attempts, keep-alives)."""

    def stats(self, name: str) -> OutputStats:
        hub_dropped = self._hub.dropped if self._hub is not None else 0
        return OutputStats(name, self.state, frames=self.frames_sent, dropped=self.dropped + hub_dropped,
                           repeated=self._hub.repeated if self._hub is not None else 0,
                           bitrate_kbps=self.bitrate_kbps(), fps=self.fps_meter.rate(), detail=self.detail)


class EncodeHub:
    """See the module docstring. ``block``: wait for room instead of dropping (offline renders)."""

    def __init__(self, fmt: ProgramFormat, settings: StreamEncodeSettings | None = None, block: bool = False,
                 queue_frames: int | None = None, in_process: bool = False) -> None:
        self.fmt = fmt
        self.settings = settings or StreamEncodeSettings()
        self.block = block
        # live: half a second of pictures at most (latency); offline (block) the same bound only paces the core
        self.queue_frames = queue_frames or max(8, round(0.5 * fmt.fps))
        # in_process: encode on the hub's thread (holds the GIL while it encodes); default: a child process
        make = StreamEncoder if in_process else ChildEncoder
        self.encoder = make(fmt.width, fmt.height, fmt.fps, fmt.audio_rate_hz, self.settings)
        self.choice = self.encoder.choice
        self._sinks: list[Sink] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._q: deque[tuple] = deque()
        self._queued_frames = 0
        self._next_in_slot: int | None = None  # first slot not yet taken from the core
        self._audio_in_end: int | None = None  # first program sample not yet taken
        self.first_slot: int | None = None
        self.first_sample = 0
        self._next_slot = 0
        self._audio_done = 0  # samples encoded, from first_sample
        self._audio_pending: deque[tuple[int, np.ndarray]] = deque()  # (start from first_sample, samples) to encode
        self._last: tuple[np.ndarray, str] | None = None
        self._force_key = False
        self.frames = 0  # pictures encoded from the core
        self.repeated = 0
        self.dropped = 0  # pictures this hub could not take in time
        self.encode_ms = deque(maxlen=250)
        self.error: BaseException | None = None
        self._closing = False
        self._busy = False  # the encode thread holds an item taken from the queue
        self._thread = threading.Thread(target=self._loop, name="encode-hub", daemon=True)
        self._thread.start()

    # -- sinks ------------------------------------------------------------------------------------------------------

    def add_sink(self, sink: Sink) -> None:
        """Attach a sink (also while running): it starts at the next keyframe, which is forced now."""
        sink._attach(self)
        with self._lock:
            self._sinks.append(sink)
            self._force_key = True

    def remove_sink(self, sink: Sink, drain_s: float = 5.0) -> object:
        """Detach and finish a sink (a file sink finalizes its file); returns the sink's result. The pictures
        already submitted are encoded first (at most ``drain_s``), so the sink ends where the program was."""
        deadline = time.monotonic() + drain_s
        with self._cond:
            while (self._q or self._busy) and time.monotonic() < deadline and self._thread.is_alive():
                self._cond.wait(0.05)
            if sink in self._sinks:
                self._sinks.remove(sink)
        return sink.close()

    def sinks(self) -> list[Sink]:
        with self._lock:
            return list(self._sinks)

    def request_keyframe(self) -> None:
        self._force_key = True

    # -- the core's side --------------------------------------------------------------------------------------------

    def submit(self, batch: ProgramBatch) -> None:
        """Take the slots and audio of ``batch`` not taken before; returns at once (drops when full) unless
        ``block``."""
        if self.error is not None:
            if isinstance(self.error, StudioError):
                raise self.error
            raise EncoderError(f"Encoding the program failed ({self.error}): stop and start the output again.") \
                from self.error
        yuv = batch.yuv is not None and len(batch.yuv) == len(batch.slots)
        pics = batch.yuv if yuv else batch.frames
        pix = "yuv420p" if yuv else "rgb24"
        cap = self._capture_stamps(batch)
        with self._cond:
            if self._closing:
                return
            keep = [j for j, s in enumerate(batch.slots) if self._next_in_slot is None or s >= self._next_in_slot]
            if keep:
                self._next_in_slot = int(batch.slots[keep[-1]]) + 1
            a_start, audio = int(batch.audio_start), batch.audio
            if self._audio_in_end is not None and a_start < self._audio_in_end:
                cut = min(len(audio), self._audio_in_end - a_start)
                audio, a_start = audio[cut:], a_start + cut
            if len(audio):
                self._audio_in_end = a_start + len(audio)
            audio = np.array(audio, np.float32)  # a copy: the core may reuse its buffers once write() returns
            taken: list[int] = []
            for j in keep:
                if self._queued_frames >= self.queue_frames:
                    if not self.block:
                        self.dropped += 1  # the slot repeats the previous picture
                        continue
                    if taken:  # hand over what fits, so that the encoder makes room for the rest
                        self._put(batch, pics, pix, cap, taken, a_start, audio)
                        taken, audio = [], audio[:0]
                    while self._queued_frames >= self.queue_frames and not self._closing:
                        self._cond.wait(0.1)
                taken.append(j)
                self._queued_frames += 1
            if taken or len(audio):
                self._put(batch, pics, pix, cap, taken, a_start, audio)

    def _put(self, batch: ProgramBatch, pics: np.ndarray, pix: str, cap: np.ndarray, taken: list[int],
             a_start: int, audio: np.ndarray) -> None:
        """Queue pictures ``taken`` of ``batch`` (fancy indexing copies them) and the audio (the lock is held)."""
        self._q.append((batch.slots[taken], pics[taken], pix, cap[taken], a_start, audio))
        self._cond.notify_all()

    @staticmethod
    def _capture_stamps(batch: ProgramBatch) -> np.ndarray:
        """Monotonic ns per frame: when the sound it shows was heard (microphone), else when the core finished it."""
        made = batch.finished_ns or time.monotonic_ns()
        cap = np.full(len(batch.slots), made, np.int64)
        if batch.heard_ns is not None:
            heard = np.asarray(batch.heard_ns, np.int64)
            cap = np.where(heard > 0, heard, cap)
        return cap

    def close(self, timeout_s: float = 30.0) -> dict[Sink, object]:
        """Encode what is queued, flush the encoders, finish every sink; returns each sink's result."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout_s)
        results: dict[Sink, object] = {}
        errors: list[BaseException] = []
        for sink in self.sinks():
            try:
                results[sink] = self.remove_sink(sink, drain_s=0)
            except StudioError as exc:  # finish the others, then report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]
        return results

    @property
    def video_encodes(self) -> int:
        """Pictures handed to the video encoder so far (repeats included): one per frame slot, however many sinks
        take the packets."""
        return self.encoder.frames_in

    def stats(self) -> dict[str, float | str | int]:
        ms = sorted(self.encode_ms)
        return {"encoder": self.choice.kind.value, "reason": self.choice.reason, "frames": self.frames,
                "repeated": self.repeated, "dropped": self.dropped, "video_encodes": self.video_encodes,
                "sinks": len(self.sinks()), "encode_ms_median": ms[len(ms) // 2] if ms else float("nan")}

    # -- the encode thread ------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._q and not self._closing:
                        self._cond.wait(0.5)
                    if not self._q:
                        break
                    item = self._q.popleft()
                    self._busy = True
                try:
                    self._encode_item(*item)
                finally:
                    with self._cond:
                        self._busy = False
                        self._queued_frames -= len(item[0])
                        self._cond.notify_all()
            if self.first_slot is not None:  # the sound ends with the last picture
                self._encode_audio(self.fmt.samples_at(self._next_slot) - self.first_sample, 0, pad=True)
            self._fan_out(self.encoder.flush())
        except BaseException as exc:  # handed to submit() and the outputs' stats
            self.error = exc
            log.exception("the encode hub failed")
        finally:
            self.encoder.close()

    def _encode_item(self, slots: np.ndarray, pics: np.ndarray, pix: str, cap: np.ndarray, a_start: int,
                     audio: np.ndarray) -> None:
        if self.first_slot is None:
            if not len(slots):
                return  # no picture yet: the timeline starts with the first one
            self.first_slot = self._next_slot = int(slots[0])
            self.first_sample = self.fmt.samples_at(self.first_slot)
        # the sound first: AAC holds a frame back, so its packets would otherwise leave a batch's encode later than
        # the pictures, and every viewer that plays in sync waits for the sound. Sound past this batch's last
        # picture waits for the pictures that show it (and is cut when none come: the tracks end together).
        if len(audio):
            self._audio_pending.append((a_start - self.first_sample, audio))
        last = int(slots[-1]) + 1 if len(slots) else self._next_slot
        self._encode_audio(self.fmt.samples_at(max(last, self._next_slot)) - self.first_sample,
                           int(cap.max()) if len(cap) else 0)
        t0 = time.perf_counter()
        for slot, pic, c in zip(slots, pics, cap):
            slot = int(slot)
            if slot < self._next_slot:
                continue
            while self._next_slot < slot and self._last is not None:  # the screen held the last picture
                self._encode_picture(self._last[0], self._last[1], int(c))
                self.repeated += 1
            self._encode_picture(pic, pix, int(c))
            self._last = (pic, pix)
            self.frames += 1
        if len(slots):
            self.encode_ms.append((time.perf_counter() - t0) * 1e3 / len(slots))

    def _encode_picture(self, pic: np.ndarray, pix: str, capture_ns: int) -> None:
        key, self._force_key = self._force_key, False
        index = self._next_slot - self.first_slot  # type: ignore[operator]
        self._next_slot += 1
        self._fan_out(self.encoder.encode_picture(pic, pix, index, keyframe=key, capture_ns=capture_ns))

    def _encode_audio(self, end: int, capture_ns: int, pad: bool = False) -> None:
        """Encode the waiting sound up to sample ``end`` (from ``first_sample``); a hole is silence, and so is what
        is missing up to ``end`` when ``pad``."""
        pend = self._audio_pending
        while pend and self._audio_done < end:
            rel, a = pend[0]
            if rel + len(a) <= self._audio_done:  # already encoded (or before the first picture)
                pend.popleft()
                continue
            if rel > self._audio_done:  # a hole in the program audio: silence
                upto = min(rel, end)
                self._fan_out(self.encoder.encode_audio(np.zeros(upto - self._audio_done, np.float32), capture_ns))
                self._audio_done = upto
                if upto >= end:
                    break
            a0 = self._audio_done - rel
            take = a[a0:a0 + end - self._audio_done]
            self._audio_done += len(take)
            self._fan_out(self.encoder.encode_audio(take, capture_ns))
            if a0 + len(take) >= len(a):
                pend.popleft()
        if pad and self._audio_done < end:
            self._fan_out(self.encoder.encode_audio(np.zeros(end - self._audio_done, np.float32), capture_ns))
            self._audio_done = end

    def _fan_out(self, packets: list[EncodedPacket]) -> None:
        if not packets:
            return
        for sink in self.sinks():
            for p in packets:
                sink.offer(p)


# -- one hub per format ----------------------------------------------------------------------------------------------

_pool_lock = threading.Lock()
_pool: dict[tuple, tuple[EncodeHub, int]] = {}


def acquire_hub(fmt: ProgramFormat, settings: StreamEncodeSettings | None = None, block: bool = False,
                queue_frames: int | None = None) -> EncodeHub:
    """The running hub for this format and these settings, or a new one (reference-counted; ``release_hub``).
    ``queue_frames`` sizes a new hub's queue (a running one keeps its own)."""
    settings = settings or StreamEncodeSettings()
    key = (fmt, settings, block)
    with _pool_lock:
        hub, refs = _pool.get(key, (None, 0))
        if hub is None or hub.error is not None or hub._closing:
            hub, refs = EncodeHub(fmt, settings, block=block, queue_frames=queue_frames), 0
        _pool[key] = (hub, refs + 1)
        return hub


def release_hub(hub: EncodeHub, sink: Sink | None = None) -> object:
    """Drop one reference (and ``sink``, finished: its result is returned). The last reference closes the hub: what
    was submitted is encoded, the encoders are flushed and every remaining sink finishes."""
    with _pool_lock:
        last = True
        for key, (h, refs) in list(_pool.items()):
            if h is hub:
                if refs > 1:
                    _pool[key] = (h, refs - 1)
                    last = False
                else:
                    del _pool[key]
                break
    if not last:
        return hub.remove_sink(sink) if sink is not None else None
    results = hub.close()
    return results.get(sink) if sink is not None else None


# -- the base of the outputs that use the hub -------------------------------------------------------------------------

class HubOutput(Output):
    """An output of the core that owns one sink of the shared encode for its format (``acquire_hub``)."""

    name = "stream"
    needs_rgb = False  # the hub takes the core's I420 pictures (converted off the interpreter lock) as they are
    wants_yuv = True
    retains_frames = False  # the hub copies what it keeps

    def __init__(self, settings: StreamEncodeSettings | None = None, block: bool = False,
                 queue_frames: int | None = None) -> None:
        self.settings = settings or StreamEncodeSettings()
        self.block = block
        self.queue_frames = queue_frames  # the hub's queue, when this output starts it
        self.pace = False  # the sink sends no faster than real time (``Sink.pace``)
        self.hub: EncodeHub | None = None
        self.sink: Sink | None = None
        self._result: object = None
        self._closed = False

    def make_sink(self) -> Sink:
        raise NotImplementedError

    def open(self, fmt: ProgramFormat) -> None:
        super().open(fmt)
        if self.hub is not None:
            return
        self.sink = self.make_sink()
        self.sink.block = self.block  # an offline render keeps every frame for every sink that is reachable
        self.sink.pace = self.pace
        self.hub = acquire_hub(fmt, self.settings, self.block, self.queue_frames)
        self.hub.add_sink(self.sink)

    def write(self, batch: ProgramBatch) -> None:
        """Hand the batch to the hub; raises (so that the core takes this output out of the program) when the
        encode or this output's sink failed for good (a full disk, say; a network sink reconnects instead)."""
        if self.hub is None or self._closed:
            return
        if self.sink is not None and isinstance(self.sink.error, StudioError):
            raise self.sink.error
        self.hub.submit(batch)

    def close(self) -> object:
        if self._closed:
            return self._result
        self._closed = True
        if self.hub is not None and self.sink is not None:
            self._result = release_hub(self.hub, self.sink)
        return self._result

    def stats(self) -> OutputStats:
        if self.sink is None:
            return OutputStats(self.name, OutputState.OFF)
        st = self.sink.stats(self.name)
        if self._closed and st.state is not OutputState.FAILED:
            st = OutputStats(st.name, OutputState.OFF, st.frames, st.dropped, st.repeated, st.bitrate_kbps, st.fps,
                             st.detail)
        return st

    @property
    def encoder_pill(self) -> str:
        """The HUD's encoder pill for this output: the encoder and why."""
        return self.hub.choice.pill if self.hub is not None else ""
