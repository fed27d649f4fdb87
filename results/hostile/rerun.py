#!/usr/bin/env python3
"""Re-run issue 20's hostile-input cases from the command line, as a user would, and judge each against the issue.

Issue 20 ("Hostile input, faults and a long day on air") lists inputs that once crashed NewsStudio or made it say
something untrue; its "Must hold" asks that each one, re-run, ends in one line and exit 2, or in a correct output;
that the 3,000-word script without punctuation peaks under 2 GB; and that the 1 Hz WAV is refused in under 5 s.

Every case runs `python main.py ...` (the project's .venv) in a scratch folder of its own with a scratch
NEWSSTUDIO_HOME, on inputs this script makes (numpy / PIL / scipy; the built-in astronaut portrait from scikit-image,
matplotlib's grace_hopper.jpg, Moonshine's beckett.wav and two_cities.wav). For each command it records the command,
the exit status, the wall seconds, the child's peak RSS (`/usr/bin/time -v` where present, else the rusage that
os.wait4 returns for that child), and the last stderr lines; then a verdict with its reasons.

    .venv/bin/python results/hostile/rerun.py                 # every case (about 15 min on 2 idle cores)
    .venv/bin/python results/hostile/rerun.py --quick         # leave out the long cases (see LONG below)
    .venv/bin/python results/hostile/rerun.py --cases wav_1hz,size_513 --nice 19
    .venv/bin/python results/hostile/rerun.py --list

Writes results/hostile/rerun.json and results/hostile/README.md (or --out-dir); exits 1 when a verdict fails.
The full-disk case mounts a 1 MB tmpfs (root only) and is skipped, with the reason, where mount fails. The live
kill -9 case starts its own PulseAudio daemon with a null sink (installers/pulse-null-sink.sh) in a private
XDG_RUNTIME_DIR and stops it (by its pid) at the end; it is skipped, with the reason, where PulseAudio is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import wave
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "main.py"
VENV_PY = REPO / ".venv" / "bin" / "python"
PY = str(VENV_PY if VENV_PY.exists() else Path(sys.executable))
TIME = "/usr/bin/time"
SITE = next((REPO / ".venv" / "lib").glob("python3*/site-packages"), None)
MOONSHINE_ASSETS = SITE / "moonshine_voice" / "assets" if SITE else None
HOPPER = SITE / "matplotlib" / "mpl-data" / "sample_data" / "grace_hopper.jpg" if SITE else None

PROGRESS = re.compile(r"^\s*\w+: +\d+(\.\d+)?% ")  # "anchor: 10% finding the face", "render: 37% frame 32/86"
SHORT_TEXT = "Good evening. Here is the news."
RSS_LIMIT_MB = 2000.0  # issue 20: the 3,000-word script under 2 GB
ONE_HZ_LIMIT_S = 5.0  # issue 20: the 1 Hz WAV refused in under 5 s


# -- running one command ----------------------------------------------------------------------------------------------

@dataclass
class Run:
    """One command as a user typed it, and what came back."""

    command: str  # as typed in the case's folder: `python main.py render ...`
    exit: int | None  # exit status; -9 for a process killed by SIGKILL
    wall_s: float
    peak_rss_mb: float | None
    rss_from: str  # "/usr/bin/time -v" or "os.wait4 rusage"
    stderr_tail: list[str]  # the last non-empty stderr lines
    timed_out: bool = False
    killed_by_us: bool = False
    stderr: str = ""  # whole stderr (kept in the JSON, trimmed)
    stdout: str = ""
    lines_t: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, stderr line)

    def non_progress_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("lines_t")
        if len(d["stderr"]) > 6000:
            d["stderr"] = d["stderr"][:2000] + "\n[...]\n" + d["stderr"][-4000:]
        d["stdout"] = d["stdout"][-2000:]
        return d


class Ctx:
    """A case's scratch folder (its working directory) and its NEWSSTUDIO_HOME."""

    def __init__(self, root: Path, name: str, nice: int, inputs: "Inputs") -> None:
        self.dir = root / name
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.home = root / f"{name}.home"
        if self.home.exists():
            shutil.rmtree(self.home)
        self.home.mkdir()
        self.nice = nice
        self.inputs = inputs
        self.env_extra: dict[str, str] = {}

    def link(self, src: Path, name: str | None = None) -> str:
        """Put an input into the case's folder (a symlink) and return the name to type."""
        dst = self.dir / (name or src.name)
        if not dst.exists():
            os.symlink(src, dst)
        return dst.name

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("NEWSSTUDIO_HOME", "XDG_RUNTIME_DIR", "PULSE_SERVER")}
        env.update({"NEWSSTUDIO_HOME": str(self.home), "PYTHONUNBUFFERED": "1"})
        env.update(self.env_extra)
        return env

    def main(self, *args: str, timeout: float = 600,
             kill_when: Callable[[float, list[str]], bool] | None = None) -> Run:
        return run_cli(self, list(args), timeout=timeout, kill_when=kill_when)


def _parse_time_v(text: str) -> tuple[float | None, int | None, int | None]:
    """(peak RSS MB, exit status, terminating signal) from GNU time -v's report."""
    rss = status = sig = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Maximum resident set size (kbytes):"):
            rss = int(line.rsplit(":", 1)[1]) / 1024
        elif line.startswith("Exit status:"):
            status = int(line.rsplit(":", 1)[1])
        elif line.startswith("Command terminated by signal"):
            sig = int(line.rsplit(" ", 1)[1])
    return rss, status, sig


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def run_cli(ctx: Ctx, args: list[str], timeout: float = 600,
            kill_when: Callable[[float, list[str]], bool] | None = None) -> Run:
    """Run `python main.py ARGS` in the case's folder; measure it; optionally SIGKILL python when ``kill_when``
    (seconds since start, stderr lines so far) says so."""
    use_time = os.access(TIME, os.X_OK)
    tfile = ctx.dir.parent / f".{ctx.dir.name}.time.txt"
    cmd: list[str] = []
    if ctx.nice:
        cmd += ["nice", "-n", str(ctx.nice)]
    if use_time:
        cmd += [TIME, "-v", "-o", str(tfile)]
    cmd += [PY, str(MAIN), *args]
    shown = "python main.py " + " ".join(shlex.quote(a) for a in args)
    lines: list[tuple[float, str]] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ctx.dir, env=ctx.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    out_chunks: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out_chunks.append(line)

    readers = [threading.Thread(target=read_err, daemon=True), threading.Thread(target=read_out, daemon=True)]
    for r in readers:
        r.start()

    def python_pid() -> int | None:
        if not use_time:
            return proc.pid  # nice execs python itself
        kids = _children(proc.pid)  # nice has exec'd time; time's child is python
        return kids[0] if kids else None

    timed_out = killed = False
    status = rusage = None
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            status, rusage = st, ru
            break
        elapsed = time.monotonic() - t0
        if not killed and kill_when is not None and kill_when(elapsed, [ln for _, ln in lines]):
            target = python_pid()
            if target is not None:
                os.kill(target, signal.SIGKILL)
                killed = True
        if elapsed > timeout and not timed_out:
            timed_out = True
            target = python_pid()
            if target is not None:
                os.kill(target, signal.SIGKILL)
            if use_time:
                time.sleep(1)
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    for r in readers:  # an orphaned encoder child may hold the pipes open after a kill -9: do not wait for it
        r.join(timeout=3)
    exit_code: int | None = proc.returncode
    rss = None
    rss_from = "os.wait4 rusage"
    if use_time and tfile.exists():
        rss, t_status, t_sig = _parse_time_v(tfile.read_text(errors="replace"))
        rss_from = "/usr/bin/time -v"
        exit_code = -t_sig if t_sig else t_status
        tfile.unlink()
    elif rusage is not None:
        rss = rusage.ru_maxrss / 1024
    stderr = "\n".join(ln for _, ln in lines)
    tail = [ln for _, ln in lines if ln.strip()][-3:]
    return Run(command=shown, exit=exit_code, wall_s=round(wall, 2), peak_rss_mb=None if rss is None else round(rss, 1),
               rss_from=rss_from, stderr_tail=tail, timed_out=timed_out, killed_by_us=killed, stderr=stderr,
               stdout="".join(out_chunks), lines_t=list(lines))


