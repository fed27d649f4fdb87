"""RSS across core restarts of the studio runtime (no Qt): python results/soak/restart_probe.py none|rec|stream|toggle"""
import os, sys, time, tempfile, subprocess, gc
from pathlib import Path
home = Path(tempfile.mkdtemp(prefix="fm-")); os.environ["NEWSSTUDIO_HOME"] = str(home)
sys.path.insert(0, "tests/unit")
from test_studio_runtime import _Running
from studio.pipeline import commands as cmd
from studio.pipeline.settings import CoreSettings
from studio.pipeline.studio import AudioOutputMode, StudioSettings
from studio.pipeline.factory import default_optimizations
from studio.ui import soak
from studio.pipeline import heap
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
what = sys.argv[1]
def smaps():
    regs = []; cur = None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
            cur = [parts[5] if len(parts) > 5 else "[anon]", 0, parts[0]]; regs.append(cur)
        elif parts[0] == "Rss:":
            cur[1] += int(parts[1])
    import collections
    agg = collections.Counter()
    for name, kb, rng in regs:
        agg[name if not name.startswith("/") else ("lib" if ".so" in name else "file")] += kb
    big = sorted([(kb, rng) for name, kb, rng in regs if name == "[anon]"], reverse=True)[:6]
    print("SMAPS", {k: v // 1024 for k, v in agg.items()}, "big anon MB", [(kb // 1024, r) for kb, r in big], flush=True)
soak._register_faulty()
core = CoreSettings(size_px=512, fps=25.0, device="cpu", engine="builtin-soak", chunk_frames=4, batch_frames=4,
                    measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
st = StudioSettings(core=core, audio_output=AudioOutputMode.NONE, restart_backoff_s=1.0, warm_up_microphone=False)
port = int(sys.argv[2]) if len(sys.argv) > 2 else 19801
with _Running(st) as r:
    r.runtime.submit(cmd.LoadAnchor(None)); r.wait(lambda: r.of(cmd.AnchorLoaded), 300)
    if "rec" in what:
        (home / "rec").mkdir(); r.runtime.submit(cmd.StartRecording(home / "rec"))
    if "stream" in what:
        recv = soak._Receiver(port); recv.start(); r.runtime.submit(cmd.StartOutput(f"tcp://127.0.0.1:{port}"))
    r.runtime.submit(cmd.GoLive(0)) if hasattr(cmd, "GoLive") and False else None
    time.sleep(40); heap.trim(); print(what, "before", round(rss()), flush=True)
    import collections
    print("TASKS", len(os.listdir("/proc/self/task")), flush=True)
    from studio.pipeline.settings import Optimization as O
    for k in range(4):
        if "toggle" in what and k < 2:
            opts = r.runtime.core_settings.optimizations
            r.runtime.submit(cmd.SetOptimizations(tuple(opts - {O.ASYNC_PIPELINE}))); time.sleep(15)
            r.runtime.submit(cmd.SetOptimizations(tuple(opts)))
        else:
            soak._Faulty.armed.set()
            n = len(r.of(cmd.Error)); r.wait(lambda: len(r.of(cmd.Error)) > n)
        time.sleep(30); gc.collect(); heap.trim(); time.sleep(1)
        import collections
        cnt = collections.Counter(type(o).__name__ for o in gc.get_objects() if str(getattr(type(o), "__module__", "")).startswith("studio"))
        print("TASKS", len(os.listdir("/proc/self/task")), flush=True); smaps()
        print(what, "after", "toggle" if ("toggle" in what and k < 2) else "fault", k + 1, round(rss()), flush=True); continue; print({k2: v for k2, v in cnt.items() if v < 50}, flush=True)
    if "stream" in what: recv.kill()
