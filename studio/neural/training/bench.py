"""Benchmarks of the neural audio-to-motion engine (scripts, not tests; medians over repeats).

  python -m studio.neural.training.bench rtf [--runs 5]            audio path real-time factor on this CPU (torch, onnx)
  python -m studio.neural.training.bench kv [--minutes 60]         one-hour synthetic stream: cache bytes, p95 step time first
                                                          vs last minute, INT8 vs FP16 output difference
  python -m studio.neural.training.bench fingerprint               rundown played twice; rundown with repeated station idents
  python -m studio.neural.training.bench gpu --weights W           step / encoder time on CUDA (device machine)
  python -m studio.neural.training.bench render                    ``main.py render --audio`` of the human clips with both
                                                          engines, lip sync measured on the MP4s (MediaPipe)
Each writes JSON to stdout (and ``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from studio.neural.kvcache import CacheDType
from studio.neural.settings import MODEL_DIR, Backend, NeuralSettings

log = logging.getLogger(__name__)


def _speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    """Synthetic speech-like audio at 16 kHz: voiced harmonic bursts with syllable-rate gating and noise."""
    r = np.random.default_rng(seed)
    n = int(seconds * 16000)
    t = np.arange(n) / 16000
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.3 * t)
    ph = 2 * np.pi * np.cumsum(f0) / 16000
    voiced = sum(np.sin(k * ph) / k for k in range(1, 8))
    gate = (np.sin(2 * np.pi * 4.0 * t + r.uniform(0, 6)) > -0.2).astype(np.float32)
    return (0.2 * voiced * gate + 0.01 * r.standard_normal(n)).astype(np.float32)


def bench_rtf(weights: Path, runs: int, seconds: float = 20.0) -> dict:
    """Median wall time per audio second of ``engine.motion`` (features + encoder + steps + VAD gate), fingerprint
    cache off, per backend; and ONNX Runtime without the VAD gate (what the gate costs)."""
    from studio.neural.engine import NeuralMotionEngine

    torch.set_num_threads(1)
    audio = _speechlike(seconds)
    out: dict = {"audio_s": seconds, "runs": runs, "torch_threads": 1}
    for key, backend, gate in (("onnx", Backend.ONNX, True), ("torch", Backend.TORCH, True),
                               ("onnx_no_vad_gate", Backend.ONNX, False)):
        s = NeuralSettings(weights_path=weights, backend=backend, fingerprint_capacity=0, vad_gate=gate)
        eng = NeuralMotionEngine(s)
        eng.motion(audio[:16000])  # warm-up
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            eng.motion(audio)
            times.append(time.perf_counter() - t0)
        out[key] = {"rtf_median": statistics.median(times) / seconds, "rtf_all": [round(x / seconds, 4) for x in times]}
    return out


def bench_kv(weights: Path, minutes: float, backend: Backend) -> dict:
    """Stream ``minutes`` of synthetic audio through one session; per-step time and cache bytes over the stream."""
    from studio.neural.engine import NeuralMotionEngine

    torch.set_num_threads(1)
    # no VAD gate: the model's own outputs go back in as its previous frame, as on speech (the gate would rest this
    # synthetic audio); the cache and the step are the same either way
    eng = NeuralMotionEngine(NeuralSettings(weights_path=weights, backend=backend, fingerprint_capacity=0,
                                            vad_gate=False))
    sess = eng.session()
    chunk = _speechlike(60.0, seed=1)  # one minute, replayed (the encoder sees the same audio; the cache does not care)
    step_ms: list[list[float]] = []  # wall time per step, per minute
    cpu_ms: list[list[float]] = []  # CPU time of this thread per step (robust to other processes on the machine)
    nbytes = []
    backend_step = eng.backend.step

    inputs: list[tuple[np.ndarray, np.ndarray]] = []  # the first minute's step inputs, replayed below

    def timed_step(enc, prev, state):
        if len(step_ms) == 1:
            inputs.append((np.array(enc), np.array(prev)))
        t0, c0 = time.perf_counter(), time.thread_time()
        r = backend_step(enc, prev, state)
        step_ms[-1].append((time.perf_counter() - t0) * 1e3)
        cpu_ms[-1].append((time.thread_time() - c0) * 1e3)
        return r

    eng.motion(chunk[: 16000 * 5])  # warm-up on a separate session
    eng.backend.step = timed_step  # type: ignore[method-assign]
    for m in range(int(minutes)):
        step_ms.append([])
        cpu_ms.append([])
        for i in range(0, len(chunk), 1600):
            sess.push(chunk[i:i + 1600])
        nbytes.append(sess.cache_nbytes())
        if m == 0:
            state_1min = [np.array(x) if isinstance(x, np.ndarray) else x.clone() for x in sess._state]
    # Interleaved A/B: the same inputs stepped against the cache after minute 1 and after the last minute, alternately,
    # so that the load of other processes on this shared machine hits both sides alike.
    eng.backend.step = backend_step  # type: ignore[method-assign]
    a_state, b_state = state_1min, list(sess._state)
    ab = {"after_first_minute": [], "after_last_minute": []}
    for enc, prev in inputs:
        for key in ("after_first_minute", "after_last_minute"):
            st = a_state if key == "after_first_minute" else b_state
            t0 = time.perf_counter()
            _, _, st = backend_step(enc, prev, st)
            ab[key].append((time.perf_counter() - t0) * 1e3)
            if key == "after_first_minute":
                a_state = st
            else:
                b_state = st
    p95_a, p95_b = (float(np.percentile(ab[k], 95)) for k in ("after_first_minute", "after_last_minute"))
    first, last = step_ms[0], step_ms[-1]
    p95_first, p95_last = float(np.percentile(first, 95)), float(np.percentile(last, 95))
    return {"minutes": minutes, "backend": backend.value, "frames": sess.frames_out,
            "cache_bytes_first_minute": nbytes[0], "cache_bytes_last_minute": nbytes[-1],
            "cache_bytes_constant": len(set(nbytes)) == 1,
            "p95_step_ms_first_minute": p95_first, "p95_step_ms_last_minute": p95_last,
            "p95_change": p95_last / p95_first - 1.0,
            "median_step_ms_first": float(np.median(first)), "median_step_ms_last": float(np.median(last)),
            "p95_cpu_ms_first_minute": float(np.percentile(cpu_ms[0], 95)),
            "p95_cpu_ms_last_minute": float(np.percentile(cpu_ms[-1], 95)),
            "p95_cpu_change": float(np.percentile(cpu_ms[-1], 95) / np.percentile(cpu_ms[0], 95) - 1.0),
            "interleaved_p95_ms_state_after_first_minute": p95_a,
            "interleaved_p95_ms_state_after_last_minute": p95_b,
            "interleaved_p95_change": p95_b / p95_a - 1.0,
            "p95_wall_trend_ms_per_hour": float(np.polyfit(np.arange(len(step_ms)), [np.percentile(x, 95) for x in
                                                                                    step_ms], 1)[0] * 60),
            "p95_wall_ms_by_minute": [round(float(np.percentile(x, 95)), 4) for x in step_ms],
            "p95_cpu_ms_by_minute": [round(float(np.percentile(x, 95)), 4) for x in cpu_ms]}


def bench_int8_vs_fp16(weights: Path, seconds: float = 120.0, human: bool = True) -> dict:
    """Same audio through INT8, FP16 and FP32 caches (torch backend): max / mean abs output differences. Synthetic
    speech-like audio, and (``human``) the evaluation's human clips, INT8 vs FP16 with and without the VAD gate."""
    from studio.neural.engine import NeuralMotionEngine

    def run(dt: CacheDType, clips: list[np.ndarray], gate: bool) -> tuple[np.ndarray, np.ndarray]:
        eng = NeuralMotionEngine(NeuralSettings(weights_path=weights, backend=Backend.TORCH, cache_dtype=dt,
                                                fingerprint_capacity=0, vad_gate=gate))
        ms = [eng.motion(a) for a in clips]
        return np.concatenate([m.mouth for m in ms]), np.concatenate([m.visemes for m in ms])

    def compare(x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]) -> dict:
        diff = np.abs(x[0] - y[0])
        return {"max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
                "viseme_agreement": float((x[1] == y[1]).mean())}

    # no VAD gate on the synthetic audio: the gate rests the mouth wherever Silero hears no speech (all of it), which
    # would hide what the cache precision does to the model's output
    synth = [_speechlike(seconds, seed=2)]
    outs = {dt.value: run(dt, synth, False) for dt in CacheDType}
    d: dict = {f"{a}_vs_{b}": compare(outs[a], outs[b]) for a, b in (("int8", "fp16"), ("int8", "fp32"),
                                                                    ("fp16", "fp32"))}
    res: dict = {"seconds": seconds, **d}
    if human:
        from studio.neural.training.evaluate import load_clips
        from studio.audio.io import load_audio_file

        clips = [load_audio_file(p)[0] for _, p, _ in load_clips()]
        res["human_clips"] = {"clips": len(clips), "seconds": round(sum(len(a) for a in clips) / 16000, 1)}
        for gate in (True, False) if clips else ():  # none where alsa-utils and moonshine-voice are missing
            res["human_clips"]["int8_vs_fp16" + ("" if gate else "_no_vad_gate")] = compare(
                run(CacheDType.INT8, clips, gate), run(CacheDType.FP16, clips, gate))
    return res