# -- checks -----------------------------------------------------------------------------------------------------------

class Verdict:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.notes: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        (self.notes if ok else self.failures).append(("ok: " if ok else "FAIL: ") + what)
        return ok

    def note(self, what: str) -> None:
        self.notes.append(what)

    @property
    def passed(self) -> bool:
        return not self.failures


def refusal(v: Verdict, run: Run, contains: tuple[str, ...] = (), not_contains: tuple[str, ...] = ()) -> None:
    """One line on stderr (progress lines aside), starting "error: ", exit 2, no traceback."""
    lines = run.non_progress_lines()
    v.check(run.exit == 2, f"exit {run.exit} (want 2)")
    v.check(len(lines) == 1 and lines[0].startswith("error: "),
            f"{len(lines)} non-progress stderr line(s), want one 'error: ...' line")
    v.check("Traceback" not in run.stderr, "no traceback on stderr")
    text = "\n".join(lines)
    for s in contains:
        v.check(s.lower() in text.lower(), f"the message says {s!r}")
    for s in not_contains:
        v.check(s.lower() not in text.lower(), f"the message does not say {s!r}")


def before_work(v: Verdict, ctx: Ctx, run: Run, inputs: set[str]) -> None:
    """Refused before any work: no progress of the anchor/speech/render stages, no file made in the folder,
    nothing cached in the data folder."""
    stages = [ln for ln in run.stderr.splitlines() if PROGRESS.match(ln)]
    v.check(not stages, f"no stage progress before the refusal ({len(stages)} progress lines)")
    made = sorted(p.name for p in ctx.dir.iterdir() if p.name not in inputs)
    v.check(not made, f"no file written in the folder ({', '.join(made) or 'none'})")
    cache = ctx.home / "cache"
    cached = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    v.check(not cached, f"nothing cached in NEWSSTUDIO_HOME ({len(cached)} files)")


def ffprobe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_streams", "-show_format", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout)


def decodes(path: Path) -> tuple[bool, str]:
    """Every packet of the file decodes (ffmpeg to null, errors only)."""
    out = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-f", "null", "-"],
                         capture_output=True, text=True, timeout=1200)
    return out.returncode == 0 and not out.stderr.strip(), out.stderr.strip()[-300:]


def mp4_summary(info: dict) -> dict:
    if "error" in info:
        return info
    s = {}
    for st in info.get("streams", []):
        if st.get("codec_type") == "video":
            s.update(video=st.get("codec_name"), width=st.get("width"), height=st.get("height"),
                     fps=st.get("avg_frame_rate"), video_s=float(st.get("duration", "nan")))
        elif st.get("codec_type") == "audio":
            s.update(audio=st.get("codec_name"), audio_hz=int(st.get("sample_rate", 0)),
                     channels=st.get("channels"), audio_s=float(st.get("duration", "nan")))
    s["duration_s"] = float(info.get("format", {}).get("duration", "nan"))
    return s


def good_mp4(v: Verdict, path: Path, min_s: float = 0.5, audio_hz: int = 48000) -> dict:
    """H.264 + AAC at ``audio_hz``, at least ``min_s`` long, every packet decodes."""
    if not v.check(path.is_file(), f"{path.name} exists"):
        return {}
    s = mp4_summary(ffprobe(path))
    v.check(s.get("video") == "h264" and s.get("audio") == "aac", f"{path.name}: h264 + aac ({s.get('video')} + "
                                                                     f"{s.get('audio')})")
    v.check(s.get("audio_hz") == audio_hz, f"{path.name}: audio {s.get('audio_hz')} Hz (want {audio_hz})")
    v.check(s.get("duration_s", 0) >= min_s, f"{path.name}: {s.get('duration_s', 0):.2f} s (want >= {min_s} s)")
    ok, err = decodes(path)
    v.check(ok, f"{path.name}: every packet decodes{'' if ok else ' (' + err + ')'}")
    return s


def max_volume_db(path: Path) -> float | None:
    """The audio's peak level in dBFS (ffmpeg's volumedetect)."""
    out = subprocess.run(["ffmpeg", "-nostdin", "-i", str(path), "-vn", "-af", "volumedetect", "-f", "null", "-"],
                         capture_output=True, text=True, timeout=300)
    m = re.search(r"max_volume: (-?[\d.]+|-inf) dB", out.stderr)
    return None if not m or m.group(1) == "-inf" else float(m.group(1))


def success(v: Verdict, run: Run) -> None:
    v.check(run.exit == 0, f"exit {run.exit} (want 0)")
    v.check("Traceback" not in run.stderr, "no traceback on stderr")


def sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def first_frame(path: Path, at_s: float = 0.5):
    """One decoded frame (H x W x 3 uint8) of an MP4, through ffmpeg."""
    import numpy as np
    from PIL import Image

    png = path.with_suffix(f".frame{at_s:g}.png")
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-ss", f"{at_s}", "-i", str(path), "-frames:v", "1",
                    str(png)], check=True, capture_output=True, timeout=120)
    frame = np.asarray(Image.open(png).convert("RGB"))
    png.unlink()
    return frame


def face_in(frame) -> float | None:
    """Face width in px that MediaPipe's mesh finds in a frame (a separate process; None when there is none)."""
    import numpy as np

    tmp = Path(tempfile.mkdtemp(prefix="hostile-face-"))
    np.save(tmp / "f.npy", frame)
    code = ("import sys, numpy as np; sys.path.insert(0, %r)\n"
            "from studio.presenter import landmarks as lm\n"
            "pts = lm.detect_landmarks(np.load(%r))\n"
            "print('none' if pts is None else float(pts[:, 0].max() - pts[:, 0].min()))") % (str(REPO),
                                                                                           str(tmp / "f.npy"))
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NEWSSTUDIO_HOME": str(tmp)})
    shutil.rmtree(tmp, ignore_errors=True)
    last = (out.stdout.strip().splitlines() or ["none"])[-1]
    try:
        return float(last)
    except ValueError:
        return None


