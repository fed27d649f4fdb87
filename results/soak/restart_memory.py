"""RSS of the studio runtime across six injected core failures (each restarts the core); run from the repository root:
    python results/soak/restart_memory.py
"""
import os, sys, threading, time, gc
os.environ.setdefault("NEWSSTUDIO_HOME", "/tmp/r/rmhome")
sys.path.insert(0, "tests/unit")
from test_studio_runtime import _FailsOnce, _Running, _settings
from studio.pipeline import commands as cmd

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

name = "restart-mem"
with _Running(_settings(engine=name, size_px=512)) as r:
    fails = _FailsOnce(name, calls=10**9).__enter__()
    r.runtime.submit(cmd.LoadAnchor(None))
    r.wait(lambda: r.of(cmd.AnchorLoaded))
    time.sleep(20)
    print("before", round(rss()), flush=True)
    for k in range(6):
        fails.raised.clear(); fails.calls = fails.seen + 5
        n = len(r.of(cmd.Error))
        r.wait(lambda: len(r.of(cmd.Error)) > n)
        time.sleep(15)
        print("after failure", k + 1, round(rss()), flush=True)