def _rundown_texts() -> list[str]:
    from studio.paths import RESOURCES

    p = RESOURCES / "rundown.json"
    if p.is_file():
        data = json.loads(p.read_text())
        return [s["text"] for s in data["segments"]]
    return ["Good evening. Here is the news.", "The council approved a new plan for buses today.",
            "Astronomers spotted a comet.", "The home team won two goals to one.", "Clouds, then sunshine."]


def bench_fingerprint(weights: Path, voice: str) -> dict:
    """Rundown played twice through one engine (shared cache); then a rundown with repeated station idents."""
    from studio.neural.training.data import _resample
    from studio.neural.engine import NeuralMotionEngine
    from studio.speech import synthesize

    def speak(text: str) -> np.ndarray:
        u = synthesize(text, voice)
        return _resample(u.audio, u.sample_rate_hz, 16000)

    texts = _rundown_texts()
    segs = [speak(t) for t in texts]
    eng = NeuralMotionEngine(NeuralSettings(weights_path=weights))
    fp = eng.fingerprints
    assert fp is not None
    res: dict = {"voice": voice, "segments": len(segs), "audio_s": sum(len(s) for s in segs) / 16000}
    for p in (1, 2):
        fp.reset_counts()
        t0 = time.perf_counter()
        for s in segs:
            eng.motion(s)
        st = fp.stats()
        res[f"pass{p}"] = {"hits": st.hits, "misses": st.misses, "hit_rate": st.hit_rate,
                           "encoder_ms_per_miss": st.encoder_ms_per_miss, "encoder_ms_saved": st.encoder_ms_saved,
                           "wall_s": time.perf_counter() - t0}
    ident = speak("You are watching Studio News, live from the capital.")
    welcome = speak("Welcome back to Studio News.")
    eng2 = NeuralMotionEngine(NeuralSettings(weights_path=weights))
    fp2 = eng2.fingerprints
    assert fp2 is not None
    t0 = time.perf_counter()
    for i, s in enumerate(segs):  # ident before every segment, "welcome back" after every second one
        eng2.motion(ident)
        eng2.motion(s)
        if i % 2 == 1:
            eng2.motion(welcome)
    st = fp2.stats()
    res["idents"] = {"hits": st.hits, "misses": st.misses, "hit_rate": st.hit_rate,
                     "encoder_ms_per_miss": st.encoder_ms_per_miss, "encoder_ms_saved": st.encoder_ms_saved,
                     "wall_s": time.perf_counter() - t0}
    return res


