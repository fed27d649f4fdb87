"""A long day on air, measured: the studio window (offscreen) runs the default rundown in a loop while recording, then
the microphone, with faults injected on the way; memory, step time, A/V offset, GUI stalls and drops are sampled
every ``--every`` seconds into JSON and a PNG plot.

    python -m studio.ui.soak --minutes 60 --out benchmarks/cpu

Faults (each logged with what the studio said): the sound server killed and restarted (microphone phase); the
recording disk filled (a small tmpfs as the recording folder, root only; skipped otherwise); an exception injected
once into the generator; the live output's receiver killed and restarted. Not part of the test suite: a tool.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Faulty:
    """A built-in generator that raises once when ``armed`` is set (the injected stage failure)."""

    armed = threading.Event()
    fired = 0


def _register_faulty() -> None:
    from studio.generators.builtin import BuiltinGenerator
    from studio.contracts import GENERATORS

    class FaultyGenerator(BuiltinGenerator):
        def generate(self, coeffs, features=None, **rows):
            if _Faulty.armed.is_set():
                _Faulty.armed.clear()
                _Faulty.fired += 1
                raise RuntimeError("injected fault in the generator (soak test)")
            return super().generate(coeffs, features, **rows)

        def render_span(self, coeffs, strides, carry, **rows):
            if _Faulty.armed.is_set():
                _Faulty.armed.clear()
                _Faulty.fired += 1
                raise RuntimeError("injected fault in the generator (soak test)")
            return super().render_span(coeffs, strides, carry, **rows)

    GENERATORS.register("builtin-soak")(lambda **kw: FaultyGenerator(**kw))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m studio.ui.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="total length (default 60)")
    p.add_argument("--mic-share", type=float, default=0.25, help="share of the run in microphone mode (default 0.25)")
    p.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--out", type=Path, default=Path("benchmarks/cpu"))
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--small-disk-mb", type=int, default=40, help="size of the tmpfs the recording moves to (default 40)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="soak-home-"))
    os.environ["NEWSSTUDIO_HOME"] = str(home)
    pulse = Path(tempfile.mkdtemp(prefix="soak-pulse-"))
    pulse.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(pulse)
    repo = Path(__file__).resolve().parents[2]
    sink = repo / "installers" / "pulse-null-sink.sh"
    subprocess.run(["bash", str(sink)], check=True, capture_output=True, timeout=30)

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from studio.audio.capture import rescan_devices
    from studio.pipeline import commands as cmd
    from studio.pipeline import heap
    from studio.pipeline.settings import CoreSettings
    from studio.runtime import AudioOutputMode, StudioSettings
    from studio.ui.main_window import MainWindow
    from studio.ui.theme import apply_theme

    rescan_devices()
    _register_faulty()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app)
    from studio.pipeline.factory import default_optimizations

    core = CoreSettings(size_px=a.size, fps=25.0, device="cpu", engine="builtin-soak", chunk_frames=4, batch_frames=4,
                        measure_baseline=True, optimizations=default_optimizations("cpu", "builtin"))
    st = StudioSettings(core=core, audio_output=AudioOutputMode.NONE)
    w = MainWindow(runtime_settings=st, settings=QSettings(str(home / "studio.ini"), QSettings.IniFormat))
    w.resize(1920, 1080)
    w.show()
    events: list[tuple[float, str]] = []
    t_start = time.monotonic()
    w.bridge.event.connect(lambda e: events.append((time.monotonic() - t_start, repr(e)[:300])))
    gc_times = _GcTimes(t_start)
    stalls = _StallWatch(w.stall, t_start, gc_times)

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.004)

    pump(5)
    while w.runtime.latest_frame() is None and time.monotonic() - t_start < 180:
        pump(0.5)
    rec_dir = home / "recordings"
    rec_dir.mkdir()
    small = home / "small-disk"
    small.mkdir()
    tmpfs = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={a.small_disk_mb}M", "tmpfs", str(small)],
                                                   capture_output=True).returncode == 0
    w.record_panel.folder_edit.setText(str(rec_dir))
    w.toggle_recording()
    speech = _speech_wav(home)
    receiver = _Receiver(19777)
    w.bridge.send(cmd.StartOutput("tcp://127.0.0.1:19777"))

    total_s = a.minutes * 60.0
    mic_at = total_s * (1.0 - a.mic_share)
    faults = {"stage": 0.2 * total_s, "receiver": 0.35 * total_s, "disk": 0.5 * total_s,
              "pulse": mic_at + 0.4 * (total_s - mic_at)}
    done: set[str] = set()
    samples = []
    w.stall.reset()
    next_sample = time.monotonic() + a.every
    last_live = None
    player = None
    mode = "script"
    while time.monotonic() - t_start < total_s:
        pump(0.2)
        el = time.monotonic() - t_start
        if mode == "script" and w.state.label in ("idle",) and (last_live is None or el - last_live > 5):
            w.rundown.toggle_live()  # the rundown again, and again
            last_live = el
        if mode == "script" and el >= mic_at:
            mode = "microphone"
            w.set_mode(cmd.PreviewMode.MICROPHONE)
        if mode == "microphone" and (player is None or player.poll() is not None):
            player = subprocess.Popen(["paplay", "--device=studio", str(speech)], env=dict(os.environ))
        if "disk" in done and "disk_back" not in done and any("RecordingFailed" in e[1] for e in events):
            done.add("disk_back")  # as the producer would: the recording goes on in a folder with room
            pump(1)
            w.record_panel.folder_edit.setText(str(rec_dir))
            if w.recording_path is None:
                w.toggle_recording()
            events.append((el, "recording moved back to a folder with room"))
        for name, at in faults.items():
            if name in done or el < at:
                continue
            done.add(name)
            if name == "stage":
                _Faulty.armed.set()
            elif name == "receiver":
                threading.Thread(target=receiver.bounce, args=(8.0,), daemon=True).start()
            elif name == "disk" and tmpfs:
                w.toggle_recording()
                pump(2)
                w.record_panel.folder_edit.setText(str(small))
                w.toggle_recording()
            elif name == "pulse":
                threading.Thread(target=_bounce_pulse, args=(sink, 6.0), daemon=True).start()
            events.append((el, f"FAULT injected: {name}"))
        if time.monotonic() >= next_sample:
            next_sample += a.every
            t = w.runtime.telemetry()
            trims = [ms for at, ms in list(heap.recent) if at >= t_start + el - a.every]
            gc_ms = gc_times.take()
            s = w.runtime.bus.latest("core")
            gen = s.stages.get("generate") if s is not None else None
            samples.append({"t_s": el, "mode": mode, "rss_mb": _rss_mb(), "fps_shown": t.fps_shown,
                            "frames_dropped": t.frames_dropped, "frames_late": t.frames_late,
                            "generate_ms_median": gen.median_ms if gen else math.nan,
                            "av_offset_ms": t.av_offset_ms, "gui_stall_ms": w.stall.recent_stall_ms,
                            "latency_ms": t.latency_ms_median, "recording_s": t.recording_s,
                            "gc_ms_max": gc_ms, "trim_ms_max": max(trims, default=math.nan),
                            "outputs": [(u, st.state.value, st.dropped) for u, st in w.runtime.output_stats()]})
            print(json.dumps(samples[-1]), flush=True)
    if w.recording_path is not None:
        w.toggle_recording()
        pump(10)
    w.close()
    stalls.stop()
    gc_times.stop()
    receiver.kill()
    recordings = [_probe(x) for x in sorted(list(rec_dir.glob("*.mp4")) + list(small.glob("*.mp4")))]
    leftovers = sorted(str(x) for x in list(rec_dir.iterdir()) + list(small.iterdir()) if x.suffix != ".mp4")
    df_small = shutil.disk_usage(small) if tmpfs else None
    if tmpfs:
        subprocess.run(["umount", str(small)], capture_output=True)
    result = {"minutes": a.minutes, "samples": samples, "events": events, "recordings": recordings,
              "other_files": leftovers, "small_disk": {"tmpfs": tmpfs, "used_bytes": df_small.used if df_small else None,
                                                      "total_bytes": df_small.total if df_small else None},
              "stall_stacks": stalls.found, "slow_collections": gc_times.slow, "faults_fired": {"stage": _Faulty.fired},
              "summary": _summary(samples)}
    (a.out / "soak.json").write_text(json.dumps(result, indent=1, default=str))
    _plot(samples, a.out / "soak.png")
    print(json.dumps(result["summary"], indent=1))
    subprocess.run(["pulseaudio", "--kill"], capture_output=True)  # the soak's own sound server, not left running
    shutil.rmtree(pulse, ignore_errors=True)
    return 0


def _summary(samples: list[dict]) -> dict:
    import numpy as np

    if not samples:
        return {}
    rss = [s["rss_mb"] for s in samples]
    first = [s for s in samples if s["t_s"] < samples[0]["t_s"] + 300]
    av = [s["av_offset_ms"] for s in samples if s["mode"] == "script" and math.isfinite(s["av_offset_ms"])]
    gen = [s["generate_ms_median"] for s in samples if math.isfinite(s["generate_ms_median"])]
    phases = {}
    for mode in ("script", "microphone"):  # the microphone loads its own models: growth is measured per phase too
        ph = [s for s in samples if s["mode"] == mode]
        if len(ph) >= 2:
            early = [s["rss_mb"] for s in ph if s["t_s"] < ph[0]["t_s"] + min(300.0, (ph[-1]["t_s"] - ph[0]["t_s"]) / 3)]
            phases[mode] = {"minutes": (ph[-1]["t_s"] - ph[0]["t_s"]) / 60, "rss_early_median_mb": float(np.median(early)),
                            "rss_last_mb": ph[-1]["rss_mb"], "rss_growth_mb": ph[-1]["rss_mb"] - float(np.median(early)),
                            "gui_stall_ms_max": max(s["gui_stall_ms"] for s in ph),
                            "frames_dropped": ph[-1]["frames_dropped"] - ph[0]["frames_dropped"]}
    return {"phases": phases, "rss_first_5min_median_mb": float(np.median([s["rss_mb"] for s in first])),
            "rss_last_mb": rss[-1], "rss_growth_mb": rss[-1] - float(np.median([s["rss_mb"] for s in first])),
            "av_offset_ms_min": min(av) if av else None, "av_offset_ms_max": max(av) if av else None,
            "gui_stall_ms_max": max(s["gui_stall_ms"] for s in samples),
            "gc_ms_max": max(s["gc_ms_max"] for s in samples),
            "trim_ms_max": float(np.nanmax([s["trim_ms_max"] for s in samples] + [math.nan, 0.0])),
            "generate_ms_first": gen[0] if gen else None, "generate_ms_last": gen[-1] if gen else None,
            "frames_dropped_end": samples[-1]["frames_dropped"]}


def _plot(samples: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t_s"] / 60 for s in samples]
    fig, axes = plt.subplots(5, 1, figsize=(9, 10), sharex=True)
    for ax, key, label in zip(axes, ("rss_mb", "generate_ms_median", "av_offset_ms", "gui_stall_ms", "fps_shown"),
                              ("memory (RSS, MB)", "generate ms per chunk (median)", "A/V offset at the screen (ms)",
                               "GUI stall, worst in the last 5 s (ms)", "fps shown")):
        ax.plot(t, [s[key] for s in samples], lw=1)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[2].axhline(45, color="#c33", ls="--", lw=0.8)
    axes[2].axhline(-125, color="#c33", ls="--", lw=0.8)
    axes[3].axhline(100, color="#c33", ls="--", lw=0.8)
    axes[-1].set_xlabel("minutes on air (script, then microphone)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _speech_wav(home: Path) -> Path:
    """Speech for the microphone phase: the human clip beckett.wav where installed, else text-to-speech."""
    import importlib.util

    spec = importlib.util.find_spec("moonshine_voice")
    if spec and spec.submodule_search_locations:
        p = Path(list(spec.submodule_search_locations)[0]) / "assets" / "beckett.wav"
        if p.is_file():
            return p
    import numpy as np
    from scipy.io import wavfile

    from studio.speech import synthesize

    utt = synthesize("Good evening. This is the microphone test of the long day on air.")
    out = home / "speech.wav"
    wavfile.write(out, utt.sample_rate_hz, (np.clip(utt.audio, -1, 1) * 32767).astype(np.int16))
    return out


def _probe(path: Path) -> dict:
    """A recording as ffprobe reads it: playable, its length, its streams."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_type,sample_rate",
                          "-of", "json", str(path)], capture_output=True, text=True)
    info = json.loads(out.stdout or "{}") if out.returncode == 0 else {}
    return {"path": str(path), "bytes": path.stat().st_size, "playable": out.returncode == 0 and "format" in info,
            "duration_s": float(info.get("format", {}).get("duration", "nan")),
            "streams": [st.get("codec_type") for st in info.get("streams", [])], "error": out.stderr[-300:]}


