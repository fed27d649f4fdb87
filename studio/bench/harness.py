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
    for r in range(b.repeats):
        for name, opts in configs.items():
            rep = Pipeline(anchor, _settings(b, opts, encoder, hw)).run(program)
            reports[name].append(rep)
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
    skipped.append({"optimization": "audio_cache", "reason": "the neural audio engine (studio.neural) is not wired "
                    "into this pipeline yet; the built-in engine has no audio features to cache"})
    skipped.append({"optimization": "kv_cache", "reason": "the neural audio engine (studio.neural) is not wired into "
                    "this pipeline yet"})
    opt_rep = reports["optimized"][len(reports["optimized"]) // 2]
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
        "quality": quality,
        "floor": floor,
        "repeats": {k: [x.ms_per_frame for x in v] for k, v in reports.items()},
        "bench_wall_s": time.perf_counter() - t_start,
    }
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=1))
        result["chart"] = str(write_chart(result, json_path.with_suffix(".png")))
        json_path.write_text(json.dumps(result, indent=1))
    return result


def write_chart(result: dict, path: Path) -> Path:
    """Bar chart: ms per output frame for plain, each ablation row and the optimized pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("plain", result["plain_ms_per_frame"])]
    rows += [(r["optimization"], r["optimized_ms_per_frame"]) for r in result["ablation"] + result["extra_ablation"]]
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