def bench_gpu(weights: Path, seconds: float = 30.0) -> dict:
    """CUDA timings (synchronized, medians): one step (batch 1, INT8 cache), the encoder on one window and on a
    whole 30 s stream's windows as one batch; real-time factor of the step-by-step path."""
    from studio.neural.model import StepGraph
    from studio.neural.weights import load_weights

    dev = "cuda"
    model = load_weights(weights, dev)
    g = StepGraph(model).eval()
    cfg = model.cfg
    res: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    with torch.inference_mode():
        for dt in (CacheDType.INT8, CacheDType.FP16):
            st = model.empty_state(dt, dev).tensors()
            enc = torch.randn(cfg.mel_per_token, cfg.enc_channels, device=dev)
            prev = torch.zeros(cfg.n_out, device=dev)
            ts = []
            for i in range(300):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = g(enc, prev, *st)
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t0)
                st = out[2:]
            res[f"step_ms_median_{dt.value}"] = statistics.median(ts[50:]) * 1e3
            res[f"cuda_graph_{dt.value}"] = _step_cuda_graph(g, model, dt, enc, dev)
        w = torch.randn(1, 20, cfg.n_mels, device=dev) - 5
        ts = []
        for _ in range(200):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.encoder(w)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        res["encoder_window_ms_median"] = statistics.median(ts[20:]) * 1e3
        n_win = int(seconds * 7.5)
        wb = torch.randn(n_win, 20, cfg.n_mels, device=dev) - 5
        ts = []
        for _ in range(30):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.encoder(wb)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        res["encoder_batched_30s_ms_median"] = statistics.median(ts[5:]) * 1e3
    per_s = 25 * res["step_ms_median_int8"] + 7.5 * res["encoder_window_ms_median"]
    res["rtf_streaming_eager"] = per_s / 1e3
    res["rtf_streaming_step_cuda_graph"] = (25 * res["cuda_graph_int8"]["step_ms_median"]
                                            + 7.5 * res["encoder_window_ms_median"]) / 1e3
    return res


