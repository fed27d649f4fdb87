"""Segments per minute on the farm: 1 and 2 local workers, a two-node cluster simulated on this machine, the measured
overheads (task launch, object transfer, stitching) and a projection to 8 GPUs x N nodes from those numbers.

    python benchmarks/farm_scaling.py --json benchmarks/farm_scaling.json

Each configuration renders the same rundown (``--segments`` short news items, picture ``--size``) on a fresh cluster
into a fresh folder; segments per minute counts from the first submission to the last segment (the cluster's start
is reported beside it). Every figure is measured in this run on this machine; the projection's per-segment cost is
the median warm segment measured here, or ``--segment-seconds`` (e.g. a GPU figure from ``--gpu-sweep`` on a GPU
machine). ``--gpu-sweep``: one GPU, the built-in engine on a saved program (no TTS, no encoder, no MediaPipe), with
1, 2 and 4 segments sharing the GPU (Ray's num_gpus fractions), for a machine that carries only Ray
(benchmarks/farm_device_bundle.sh makes the bundle and the inputs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STORIES = [
    "Good evening. The city council approved a new plan for public transport today.",
    "Buses will run every ten minutes from next spring, the mayor said.",
    "Astronomers have spotted a comet that will pass close to Earth next month.",
    "It should be visible without a telescope on clear nights.",
    "In sport, the home team won the final by two goals to one.",
    "The winner came in the ninetieth minute, from a corner.",
    "And the weather: clouds in the morning, sunshine by the afternoon.",
    "That is all from us tonight. Good night.",
]


def _rundown(folder: Path, n: int) -> Path:
    path = folder / "bench.json"
    segs = [{"title": f"Story {i + 1}", "text": STORIES[i % len(STORIES)]} for i in range(n)]
    path.write_text(json.dumps({"version": 1, "segments": segs}))
    return path


def run_config(label: str, settings, rundown: Path) -> dict:
    from studio.farm.driver import run_farm

    t0 = time.perf_counter()
    t_first = None
    gen = run_farm(settings, [rundown])
    try:
        while True:
            p = next(gen)
            if t_first is None and p.running:
                t_first = time.perf_counter()
    except StopIteration as stop:
        result = stop.value
    wall = time.perf_counter() - t0
    report = json.loads(next(iter(result.reports.values())).read_text())
    segs = [s for s in report["segments"] if s["status"] == "done"]
    render_s = max(1e-9, (t0 + result.seconds) - (t_first or t0) - report["stitch"]["seconds"])
    warm = [s["seconds"] for s in segs if s.get("warm_tasks", 0) > 0]
    return {
        "config": label, "segments": len(segs), "nodes": result.cluster.get("nodes"),
        "wall_s": round(wall, 2), "startup_s": round((t_first or t0) - t0, 2), "render_s": round(render_s, 2),
        "segments_per_min": round(60 * len(segs) / render_s, 2),
        "segment_s_median": round(statistics.median(s["seconds"] for s in segs), 3),
        "warm_segment_s_median": round(statistics.median(warm), 3) if warm else None,
        "stitch_s": report["stitch"]["seconds"], "output_s": report["stitch"]["duration_s"],
        "per_node": sorted({s["node"] for s in segs}),
    }


def measure_overheads(address: str) -> dict:
    """Task launch (empty tasks), object transfer (an anchor pack fetched on the other node)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from studio.farm.worker import build_pack

    ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        @ray.remote(num_cpus=1)
        def noop(x):
            return x

        ray.get([noop.remote(i) for i in range(20)])  # warm the worker pool
        t0 = time.perf_counter()
        ray.get([noop.remote(i) for i in range(200)])
        batch_s = (time.perf_counter() - t0) / 200
        rtt = []
        for i in range(20):
            t0 = time.perf_counter()
            ray.get(noop.remote(i))
            rtt.append(time.perf_counter() - t0)
        pack = build_pack(None)
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        here = ray.get_runtime_context().get_node_id()
        other = next((n for n in nodes if n != here), here)

        @ray.remote(num_cpus=1)
        def fetch(box):
            t0 = time.perf_counter()
            ray.get(box[0])
            return time.perf_counter() - t0

        fetches = []
        for _ in range(3):
            ref = ray.put(pack)
            strat = NodeAffinitySchedulingStrategy(other, soft=False)
            fetches.append(ray.get(fetch.options(scheduling_strategy=strat).remote([ref])))
        size = sum(v.nbytes for v in vars(pack).values() if hasattr(v, "nbytes"))
        return {"task_launch_s_batched": round(batch_s, 5),
                "task_round_trip_s_median": round(statistics.median(rtt), 5),
                "pack_bytes": int(size), "pack_fetch_other_node_s_median": round(statistics.median(fetches), 4),
                "fetch_crossed_nodes": other != here}
    finally:
        ray.shutdown()


