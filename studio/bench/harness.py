"""`python main.py bench`: the plain pipeline against the optimized one, in the same run, on this machine.

Runs a fixed rundown (the default rundown's segments, text-to-speech once, cut to ``--seconds``; or a saved program
``--program FILE.npz`` on machines without TTS) through:
- plain: eager, synchronous, full resolution, every frame generated, no cache, no sieve;
- plain + each optimization alone (the ablation rows: one switched on, everything else as plain);
- optimized: every optimization that applies here.
Each configuration is repeated (interleaved, so that load from other processes spreads evenly) and medians are reported.
Quality is measured too: interpolated frames against truly generated ones (motion-space and RIFE), and pyramidal
routes against native full resolution (PSNR and SSIM on the face box). Writes JSON and a PNG chart.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from studio.pipeline.stages import (RATE_HZ, EncoderKind, Optimization, Pipeline, PipelineReport, PipelineSettings,
                                    Segment)
from studio.pipeline.telemetry import (CacheRate, ComputeSaved, TelemetryBus, TelemetrySample, last_bench_path,
                                       shares_from)
from studio.speech.types import PhonemeTiming

log = logging.getLogger(__name__)

PAUSE_S = 0.6  # silence after each story, as a presenter pauses


@dataclass(frozen=True)
class BenchSettings:
    device: str = "cpu"
    seconds: float = 6.0
    size_px: int = 384
    fps: float = 30.0
    repeats: int = 3
    program: Path | None = None  # saved program (.npz) instead of text-to-speech
    save_program: Path | None = None
    quality_frames: int = 8


def defaults_for(device: str) -> BenchSettings:
    """CPU: small enough to finish in minutes on 2 cores; CUDA: the product target, 1080x1080 at 60 fps."""
    if device.startswith("cuda"):
        return BenchSettings(device=device, seconds=20.0, size_px=1080, fps=60.0, repeats=3)
    return BenchSettings(device=device)


# -- the program ----------------------------------------------------------------------------------------------------------

def build_program(seconds: float) -> list[Segment]:
    """The default rundown through text-to-speech (16 kHz, a pause after each story), cut to ``seconds``."""
    from scipy.signal import resample_poly

    from studio.pipeline.rundown import load_rundown
    from studio.speech import synthesize

    out: list[Segment] = []
    total = 0.0
    for item in load_rundown():
        if total >= seconds:
            break
        utt = synthesize(item.text, item.voice)
        g = np.gcd(RATE_HZ, utt.sample_rate_hz)
        audio = resample_poly(utt.audio, RATE_HZ // g, utt.sample_rate_hz // g).astype(np.float32)
        audio = np.concatenate([audio, np.zeros(int(PAUSE_S * RATE_HZ), np.float32)])
        keep = min(len(audio), int((seconds - total) * RATE_HZ))
        phones = tuple(p for p in utt.phonemes if p.start_s < keep / RATE_HZ)
        out.append(Segment(audio=audio[:keep], phonemes=phones, title=item.title))
        total += keep / RATE_HZ
    return out


def save_program(program: list[Segment], path: Path) -> None:
    arrays: dict[str, np.ndarray] = {"n": np.array(len(program))}
    for i, seg in enumerate(program):
        arrays[f"audio{i}"] = seg.audio
        arrays[f"phones{i}"] = np.array([p.phoneme for p in seg.phonemes], dtype=str)
        arrays[f"times{i}"] = np.array([[p.start_s, p.end_s, p.stress] for p in seg.phonemes], np.float64).reshape(-1, 3)
        arrays[f"title{i}"] = np.array(seg.title)
    np.savez(path, **arrays)


def load_program(path: Path) -> list[Segment]:
    z = np.load(path)
    out = []
    for i in range(int(z["n"])):
        phones = tuple(PhonemeTiming(str(p), float(t[0]), float(t[1]), int(t[2]))
                       for p, t in zip(z[f"phones{i}"], z[f"times{i}"]))
        out.append(Segment(audio=z[f"audio{i}"].astype(np.float32), phonemes=phones, title=str(z[f"title{i}"])))
    return out


# -- configurations -------------------------------------------------------------------------------------------------------

def _encoder_for(device: str) -> tuple[EncoderKind, str, list[str]]:
    """libx264 where PyAV exists (with a hardware H.264 encoder if one opens); NV12 + host copy where PyAV is absent."""
    try:
        from studio.encode import available_video_encoders
    except ImportError:
        return EncoderKind.NV12_HOST, "", []
    found = available_video_encoders()
    hw = [e for e in found if e.startswith("h264_")]
    return EncoderKind.X264, (hw[0] if hw else ""), found


def _configs(cuda: bool, hw_codec: str) -> dict[str, frozenset[Optimization]]:
    O = Optimization
    rows = [O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.ASYNC_PIPELINE, O.SILENCE_SIEVE]
    if hw_codec:
        rows.append(O.GPU_ENCODE)
    if cuda:
        rows.append(O.CUDA_GRAPHS)
    cfg = {"plain": frozenset()}
    cfg.update({o.value: frozenset({o}) for o in rows})
    cfg["optimized"] = frozenset(rows)
    return cfg


def _settings(b: BenchSettings, opts: frozenset[Optimization], encoder: EncoderKind, hw: str) -> PipelineSettings:
    enc = encoder
    if Optimization.GPU_ENCODE in opts and hw:
        enc = EncoderKind.HARDWARE
    return PipelineSettings(size_px=b.size_px, fps=b.fps, device=b.device, optimizations=opts, encoder=enc,
                            hardware_codec=hw)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


# -- quality ------------------------------------------------------------------------------------------------------------

@torch.inference_mode()
def measure_quality(anchor, program: list[Segment], b: BenchSettings) -> dict:
    """PSNR of interpolated frames against truly generated ones; pyramidal routes against native resolution."""
    from studio.enhance.interp import MotionSpaceInterpolator, max_error_px
    from studio.enhance.quality import face_box, psnr, ssim
    from studio.enhance.settings import EnhanceSettings
    from studio.presenter.motion import script_motion
    from studio.presenter.renderer import Presenter, RenderSettings

    e = EnhanceSettings()
    seg = program[0]
    n = min(2 * b.quality_frames + 1, PipelineSettings().chunk_frames + 1)
    motion = script_motion(seg.phonemes, seg.audio, RATE_HZ, b.fps, 4 * n).values
    a0 = int(0.4 * b.fps)  # start inside the speech
    coeffs = torch.as_tensor(motion[a0:a0 + n])
    dev = torch.device(b.device)
    native = Presenter(anchor, RenderSettings(size_px=b.size_px, device=b.device))
    ref = native.module(coeffs.to(dev)).clamp(0, 255)  # n frames, every one generated
    box = face_box(native.module.lm_src.cpu().numpy(), b.size_px)
    out: dict = {"size_px": b.size_px, "face_box": box, "frames": n}
    mid = torch.arange(1, n - 1, 2)  # frames a stride-2 schedule interpolates

    interp = MotionSpaceInterpolator(native.module, max_error_px(e.max_interp_error_px_at_512, b.size_px))
    frames, _ = interp.render_span(coeffs.to(dev), np.full(n, 2))
    res = {"psnr_db": psnr(frames.clamp(0, 255)[mid], ref[mid]),
           "psnr_face_db": psnr(frames.clamp(0, 255)[mid], ref[mid], box),
           "frames_interpolated": interp.frames_interpolated, "frames_fallback": interp.frames_fallback}
    out["interpolation"] = {"motion_space": res}
    blend = (ref[mid - 1] + ref[mid + 1]) / 2
    out["interpolation"]["linear_blend"] = {"psnr_db": psnr(blend, ref[mid]), "psnr_face_db": psnr(blend, ref[mid], box)}
    try:
        from studio.enhance.rife import RifeInterpolator

        rife = RifeInterpolator(dev, half=dev.type == "cuda")
        k = min(len(mid), 4 if dev.type == "cpu" else len(mid))
        sel = mid[:k]
        t0 = time.perf_counter()
        mids = torch.cat([rife.between(ref[i - 1:i], ref[i + 1:i + 2], 0.5) for i in sel.tolist()])
        ms = (time.perf_counter() - t0) * 1e3 / k
        out["interpolation"]["rife"] = {"psnr_db": psnr(mids, ref[sel]), "psnr_face_db": psnr(mids, ref[sel], box),
                                        "frames": k, "ms_per_frame_eager": ms}
    except Exception as exc:  # missing weights are reported, not fatal
        out["interpolation"]["rife"] = {"error": str(exc)}

    pyr = Presenter(anchor, RenderSettings(size_px=b.size_px, device=b.device,
                                           field_px=max(16, b.size_px // e.field_divisor)))
    wf = pyr.module(coeffs.to(dev)).clamp(0, 255)
    out["pyramidal"] = {"warp_field": {"field_px": pyr.module.field, "native_field_px": native.module.field,
                                       "psnr_face_db": psnr(wf, ref, box), "ssim_face": ssim(wf, ref, box),
                                       "psnr_db": psnr(wf, ref)}}
    try:
        from studio.enhance.upscale import LearnedUpscaler

        up = LearnedUpscaler(dev, half=dev.type == "cuda")
        small = Presenter(anchor, RenderSettings(size_px=b.size_px // up.scale, device=b.device))
        k = min(n, 4 if dev.type == "cpu" else n)
        lo = small.module(coeffs[:k].to(dev)).clamp(0, 255)
        up(lo[:1])  # warm-up
        _sync(dev)
        t0 = time.perf_counter()
        hi = up(lo)
        _sync(dev)
        up_ms = (time.perf_counter() - t0) * 1e3 / k
        bic = torch.nn.functional.interpolate(lo, size=(b.size_px, b.size_px), mode="bicubic",
                                              align_corners=False).clamp(0, 255)
        out["pyramidal"]["learned_span_x4"] = {
            "generated_px": b.size_px // up.scale, "psnr_face_db": psnr(hi, ref[:k], box),
            "ssim_face": ssim(hi, ref[:k], box), "frames": k, "ms_per_frame_eager": up_ms,
            "bicubic_psnr_face_db": psnr(bic, ref[:k], box), "bicubic_ssim_face": ssim(bic, ref[:k], box)}
    except Exception as exc:
        out["pyramidal"]["learned_span_x4"] = {"error": str(exc)}
    return out


@torch.inference_mode()
def kernel_floor(size_px: int, device: str, copy_tb_s: float = 4.3) -> dict:
    """The main full-resolution kernels of one output frame: bytes they must move (fp32 frames), their physical
    floor at the measured copy ceiling, and their measured time (CUDA events, median of 50, batch 8)."""
    import torch.nn.functional as F

    s, b = size_px, 8
    dev = torch.device(device)
    img = torch.rand(1, 3, s, s, device=dev) * 255
    bg = torch.rand(1, 3, s, s, device=dev) * 255
    field = torch.rand(b, 2, s // 8, s // 8, device=dev) * 2 - 1
    mask_lo = torch.rand(b, 1, s // 8, s // 8, device=dev)
    px = s * s
    kernels = {
        # name: (callable, bytes per frame)
        "field_upsample": (lambda: (F.interpolate(field, size=(s, s), mode="bilinear", align_corners=False),
                                    F.interpolate(mask_lo, size=(s, s), mode="bilinear", align_corners=False)),
                           px * 3 * 4),
        "grid_sample_portrait": (None, px * 2 * 4 + px * 3 * 4 + px * 3 * 4),
        "composite_lerp": (None, px * (3 + 3 + 1 + 3) * 4),
        "rgb_to_nv12_u8": (None, px * 3 * 4 + px * 3 // 2),
    }
    grid = F.interpolate(field, size=(s, s), mode="bilinear", align_corners=False).permute(0, 2, 3, 1).contiguous()
    mask = F.interpolate(mask_lo, size=(s, s), mode="bilinear", align_corners=False)
    warped = F.grid_sample(img.expand(b, -1, -1, -1), grid, mode="bilinear", padding_mode="border", align_corners=False)
    from studio.pipeline.stages import rgb_to_nv12

    kernels["grid_sample_portrait"] = (lambda: F.grid_sample(img.expand(b, -1, -1, -1), grid, mode="bilinear",
                                                             padding_mode="border", align_corners=False),
                                       kernels["grid_sample_portrait"][1])
    kernels["composite_lerp"] = (lambda: torch.lerp(bg, warped, mask), kernels["composite_lerp"][1])
    kernels["rgb_to_nv12_u8"] = (lambda: rgb_to_nv12(warped), kernels["rgb_to_nv12_u8"][1])
    out = {"copy_ceiling_tb_s": copy_tb_s, "size_px": s, "kernels": {}}
    total_b = total_ms = 0.0
    for name, (fn, nbytes) in kernels.items():
        for _ in range(3):
            fn()
        times = []
        for _ in range(50):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / b)
        ms = statistics.median(times)
        floor_ms = nbytes / (copy_tb_s * 1e12) * 1e3
        out["kernels"][name] = {"bytes_per_frame": nbytes, "floor_ms": floor_ms, "measured_ms_per_frame": ms,
                                "fraction_of_ceiling": floor_ms / ms}
        total_b += nbytes
        total_ms += ms
    out["total"] = {"bytes_per_frame": total_b, "floor_ms": total_b / (copy_tb_s * 1e12) * 1e3,
                    "measured_ms_per_frame": total_ms}
    return out


# -- the neural audio engine's rows -------------------------------------------------------------------------------------

def _neural_model():
    from studio.neural.settings import NeuralSettings
    from studio.neural.weights import load_weights

    s = NeuralSettings()
    if not s.weights_path.is_file():
        from studio.errors import ModelLoadError

        raise ModelLoadError(f"no audio-to-motion weights at {s.weights_path}")
    return s, load_weights(s.weights_path)


def measure_audio_cache(program: list[Segment], b: BenchSettings) -> dict:
    """The program's audio through the neural engine (its production backend) twice with one fingerprint cache,
    against the same engine with no cache; interleaved repeats, medians. Per output frame of the bench's frame rate."""
    from studio.audio.fingerprint import FingerprintCache
    from studio.neural.engine import SAMPLES_PER_FRAME, NeuralMotionEngine

    s, model = _neural_model()
    plain = NeuralMotionEngine(replace(s, fingerprint_capacity=0), model=model)
    audio = [seg.audio for seg in program]
    noise = (0.05 * np.random.default_rng(0).standard_normal(RATE_HZ)).astype(np.float32)
    cached = NeuralMotionEngine(s, model=model, fingerprints=FingerprintCache(1))
    for eng in (plain, cached):
        eng.motion(noise)  # warm-up (sessions, allocations); noise never matches the program's fingerprints
    n_out = sum(len(a) for a in audio) / RATE_HZ * b.fps
    n_engine = sum(-(-len(a) // SAMPLES_PER_FRAME) for a in audio)
    base, first, second, stats = [], [], [], []
    for _ in range(b.repeats):
        t0 = time.perf_counter()
        for a in audio:
            plain.motion(a)
        base.append((time.perf_counter() - t0) * 1e3 / n_out)
        fp = FingerprintCache(max(1, s.fingerprint_capacity))  # empty: pass 1 fills it, pass 2 replays the audio
        cached.fingerprints = fp
        for rec in (first, second):
            if rec is second:
                fp.reset_counts()
            t0 = time.perf_counter()
            for a in audio:
                cached.motion(a)
            rec.append((time.perf_counter() - t0) * 1e3 / n_out)
        stats.append(fp.stats())
    st = stats[len(stats) // 2]
    med_base, med_second = statistics.median(base), statistics.median(second)
    return {"optimization": "audio_cache", "scope": "neural audio engine alone (fingerprint cache in front of its "
            "encoder); not part of the pipeline's plain / optimized totals",
            "backend": s.backend.value, "baseline_ms_per_frame": med_base, "optimized_ms_per_frame": med_second,
            "saved_fraction": 1.0 - med_second / med_base, "first_pass_ms_per_frame": statistics.median(first),
            "second_pass_hit_rate": st.hit_rate, "second_pass_hits": st.hits, "second_pass_misses": st.misses,
            "encoder_ms_per_miss": st.encoder_ms_per_miss, "encoder_ms_saved": st.encoder_ms_saved,
            "encoder_ms_saved_per_frame": st.encoder_ms_saved / n_out,
            "encoder_ms_saved_per_engine_frame": st.encoder_ms_saved / n_engine,
            "repeats_ms_per_frame": second, "repeats_baseline_ms_per_frame": base}


@torch.inference_mode()
def measure_kv_cache(program: list[Segment], b: BenchSettings, max_steps: int = 150) -> dict:
    """The motion transformer's streaming step with the INT8 sliding-window KV cache, against no cache (the parallel
    form recomputed over every token so far, which is what a step costs without one), and against FP16 / FP32 caches.
    Torch backend for all, on the program's first ``max_steps`` engine frames; per output frame of the bench."""
    from studio.audio.features import log_mel
    from studio.neural.engine import FPS, MEL_FRONT_PAD, _SILENT_MEL
    from studio.neural.kvcache import CacheDType
    from studio.neural.model import StepGraph

    _, model = _neural_model()
    cfg = model.cfg
    audio = np.concatenate([seg.audio for seg in program])
    mel = log_mel(audio)
    mel = np.concatenate([np.full((MEL_FRONT_PAD, mel.shape[1]), _SILENT_MEL, np.float32), mel])
    n = min(max_steps, (len(mel) - cfg.mel_per_token) // cfg.mel_per_frame)
    enc = model.encoder(torch.from_numpy(mel)[None])  # 1 x M x C
    feats = model.motion.tokens(enc, n)[0]  # n x 8C
    graph = StepGraph(model).eval()
    per_out = FPS / b.fps  # engine frames per output frame

    def run_cached(dtype: CacheDType) -> tuple[float, np.ndarray, int]:
        state = list(model.empty_state(dtype).tensors())
        prev = torch.zeros(cfg.n_out)
        ys = []
        t0 = time.perf_counter()
        for t in range(n):
            out = graph(feats[t], prev, *state)
            prev, state = out[0], list(out[2:])
            ys.append(prev)
        ms = (time.perf_counter() - t0) * 1e3 / n
        return ms, torch.stack(ys).numpy(), sum(x.numel() * x.element_size() for x in state)

    def run_uncached(prevs: torch.Tensor) -> float:
        t0 = time.perf_counter()
        for t in range(n):
            model.motion(feats[None, : t + 1], prevs[None, : t + 1])
        return (time.perf_counter() - t0) * 1e3 / n

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on the CPU, as the engine runs (onnx_threads=1): a token step is too small to split
    try:
        run_cached(CacheDType.INT8)  # warm-up
        rows: dict[str, list[float]] = {"int8": [], "fp16": [], "fp32": [], "none": []}
        outs, nbytes = {}, {}
        for _ in range(b.repeats):
            for name, dt in (("int8", CacheDType.INT8), ("fp16", CacheDType.FP16), ("fp32", CacheDType.FP32)):
                ms, outs[name], nbytes[name] = run_cached(dt)
                rows[name].append(ms)
            prevs = torch.cat([torch.zeros(1, cfg.n_out), torch.from_numpy(outs["fp32"][:-1])])
            rows["none"].append(run_uncached(prevs))
        step_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    med = {k: statistics.median(v) * per_out for k, v in rows.items()}
    return {"optimization": "kv_cache", "scope": "neural motion transformer's step alone (torch backend); not part of "
            "the pipeline's plain / optimized totals", "steps": n, "torch_threads": step_threads,
            "baseline": "no KV cache: parallel form over every token so far, per step",
            "baseline_ms_per_frame": med["none"], "optimized_ms_per_frame": med["int8"],
            "saved_fraction": 1.0 - med["int8"] / med["none"],
            "fp16_cache_ms_per_frame": med["fp16"], "fp32_cache_ms_per_frame": med["fp32"],
            "int8_vs_fp16_saved_fraction": 1.0 - med["int8"] / med["fp16"],
            "cache_bytes": {"int8": nbytes["int8"], "fp16": nbytes["fp16"], "fp32": nbytes["fp32"],
                            "unbounded_fp16_at_end_computed": cfg.n_layers * 2 * n * cfg.d_model * 2},
            "int8_vs_fp32_max_abs_diff": float(np.abs(outs["int8"] - outs["fp32"]).max()),
            "fp16_vs_fp32_max_abs_diff": float(np.abs(outs["fp16"] - outs["fp32"]).max()),
            "repeats_ms_per_engine_frame": rows}


# -- the run --------------------------------------------------------------------------------------------------------------

def machine_info(device: str) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(), "device": device}
    try:
        info["load_average_1m"] = os.getloadavg()[0]
    except OSError:
        pass
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def run_bench(b: BenchSettings, json_path: Path | None = None, progress=print) -> dict:
    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import resolve_device

    dev = resolve_device(b.device)
    b = replace(b, device=str(dev))
    t_start = time.perf_counter()
    anchor = build_anchor()
    program = load_program(b.program) if b.program else build_program(b.seconds)
    if b.save_program:
        save_program(program, b.save_program)
    encoder, hw, encoders = _encoder_for(b.device)
    configs = _configs(dev.type == "cuda", hw)
    progress(f"bench: {sum(len(s.audio) for s in program) / RATE_HZ:.1f} s program, {b.size_px}px at {b.fps:g} fps, "
             f"device {dev}, {len(configs)} configurations x {b.repeats} repeats")
    # warm-up: one short run of each configuration (allocations, graph capture, lazy init)
    warm = [Segment(program[0].audio[: RATE_HZ], program[0].phonemes)]
    for opts in configs.values():
        Pipeline(anchor, _settings(b, opts, encoder, hw)).run(warm)
    reports: dict[str, list[PipelineReport]] = {k: [] for k in configs}
    samples: dict[str, list[TelemetrySample]] = {k: [] for k in configs}  # each run's last sample on the bus
    bus = TelemetryBus()
    for r in range(b.repeats):
        for name, opts in configs.items():
            rep = Pipeline(anchor, _settings(b, opts, encoder, hw), bus=bus).run(program)
            reports[name].append(rep)
            samples[name].append(bus.latest("pipeline"))
            progress(f"  repeat {r + 1}: {name:>20}: {rep.ms_per_frame:8.3f} ms/frame")
    med = {k: statistics.median(x.ms_per_frame for x in v) for k, v in reports.items()}
    base = med["plain"]
    ablation = []
    extra = []
    for name in configs:
        if name in ("plain", "optimized"):
            continue
        row = {"optimization": name, "baseline_ms_per_frame": base, "optimized_ms_per_frame": med[name],
               "saved_fraction": 1.0 - med[name] / base, "repeats_ms_per_frame": [x.ms_per_frame for x in reports[name]]}
        (extra if name == Optimization.CUDA_GRAPHS.value else ablation).append(row)
    skipped = []
    if not hw:
        skipped.append({"optimization": "gpu_encode", "reason": "no hardware video encoder opens on this machine"
                        + ("" if encoders or encoder is not EncoderKind.NV12_HOST else " (no PyAV here)")})
    caches: dict[str, CacheRate] = {}
    for name, fn in (("audio_cache", measure_audio_cache), ("kv_cache", measure_kv_cache)):
        try:
            row = fn(program, b)
        except Exception as exc:  # no weights / no engine: the row is left out with the reason, never assumed
            log.warning("bench: %s row left out: %s", name, exc)
            skipped.append({"optimization": name, "reason": f"neural audio engine unavailable: {exc}"})
            continue
        ablation.append(row)
        progress(f"  {name:>20}: {row['baseline_ms_per_frame']:8.3f} -> {row['optimized_ms_per_frame']:8.3f} "
                 f"ms/frame ({row['scope'].split(';')[0]})")
        if name == "audio_cache":
            caches[name] = CacheRate(row["second_pass_hits"], row["second_pass_misses"], row["encoder_ms_saved"])
    opt_rep = reports["optimized"][len(reports["optimized"]) // 2]
    opt_sample = samples["optimized"][len(samples["optimized"]) // 2]
    unavailable = {r["optimization"]: r["reason"] for r in skipped}
    if dev.type != "cuda":
        unavailable["cuda_graphs"] = "no CUDA GPU"
    active = {o.value for o in configs["optimized"]}
    shares = shares_from(active, {"ablation": ablation, "extra_ablation": extra}, unavailable)
    bus.publish(replace(opt_sample, taken_s=time.monotonic(), source="bench", caches=caches, compute=ComputeSaved(
        base, med["optimized"], f"bench plain pipeline, median of {b.repeats} runs, same process", shares)))
    telemetry = _jsonable(asdict(bus.latest("bench")))
    plain_rep = reports["plain"][len(reports["plain"]) // 2]
    quality = measure_quality(anchor, program, b)
    floor = kernel_floor(b.size_px, b.device) if dev.type == "cuda" else None
    result = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(b).items()},
        "machine": machine_info(b.device),
        "encoder": {"kind": encoder.value, "hardware": hw, "available": encoders},
        "program_s": sum(len(s.audio) for s in program) / RATE_HZ,
        "frames": plain_rep.n_frames,
        "plain_ms_per_frame": base,
        "optimized_ms_per_frame": med["optimized"],
        "compute_saved": 1.0 - med["optimized"] / base,
        "realtime_budget_ms_per_frame": 1e3 / b.fps,
        "stages": {"plain": {k: asdict(v) for k, v in plain_rep.stages.items()},
                   "optimized": {k: asdict(v) for k, v in opt_rep.stages.items()}},
        "ablation": ablation,
        "extra_ablation": extra,
        "skipped": skipped,
        "optimized_run": {k: v for k, v in asdict(opt_rep).items() if k != "stages"},
        "telemetry": telemetry,
        "quality": quality,
        "floor": floor,
        "repeats": {k: [x.ms_per_frame for x in v] for k, v in reports.items()},
        "bench_wall_s": time.perf_counter() - t_start,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=1))
        result["chart"] = str(write_chart(result, json_path.with_suffix(".png")))
        json_path.write_text(json.dumps(result, indent=1))
    try:  # the studio's HUD takes its pills' fractions from this machine's last bench
        last_bench_path("cuda" if dev.type == "cuda" else "cpu").write_text(json.dumps(result, indent=1))
    except OSError as exc:
        log.warning("bench: cannot keep a copy for the HUD: %s", exc)
    return result


def _jsonable(x):
    """asdict() output -> JSON types (enums by value, nan as null)."""
    import enum
    import math

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_chart(result: dict, path: Path) -> Path:
    """Bar chart: ms per output frame for plain, each ablation row and the optimized pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("plain", result["plain_ms_per_frame"])]
    rows += [(r["optimization"], r["optimized_ms_per_frame"]) for r in result["ablation"] + result["extra_ablation"]
             if "scope" not in r]  # the neural engine's rows measure another scope (see their ``scope``)
    rows.append(("optimized", result["optimized_ms_per_frame"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    names, vals = zip(*rows)
    colors = ["#888"] + ["#4a90d9"] * (len(rows) - 2) + ["#2e9e5b"]
    ax.barh(names[::-1], vals[::-1], color=colors[::-1])
    ax.axvline(result["realtime_budget_ms_per_frame"], color="#c33", ls="--", label="real-time budget")
    m = result["machine"]
    ax.set_xlabel("ms per output frame (median of repeats)")
    ax.set_title(f"{m.get('gpu', 'CPU')}: {result['settings']['size_px']}px @ {result['settings']['fps']:g} fps, "
                 f"compute saved {100 * result['compute_saved']:.0f}%")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