def _step_cuda_graph(g: torch.nn.Module, model: torch.nn.Module, dt: CacheDType, enc: torch.Tensor,
                     dev: str, steps: int = 300) -> dict:
    """The step captured once as a CUDA graph (static input, previous-frame and cache buffers, updated in place by
    the graph) and replayed: median time per step, and the largest difference from the eager step over ``steps``
    frames from an empty cache (the same numbers, or the graph is not the step)."""
    empty = model.empty_state(dt, dev).tensors()
    st = [t.clone() for t in empty]
    prev = torch.zeros(model.cfg.n_out, device=dev)
    x = enc.clone()

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        out = g(x, prev, *st)
        for buf, new in zip(st, out[2:]):
            buf.copy_(new)
        prev.copy_(out[0])
        return out[0], out[1]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_out, _ = run()
    # eager reference and graph from the same empty cache
    ref_st, ref_prev, ref = list(empty), torch.zeros_like(prev), []
    for _ in range(steps):
        out = g(enc, ref_prev, *ref_st)
        ref_prev, ref_st = out[0], list(out[2:])
        ref.append(ref_prev)
    for buf, new in zip(st, empty):
        buf.copy_(new)
    prev.zero_()
    ts, got = [], []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
        got.append(y_out.clone())
    diff = float((torch.stack(got) - torch.stack(ref)).abs().max())
    return {"step_ms_median": statistics.median(ts[50:]) * 1e3, "max_abs_diff_vs_eager": diff}


def bench_render(clips: tuple[str, ...] = ("moonshine:beckett.wav", "moonshine:two_cities.wav"),
                 size: int = 256) -> dict:
    """Each clip rendered by the real CLI with each audio engine, then ``measure_lipsync`` against the clip's
    forced-aligned transcript: best mouth-opening / loudness correlation and its lag, p/b/m over open-vowel opening."""
    import subprocess
    import sys
    import tempfile

    from studio.bench.lipsync import measure_lipsync
    from studio.neural.training.evaluate import load_clips, reference_phones
    from studio.audio.io import load_audio_file

    known = {k: (p, t) for k, p, t in load_clips()}
    res: dict = {"cmd": f"python main.py render --audio CLIP --size {size} --audio-engine neural|pocketsphinx --out X.mp4; "
                        "measure_lipsync(X.mp4, forced-aligned phones, max_lag_frames=5)"}
    root = Path(__file__).resolve().parents[3]  # the repository (this file is studio/neural/training/bench.py)
    with tempfile.TemporaryDirectory() as tmp:
        for key in clips:
            if key not in known:
                res[key] = "clip not installed"
                continue
            path, text = known[key]
            audio, rate = load_audio_file(path)
            phones, _ = reference_phones(audio, rate, text)
            for engine in ("neural", "pocketsphinx"):
                out = Path(tmp) / f"{engine}.mp4"
                run = subprocess.run([sys.executable, str(root / "main.py"), "render", "--audio", str(path), "--size",
                                      str(size), "--audio-engine", engine, "--out", str(out)], capture_output=True, text=True)
                if run.returncode != 0:
                    res[f"{key}|{engine}"] = {"error": run.stderr.strip()[-400:]}
                    continue
                rep = measure_lipsync(out, phones, max_lag_frames=5)
                res[f"{key}|{engine}"] = {"best_corr": rep.best_corr, "best_lag_frames": rep.best_lag_frames,
                                          "pbm_over_open": rep.phones.pbm_over_open,
                                          "n_pbm_frames": rep.phones.n_pbm_frames,
                                          "n_open_frames": rep.phones.n_open_frames,
                                          "stderr_tail": run.stderr.strip().splitlines()[-1][-300:]}
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["rtf", "kv", "int8", "fingerprint", "gpu", "render"])
    p.add_argument("--weights", type=Path, default=MODEL_DIR / "audio2motion.pt")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--backend", choices=[b.value for b in Backend], default="onnx")
    p.add_argument("--voice", default="piper:joe")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.what == "rtf":
        r = bench_rtf(args.weights, args.runs)
    elif args.what == "kv":
        r = bench_kv(args.weights, args.minutes, Backend(args.backend))
    elif args.what == "int8":
        r = bench_int8_vs_fp16(args.weights)
    elif args.what == "fingerprint":
        r = bench_fingerprint(args.weights, args.voice)
    elif args.what == "render":
        r = bench_render()
    else:
        r = bench_gpu(args.weights)
    text = json.dumps(r, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