def projection(seg_s: float, stitch_per_seg_s: float, driver_s: float, fetch_s: float, shares: int) -> dict:
    """8 GPUs x N nodes, ``shares`` segments per GPU at a time. Workers: each slot makes a segment in ``seg_s`` plus its
    share of its bulletin's stitching (a task too). Driver: one process submits and collects every segment, serially
    (``driver_s``: the measured task round trip). Pack: each node fetches each portrait's pack once (``fetch_s``)."""
    rows = []
    for n in (1, 2, 4, 8, 16, 32, 64, 128):
        slots = 8 * n * shares
        workers_rate = slots / (seg_s + stitch_per_seg_s)  # segments per second if the driver kept up
        driver_rate = 1 / driver_s
        rows.append({"nodes": n, "gpus": 8 * n, "segments_per_min": round(60 * min(workers_rate, driver_rate), 1),
                     "limited_by": "workers" if workers_rate < driver_rate else "driver",
                     "pack_fetch_all_nodes_s": round(n * fetch_s, 3)})
    knee = (seg_s + stitch_per_seg_s) / driver_s / (8 * shares)
    return {"segment_s": seg_s, "stitch_s_per_segment": round(stitch_per_seg_s, 4), "driver_s_per_segment": driver_s,
            "shares_per_gpu": shares, "rows": rows, "stops_scaling_at_nodes": round(knee, 1)}


def project_from(path: Path, seg_s: float | None, shares: int) -> dict:
    """The projection again from a saved run, e.g. with a GPU's per-segment cost from ``--gpu-sweep``."""
    d = json.loads(path.read_text())
    rows, over = d["configs"], d["overheads"]
    seg = seg_s or rows[0]["warm_segment_s_median"] or rows[0]["segment_s_median"]
    stitch = statistics.median(r["stitch_s"] for r in rows) / rows[0]["segments"]
    return projection(seg, stitch, over["task_round_trip_s_median"], over["pack_fetch_other_node_s_median"], shares)


_WORKER_CACHE: dict = {}  # per worker process: the pack and the program, fetched once from the object store


def render_program_segment(box: list, size: int, index: int) -> dict:
    """One segment on this worker's device: the saved program through the core into a null output (no encoder)."""
    import torch
    import ray

    from studio.bench.harness import NullOutput, _items
    from studio.pipeline.factory import default_optimizations, make_core
    from studio.pipeline.motion import ProgramMotion
    from studio.pipeline.settings import CoreSettings
    from studio.pipeline.sources import ProgramSource

    if "pack" not in _WORKER_CACHE:
        _WORKER_CACHE["pack"], _WORKER_CACHE["program"] = ray.get(box[0]), ray.get(box[1])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    s = CoreSettings(size_px=size, fps=25.0, device=device, seed=index, chunk_frames=16,
                     batch_frames=16 if device == "cuda" else 8,
                     optimizations=default_optimizations(device, "builtin"))
    out = NullOutput()
    t0 = time.perf_counter()
    core = make_core(ProgramSource(_items(_WORKER_CACHE["program"])), ProgramMotion(seed=index), s,
                     _WORKER_CACHE["pack"], [out], on_air=False)
    try:
        core.run()
    finally:
        core.close()
    if device == "cuda":
        torch.cuda.synchronize()
    return {"seconds": time.perf_counter() - t0, "frames": out.frames, "device": device}


