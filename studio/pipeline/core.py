"""The pipeline core: the one frame loop every mode runs (the studio's script and microphone modes, ``render``,
``live`` and ``bench``).

Three stages on one frame clock (``studio.contracts`` has the contract):
- stage A (``motion``): the source's next chunk of frame slots with its audio; the motion source's coefficients; the
  silence sieve's decision and the keyframe stride per slot; the generator's audio features (behind the fingerprint
  cache);
- stage B (``generate``): frames on the device: every slot (plain), or keyframes + motion-space in-betweens (an
  engine that declares MOTION_SPACE interpolation re-renders them from interpolated geometry), at the plain or the
  pyramidal size, eager or as CUDA graphs;
- stage C (``post``): RIFE in-betweens for flow-interpolated engines, super-resolution to the presenter's size, the
  16:9 canvas, colour conversion (NV12 on the GPU with GPU_ENCODE), then every output.
Without ASYNC_PIPELINE the stages run one after the other on the calling thread; with it, stages A and B run on
threads of their own behind bounded blocking queues (on CUDA generation and post-processing on separate streams,
ordered by events), so chunk t+1's motion, chunk t's generation and chunk t-1's post-processing overlap.

Why the queues block instead of dropping: a chunk carries the program audio of its span, which no output may lose.
A live source that falls behind skips frame slots instead (counted as dropped: ``Chunk.skipped``), and an output that
falls behind drops frames (counted) and keeps the audio. A ``just_in_time`` source (the microphone) is asked for a
chunk only once stage B has taken the previous one, and stage B takes one only once stage C has: the sound that
arrives meanwhile joins the next, larger chunk, so a core near its limit batches instead of holding stale chunks in
its queues (sound-to-screen latency stays a few chunk times, not the queues' depth).

Measuring what the optimizations save (``CoreSettings.measure_baseline``, the HUD's figures): one chunk in
``baseline_every`` is produced as a baseline variant - every optimization off ("plain"), or all but one of the active
generation flags ("minus:<flag>") in rotation - and the cost of each chunk (stage times per output frame, GPU time by
events on CUDA) is kept per variant. Compute saved = (plain - actual) / plain, and each flag's share =
(minus:flag - actual) / plain, all measured on this machine in this run. Baseline chunks are real program frames.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections import deque
from dataclasses import replace

import numpy as np
import torch

from studio import startup
from studio.errors import RenderError, StudioError
from studio.contracts import (CastLayout, Chunk, InterpolationKind, MotionSource, Output, Pacing, ProgramFormat,
                              Source)
from studio.pipeline.pool import GeneratorPool, compiled_engine_note
from studio.pipeline.post_stage import PostStage
from studio.pipeline.report import CoreReport
from studio.pipeline.savings import PairedSavings
from studio.pipeline.stage_queue import StageQueue
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import (CacheRate, ComputeSaved, OptimizationShare, OptimizationStatus,
                                       TelemetryBus, TelemetrySample, stage_timing)

log = logging.getLogger(__name__)

O = Optimization
GENERATION_FLAGS = (O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.SILENCE_SIEVE, O.CUDA_GRAPHS, O.GPU_ENCODE)
_WINDOW = 120  # chunks of history for the live figures


_DONE = object()


class Core:
    """The one frame loop (module docstring). Build it with ``studio.pipeline.factory``; call ``run`` on the thread
    that owns the models; ``set_optimizations`` and the output list may change while it runs."""

    def __init__(self, source: Source, motion: MotionSource, generators: GeneratorPool, outputs: list[Output],
                 settings: CoreSettings, bus: TelemetryBus | None = None, canvas_style=None,
                 features=None, bus_source: str = "core") -> None:
        self.source = source
        self.motion = motion
        self.pool = generators
        self.s = settings
        self.created_at_s = time.perf_counter()
        self.first_frame_at_s: float | None = None  # perf_counter() when the first program frame was written
        self._run_started_s = self.created_at_s
        self.bus = bus
        self.bus_source = bus_source
        self.features = features  # studio.pipeline.features.FeatureStage for audio-driven engines, or None
        self.device = torch.device(settings.device)
        self.cuda = self.device.type == "cuda"
        w, h = settings.output_size
        presenter = generators.presenter_px
        self.fmt = ProgramFormat(width=w, height=h, fps=settings.fps, layout=settings.layout, presenter_px=presenter,
                                 rows=settings.cast_size, cast_layout=settings.cast_layout)
        self._outputs: list[Output] = list(outputs)
        self._outputs_lock = threading.Lock()
        # a flag the generator cannot run with this anchor is off, and says so (``unavailable``)
        self._opts = settings.optimizations - ({O.CUDA_GRAPHS} if generators.graphs_off else set())
        self._opts_lock = threading.Lock()
        # a weak way back to the core: held strongly, it made every core a cycle that only the cycle collector frees,
        # and that rarely runs in a process of millions of objects (a core failing on each start piled up gigabytes)
        channels = weakref.WeakMethod(self._frame_channels)
        self.post = PostStage(self.fmt, self.device, settings, generators.info.warp_field, canvas_style,
                              frame_channels=lambda: channels()())
        self.gen_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.post_stream = torch.cuda.Stream(self.device) if self.cuda else None
        # state carried from chunk to chunk
        self._carry = None  # MOTION_SPACE engines: the last keyframe's state (``Generator.render_span``)
        # FLOW engines: the last chunk ended on a keyframe the post stage's RIFE holds (it had a key mask), and the
        # cast row that keyframe shows (a cast cut to the speaker; None: every row)
        self._flow_key = False
        self._last_shown: int | None = None
        self._first_chunk = True  # the run's first chunk is still to come (``_chunk_cap``)
        self._streams: set = set()  # the generator forms this run has started a stream on (``Generator.new_stream``)
        self._last_slot = -2
        self._chunks_made = 0
        self._rotation = 0
        self._sieve = None
        self._sieve_buf = np.zeros(0, np.float32)
        self._sieve_pos = 0  # analysis sample of _sieve_buf[0]
        self._sieve_flags: deque[tuple[int, bool]] = deque(maxlen=4096)  # (frame start sample, speaking)
        # measurements
        self._stage_ms: dict[str, deque[float]] = {k: deque(maxlen=_WINDOW) for k in ("motion", "generate", "post")}
        self._cost: dict[str, deque[float]] = {}  # variant -> cost per frame of each chunk (ms)
        self._savings = self._new_savings()  # baseline chunks paired with their neighbours: the HUD's figures
        self._stage_per_frame: dict[str, deque[float]] = {k: deque(maxlen=_WINDOW) for k in ("motion", "generate",
                                                                                             "post")}
        self._all_stage_ms: dict[str, list[float]] = {"motion": [], "generate": [], "post": []}
        self._queues: dict[str, StageQueue] = {}
        self.produced = self.dropped = self.silent_frames = 0
        self.frames_full = self.frames_interpolated = self.frames_fallback = 0
        self._cost_s_per_frame = 0.02
        self._stop = threading.Event()
        self.failed_outputs: list[tuple[Output, str]] = []  # outputs taken out of the program, and why
        self._compiled_note: str | None = None
        self._started_s = time.monotonic()

    # -- control (any thread) ------------------------------------------------------------------------------------

    @property
    def optimizations(self) -> frozenset[Optimization]:
        with self._opts_lock:
            return self._opts

    def set_optimizations(self, opts: frozenset[Optimization]) -> None:
        """Switch flags from the next chunk on (ASYNC_PIPELINE takes effect at the next ``run``)."""
        opts = frozenset(opts)
        if O.CUDA_GRAPHS in opts and O.CUDA_GRAPHS in self.unavailable():
            opts = opts - {O.CUDA_GRAPHS}
        with self._opts_lock:
            self._opts = opts
        for key in [k for k in self._cost if k.startswith("minus:")]:
            self._cost.pop(key, None)
        self._savings = self._new_savings()  # pairs of the old set say nothing of the new one

    def add_output(self, out: Output) -> None:
        out.open(self.fmt)
        out.opened = True
        with self._outputs_lock:
            self._outputs.append(out)

    def remove_output(self, out: Output) -> object:
        with self._outputs_lock:
            if out in self._outputs:
                self._outputs.remove(out)
        return out.close()

    def outputs(self) -> list[Output]:
        with self._outputs_lock:
            return list(self._outputs)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Let go of what this core opened, once its run has returned: the generator forms, the post stage's canvas
        (a set video's decoder), upscalers, RIFE and buffers. The source, the motion and the outputs are its owner's.
        A closed core is not run again."""
        self.pool.close()
        self.post.close()

    def _frame_channels(self) -> int:
        """Channels of the frames the current flags' generator form makes (4: RGB and the warped matte)."""
        opts = self.optimizations
        return self.pool.get(O.PYRAMIDAL in opts, O.CUDA_GRAPHS in opts).out_channels

    def warm(self) -> None:
        """Open the generator forms the current flags (and the baseline variants) need, so that no run pays for a
        model's set-up or a CUDA graph capture inside its timed frames; draw the set and graphics of what the source
        will have on air (drawn on the chunk that first shows them, they made a CPU's live frames late)."""
        for on_air in self.source.on_air_states():
            self.post.prepare(on_air)
        opts = self.optimizations
        forms = {(O.PYRAMIDAL in opts, O.CUDA_GRAPHS in opts)}
        if self.s.measure_baseline:
            forms |= {(False, False), (False, O.CUDA_GRAPHS in opts), (O.PYRAMIDAL in opts, False)}
        for pyramidal, graphs in forms:
            self.pool.get(pyramidal, graphs)
        if self.cuda and O.CUDA_GRAPHS in opts:
            want_yuv = O.GPU_ENCODE in opts and any(o.wants_yuv for o in self.outputs())
            flow = O.FRAME_INTERPOLATION in opts and self.pool.info.interpolation is InterpolationKind.FLOW
            self.post.warm(sorted({self.pool.size_for(pyramidal) for pyramidal, _ in forms}), want_yuv, flow)

    # -- stage A ----------------------------------------------------------------------------------------------------

    def _variant(self, opts: frozenset[Optimization]) -> tuple[frozenset[Optimization], bool, str]:
        """The flags of the next chunk: normal, or an interleaved baseline variant (see the module docstring)."""
        self._chunks_made += 1
        if not self.s.measure_baseline or self._chunks_made % max(2, self.s.baseline_every):
            return opts, False, ""
        variants = ["plain"] + [f"minus:{o.value}" for o in GENERATION_FLAGS if o in opts]
        v = variants[self._rotation % len(variants)]
        self._rotation += 1
        if v == "plain":
            return opts - set(GENERATION_FLAGS), True, ""
        flag = Optimization(v.split(":", 1)[1])
        return opts - {flag}, False, flag.value

    def _chunk_cap(self) -> int:
        """Slots of the next chunk at most: ``chunk_frames``; a run's first chunk no more than the short first window
        of a streaming window engine makes (``GeneratorInfo.first_window_frames``; with keyframes, that many
        keyframes), so that the first frame waits for that window only."""
        first = self.pool.info.first_window_frames
        if not self._first_chunk or first <= 0:
            return self.s.chunk_frames
        stride = self.s.key_stride if O.FRAME_INTERPOLATION in self.optimizations else 1
        return max(1, min(self.s.chunk_frames, (first - 1) * stride + 1))  # its keys: 0, stride, ..., the last

    def _stage_a(self, stop: threading.Event) -> Chunk | None:
        pace = Pacing(max_frames=self._chunk_cap(), cost_s_per_frame=self._cost_s_per_frame, stop=stop,
                      lead_s=self.motion.lead_s)
        chunk = self.source.next_chunk(pace)
        if chunk is None:
            return None
        self._first_chunk = False
        t0 = time.perf_counter()
        opts, plain, minus = self._variant(self.optimizations)
        chunk.optimizations, chunk.plain, chunk.baseline_of = opts, plain, minus
        chunk.coeffs = np.ascontiguousarray(self.motion.motion(chunk), np.float32)
        k = chunk.n
        stride = np.full(k, self.s.key_stride if O.FRAME_INTERPOLATION in opts else 1, np.int64)
        speaking = None
        if O.SILENCE_SIEVE in opts or self.s.measure_baseline:
            speaking = self.motion.speaking(chunk)
            if speaking is None:
                speaking = self._sieve_speaking(chunk)
        chunk.speaking = speaking if speaking is not None else np.ones(k, bool)
        if O.SILENCE_SIEVE in opts:
            silent = ~chunk.speaking
            self.silent_frames += int(silent.sum())
            stride[silent] = np.maximum(stride[silent], self.s.silent_key_stride)
        chunk.strides = stride
        if self.features is not None:
            chunk.features = self.features.features(chunk, cache=O.AUDIO_CACHE in opts)
        chunk.timings_ms["motion"] = (time.perf_counter() - t0) * 1e3
        return chunk

    def _sieve_speaking(self, chunk: Chunk) -> np.ndarray:
        """The silence sieve (RMS gate + Silero VAD with hangover) over the chunk's analysis audio, per slot."""
        from studio.audio.sieve import SilenceSieve

        if self._sieve is None:
            self._sieve = SilenceSieve()
        n = self._sieve.settings.frame_samples
        if chunk.analysis_start != self._sieve_pos + len(self._sieve_buf):  # a jump (new source): start over
            self._sieve_buf = np.zeros(0, np.float32)
            self._sieve_pos = chunk.analysis_start
            self._sieve.reset()
        buf = np.concatenate([self._sieve_buf, chunk.analysis]) if len(self._sieve_buf) else chunk.analysis
        m = len(buf) // n
        for i in range(m):
            self._sieve_flags.append((self._sieve_pos + i * n, self._sieve.process(buf[i * n:(i + 1) * n])))
        self._sieve_buf = buf[m * n:].copy()
        self._sieve_pos += m * n
        rate = 16000
        out = np.zeros(chunk.n, bool)
        flags = list(self._sieve_flags)
        if not flags:
            return out
        starts = np.array([f[0] for f in flags])
        vals = np.array([f[1] for f in flags])
        offset = chunk.analysis_start - int(round(chunk.audio_start * rate / self.fmt.audio_rate_hz))
        for j, slot in enumerate(chunk.slots):
            t = int(round(slot / self.fmt.fps * rate)) + offset
            i = int(np.searchsorted(starts, t, side="right")) - 1
            out[j] = bool(vals[max(i, 0)]) if i >= 0 else bool(vals[0])
        return out

    # -- stage B ----------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def _stage_b(self, chunk: Chunk) -> Chunk:
        opts = chunk.optimizations
        t0 = time.perf_counter()
        ev0 = ev1 = None
        if self.cuda:
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record(torch.cuda.current_stream())
        gen = self.pool.get(O.PYRAMIDAL in opts, O.CUDA_GRAPHS in opts)
        if gen not in self._streams:  # this run's first chunk for this form: nothing made before belongs to it
            gen.new_stream()
            self._streams.add(gen)
        c = torch.as_tensor(chunk.coeffs, device=self.device)
        feats = None if chunk.features is None else torch.as_tensor(chunk.features, device=self.device)
        contiguous = chunk.n and chunk.skipped == 0 and int(chunk.slots[0]) == self._last_slot + 1 \
            and not chunk.seg_start and bool(np.all(np.diff(chunk.slots) == 1))
        interpolating = bool((chunk.strides > 1).any()) and bool(np.all(np.diff(chunk.slots) == 1))
        chunk_key_mask = None
        restart = not contiguous
        # a cast cut to the speaker: only the rows on screen are made (every anchor's motion is in ``c`` still)
        shown = chunk.shown = self._shown(chunk)
        rows = {} if shown is None else {"shown": shown}
        if interpolating and gen.info.interpolation is InterpolationKind.MOTION_SPACE:
            carry = self._carry if contiguous else None
            before = gen.counts()
            frames, self._carry = gen.render_span(c, chunk.strides, carry, **rows)
            after = gen.counts()
            self.frames_full += after[0] - before[0]
            self.frames_interpolated += after[1] - before[1]
            self.frames_fallback += after[2] - before[2]
        elif interpolating and not (shown is not None and bool((shown != shown[0]).any())):
            from studio.enhance.interp import key_positions

            # RIFE goes on from the last chunk's last keyframe where that keyframe is still on screen: the chunk
            # follows on, the last one went through RIFE, and (a cut) it shows the same anchor
            carry = contiguous and self._flow_key and (shown is None or int(shown[0]) == self._last_shown)
            chunk_key_mask = key_positions(chunk.strides, have_carry=carry)
            idx = torch.as_tensor(np.flatnonzero(chunk_key_mask), device=self.device)
            frames = gen.generate(c[idx], None if feats is None else feats[idx],
                                  **({} if shown is None else {"shown": shown[chunk_key_mask]}))
            self.frames_full += len(idx)
            self._carry = None
            restart = not carry
        else:  # every slot; also a cut inside a chunk with keyframes (an in-between across it would morph one
            # face into the other)
            frames = gen.generate(c, feats, **rows)
            self.frames_full += chunk.n
            self._carry = None
        if chunk_key_mask is not None:
            chunk.timings_ms["key_mask"] = 0.0
        chunk.key_mask = chunk_key_mask
        chunk.restart = restart
        self._flow_key = chunk_key_mask is not None
        self._last_shown = int(shown[-1]) if shown is not None and chunk.n else None
        chunk.frames = frames
        self._last_slot = int(chunk.slots[-1]) if chunk.n else self._last_slot
        if self.cuda:
            ev1.record(torch.cuda.current_stream())
            chunk.gen_events = (ev0, ev1)
        else:
            chunk.timings_ms["generate"] = (time.perf_counter() - t0) * 1e3
        return chunk

    def _shown(self, chunk: Chunk) -> np.ndarray | None:
        """The cast row each frame shows when the picture shows one (a cast cut to the speaker, frame by frame: a
        turn may change inside a chunk); None when every row is on screen."""
        if self.fmt.rows < 2 or self.fmt.cast_layout is not CastLayout.CUT:
            return None
        return np.clip(chunk.speaker_rows(), 0, self.fmt.rows - 1)

    # -- stage C ----------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def _stage_c(self, chunk: Chunk) -> None:
        outputs = self.outputs()
        before = self.post.frames_interpolated
        batch, chunk.timings_ms["post"] = self.post.program(chunk, outputs)
        self.frames_interpolated += self.post.frames_interpolated - before
        if self.cuda:
            ge0, ge1 = chunk.gen_events
            chunk.timings_ms["generate"] = ge0.elapsed_time(ge1)
        for out in outputs:
            try:
                out.write(batch)
            except StudioError as exc:  # one output failing (a full disk, say) never stops the program; its
                log.info("output %s failed: %s", out.name, exc)  # owner says so (failed_outputs), once
                self._output_failed(out, exc)
        if self.first_frame_at_s is None and len(batch.slots):
            self.first_frame_at_s = time.perf_counter()
        chunk.frames = None
        self._account(chunk)

    def _output_failed(self, out: Output, exc: StudioError) -> None:
        """An output raised: it is taken out of the program (its own stats say why)."""
        with self._outputs_lock:
            if out in self._outputs:
                self._outputs.remove(out)
        self.failed_outputs.append((out, str(exc)))

    # -- measurements -------------------------------------------------------------------------------------------

    def _account(self, chunk: Chunk) -> None:
        n = max(1, chunk.n)
        self.produced += chunk.n
        self.dropped += chunk.skipped
        for k in ("motion", "generate", "post"):
            v = chunk.timings_ms.get(k, 0.0)
            self._stage_ms[k].append(v)
            self._all_stage_ms[k].append(v)
            self._stage_per_frame[k].append(v / n)
        cost = sum(chunk.timings_ms.get(k, 0.0) for k in ("motion", "generate", "post")) / n
        variant = "plain" if chunk.plain else (f"minus:{chunk.baseline_of}" if chunk.baseline_of else "normal")
        self._cost.setdefault(variant, deque(maxlen=_WINDOW if variant == "normal" else 24)).append(cost)
        self._savings.add(variant, cost)
        gen_post = (chunk.timings_ms.get("generate", 0.0) + chunk.timings_ms.get("post", 0.0)) / n
        if variant == "normal":
            self._cost_s_per_frame = 0.8 * self._cost_s_per_frame + 0.2 * gen_post / 1e3
        if self.bus is not None:
            self.bus.publish(self.sample())

    def _new_savings(self) -> PairedSavings:
        return PairedSavings(self.s.baseline_pairs, self.s.baseline_pairs_min)

    def compute_saved(self) -> ComputeSaved | None:
        """Compute saved and each flag's share, from the interleaved baseline chunks (module docstring)."""
        opts = self.optimizations
        normal = self._cost.get("normal")
        if not normal:
            return None
        savings = self._savings
        motion_stats = self.motion.stats()
        motion_saved = self._motion_saved_ms_per_frame(opts, motion_stats)
        fig = savings.saved(sum(motion_saved.values()))
        actual = fig.actual_ms_per_frame if fig else float(np.median(normal))
        base = fig.baseline_ms_per_frame if fig else math.nan
        shares = []
        for o in Optimization:
            reason = ""
            frac = math.nan
            status = OptimizationStatus.ACTIVE if o in opts else OptimizationStatus.INACTIVE
            unavailable = self.unavailable().get(o)
            if unavailable:
                head = self.pool.graphs_off[0] if o is O.CUDA_GRAPHS and self.pool.graphs_off else ""
                shares.append(OptimizationShare(o.value, OptimizationStatus.UNAVAILABLE, math.nan, unavailable, head))
                continue
            if o not in opts:
                shares.append(OptimizationShare(o.value, status, math.nan, "switched off"))
                continue
            if o in GENERATION_FLAGS:
                share = savings.share(o.value, base)
                if share is not None:
                    frac = share.fraction
                    reason = (f"measured live: median of the last {share.pairs} chunks without it, each against the "
                              f"chunks beside it ({100 * share.low:+.0f} to {100 * share.high:+.0f} %)")
                else:
                    reason = (f"measuring ({savings.count(f'minus:{o.value}')} of {savings.min_pairs} chunks "
                              "without it; one comes every few seconds)")
            elif o in motion_saved:
                frac = motion_saved[o] / base if base > 0 else math.nan
                reason = "measured live in the motion stage"
                if o is O.KV_CACHE:
                    reason = (f"measured live: the audio model's step without its cache, timed every few seconds over "
                              f"the stream's last {motion_stats.get('kv_probe_tokens', 0)} tokens, against its cached "
                              "steps")
            elif o is O.ASYNC_PIPELINE:
                per = {k: float(np.median(v)) for k, v in self._stage_per_frame.items() if v}
                if per and base > 0:
                    frac = (sum(per.values()) - max(per.values())) / base
                    reason = ("measured stage costs: time per frame bounded by the slowest stage "
                              f"({max(per.values()):.2f} ms) instead of their sum ({sum(per.values()):.2f} ms)")
            elif o is O.KV_CACHE and math.isfinite(motion_stats.get("kv_cache_bytes", math.nan)):
                reason = "measuring (the audio model's step is timed without its cache every few seconds)"
            elif o is O.KV_CACHE or o is O.AUDIO_CACHE:
                reason = "no audio model in this mode" if o not in motion_saved else ""
            shares.append(OptimizationShare(o.value, status, frac, reason))
        src = (f"this run: a baseline chunk (every optimization off, or all but one) interleaved 1 in "
               f"{self.s.baseline_every}; "
               f"each plain one against the normal chunks beside it, the median of the last {savings.window} such "
               "pairs; stage costs per output frame" + (" (GPU time by CUDA events)" if self.cuda else ""))
        return ComputeSaved(base, actual, src, tuple(shares), fraction=fig.fraction if fig else math.nan,
                            low=fig.low if fig else math.nan, high=fig.high if fig else math.nan,
                            pairs=savings.count("plain"), pairs_needed=savings.min_pairs)

    def _motion_saved_ms_per_frame(self, opts, st: dict) -> dict[Optimization, float]:
        out = {}
        if O.AUDIO_CACHE in opts and "audio_cache_saved_ms_per_frame" in st:
            out[O.AUDIO_CACHE] = float(st["audio_cache_saved_ms_per_frame"])
        if O.KV_CACHE in opts and "kv_saved_ms_per_frame" in st:
            out[O.KV_CACHE] = float(st["kv_saved_ms_per_frame"])
        if self.features is not None:
            fs = self.features.stats()
            if O.AUDIO_CACHE in opts and "saved_ms_per_frame" in fs:
                out[O.AUDIO_CACHE] = out.get(O.AUDIO_CACHE, 0.0) + float(fs["saved_ms_per_frame"])
        return out

    def unavailable(self) -> dict[Optimization, str]:
        """Flags this machine or engine cannot use, with the reason in words."""
        out: dict[Optimization, str] = {}
        if not self.cuda:
            if self._compiled_note is None:  # the engine cache is read once per core, not per chunk
                self._compiled_note = compiled_engine_note(self.pool.engine, self.s.device)
            why = self._compiled_note
            if not why and self.pool.compiled_installed is False:
                why = "none of the cached engines fits this portrait, size and batch: " + "; ".join(
                    self.pool.engine_notes)
            if why:
                out[O.CUDA_GRAPHS] = f"no CUDA GPU, and {why}"
            out[O.GPU_ENCODE] = "no CUDA GPU (no GPU colour conversion, no NVENC)"
        st = self.motion.stats()
        if "kv_cache_bytes" not in st:
            out.setdefault(O.KV_CACHE, "no autoregressive motion model in this mode (the neural audio engine has one)")
        info = self.pool.info
        if not info.has_pyramidal_route:
            out[O.PYRAMIDAL] = f"{info.label} has one native size ({info.native_px} px): nothing smaller to generate"
        if "audio_cache_saved_ms_per_frame" not in st and self.features is None:
            out.setdefault(O.AUDIO_CACHE, "no audio encoder in this mode (the neural engine and audio-driven "
                                          "engines have one)")
        if self.pool.graphs_off:  # the engine cannot with this anchor (a cast): ``GeneratorPool.graphs_off``
            out[O.CUDA_GRAPHS] = self.pool.graphs_off[1]
        return out

    def sample(self) -> TelemetrySample:
        st = self.motion.stats()
        caches = {}
        if "audio_cache_hits" in st:
            caches["audio_cache"] = CacheRate(int(st["audio_cache_hits"]), int(st.get("audio_cache_misses", 0)),
                                              float(st.get("audio_cache_saved_ms", 0.0)))
        if self.features is not None:
            fs = self.features.stats()
            if "hits" in fs:
                caches["features"] = CacheRate(int(fs["hits"]), int(fs["misses"]), float(fs.get("saved_ms", 0.0)))
        gpu_mb = torch.cuda.memory_allocated(self.device) / 2 ** 20 if self.cuda else math.nan
        extra = {k: float(v) for k, v in st.items() if isinstance(v, (int, float))}
        extra["chunk_frames"] = float(self.s.chunk_frames)
        extra.update(startup.first_frame_fields(self.first_frame_at_s, self._run_started_s, self.created_at_s))
        if self.features is not None:
            extra.update({f"features_{k}": float(v) for k, v in self.features.stats().items()})
        return TelemetrySample(
            taken_s=time.monotonic(), source=self.bus_source, frames_produced=self.produced,
            frames_dropped=self.dropped, fps_target=self.fmt.fps,
            stages={k: stage_timing(v) for k, v in self._stage_ms.items() if v},
            queue_depths={k: q.depth for k, q in self._queues.items()}, drops={"source": self.dropped},
            gpu_mem_mb=gpu_mb, caches=caches, compute=self.compute_saved(), extra=extra)

    # -- run --------------------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> CoreReport:
        """Produce frames until the source ends or ``stop`` is set; outputs stay open (their owner closes them)."""
        stop = stop or self._stop
        self.failed_outputs = []
        self.source.open(self.fmt)
        self.motion.open(self.fmt)
        for out in self.outputs():
            if not out.opened:
                try:
                    out.open(self.fmt)
                except StudioError as exc:  # a port taken, no loopback device: that output is out, the rest go on
                    log.warning("output %s did not open: %s", out.name, exc)
                    self._output_failed(out, exc)
                    continue
                out.opened = True
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = self._run_started_s = time.perf_counter()
        self.first_frame_at_s = None
        self._first_chunk, self._streams = True, set()
        reason = "end of program"
        try:
            if O.ASYNC_PIPELINE in self.optimizations:
                self._run_async(stop)
            else:
                while not stop.is_set():
                    chunk = self._stage_a(stop)
                    if chunk is None:
                        break
                    self._stage_c(self._stage_b(chunk))
            if stop.is_set():
                reason = "stopped"
        except BaseException as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if self.cuda:
                torch.cuda.synchronize(self.device)
            wall = time.perf_counter() - t0
            self.source.close()
            self._last_report = self._report(wall, reason)
        return self._last_report

    def _report(self, wall: float, reason: str) -> CoreReport:
        costs = [sum(x) for x in zip(*(self._all_stage_ms[k] for k in ("motion", "generate", "post")))]
        produced = max(1, self.produced)
        return CoreReport(
            optimizations=tuple(sorted(o.value for o in self.optimizations)),
            n_frames=self.produced + self.dropped, frames_produced=self.produced, frames_dropped=self.dropped,
            wall_s=wall, ms_per_frame=wall * 1e3 / produced,
            stages={k: stage_timing(v) for k, v in self._all_stage_ms.items() if v},
            cost_ms_per_frame=float(np.sum(costs)) / produced if costs else math.nan,
            queue_depth_max={k: q.max_depth for k, q in self._queues.items()},
            frames_full=self.frames_full, frames_interpolated=self.frames_interpolated,
            frames_fallback=self.frames_fallback, silent_frames=self.silent_frames,
            gpu_mem_peak_mb=torch.cuda.max_memory_allocated(self.device) / 2 ** 20 if self.cuda else 0.0,
            stop_reason=reason,
            off={o.value: why for o, why in self.unavailable().items()
                 if o in self.s.optimizations and o not in self.optimizations},
            **startup.first_frame_fields(self.first_frame_at_s, self._run_started_s, self.created_at_s))

    def _run_async(self, stop: threading.Event) -> None:
        depth = max(1, self.s.queue_depth)
        q_ab, q_bc = StageQueue(depth), StageQueue(depth)
        self._queues = {"motion->generate": q_ab, "generate->post": q_bc}
        errors: list[BaseException] = []
        halt = threading.Event()  # set on the first error: every stage winds down

        jit = self.source.just_in_time

        def stage_a() -> None:
            try:
                while not stop.is_set() and not halt.is_set():
                    if jit:
                        q_ab.wait_empty(lambda: stop.is_set() or halt.is_set())
                    chunk = self._stage_a(stop)
                    if chunk is None:
                        break
                    q_ab.put(chunk)
            except BaseException as exc:
                errors.append(exc)
                halt.set()
            finally:
                q_ab.put(_DONE)

        def stage_b() -> None:
            try:
                ctx = torch.cuda.stream(self.gen_stream) if self.cuda else _nullctx()
                with ctx:
                    while True:
                        if jit:
                            q_bc.wait_empty(halt.is_set)
                        if (chunk := q_ab.get()) is _DONE:
                            break
                        if not halt.is_set():
                            q_bc.put(self._stage_b(chunk))
            except BaseException as exc:
                errors.append(exc)
                halt.set()
                while q_ab.get() is not _DONE:  # let stage A finish
                    pass
            finally:
                q_bc.put(_DONE)

        threads = [threading.Thread(target=stage_a, name="core-motion", daemon=True),
                   threading.Thread(target=stage_b, name="core-generate", daemon=True)]
        for t in threads:
            t.start()
        try:
            ctx = torch.cuda.stream(self.post_stream) if self.cuda else _nullctx()
            with ctx:
                while (chunk := q_bc.get()) is not _DONE:
                    if not halt.is_set():
                        self._stage_c(chunk)
        except BaseException as exc:
            errors.append(exc)
            halt.set()
            stop.set()
            while q_bc.get() is not _DONE:
                pass
        for t in threads:
            t.join()
        if errors:
            err, errors[:] = errors[0], []  # the list is in the error's frames: kept, the two would hold each other
            try:
                raise err
            finally:
                del err  # this frame is in its traceback too


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def check_size(settings: CoreSettings) -> None:
    """Refuse up front what the core cannot do (the drivers call it before any work)."""
    if settings.size_px < 64 or settings.size_px % 2:
        raise RenderError(f"Presenter size {settings.size_px} is not usable: use an even number of pixels, 64 or "
                          "more.")


def with_flags(settings: CoreSettings, opts) -> CoreSettings:
    return replace(settings, optimizations=frozenset(opts))
