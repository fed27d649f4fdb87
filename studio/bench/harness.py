"""`python main.py bench`: the pipeline core with its optimizations off and on, in the same run, on this machine.

The program is the default rundown through text-to-speech, with the station ident between the stories (a repeated
phrase, as on air: what the audio cache is for), cut to ``--seconds``; or a saved program (``--program FILE.npz``) on
machines without TTS. Its items go in as recordings, so the neural audio-to-motion engine animates them and every flag
has work to do (the KV cache and the audio cache sit in that engine). Each configuration is a core built by the same
factory as the studio's (``studio.pipeline.factory.make_core``):
- plain: the empty set of flags (eager, synchronous, full resolution, every frame generated, no caches, no sieve);
- each flag alone on top of plain (the ablation rows), and all flags but one (how much each saves in company);
- optimized: every flag that applies here.
Configurations are repeated, interleaved (load from other processes spreads evenly), and medians are reported: the
wall time per output frame, and the cost per frame of each stage (on CUDA the GPU time by events). Quality is measured
too: interpolated frames against truly generated ones (motion space and RIFE) and the pyramidal routes against native
resolution (PSNR and SSIM on the face box). Writes JSON and a PNG chart.
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

from studio.errors import InputError
from studio.contracts import ANALYSIS_RATE_HZ, Output, ProgramBatch
from studio.pipeline.settings import CoreSettings, Optimization
from studio.pipeline.telemetry import last_bench_path

log = logging.getLogger(__name__)

PAUSE_S = 0.6  # silence after each story, as a presenter pauses
IDENT = "You are watching NewsStudio."  # the station ident between stories


@dataclass(frozen=True)
class BenchSettings:
    device: str = "cpu"
    seconds: float = 6.0
    size_px: int = 384
    canvas: str = ""  # "", "720p", "1080p"
    fps: float = 30.0
    repeats: int = 3
    engine: str = "builtin"
    program: Path | None = None  # saved program (.npz) instead of text-to-speech
    save_program: Path | None = None
    quality_frames: int = 8
    configs: str = "ablation"  # "ablation": plain, each flag alone, optimized; "all": also all-but-one rows
    native_px: int = 0  # the engine's plain size (0: its own)
    key_stride: int = 2  # with FRAME_INTERPOLATION: one generated frame every N output frames


def defaults_for(device: str) -> BenchSettings:
    """CPU: small enough to finish in minutes on 2 cores; CUDA: the product target, 1080 px at 60 fps."""
    if device.startswith("cuda"):
        return BenchSettings(device=device, seconds=20.0, size_px=1080, fps=60.0, repeats=3)
    return BenchSettings(device=device)


# -- the program ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchItem:
    audio_16k: np.ndarray
    title: str


def build_program(seconds: float) -> list[BenchItem]:
    """The default rundown through text-to-speech at 16 kHz, the ident and a pause after each story, cut to
    ``seconds``."""
    from studio.pipeline.rundown import load_rundown
    from studio.pipeline.sources import resample
    from studio.speech import synthesize

    def speech(text: str, voice: str) -> np.ndarray:
        utt = synthesize(text, voice)
        return resample(utt.audio, utt.sample_rate_hz, ANALYSIS_RATE_HZ)

    pause = np.zeros(int(PAUSE_S * ANALYSIS_RATE_HZ), np.float32)
    out: list[BenchItem] = []
    total = 0.0
    ident = None
    for item in load_rundown():
        if total >= seconds:
            break
        if ident is None:
            ident = speech(IDENT, item.voice)
        for title, audio in ((item.title, speech(item.text, item.voice)), ("NewsStudio", ident)):
            a = np.concatenate([audio, pause])
            keep = min(len(a), int((seconds - total) * ANALYSIS_RATE_HZ))
            if keep <= 0:
                break
            out.append(BenchItem(a[:keep], title))
            total += keep / ANALYSIS_RATE_HZ
    return out


def save_program(program: list[BenchItem], path: Path) -> None:
    arrays: dict[str, np.ndarray] = {"n": np.array(len(program))}
    for i, it in enumerate(program):
        arrays[f"audio{i}"] = it.audio_16k
        arrays[f"title{i}"] = np.array(it.title)
    np.savez(path, **arrays)


def load_program(path: Path) -> list[BenchItem]:
    try:
        z = np.load(path)
        return [BenchItem(z[f"audio{i}"].astype(np.float32), str(z[f"title{i}"])) for i in range(int(z["n"]))]
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"{path} is not a saved bench program ({exc}): make one with --save-program.") from exc


def cut_program(program: list[BenchItem], seconds: float) -> list[BenchItem]:
    """The first ``seconds`` of a saved program."""
    out, left = [], int(seconds * ANALYSIS_RATE_HZ)
    for it in program:
        if left <= 0:
            break
        out.append(BenchItem(it.audio_16k[:left], it.title))
        left -= len(out[-1].audio_16k)
    return out


def _items(program: list[BenchItem]):
    from studio.contracts import OnAir
    from studio.pipeline.sources import ProgramItem, resample

    return [ProgramItem(program_audio=resample(it.audio_16k, ANALYSIS_RATE_HZ, 48000), analysis_audio=it.audio_16k,
                        on_air=OnAir(title=it.title)) for it in program]


# -- configurations ---------------------------------------------------------------------------------------------------------

class NullOutput(Output):
    """Takes the program and drops it: on CUDA the bench measures the core (generation, post-processing, NV12
    conversion and the copy to the host) without a CPU video encoder in the way (the H200 has no NVENC)."""

    name = "null"
    needs_rgb = False
    wants_yuv = True  # what an encoder would take: the colour conversion and the copy to the host are measured
    retains_frames = False

    def __init__(self) -> None:
        self.frames = 0

    def write(self, batch: ProgramBatch) -> None:
        self.frames += len(batch.slots)


def configurations(cuda: bool, which: str = "all") -> dict[str, frozenset[Optimization]]:
    O = Optimization
    rows = [O.PYRAMIDAL, O.FRAME_INTERPOLATION, O.ASYNC_PIPELINE, O.SILENCE_SIEVE, O.AUDIO_CACHE, O.KV_CACHE]
    if cuda:
        rows += [O.CUDA_GRAPHS, O.GPU_ENCODE]
    cfg = {"plain": frozenset()}
    cfg.update({o.value: frozenset({o}) for o in rows})
    everything = frozenset(rows)
    if which == "all":
        cfg.update({f"all_but_{o.value}": everything - {o} for o in rows})
    cfg["optimized"] = everything
    return cfg


def _core_settings(b: BenchSettings, opts: frozenset[Optimization]) -> CoreSettings:
    from studio.contracts import Layout

    layout = Layout.CANVAS if b.canvas else Layout.SQUARE
    return CoreSettings(size_px=b.size_px, layout=layout, canvas_height_px={"720p": 720, "1080p": 1080}.get(b.canvas,
                        720), fps=b.fps, device=b.device, engine=b.engine, native_px=b.native_px,
                        optimizations=opts, chunk_frames=16, key_stride=b.key_stride,
                        batch_frames=8 if b.device == "cpu" else 16)


def _cold_audio_cache() -> None:
    """Every run starts with the neural engine's fingerprint cache empty, as the studio does: the cache is
    process-wide, and a warm one would credit the audio_cache row with the hits of earlier runs."""
    from studio.errors import ModelLoadError
    from studio.neural.engine import default_engine

    try:
        fp = default_engine().fingerprints
    except ModelLoadError:
        return
    if fp is not None:
        fp.clear()


def run_config(anchor, program: list[BenchItem], b: BenchSettings, opts: frozenset[Optimization], tmp: Path,
               keep_core: bool = False, forms: dict | None = None, stop=None):
    """One run of the core over the program; returns its CoreReport and the motion source's stats (and the core,
    its generators still open, with ``keep_core``: the caller closes ``core.pool``). ``forms``: generator forms
    kept between runs (``make_core``). ``stop``: a threading.Event that ends the run early (the report says
    "stopped")."""
    from studio.pipeline.factory import make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.sources import ProgramSource

    s = _core_settings(b, opts)
    cuda = b.device.startswith("cuda")
    _cold_audio_cache()
    if cuda:
        out: Output = NullOutput()
    else:
        from studio.encode.recorder import RecorderOutput
        from studio.encode.settings import EncodeSettings

        out = RecorderOutput(tmp / "bench.mp4", fragmented=False, block=True, settings=EncodeSettings(preset="ultrafast"))
    motion = ProgramMotion(seed=0)
    core = make_core(ProgramSource(_items(program)), motion, s, anchor, [out], on_air=False, forms=forms)
    core.warm()
    try:
        report = core.run(stop)
    finally:
        if not keep_core:
            core.close()
    out.close()
    if keep_core:
        return report, motion.stats(), core
    return report, motion.stats()


# -- quality ------------------------------------------------------------------------------------------------------------

@torch.inference_mode()
def measure_quality(anchor, b: BenchSettings) -> dict:
    """PSNR of interpolated frames against truly generated ones; pyramidal routes against native resolution."""
    from studio.bench.renderer_speed import _motion
    from studio.enhance.interp import MotionSpaceInterpolator, max_error_px
    from studio.enhance.quality import face_box, psnr, ssim
    from studio.presenter.renderer import Presenter, RenderSettings

    n = 2 * b.quality_frames + 1
    coeffs = torch.as_tensor(_motion(n))
    dev = torch.device(b.device)
    native = Presenter(anchor, RenderSettings(size_px=b.size_px, device=b.device))
    ref = native.module(coeffs.to(dev)).clamp(0, 255)  # n frames, every one generated
    box = face_box(native.module.lm_src.cpu().numpy(), b.size_px)
    out: dict = {"size_px": b.size_px, "face_box": box, "frames": n}
    mid = torch.arange(1, n - 1, 2)  # frames a stride-2 schedule interpolates
    interp = MotionSpaceInterpolator(native.module, max_error_px(2.0, b.size_px))
    frames, _ = interp.render_causal(coeffs.to(dev), np.full(n, 2), None)
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
    pyr = Presenter(anchor, RenderSettings(size_px=b.size_px, device=b.device, field_px=max(16, b.size_px // 8)))
    wf = pyr.module(coeffs.to(dev)).clamp(0, 255)
    out["pyramidal"] = {"warp_field": {"field_px": pyr.module.field, "native_field_px": native.module.field,
                                       "psnr_face_db": psnr(wf, ref, box), "ssim_face": ssim(wf, ref, box),
                                       "psnr_db": psnr(wf, ref)}}
    try:
        from studio.pipeline.post import span_for

        up = span_for(str(dev))  # the form the post stage runs
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


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


@torch.inference_mode()
def kernel_floor(size_px: int, device: str, copy_tb_s: float = 4.3) -> dict:
    """The main full-resolution kernels of one output frame: bytes they must move (fp32 frames), their physical
    floor at the measured copy ceiling, and their measured time (CUDA events, median of 50, batch 8)."""
    import torch.nn.functional as F

    from studio.encode.colour import rgb_to_nv12

    s, b = size_px, 8
    dev = torch.device(device)
    img = torch.rand(1, 3, s, s, device=dev) * 255
    bg = torch.rand(1, 3, s, s, device=dev) * 255
    field = torch.rand(b, 2, s // 8, s // 8, device=dev) * 2 - 1
    mask_lo = torch.rand(b, 1, s // 8, s // 8, device=dev)
    px = s * s
    grid = F.interpolate(field, size=(s, s), mode="bilinear", align_corners=False).permute(0, 2, 3, 1).contiguous()
    warped = F.grid_sample(img.expand(b, -1, -1, -1), grid, mode="bilinear", padding_mode="border", align_corners=False)
    mask = F.interpolate(mask_lo, size=(s, s), mode="bilinear", align_corners=False)
    kernels = {
        "field_upsample": (lambda: (F.interpolate(field, size=(s, s), mode="bilinear", align_corners=False),
                                    F.interpolate(mask_lo, size=(s, s), mode="bilinear", align_corners=False)),
                           px * 3 * 4),
        "grid_sample_portrait": (lambda: F.grid_sample(img.expand(b, -1, -1, -1), grid, mode="bilinear",
                                                       padding_mode="border", align_corners=False),
                                 px * 2 * 4 + px * 3 * 4 + px * 3 * 4),
        "composite_lerp": (lambda: torch.lerp(bg, warped, mask), px * (3 + 3 + 1 + 3) * 4),
        "rgb_to_nv12_u8": (lambda: rgb_to_nv12(warped), px * 3 * 4 + px * 3 // 2),
    }
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


def _per_frame(rep, key: str) -> float:
    st = rep.stages.get(key)
    return st.total_ms / max(1, rep.frames_produced) if st is not None else 0.0


def _score(rep, cuda: bool) -> float:
    return _per_frame(rep, "generate") + _per_frame(rep, "post") if cuda else rep.ms_per_frame


def _in_company(anchor, program, warm, b: BenchSettings, tmp: Path, helpful: frozenset, every: frozenset,
                plain: float, cuda: bool, progress) -> tuple[frozenset, list[dict]]:
    """Flags that did not help alone may help beside those that did (GPU colour conversion once the post stage is a
    CUDA graph): starting from the flags that helped alone, each other flag is added for one run and kept when the
    set's score (GPU time on CUDA, wall time on the CPU) drops. Returns the set and what was tried."""
    rest = sorted(every - helpful, key=lambda o: o.value)
    if not helpful or not rest:
        return helpful, []
    run_config(anchor, warm, b, helpful, tmp)
    current = _score(run_config(anchor, program, b, helpful, tmp)[0], cuda)
    tried = []
    for o in rest:
        trial = helpful | {o}
        run_config(anchor, warm, b, trial, tmp)
        got = _score(run_config(anchor, program, b, trial, tmp)[0], cuda)
        kept = got < current and got < plain
        tried.append({"optimization": o.value, "before_ms_per_frame": current, "with_ms_per_frame": got, "kept": kept})
        progress(f"  in company: +{o.value}: {current:.3f} -> {got:.3f} ms/frame{' (kept)' if kept else ''}")
        if kept:
            helpful, current = trial, got
    return helpful, tried