def gpu_sweep(shares: list[int], segments: int, size: int, program: Path, pack: Path) -> dict:
    """One GPU: ``segments`` renders of a saved program through the core, with k of them sharing the GPU."""
    import ray

    from studio.bench.harness import load_program
    from studio.presenter.anchor import _load_pack

    ray.init(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        box = [ray.put(_load_pack(pack, "anchor")), ray.put(load_program(program))]
        remote = ray.remote(render_program_segment)
        rows = []
        for k in shares:
            task = remote.options(num_gpus=1 / k if ray.cluster_resources().get("GPU") else 0,
                                  num_cpus=0 if ray.cluster_resources().get("GPU") else 1 / k, max_retries=0)
            ray.get([task.remote(box, size, 0) for _ in range(k)])  # warm k workers
            t0 = time.perf_counter()
            per = ray.get([task.remote(box, size, i) for i in range(segments)])
            wall = time.perf_counter() - t0
            rows.append({"sharing": k, "segments": segments, "wall_s": round(wall, 3),
                         "segments_per_min": round(60 * segments / wall, 2),
                         "segment_s_median": round(statistics.median(p["seconds"] for p in per), 4),
                         "frames_per_segment": per[0]["frames"], "device": per[0]["device"]})
            print(json.dumps(rows[-1]), flush=True)
        base = rows[0]["segments_per_min"]
        for r in rows:
            r["speedup_vs_one_at_a_time"] = round(r["segments_per_min"] / base, 3)
        return {"gpu_sweep": rows, "cluster": ray.cluster_resources()}
    finally:
        ray.shutdown()


def make_device_inputs(folder: Path, seconds: float) -> None:
    """The saved program (TTS made here) and the default anchor pack, for a machine without TTS or MediaPipe."""
    from studio.bench.harness import build_program, save_program
    from studio.farm.worker import build_pack
    from studio.presenter.anchor import _save_pack

    folder.mkdir(parents=True, exist_ok=True)
    save_program(build_program(seconds), folder / "program.npz")
    _save_pack(build_pack(None), folder / "anchor.npz")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--segment-seconds", type=float, help="per-segment cost for the projection (default: measured)")
    ap.add_argument("--shares", type=int, default=4, help="segments sharing one GPU in the projection")
    ap.add_argument("--project", type=Path, metavar="JSON",
                    help="only print the projection again from a saved run (with --segment-seconds, --shares)")
    ap.add_argument("--gpu-sweep", action="store_true", help="one GPU: 1, 2, 4 segments sharing it (see above)")
    ap.add_argument("--inputs", type=Path, default=REPO / ".farmwhl",
                    help="--gpu-sweep: folder with program.npz and anchor.npz (made by --make-inputs)")
    ap.add_argument("--make-inputs", type=float, metavar="SECONDS",
                    help="write program.npz (SECONDS of speech) and anchor.npz into --inputs, then stop")
    args = ap.parse_args()
    out: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                             "load_avg_1min": os.getloadavg()[0]}}
    if args.project:
        print(json.dumps(project_from(args.project, args.segment_seconds, args.shares), indent=1))
        return 0
    if args.make_inputs:
        make_device_inputs(args.inputs, args.make_inputs)
        return 0
    if args.gpu_sweep:
        out.update(gpu_sweep([1, 2, 4], args.segments, args.size, args.inputs / "program.npz",
                             args.inputs / "anchor.npz"))
    else:
        import ray
        from ray.cluster_utils import Cluster

        from studio.farm.settings import FarmSettings
        from studio.pipeline.settings import CoreSettings

        core = CoreSettings(size_px=args.size, fps=25.0)
        rows = []
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            tmp = Path(tmp)
            rd = _rundown(tmp, args.segments)
            for workers in (1, 2):
                s = FarmSettings(out_dir=tmp / f"local{workers}", core=core, workers=workers)
                rows.append(run_config(f"local, {workers} worker(s)", s, rd))
                print(json.dumps(rows[-1]), flush=True)
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            try:
                s = FarmSettings(out_dir=tmp / "cluster", core=core, address=cluster.address)
                rows.append(run_config("two nodes (simulated), 1 worker each", s, rd))
                print(json.dumps(rows[-1]), flush=True)
                over = measure_overheads(cluster.address)
            finally:
                if ray.is_initialized():
                    ray.shutdown()
                cluster.shutdown()
        out["configs"] = rows
        out["overheads"] = over
        seg_s = args.segment_seconds or rows[0]["warm_segment_s_median"] or rows[0]["segment_s_median"]
        stitch_per_seg = statistics.median(r["stitch_s"] for r in rows) / args.segments
        out["projection"] = projection(seg_s, stitch_per_seg, over["task_round_trip_s_median"],
                                       over["pack_fetch_other_node_s_median"], args.shares)
        out["machine"]["load_avg_1min_end"] = os.getloadavg()[0]
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