def _bounce_pulse(sink: Path, down_s: float) -> None:
    """The sound server killed, then started again ``down_s`` later (as a crash and a restart would)."""
    subprocess.run(["pulseaudio", "--kill"], capture_output=True)
    time.sleep(down_s)
    subprocess.run(["bash", str(sink)], capture_output=True, timeout=30)


class _GcTimes:
    """Python's garbage collections timed (gc.callbacks; a collection holds the interpreter, so the GUI thread
    waits): the worst per sample, every one over 20 ms with its generation, and the one running now."""

    def __init__(self, t0: float, slow_ms: float = 20.0) -> None:
        import gc

        self._gc, self._t0, self._slow_ms = gc, t0, slow_ms
        self.running: int | None = None
        self.slow: list[dict] = []
        self._worst = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.running, self._start = info["generation"], time.perf_counter()
            return
        ms = (time.perf_counter() - self._start) * 1e3
        self.running = None
        self._worst = max(self._worst, ms)
        if ms >= self._slow_ms:
            self.slow.append({"t_s": time.monotonic() - self._t0, "generation": info["generation"], "ms": ms,
                              "collected": info["collected"]})

    def take(self) -> float:
        """The longest collection since the last call (ms)."""
        worst, self._worst = self._worst, 0.0
        return worst

    def stop(self) -> None:
        if self._callback in self._gc.callbacks:
            self._gc.callbacks.remove(self._callback)