def run_bench(b: BenchSettings, json_path: Path | None = None, progress=print) -> dict:
    import tempfile

    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import resolve_device

    dev = resolve_device(b.device)
    b = replace(b, device=str(dev))
    t_start = time.perf_counter()
    # the pack the studio would put on air at this size (framed, with its face detail, at the presenter's size)
    anchor = build_anchor(output_px=int(b.canvas[:-1]) if b.canvas else b.size_px)
    program = cut_program(load_program(b.program), b.seconds) if b.program else build_program(b.seconds)
    if b.save_program:
        save_program(program, b.save_program)
    configs = configurations(dev.type == "cuda", b.configs)
    tmp = Path(tempfile.mkdtemp(prefix="bench_"))
    program_s = sum(len(it.audio_16k) for it in program) / ANALYSIS_RATE_HZ
    progress(f"bench: {program_s:.1f} s program ({len(program)} items), "
             f"{b.canvas or f'{b.size_px}px'} at {b.fps:g} fps, device {dev}, engine {b.engine}, "
             f"{len(configs)} configurations x {b.repeats} repeats")
    warm = [BenchItem(program[0].audio_16k[:ANALYSIS_RATE_HZ // 2], program[0].title)]
    first_from_command = None
    for opts in configs.values():  # warm-up: allocations, graph capture, lazy init, ONNX sessions
        rep, _ = run_config(anchor, warm, b, opts, tmp)
        if first_from_command is None:
            first_from_command = rep.first_frame_from_command_s
    reports: dict[str, list] = {k: [] for k in configs}
    motion_stats: dict[str, dict] = {}
    for r in range(b.repeats):
        for name, opts in configs.items():
            rep, mstats = run_config(anchor, program, b, opts, tmp)
            reports[name].append(rep)
            motion_stats[name] = mstats
            progress(f"  repeat {r + 1}: {name:>28}: {rep.ms_per_frame:8.3f} ms/frame wall, "
                     f"{rep.cost_ms_per_frame:8.3f} ms/frame of stage work")
    med = {k: statistics.median(x.ms_per_frame for x in v) for k, v in reports.items()}
    # The flags that helped alone on this machine and engine (GPU time on CUDA, wall time on the CPU), together:
    # measured as one more configuration in the same run, never assumed.
    cuda = dev.type == "cuda"

    def score(name: str) -> float:
        return statistics.median(_score(x, cuda) for x in reports[name])

    helpful = frozenset(o for o in configs["optimized"] if o.value in reports and score(o.value) < score("plain"))
    alone = helpful
    helpful, tried = _in_company(anchor, program, warm, b, tmp, helpful, configs["optimized"], score("plain"), cuda,
                                 progress)
    if helpful and helpful != configs["optimized"]:
        reports["helpful"] = []
        run_config(anchor, warm, b, helpful, tmp)
        for r in range(b.repeats):
            rep, _ = run_config(anchor, program, b, helpful, tmp)
            reports["helpful"].append(rep)
            progress(f"  repeat {r + 1}: {'helpful':>28}: {rep.ms_per_frame:8.3f} ms/frame wall "
                     f"({','.join(sorted(o.value for o in helpful))})")
        med["helpful"] = statistics.median(x.ms_per_frame for x in reports["helpful"])
    cost = {k: statistics.median(x.cost_ms_per_frame for x in v) for k, v in reports.items()}
    base = med["plain"]
    ablation, minus_one = [], []
    for name in configs:
        if name in ("plain", "optimized", "helpful"):
            continue
        if name.startswith("all_but_"):
            flag = name[len("all_but_"):]
            minus_one.append({"optimization": flag, "without_ms_per_frame": med[name],
                              "optimized_ms_per_frame": med["optimized"],
                              "saved_fraction_of_plain": (med[name] - med["optimized"]) / base,
                              "repeats_ms_per_frame": [x.ms_per_frame for x in reports[name]]})
            continue
        ablation.append({"optimization": name, "baseline_ms_per_frame": base, "optimized_ms_per_frame": med[name],
                         "saved_fraction": 1.0 - med[name] / base,
                         "cost_ms_per_frame": cost[name], "plain_cost_ms_per_frame": cost["plain"],
                         "helps": med[name] < base,
                         "repeats_ms_per_frame": [x.ms_per_frame for x in reports[name]]})
    plain_rep = reports["plain"][len(reports["plain"]) // 2]
    opt_rep = reports["optimized"][len(reports["optimized"]) // 2]
    gpu = None
    if dev.type == "cuda":
        gpu = {k: statistics.median(_per_frame(x, "generate") + _per_frame(x, "post") for x in v)
               for k, v in reports.items()}
    quality = measure_quality(anchor, b)
    floor = kernel_floor(b.size_px, b.device) if dev.type == "cuda" else None
    result = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(b).items()},
        "machine": machine_info(b.device),
        "program_s": program_s,
        "frames": plain_rep.frames_produced,
        "plain_ms_per_frame": base,
        "optimized_ms_per_frame": med["optimized"],
        "compute_saved": 1.0 - med["optimized"] / base,
        "realtime_budget_ms_per_frame": 1e3 / b.fps,
        "gpu_ms_per_frame": gpu,  # CUDA: GPU time of generation + post-processing per output frame (events)
        # the flags that helped alone, and those that helped in their company (tried one at a time, one run each:
        # "helpful_tried"), run together ("helpful")
        "helpful_flags": sorted(o.value for o in helpful),
        "helpful_alone": sorted(o.value for o in alone),
        "helpful_tried": tried,
        "helpful_ms_per_frame": med.get("helpful", med["optimized"] if helpful == configs["optimized"] else None),
        "stages": {"plain": {k: asdict(v) for k, v in plain_rep.stages.items()},
                   "optimized": {k: asdict(v) for k, v in opt_rep.stages.items()}},
        "ablation": ablation,
        "minus_one": minus_one,
        "optimized_run": {k: v for k, v in asdict(opt_rep).items() if k not in ("stages", "outputs")},
        "motion_stats": {k: motion_stats.get(k, {}) for k in ("plain", "optimized", "audio_cache", "kv_cache")},
        "quality": quality,
        "floor": floor,
        "repeats": {k: [x.ms_per_frame for x in v] for k, v in reports.items()},
        # from a run's start (the core built and warmed) to its first program frame handed to the outputs, median
        "first_frame_s": {k: _median_or_none([x.first_frame_s for x in v]) for k, v in reports.items()},
        # from the command's start to the first program frame of its first run (its first configuration's warm-up)
        "first_frame_from_command_s": first_from_command,
        "bench_wall_s": time.perf_counter() - t_start,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    result = _jsonable(result)
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=1))
        try:
            result["chart"] = str(write_chart(result, json_path.with_suffix(".png")))
        except ImportError as exc:  # a machine without matplotlib still gets its figures
            result["chart"] = f"not drawn: {exc}"
        json_path.write_text(json.dumps(result, indent=1))
    try:  # the studio's HUD reads this machine's last bench for the leaderboard
        last_bench_path("cuda" if dev.type == "cuda" else "cpu").write_text(json.dumps(result, indent=1))
    except OSError as exc:
        log.warning("bench: cannot keep a copy for the HUD: %s", exc)
    return result


def _median_or_none(values: list) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


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
    if isinstance(x, (np.floating, np.integer)):
        return _jsonable(x.item())
    return x


def write_chart(result: dict, path: Path) -> Path:
    """Bar chart: ms per output frame for plain, each flag alone and the optimized pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("plain", result["plain_ms_per_frame"])]
    rows += [(r["optimization"], r["optimized_ms_per_frame"]) for r in result["ablation"]]
    rows.append(("optimized", result["optimized_ms_per_frame"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names, vals = zip(*rows)
    colors = ["#888"] + ["#4a90d9" if v < rows[0][1] else "#d98b4a" for v in vals[1:-1]] + ["#2e9e5b"]
    ax.barh(names[::-1], vals[::-1], color=colors[::-1])
    ax.axvline(result["realtime_budget_ms_per_frame"], color="#c33", ls="--", label="real-time budget")
    m = result["machine"]
    st = result["settings"]
    ax.set_xlabel("wall ms per output frame (median of repeats); orange: slower than plain here")
    ax.set_title(f"{m.get('gpu', 'CPU')}: {st['canvas'] or str(st['size_px']) + 'px'} @ {st['fps']:g} fps, "
                 f"{st['engine']}: compute saved {100 * result['compute_saved']:.0f}%")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
