"""Run `/usr/bin/time -v python main.py render --script SCRIPT --out OUT` in REPO; timestamp the progress lines; sample
the python child's RSS every 2 s; stop it with SIGINT after LIMIT_S seconds (or when it ends). Writes
benchmarks/cpu/long_script_TAG.json.

    python benchmarks/long_script_render.py REPO SCRIPT OUT LIMIT_S TAG
"""
import json, os, re, signal, subprocess, sys, tempfile, threading, time
from pathlib import Path
repo, script, out, limit, tag = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
env = dict(os.environ, PYTHONPATH=repo, PYTHONUNBUFFERED="1", NEWSSTUDIO_HOME=tempfile.mkdtemp(prefix="home_"))
t0 = time.monotonic()
p = subprocess.Popen(["/usr/bin/time", "-v", sys.executable, "main.py", "render", "--script", script,
                      "--out", out], cwd=repo, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
lines, rss = [], []
def child():
    try:
        kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None
def sample():
    while p.poll() is None:
        c = child()
        if c:
            try:
                kb = int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{c}/status").read()).group(1))
                rss.append((round(time.monotonic() - t0, 1), kb // 1024))
            except (OSError, AttributeError):
                pass
        time.sleep(2)
threading.Thread(target=sample, daemon=True).start()
def read():
    buf = b""
    while True:
        b = p.stderr.read1(4096) if hasattr(p.stderr, "read1") else p.stderr.read(1)
        if not b:
            break
        buf += b
        *parts, buf = re.split(rb"[\r\n]", buf)
        for ln in parts:
            if ln.strip():
                lines.append((round(time.monotonic() - t0, 2), ln.decode(errors="replace")))
    if buf.strip():
        lines.append((round(time.monotonic() - t0, 2), buf.decode(errors="replace")))
r = threading.Thread(target=read, daemon=True); r.start()
while p.poll() is None and time.monotonic() - t0 < limit:
    time.sleep(1)
if p.poll() is None:
    c = child()
    if c:
        os.kill(c, signal.SIGINT)
p.wait(120); r.join(10)
first_render = next((t for t, l in lines if l.startswith("render:")), None)
first_progress = next((t for t, l in lines if l.startswith(("speech", "render:", "anchor"))), None)
peak = next((l for t, l in lines if "Maximum resident set size" in l), "")
res = {"tag": tag, "limit_s": limit, "wall_s": round(time.monotonic() - t0, 1), "first_render_line_s": first_render,
       "first_progress_s": first_progress, "time_v_max_rss": peak.strip(), "rss_mb_samples": rss[::5],
       "rss_mb_max_sampled": max((m for _, m in rss), default=None), "load": os.getloadavg()[0],
       "render_lines": [l for l in lines if l[1].startswith("render:")], "lines_head": lines[:12], "lines_tail": lines[-30:]}
json.dump(res, open(Path(__file__).parent / "cpu" / f"long_script_{tag}.json", "w"), indent=1)
print(json.dumps({k: res[k] for k in ("tag", "wall_s", "first_render_line_s", "first_progress_s", "time_v_max_rss",
                                       "rss_mb_max_sampled", "load")}))