# -- inputs -----------------------------------------------------------------------------------------------------------

def write_wav(path: Path, rate: int, samples, bits: int = 16, header_rate: int | None = None) -> Path:
    """A PCM WAV written byte by byte, so its header may claim anything (``header_rate``). samples: N or N x C."""
    import numpy as np

    x = np.asarray(samples, np.float64).reshape(len(samples), -1)
    channels = x.shape[1]
    if bits == 24:
        ints = np.clip(np.round(x * 8388607), -8388608, 8388607).astype("<i4")
        data = ints.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    else:
        data = np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes()
    rate = rate if header_rate is None else header_rate
    block = channels * bits // 8
    header = b"RIFF" + struct.pack("<I", (36 + len(data)) & 0xFFFFFFFF) + b"WAVE" + b"fmt "
    header += struct.pack("<IHHIIHH", 16, 1, channels, rate, (rate * block) & 0xFFFFFFFF, block, bits)
    header += b"data" + struct.pack("<I", len(data) & 0xFFFFFFFF)
    path.write_bytes(header + data)
    return path


def read_wav(path: Path):
    import numpy as np

    with wave.open(str(path)) as w:
        assert w.getsampwidth() == 2
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
        return x.reshape(-1, w.getnchannels()).mean(axis=1), w.getframerate()