class _StallWatch:
    """Where the GUI thread was when its timer stalled: a watcher thread reads the GUI thread's stack once a stall
    passes 100 ms (sys._current_frames), so that a stall in the plot has a cause beside it, with what the garbage
    collector and the heap trim were doing at that moment."""

    def __init__(self, meter, t0: float, gc_times: _GcTimes, limit_ms: float = 100.0) -> None:
        import traceback

        from studio.pipeline import heap

        self.found: list[dict] = []
        self._meter, self._t0, self._limit = meter, t0, limit_ms / 1000.0
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._tb = traceback

        def watch() -> None:
            seen = None
            while not self._stop.wait(0.01):
                last = self._meter._last_s
                if last is None or last == seen or time.monotonic() - last < self._limit:
                    continue
                seen = last
                frames = sys._current_frames()
                frame = frames.get(self._main)
                stack = self._tb.format_stack(frame)[-8:] if frame is not None else []
                names = {t.ident: t.name for t in threading.enumerate()}
                others = {names.get(i, str(i)): [x.strip() for x in self._tb.format_stack(f)[-3:]]
                          for i, f in frames.items() if i not in (self._main, threading.get_ident())}
                self.found.append({"t_s": time.monotonic() - self._t0, "stack": [x.strip() for x in stack],
                                   "other_threads": others, "gc_generation_running": gc_times.running,
                                   "heap_trim_running": heap.trimming})

        threading.Thread(target=watch, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


class _Receiver:
    """An ffmpeg MPEG-TS listener that can be killed and started again (the output's receiver going away)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        if shutil.which("ffmpeg") is None:
            return
        self.proc = subprocess.Popen(["ffmpeg", "-loglevel", "error", "-y", "-i", f"tcp://127.0.0.1:{self.port}?listen",
                                      "-f", "null", "-"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def bounce(self, down_s: float) -> None:
        """Killed, then listening again ``down_s`` later."""
        self.kill()
        time.sleep(down_s)
        self.start()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None


if __name__ == "__main__":
    sys.exit(main())