def write_big_png(path: Path, width: int, height: int, rgb=(90, 110, 130)) -> Path:
    """A real, decodable width x height RGB PNG of one colour, streamed (rows after the first use the Up filter, so
    they are zeros and deflate to almost nothing)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        co = zlib.compressobj(1)
        first = b"\x00" + bytes(rgb) * width
        zero = b"\x02" + bytes(3 * width)
        pending = [co.compress(first)]
        rows_per_feed = 256
        block = zero * rows_per_feed
        done = 1
        while done < height:
            n = min(rows_per_feed, height - done)
            pending.append(co.compress(block if n == rows_per_feed else zero * n))
            done += n
            data = b"".join(pending)
            if len(data) > 1 << 20:
                f.write(chunk(b"IDAT", data))
                pending = []
        pending.append(co.flush())
        f.write(chunk(b"IDAT", b"".join(pending)) + chunk(b"IEND", b""))
    return path


class Inputs:
    """Input files made once per run under ``root`` (each case links the ones it needs into its folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _make(self, name: str, maker: Callable[[Path], object]) -> Path:
        path = self.root / name
        if not path.exists():
            tmp = path.with_name(path.name + ".tmp")
            maker(tmp)
            tmp.rename(path)
        return path

    @staticmethod
    def astronaut():
        import numpy as np
        from skimage import data

        return np.ascontiguousarray(data.astronaut()[:, :, :3])  # the built-in anchor (studio.presenter.anchor)

    @staticmethod
    def _paste(img, width: int, height: int, scale: float, x: int, y: int, fill: int = 90):
        import numpy as np
        from PIL import Image

        canvas = np.full((height, width, 3), fill, np.uint8)
        small = np.asarray(Image.fromarray(img).resize((int(img.shape[1] * scale), int(img.shape[0] * scale)),
                                                       Image.LANCZOS))
        canvas[y:y + small.shape[0], x:x + small.shape[1]] = small
        return canvas

    def np_script(self) -> Path:  # the issue's own command: ' '.join(['word'] * 3000)
        return self._make("np.txt", lambda p: p.write_text(" ".join(["word"] * 3000)))

    def one_hz_wav(self) -> Path:  # Moonshine's beckett.wav (10 s of speech at 16 kHz) under a 1 Hz header
        def make(p: Path) -> None:
            x, rate = read_wav(MOONSHINE_ASSETS / "beckett.wav")
            write_wav(p, rate, x, header_rate=1)
        return self._make("one_hz.wav", make)

    def studio_48k_wav(self) -> Path:  # 6 s of two_cities.wav (48 kHz speech) as a 24-bit stereo studio file
        def make(p: Path) -> None:
            import numpy as np

            x, rate = read_wav(MOONSHINE_ASSETS / "two_cities.wav")
            assert rate == 48000, rate
            x = x[: 6 * rate]
            write_wav(p, rate, np.stack([x, 0.8 * x], 1), bits=24)
        return self._make("studio48k.wav", make)

    def long31_wav(self) -> Path:  # session 11's long31.wav: beckett.wav looped to 31:00 at 44.1 kHz
        def make(p: Path) -> None:
            import numpy as np
            from scipy.signal import resample_poly

            x, rate = read_wav(MOONSHINE_ASSETS / "beckett.wav")
            y = resample_poly(x, 441, 160).astype(np.float32)  # 16 kHz -> 44.1 kHz
            n = 31 * 60 * 44100
            y = np.tile(y, n // len(y) + 1)[:n]
            with wave.open(str(p), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(44100)
                w.writeframes(np.clip(np.round(y * 32767), -32768, 32767).astype("<i2").tobytes())
        return self._make("long31.wav", make)

    def portrait_720p(self) -> Path:  # the default portrait (512 px) pasted at full size into a 1280x720 frame
        from PIL import Image

        return self._make("anchor_in_720p.png", lambda p: Image.fromarray(
            self._paste(self.astronaut(), 1280, 720, 1.0, 700, 100)).save(p, format="PNG"))

    def hopper_4000(self) -> Path:  # Grace Hopper at 0.6x in a 4000x3000 photo (a JPEG, as a camera makes)
        from PIL import Image

        def make(p: Path) -> None:
            import numpy as np

            hopper = np.asarray(Image.open(HOPPER).convert("RGB"))
            Image.fromarray(self._paste(hopper, 4000, 3000, 0.6, 2500, 1800)).save(p, format="JPEG", quality=92)
        return self._make("hopper_4000x3000.jpg", make)

    def tiny_face(self) -> Path:  # the default portrait at half size in a 1280x720 frame: a face of about 45 px
        from PIL import Image

        return self._make("tiny_face_720p.png", lambda p: Image.fromarray(
            self._paste(self.astronaut(), 1280, 720, 0.5, 100, 300)).save(p, format="PNG"))

    def _grey16(self):
        import numpy as np

        a = self.astronaut().astype(np.float64)
        return np.round((0.299 * a[..., 0] + 0.587 * a[..., 1] + 0.114 * a[..., 2]) * 257).astype(np.uint16)

    def grey16_png(self) -> Path:  # the default portrait as a 16-bit greyscale PNG (PNG colour type 0, depth 16)
        from PIL import Image

        return self._make("grey16.png", lambda p: Image.fromarray(self._grey16()).save(p, format="PNG"))

    def grey8_png(self) -> Path:  # the same picture as an 8-bit greyscale PNG: the reference
        import numpy as np
        from PIL import Image

        return self._make("grey8.png", lambda p: Image.fromarray(
            np.round(self._grey16() / 257).astype(np.uint8), mode="L").save(p, format="PNG"))

    def png_20000(self) -> Path:
        return self._make("poster.png", lambda p: write_big_png(p, 20000, 20000))  # a name that gives nothing away


# -- cases ------------------------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    checks: str  # what the case checks (the words)
    long: bool
    fn: Callable[[Ctx, Verdict], list[Run]]


@dataclass
class CaseResult:
    name: str
    checks: str
    long: bool
    verdict: str  # pass / fail / skip
    reasons: list[str]
    runs: list[dict]
    skip_reason: str = ""
    figures: dict = field(default_factory=dict)


CASES: list[Case] = []
FIGURES: dict[str, dict] = {}


def case(name: str, checks: str, long: bool = False):
    def deco(fn):
        CASES.append(Case(name, checks, long, fn))
        return fn
    return deco


class Skip(Exception):
    pass


@case("no_punct_3000", "3,000 words without punctuation, default voice (was killed at > 24 GB): a correct MP4, "
                       "peak RSS under 2 GB", long=True)
def _no_punct(ctx: Ctx, v: Verdict) -> list[Run]:
    script = ctx.link(ctx.inputs.np_script())
    run = ctx.main("render", "--script", script, "--out", "np.mp4", timeout=2400)
    success(v, run)
    s = good_mp4(v, ctx.dir / "np.mp4", min_s=60)
    v.check(run.peak_rss_mb is not None and run.peak_rss_mb < RSS_LIMIT_MB,
            f"peak RSS {run.peak_rss_mb} MB (want < {RSS_LIMIT_MB:.0f} MB)")
    FIGURES["no_punct_3000"] = {"peak_rss_mb": run.peak_rss_mb, "wall_s": run.wall_s,
                                "video_s": s.get("duration_s")}
    return [run]


@case("wav_1hz", "a WAV whose header claims 1 Hz (decoding was never capped): refused, one line, exit 2, in under 5 s")
def _one_hz(ctx: Ctx, v: Verdict) -> list[Run]:
    wav = ctx.link(ctx.inputs.one_hz_wav())
    run = ctx.main("render", "--audio", wav, "--out", "o.mp4", timeout=120)
    refusal(v, run, contains=("1 Hz",))
    before_work(v, ctx, run, {wav})
    v.check(run.wall_s < ONE_HZ_LIMIT_S, f"refused in {run.wall_s:.2f} s (want < {ONE_HZ_LIMIT_S:g} s)")
    FIGURES["wav_1hz"] = {"wall_s": run.wall_s, "peak_rss_mb": run.peak_rss_mb}
    return [run]


def _arg_refusal(ctx: Ctx, v: Verdict, args: list[str], contains: tuple[str, ...]) -> list[Run]:
    run = ctx.main("render", "--text", SHORT_TEXT, "--out", "o.mp4", *args, timeout=120)
    refusal(v, run, contains=contains)
    before_work(v, ctx, run, set())
    return [run]


@case("size_4096", "`--size 4096` (took 8.1 GB for 0.8 s): refused before any work, one line, exit 2")
def _size_4096(ctx: Ctx, v: Verdict) -> list[Run]:
    return _arg_refusal(ctx, v, ["--size", "4096"], ("--size 4096",))


@case("size_513", "`--size 513` (traceback, exit 1, after the anchor and speech work): refused before any work")
def _size_513(ctx: Ctx, v: Verdict) -> list[Run]:
    return _arg_refusal(ctx, v, ["--size", "513"], ("--size 513",))


@case("seed_negative", "`--seed -1` (traceback, exit 1, after the anchor and speech work): refused before any work")
def _seed(ctx: Ctx, v: Verdict) -> list[Run]:
    return _arg_refusal(ctx, v, ["--seed", "-1"], ("--seed -1",))


@case("argparse_text", "argument errors (said `python main.py main.py --help`): one line, exit 2, a true "
                       "`--help` command")
def _argparse(ctx: Ctx, v: Verdict) -> list[Run]:
    runs = [ctx.main("render", "--text", SHORT_TEXT, "--out", "o.mp4", "--size", "big", timeout=60),
            ctx.main("render", "--out", "o.mp4", timeout=60),
            ctx.main("--bogus", timeout=60)]
    wants = ["python main.py render --help", "python main.py render --help", "python main.py --help"]
    for run, want in zip(runs, wants):
        refusal(v, run, contains=(want,), not_contains=("main.py main.py",))
    before_work(v, ctx, runs[-1], set())
    return runs


@case("timings_is_out", "`--timings` equal to `--out` (the finished MP4 was replaced by JSON, exit 0): refused before "
                        "work; an existing o.mp4 left as it was")
def _timings_out(ctx: Ctx, v: Verdict) -> list[Run]:
    (ctx.dir / "o.mp4").write_bytes(b"yesterday's programme")
    run = ctx.main("render", "--text", SHORT_TEXT, "--out", "o.mp4", "--timings", "o.mp4", timeout=120)
    refusal(v, run, contains=("--timings",))
    before_work(v, ctx, run, {"o.mp4"})
    v.check((ctx.dir / "o.mp4").read_bytes() == b"yesterday's programme", "the existing o.mp4 is unchanged")
    return [run]


@case("timings_missing_folder", "`--timings` into a missing folder (failed only after the whole render): refused "
                                "before work")
def _timings_dir(ctx: Ctx, v: Verdict) -> list[Run]:
    run = ctx.main("render", "--text", SHORT_TEXT, "--out", "o.mp4", "--timings", "nowhere/o.json", timeout=120)
    refusal(v, run, contains=("nowhere",))
    before_work(v, ctx, run, set())
    return [run]


@case("chinese_script", "Chinese text with the default English voice (read as 'Chinese letter' with no warning): "
                        "refused, one line naming the writing system")
def _chinese(ctx: Ctx, v: Verdict) -> list[Run]:
    (ctx.dir / "zh.txt").write_text("今天的新闻很重要。政府宣布了新的预算计划。", encoding="utf-8")
    run = ctx.main("render", "--script", "zh.txt", "--out", "o.mp4", timeout=120)
    refusal(v, run, contains=("Chinese",))
    before_work(v, ctx, run, {"zh.txt"})
    return [run]


@case("chinese_name_in_english", "an English story with a name in Chinese characters: rendered, a warning names the "
                                 "left-out letters, no 'Chinese letter' in the spoken words")
def _chinese_mixed(ctx: Ctx, v: Verdict) -> list[Run]:
    run = ctx.main("render", "--text", "Our correspondent 李明 reports from Beijing tonight.", "--out", "o.mp4",
                   "--timings", "o.json", timeout=600)
    success(v, run)
    good_mp4(v, ctx.dir / "o.mp4")
    warn = [ln for ln in run.stderr.splitlines() if ln.lower().startswith("warning:") and "Chinese" in ln]
    v.check(bool(warn), "a 'warning:' line names the Chinese characters")
    if (ctx.dir / "o.json").is_file():
        words = [w["text"].lower() for w in json.loads((ctx.dir / "o.json").read_text())["words"]]
        v.check(not {"chinese", "letter"} & set(words), f"spoken words: {' '.join(words)}")
    else:
        v.check(False, "o.json written")
    dup = [ln for ln in run.stderr.splitlines() if "Left out" in ln]
    if len(dup) > 1:
        v.note(f"note: the warning is printed {len(dup)} times (logging's 'WARNING:' and the driver's 'warning:')")
    return [run]


@case("ssml_break", "`<break time='1s'/>` in the script (spoken as 'break time equals one s slash'): not read "
                    "aloud, a pause of about 1 s in the word timings instead")
def _break(ctx: Ctx, v: Verdict) -> list[Run]:
    run = ctx.main("render", "--text", "Good evening. <break time='1s'/> Here is the news.", "--out", "o.mp4",
                   "--timings", "o.json", timeout=600)
    success(v, run)
    good_mp4(v, ctx.dir / "o.mp4")
    if v.check((ctx.dir / "o.json").is_file(), "o.json written"):
        words = json.loads((ctx.dir / "o.json").read_text())["words"]
        texts = [w["text"].lower() for w in words]
        v.check(not {"break", "time", "equals", "slash", "s"} & set(texts), f"spoken words: {' '.join(texts)}")
        try:
            gap = words[texts.index("here")]["start_s"] - words[texts.index("evening")]["end_s"]
            v.check(0.9 <= gap <= 2.0, f"silence between 'evening' and 'Here': {gap:.2f} s (want 0.9-2.0 s)")
        except ValueError:
            v.check(False, "the words 'evening' and 'Here' are in the timings")
    v.check("Traceback" not in run.stderr and not [ln for ln in run.stderr.splitlines() if "markup" in ln.lower()],
            "no warning about unknown markup")
    return [run]


@case("audio_48k", "`--audio` of a 48 kHz 24-bit stereo studio recording (came out as 16 kHz mono AAC): 48 kHz AAC "
                   "out, as long as the recording")
def _audio48(ctx: Ctx, v: Verdict) -> list[Run]:
    wav = ctx.link(ctx.inputs.studio_48k_wav())
    run = ctx.main("render", "--audio", wav, "--out", "o.mp4", timeout=600)
    success(v, run)
    s = good_mp4(v, ctx.dir / "o.mp4", min_s=5.5, audio_hz=48000)
    if s:
        v.check(abs(s.get("audio_s", 0) - 6.0) < 0.1, f"audio {s.get('audio_s', 0):.3f} s (the recording: 6.000 s)")
    return [run]


@case("full_disk_home", "the data folder (NEWSSTUDIO_HOME) on a full disk (14 '--- Logging error ---' tracebacks "
                        "during a successful run): the render succeeds, at most one warning line about the log")
def _full_disk(ctx: Ctx, v: Verdict) -> list[Run]:
    if os.geteuid() != 0:
        raise Skip("needs root to mount a tmpfs")
    mnt = ctx.dir.parent / f"{ctx.dir.name}.tmpfs"
    mnt.mkdir(exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if out.returncode != 0:
        raise Skip(f"mount -t tmpfs failed: {out.stderr.strip()}")
    try:
        home = mnt / "newsstudio"
        home.mkdir()
        with open(mnt / "filler", "wb") as f:  # fill it: writes fail with ENOSPC from here on
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        free = shutil.disk_usage(mnt).free
        v.check(free == 0, f"the data folder's disk is full ({free} bytes free)")
        ctx.env_extra["NEWSSTUDIO_HOME"] = str(home)
        run = ctx.main("render", "--text", SHORT_TEXT, "--out", "o.mp4", timeout=600)
        success(v, run)
        good_mp4(v, ctx.dir / "o.mp4")
        v.check("--- Logging error ---" not in run.stderr,
                f"'--- Logging error ---' {run.stderr.count('--- Logging error ---')} times (want 0)")
        warn = [ln for ln in run.non_progress_lines() if "log" in ln.lower() and "warning" in ln.lower()]
        v.check(len(warn) <= 1, f"{len(warn)} warning line(s) about the log (want at most 1)")
        others = [ln for ln in run.non_progress_lines() if not ln.startswith(("wrote ", "stage seconds"))
                  and ln not in warn]
        if others:
            v.note("other stderr lines: " + " | ".join(others[:5]))
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        try:
            mnt.rmdir()
        except OSError:
            pass
    return [run]


def _face_render(ctx: Ctx, v: Verdict, image: Path) -> list[Run]:
    name = ctx.link(image)
    run = ctx.main("render", "--anchor", name, "--text", SHORT_TEXT, "--out", "o.mp4", timeout=600)
    success(v, run)
    v.check("No face" not in run.stderr, "no 'No face found'")
    if good_mp4(v, ctx.dir / "o.mp4"):
        width = face_in(first_frame(ctx.dir / "o.mp4"))
        v.check(width is not None and width > 100, f"MediaPipe finds the presenter's face in the output "
                                                  f"({'none' if width is None else f'{width:.0f} px wide'})")
    return [run]


@case("face_small_in_720p", "the default portrait placed small in a 1280x720 frame (said 'No face found'): the face "
                            "is found and the render is correct")
def _face720(ctx: Ctx, v: Verdict) -> list[Run]:
    return _face_render(ctx, v, ctx.inputs.portrait_720p())


@case("face_small_in_4000x3000", "a small face (Grace Hopper at 0.6x) in a 4000x3000 photo (said 'No face found'): "
                                 "found, the render is correct")
def _face4000(ctx: Ctx, v: Verdict) -> list[Run]:
    return _face_render(ctx, v, ctx.inputs.hopper_4000())


@case("face_too_small", "a face of about 45 px (the 'face too small' message could never be reached): one line that "
                        "says the face is too small, exit 2")
def _face_tiny(ctx: Ctx, v: Verdict) -> list[Run]:
    name = ctx.link(ctx.inputs.tiny_face())
    run = ctx.main("render", "--anchor", name, "--text", SHORT_TEXT, "--out", "o.mp4", timeout=300)
    refusal(v, run, contains=("only", "px wide"), not_contains=("No face",))
    v.check(not (ctx.dir / "o.mp4").exists(), "no o.mp4 written")
    return [run]


@case("png_16bit_grey", "a 16-bit greyscale PNG portrait (converted to almost white, then 'No face found'): rendered; "
                        "its frames match those of the same picture as an 8-bit PNG")
def _grey16(ctx: Ctx, v: Verdict) -> list[Run]:
    import numpy as np

    g16, g8 = ctx.link(ctx.inputs.grey16_png()), ctx.link(ctx.inputs.grey8_png())
    with open(ctx.dir / g16, "rb") as f:
        head = f.read(26)
    v.check(head[24] == 16 and head[25] == 0, f"the input is a 16-bit greyscale PNG (bit depth {head[24]}, colour "
                                              f"type {head[25]})")
    r16 = ctx.main("render", "--anchor", g16, "--text", SHORT_TEXT, "--out", "g16.mp4", timeout=600)
    # the reference in a data folder of its own: the anchor cache (keyed by the decoded pixels) is not shared
    ref_home = ctx.home.with_name(ctx.home.name + "-ref")
    shutil.rmtree(ref_home, ignore_errors=True)
    ref_home.mkdir()
    ctx.env_extra["NEWSSTUDIO_HOME"] = str(ref_home)
    r8 = ctx.main("render", "--anchor", g8, "--text", SHORT_TEXT, "--out", "g8.mp4", timeout=600)
    ctx.env_extra.pop("NEWSSTUDIO_HOME")
    shutil.rmtree(ref_home, ignore_errors=True)
    success(v, r16)
    success(v, r8)
    if good_mp4(v, ctx.dir / "g16.mp4") and (ctx.dir / "g8.mp4").is_file():
        a = first_frame(ctx.dir / "g16.mp4").astype(np.float64)
        b = first_frame(ctx.dir / "g8.mp4").astype(np.float64)
        mean = a.mean()
        diff = np.abs(a - b).mean() if a.shape == b.shape else float("inf")
        v.check(mean < 200, f"the 16-bit render's frame is not washed out (mean level {mean:.0f} of 255)")
        v.check(diff < 6, f"mean |16-bit frame - 8-bit frame| = {diff:.2f} levels (want < 6)")
    return [r16, r8]


@case("png_20000x20000", "a real 20000x20000 PNG (called 'not a JPEG or PNG'): refused with its size, one line, "
                         "exit 2")
def _png20000(ctx: Ctx, v: Verdict) -> list[Run]:
    name = ctx.link(ctx.inputs.png_20000())
    run = ctx.main("render", "--anchor", name, "--text", SHORT_TEXT, "--out", "o.mp4", timeout=300)
    refusal(v, run, not_contains=("not a JPEG", "Cannot read"))
    said = run.non_progress_lines()[-1:] or [""]
    v.check(bool(re.search(r"20000x20000|400 million pixels|400\.0 ?MP", said[0])) and "scale it down" in said[0],
            "the message gives the picture's size (20000x20000 / 400 million pixels) and says to scale it down")
    v.check(not (ctx.dir / "o.mp4").exists(), "no o.mp4 written")
    return [run]


def _recovered_files(folder: Path, stem: str) -> dict[str, str]:
    return {p.name: sha(p) for p in sorted(folder.glob(f"{stem}-recovered*.mp4"))}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and (p.name.endswith(".part")
                                                                                  or p.name.endswith(".note")))


def _judge_recovery(v: Verdict, ctx: Ctx, stem: str, after_kill: dict, runs: list[Run], new_out: Path,
                    new_min_s: float) -> None:
    """After a kill -9 and two further starts with the same --out: the cut recording is a visible, playable
    STEM-recovered*.mp4, announced by a 'note:' line (once), never overwritten; no hidden leftovers."""
    rec2, rec3 = runs[1], runs[2]
    if "leaked shared_memory" in runs[0].stderr:
        v.note("the killed command's stderr ends with Python's two-line 'resource_tracker: There appear to be 1 "
               "leaked shared_memory objects to clean up at shutdown' UserWarning: the orphaned resource tracker "
               "(multiprocessing) unlinks the killed process's shared memory and says so; no traceback, nothing lost")
    found = _recovered_files(ctx.dir, stem)
    if not v.check(bool(found), f"a visible {stem}-recovered*.mp4 after the next start ({', '.join(found) or 'none'})"):
        return
    for name in found:
        s = good_mp4(v, ctx.dir / name, min_s=1.0)
        FIGURES.setdefault(f"{stem}_kill9", {})[name] = s.get("duration_s")
    notes2 = [ln for ln in rec2.stderr.splitlines() if ln.startswith("note:") and "recovered" in ln.lower()]
    notes3 = [ln for ln in rec3.stderr.splitlines() if ln.startswith("note:") and "recovered" in ln.lower()]
    named = [n for n in found if any(n in ln for ln in notes2 + notes3)]
    v.check(bool(named), f"the recovery announced at a next start: {' | '.join(notes2 + notes3) or 'no note: line'}")
    v.check(len(notes2) + len(notes3) == len(found), f"announced once each ({len(notes2)} + {len(notes3)} notes for "
                                                     f"{len(found)} file(s))")
    for name, digest in after_kill.items():
        v.check(found.get(name) == digest, f"{name}, there before the next start, unchanged by it")
    v.check(_recovered_files(ctx.dir, stem) == found, "the recovered file(s) unchanged by the third start")
    good_mp4(v, new_out, min_s=new_min_s)
    left = _leftovers(ctx.dir)
    v.check(not left, f"no hidden .part / .note left ({', '.join(left) or 'none'})")


class Pulse:
    """A private PulseAudio daemon with the null sink 'studio' (installers/pulse-null-sink.sh), stopped by pid."""

    def __init__(self) -> None:
        self.runtime = Path(tempfile.mkdtemp(prefix="hostile-pulse-"))
        env = {k: v for k, v in os.environ.items() if k != "PULSE_SERVER"}
        env["XDG_RUNTIME_DIR"] = str(self.runtime)
        self.env = env
        out = subprocess.run(["bash", str(REPO / "installers" / "pulse-null-sink.sh")], env=env, capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0:
            raise Skip(f"no PulseAudio null sink: {out.stderr.strip()[-200:]}")
        self.pid = None
        try:
            self.pid = int((self.runtime / "pulse" / "pid").read_text().split()[0])
        except (OSError, ValueError):
            pass

    def play(self, wav: Path) -> subprocess.Popen:
        return subprocess.Popen(["paplay", "--device=studio", str(wav)], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.runtime, ignore_errors=True)


@case("live_kill9", "`live --out lk.mp4` killed with -9 (left a hidden .lk.mp4.part the next start destroyed): "
                    "recovered into a visible playable file, announced at the next start, never overwritten",
      long=True)
def _live_kill9(ctx: Ctx, v: Verdict) -> list[Run]:
    if not shutil.which("paplay"):
        raise Skip("paplay is not installed (pulseaudio-utils)")
    pulse = Pulse()
    players: list[subprocess.Popen] = []
    try:
        ctx.env_extra["XDG_RUNTIME_DIR"] = str(pulse.runtime)
        speech = MOONSHINE_ASSETS / "two_cities.wav"
        state = {"listening": None}

        def kill_when(t: float, lines: list[str]) -> bool:
            if state["listening"] is None and any("listening" in ln for ln in lines):
                state["listening"] = t
                players.append(pulse.play(speech))
            return state["listening"] is not None and t - state["listening"] >= 10.0

        r1 = run_cli(ctx, ["live", "--seconds", "60", "--input", "pulse", "--out", "lk.mp4"], timeout=240,
                     kill_when=kill_when)
        v.check(r1.killed_by_us and r1.exit == -9, f"the first live was killed with SIGKILL 10 s after 'listening' "
                                                   f"(exit {r1.exit})")
        after_kill = _recovered_files(ctx.dir, "lk")
        v.note(f"right after the kill: {sorted(p.name for p in ctx.dir.iterdir())}")
        r2 = ctx.main("live", "--seconds", "3", "--input", "pulse", "--out", "lk.mp4", timeout=180)
        success(v, r2)
        r3 = ctx.main("live", "--seconds", "3", "--input", "pulse", "--out", "lk.mp4", timeout=180)
        success(v, r3)
        _judge_recovery(v, ctx, "lk", after_kill, [r1, r2, r3], ctx.dir / "lk.mp4", 2.0)
        for name in _recovered_files(ctx.dir, "lk"):
            level = max_volume_db(ctx.dir / name)
            v.check(level is not None and level > -40, f"{name} holds the speech played into the microphone "
                                                       f"(max volume {level} dBFS, want > -40)")
        return [r1, r2, r3]
    finally:
        for p in players:
            if p.poll() is None:
                p.kill()
                p.wait()
        pulse.stop()


@case("render_kill9", "`render` killed with -9 (left hidden unplayable .part files forever): the cut render is "
                      "recovered into a visible playable file, announced at the next start, never overwritten",
      long=True)
def _render_kill9(ctx: Ctx, v: Verdict) -> list[Run]:
    speech = ctx.link(MOONSHINE_ASSETS / "two_cities.wav")  # 44 s of speech at 48 kHz

    def kill_when(t: float, lines: list[str]) -> bool:
        pct = [float(m.group(1)) for ln in lines for m in [re.match(r"^render: (\d+)% ", ln)] if m]
        return bool(pct) and max(pct) >= 40

    r1 = run_cli(ctx, ["render", "--audio", speech, "--out", "render.mp4"], timeout=600, kill_when=kill_when)
    v.check(r1.killed_by_us and r1.exit == -9, f"the render was killed with SIGKILL at 40 % (exit {r1.exit})")
    v.check(not (ctx.dir / "render.mp4").exists(), "no finished-looking render.mp4 after the kill")
    after_kill = _recovered_files(ctx.dir, "render")
    v.note(f"right after the kill: {sorted(p.name for p in ctx.dir.iterdir())}")
    r2 = ctx.main("render", "--text", SHORT_TEXT, "--out", "render.mp4", timeout=600)
    success(v, r2)
    r3 = ctx.main("render", "--text", SHORT_TEXT, "--out", "render.mp4", timeout=600)
    success(v, r3)
    _judge_recovery(v, ctx, "render", after_kill, [r1, r2, r3], ctx.dir / "render.mp4", 1.0)
    return [r1, r2, r3]


@case("audio_31min", "`render --audio` of a 31-minute recording (analysis 202 s and 3.4 GB with progress stuck at "
                     "0 %): progress moves within the first minute, a correct 31-minute MP4", long=True)
def _long31(ctx: Ctx, v: Verdict) -> list[Run]:
    wav = ctx.link(ctx.inputs.long31_wav())
    run = ctx.main("render", "--audio", wav, "--out", "long31.mp4", timeout=1500)
    success(v, run)
    moved = [t for t, ln in run.lines_t for m in [re.match(r"^\w+: (\d+)% ", ln)] if m and int(m.group(1)) > 0]
    first = moved[0] if moved else None
    shown = "never" if first is None else f"after {first:.1f} s"
    v.check(first is not None and first < 60, f"first progress above 0 %: {shown} (want < 60 s)")
    s = good_mp4(v, ctx.dir / "long31.mp4", min_s=1850)
    FIGURES["audio_31min"] = {"wall_s": run.wall_s, "peak_rss_mb": run.peak_rss_mb, "video_s": s.get("duration_s"),
                              "first_progress_s": first}
    v.note(f"peak RSS {run.peak_rss_mb} MB (the issue saw 3.4 GB; session 11: 1.72 GB)")
    if run.wall_s > 600:
        v.note(f"this case took {run.wall_s / 60:.1f} min, over the 10 minutes past which it may be left out of a "
               "full run (--skip audio_31min); it was kept")
    return [run]


# -- report -----------------------------------------------------------------------------------------------------------

def _num(x) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) else str(x)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(out_dir: Path, results: list[CaseResult], meta: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rerun.json").write_text(json.dumps({"meta": meta, "figures": FIGURES,
                                                    "cases": [asdict(r) for r in results]}, indent=2,
                                                   ensure_ascii=False) + "\n", encoding="utf-8")
    n = {k: sum(r.verdict == k for r in results) for k in ("pass", "fail", "skip")}
    lines = [
        "# Issue 20's hostile inputs, re-run from the command line",
        "",
        f"`{meta['invocation']}` — {meta['started_utc']} to {meta['finished_utc']} UTC, {meta['machine']}, "
        f"commit {meta['commit']}. {n['pass']} pass, {n['fail']} fail, {n['skip']} skipped"
        + (f"; mode: {meta['mode']}" if meta["mode"] != "full" else "") + ".",
        "",
        "Each case runs `python main.py ...` (the project's `.venv`) in a scratch folder of its own with a scratch "
        "`NEWSSTUDIO_HOME`, on inputs `rerun.py` makes (the built-in astronaut portrait, matplotlib's "
        "grace_hopper.jpg, Moonshine's beckett.wav and two_cities.wav, numpy/PIL images and WAVs). Peak RSS: the "
        f"child's maximum resident set ({meta['rss_from']}; for a command that starts encoder processes, the "
        "largest process, not the sum). Wall: the whole command, Python start-up included"
        + (f", under `nice -n {meta['nice']}`" if meta["nice"] else "") + ". Commands of a case are separated by "
        "`;`, with their exits, walls and peaks in the same order. Every check and its measured value is in "
        "`rerun.json` (`reasons`).",
        "",
        "| case | what it checks (issue 20) | command(s) | exit | wall s | peak RSS MB | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cmds = "; ".join(f"`{_md(x['command'])}`" for x in r.runs) or "-"
        exits = " ; ".join(str(x["exit"]) for x in r.runs) or "-"
        walls = " ; ".join(f"{x['wall_s']:.1f}" for x in r.runs) or "-"
        rss = " ; ".join("-" if x["peak_rss_mb"] is None else f"{x['peak_rss_mb']:.0f}" for x in r.runs) or "-"
        verdict = {"pass": "pass", "fail": "**FAIL**", "skip": "skipped"}[r.verdict]
        if r.verdict == "fail":
            verdict += ": " + _md("; ".join(x[6:] for x in r.reasons if x.startswith("FAIL: ")))
        elif r.verdict == "skip":
            verdict += ": " + _md(r.skip_reason)
        lines.append(f"| {r.name} | {_md(r.checks)} | {cmds} | {exits} | {walls} | {rss} | {verdict} |")
    fig = []
    if "no_punct_3000" in FIGURES:
        f = FIGURES["no_punct_3000"]
        fig.append(f"- 3,000 words without punctuation (must hold: peak under 2 GB): peak RSS {f['peak_rss_mb']} MB, "
                   f"{f['wall_s']:.0f} s wall, {_num(f['video_s'])} s of video.")
    if "wav_1hz" in FIGURES:
        f = FIGURES["wav_1hz"]
        fig.append(f"- The 1 Hz WAV (must hold: refused in under 5 s): refused in {f['wall_s']:.2f} s (whole command), "
                   f"peak RSS {f['peak_rss_mb']} MB.")
    if "audio_31min" in FIGURES:
        f = FIGURES["audio_31min"]
        fig.append(f"- The 31-minute recording: {f['wall_s']:.0f} s wall, peak RSS {f['peak_rss_mb']} MB, first "
                   f"progress above 0 % after {_num(f['first_progress_s'])} s, {_num(f['video_s'])} s of video (the "
                   "issue: 202 s "
                   "of analysis and 3.4 GB stuck at 0 %; session 11: 6:16 wall, 1.72 GB).")
    for stem in ("lk", "render"):
        if f"{stem}_kill9" in FIGURES:
            fig.append(f"- kill -9 of `{'live' if stem == 'lk' else 'render'}`: recovered "
                       + ", ".join(f"{k} ({_num(v)} s)" for k, v in FIGURES[f"{stem}_kill9"].items()) + ".")
    if fig:
        lines += ["", "## Figures", ""] + fig
    lines += ["", "## Last stderr line(s) of each command", ""]
    for r in results:
        for x in r.runs:
            tail = " / ".join(x["stderr_tail"][-2:]) or "(none)"
            lines.append(f"- {r.name}: `{_md(x['command'])}` → {_md(tail)}")
    notes = [(r.name, x) for r in results for x in r.reasons if not x.startswith(("ok: ", "FAIL: "))]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {name}: {_md(x)}" for name, x in notes]
    if meta.get("extra_notes"):
        lines += ["", "## Notes on this run", ""] + meta["extra_notes"]
    (out_dir / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "?"
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="leave out the long cases: " +
                   ", ".join(c.name for c in CASES if c.long))
    p.add_argument("--cases", help="only these cases (comma list; see --list)")
    p.add_argument("--skip", help="leave out these cases (comma list)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--nice", type=int, default=0, help="run each command under nice -n N (default 0)")
    p.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "newsstudio-hostile",
                   help="scratch folder for inputs and the cases' folders (default /tmp/newsstudio-hostile)")
    p.add_argument("--keep", action="store_true", help="keep the cases' scratch folders (inputs are kept anyway)")
    p.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent,
                   help="where rerun.json and README.md go (default: this script's folder)")
    p.add_argument("--report-from", type=Path, metavar="JSON",
                   help="write README.md again from a rerun.json (no case is run)")
    p.add_argument("--note", action="append", default=[], help="with --report-from: a line to add under Notes")
    args = p.parse_args(argv)
    if args.report_from:
        saved = json.loads(args.report_from.read_text(encoding="utf-8"))
        FIGURES.update(saved["figures"])
        meta = saved["meta"]
        meta["extra_notes"] = list(dict.fromkeys(meta.get("extra_notes", []) + [f"- {n}" for n in args.note]))
        write_report(args.out_dir, [CaseResult(**c) for c in saved["cases"]], meta)
        print(f"wrote {args.out_dir / 'rerun.json'} and {args.out_dir / 'README.md'} from {args.report_from}")
        return 0
    if args.list:
        for c in CASES:
            print(f"{c.name:26s} {'long ' if c.long else 'quick'} {c.checks}")
        return 0
    names = [c.name for c in CASES]
    chosen = CASES
    if args.cases:
        want = [x.strip() for x in args.cases.split(",") if x.strip()]
        bad = [x for x in want if x not in names]
        if bad:
            p.error(f"unknown case(s) {', '.join(bad)}; --list shows them")
        chosen = [c for c in CASES if c.name in want]
    if args.skip:
        drop = {x.strip() for x in args.skip.split(",")}
        chosen = [c for c in chosen if c.name not in drop]
    if args.quick:
        chosen = [c for c in chosen if not c.long]
    if MOONSHINE_ASSETS is None or not MOONSHINE_ASSETS.is_dir():
        print("rerun: the .venv's moonshine_voice assets are missing (beckett.wav, two_cities.wav)", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    inputs = Inputs(args.scratch / "inputs")
    cases_root = args.scratch / "cases"
    results: list[CaseResult] = []
    for c in chosen:
        print(f"== {c.name}", flush=True)
        ctx = Ctx(cases_root, c.name, args.nice, inputs)
        v = Verdict()
        runs: list[Run] = []
        skip_reason = ""
        try:
            runs = c.fn(ctx, v)
        except Skip as exc:
            skip_reason = str(exc)
        except Exception as exc:  # a fault of this script or its inputs: the case fails with the reason
            import traceback

            v.check(False, f"rerun.py could not run the case: {type(exc).__name__}: {exc}")
            traceback.print_exc()
        verdict = "skip" if skip_reason else ("pass" if v.passed else "fail")
        res = CaseResult(c.name, c.checks, c.long, verdict, v.failures + v.notes, [r.to_json() for r in runs],
                         skip_reason, FIGURES.get(c.name, {}))
        results.append(res)
        for r in runs:
            print(f"   {r.command}\n     exit {r.exit}, {r.wall_s:.1f} s, peak RSS {r.peak_rss_mb} MB; "
                  f"{' / '.join(r.stderr_tail[-1:])}", flush=True)
        print(f"   -> {verdict.upper()}" + (f" ({skip_reason})" if skip_reason else ""), flush=True)
        for reason in v.failures:
            print(f"      {reason}", flush=True)
        if not args.keep and verdict == "pass":
            shutil.rmtree(ctx.dir, ignore_errors=True)
            shutil.rmtree(ctx.home, ignore_errors=True)
    mode = "full" if not args.quick and not args.cases and not args.skip else (
        "quick" if args.quick and not args.cases else "selected cases")
    try:
        load = os.getloadavg()
    except OSError:
        load = (0, 0, 0)
    meta = {
        "invocation": "python results/hostile/rerun.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "mode": mode, "started_utc": started, "finished_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {load[0]:.1f}", "commit": _commit(),
        "python": PY, "nice": args.nice,
        "rss_from": "/usr/bin/time -v" if os.access(TIME, os.X_OK) else "os.wait4's rusage of the child",
        "cases_left_out": [c.name for c in CASES if c not in chosen],
    }
    if meta["cases_left_out"]:
        meta["extra_notes"] = [f"- Left out of this run: {', '.join(meta['cases_left_out'])}."]
    write_report(args.out_dir, results, meta)
    failed = [r.name for r in results if r.verdict == "fail"]
    print(f"wrote {args.out_dir / 'rerun.json'} and {args.out_dir / 'README.md'}; "
          f"{len(results) - len(failed)} of {len(results)} without a failure" + (f"; FAILED: {', '.join(failed)}"
                                                                               if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
