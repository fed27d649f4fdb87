"""Measurements of the live outputs on this machine (the long runs the tests keep short), results as JSON.

    python -m studio.encode.check stream --kind rtmp|tcp|udp [--seconds 60] [--height 720] [--json FILE]
        real time into Debian's ffmpeg as the receiver: frames sent, dropped, received; A/V offset of what it got
    python -m studio.encode.check browser [--seconds 30] [--height 720] [--delivery push|segments|both] [--json FILE]
        the WebCodecs page in headless Chromium: decoded fps, glass-to-glass latency, A/V offset; "both" also
        measures HLS-like file segments over HTTP and reports the difference
    python -m studio.encode.check nv12 [--device cuda] [--heights 720 1080] [--json FILE]
        RGB -> NV12 / I420 on the GPU against the CPU (swscale through PyAV, and torch on the CPU)

The program is the sync test of ``studio.encode.synthetic`` (a white frame and a beep every second), fed in real time
as the live core feeds its outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from studio.contracts import ProgramFormat

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--autoplay-policy=no-user-gesture-required", "--remote-debugging-port=0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """True when a TCP socket listens on ``port`` (read from /proc: connecting would use up ``-listen 1``)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def receiver_command(kind: str, port: int, out: Path) -> list[str]:
    """Debian's ffmpeg as a receiver that copies what it gets into ``out`` (it exits when the sender closes)."""
    if kind == "rtmp":
        src = ["-listen", "1", "-i", f"rtmp://127.0.0.1:{port}/live/test"]
        fmt = "flv"
    elif kind == "tcp":
        src = ["-i", f"tcp://127.0.0.1:{port}?listen=1"]
        fmt = "mpegts"
    elif kind == "udp":
        # timeout: UDP has no end of stream; the receiver stops 3 s after the last datagram
        src = ["-i", f"udp://127.0.0.1:{port}?fifo_size=100000&overrun_nonfatal=1&timeout=3000000"]
        fmt = "mpegts"
    else:
        raise ValueError(f"unknown receiver kind {kind!r}")
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *src, "-c", "copy", "-f", fmt, str(out)]


def chromium_command(url: str, profile: str, sound: bool = True) -> list[str]:
    """Headless Chromium on ``url``; ``sound=False``: the page may not start its audio (no click), so it draws
    each picture as soon as it is decoded instead of waiting for its sound."""
    flags = [f for f in CHROMIUM_FLAGS if sound or not f.startswith("--autoplay-policy")]
    return ["chromium", *flags, f"--user-data-dir={profile}", url]


def _format(height: int) -> ProgramFormat:
    return ProgramFormat(height * 16 // 9 + (height * 16 // 9) % 2, height, 25.0)


def _machine() -> dict:
    return {"machine": platform.node(), "cpus": os.cpu_count(), "load_avg_1min_at_end": os.getloadavg()[0]}


# -- stream ------------------------------------------------------------------------------------------------------------

def check_stream(kind: str, seconds: float, height: int) -> dict:
    from studio.encode.streams import StreamOutput
    from studio.encode.synthetic import SyncSource, decode_media, measure_sync

    fmt = _format(height)
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="newsstudio-check-"))
    out_file = work / f"got.{kind}"
    rx = subprocess.Popen(receiver_command(kind, port, out_file), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while kind != "udp" and not listening(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    url = f"rtmp://127.0.0.1:{port}/live/test" if kind == "rtmp" else f"{kind}://127.0.0.1:{port}"
    src = SyncSource(fmt)
    out = StreamOutput(url)
    out.open(fmt)
    write_ms: list[float] = []

    def write(batch) -> None:
        t = time.perf_counter()
        out.write(batch)
        write_ms.append((time.perf_counter() - t) * 1e3)

    t0 = time.monotonic()
    sent = src.play(write, seconds, batch_frames=1, realtime=True)
    wall = time.monotonic() - t0
    time.sleep(1.0)
    stats = out.stats()
    hub = out.hub.stats()
    out.close()
    try:
        rx.wait(30)
    except subprocess.TimeoutExpired:
        rx.kill()
        rx.wait()
    got = decode_media(out_file)
    sync = measure_sync(got, src, seconds)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "kind": kind, "url": url.replace(str(port), "PORT"), "size": f"{fmt.width}x{fmt.height}", "fps": fmt.fps,
        "seconds": seconds, "wall_s": round(wall, 2), "frames_sent_by_core": sent,
        "frames_encoded": hub["frames"], "dropped_by_encoder": hub["dropped"], "repeated": hub["repeated"],
        "dropped_by_sink": stats.dropped - hub["dropped"], "frames_sent": stats.frames,
        "frames_received": len(got.levels), "audio_received_s": round(len(got.audio) / max(1, got.audio_rate_hz), 3),
        "encoder": hub["encoder"], "encode_ms_median": round(hub["encode_ms_median"], 2),
        "write_ms_max": round(max(write_ms), 3), "write_ms_median": round(statistics.median(write_ms), 3),
        "bitrate_kbps": round(stats.bitrate_kbps),
        "av_offset_ms_xcorr": round(sync.offset_xcorr_ms, 2), "av_offset_ms_onsets": round(sync.offset_onsets_ms, 2),
        "flashes": sync.flashes, "beeps": sync.beeps, "within_bounds": sync.within(), **_machine(),
    }


# -- browser -----------------------------------------------------------------------------------------------------------

def check_browser(seconds: float, height: int, delivery: str, segment_s: float, warmup_s: float = 5.0,
                  sound: bool = True) -> dict:
    from studio.encode.encoders import StreamEncodeSettings
    from studio.encode.synthetic import SyncSource
    from studio.encode.websocket import WebSocketOutput, WebSocketSettings

    fmt = _format(height)
    seg = segment_s if delivery == "segments" else 0.0
    # file segments start at keyframes: one keyframe per segment, as HLS packagers cut them
    enc = StreamEncodeSettings(keyframe_interval_s=seg if seg else 2.0)
    out = WebSocketOutput(WebSocketSettings(port=0, segment_s=seg), encode=enc)
    out.open(fmt)
    src = SyncSource(fmt)
    stop = threading.Event()
    feeder = threading.Thread(target=src.play, args=(out.write, seconds + warmup_s + 60),
                              kwargs={"batch_frames": 1, "stop": stop}, daemon=True)
    feeder.start()
    profile = tempfile.mkdtemp(prefix="newsstudio-chromium-")
    query = "?measure=1" + ("&delivery=segments" if delivery == "segments" else "")
    browser = subprocess.Popen(chromium_command(out.page_url + query, profile, sound), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(r.get("decoded", 0) > 0 for r in out.server.reports()):
            if time.monotonic() > deadline:
                raise RuntimeError("the page decoded nothing within 60 s")
            time.sleep(0.2)
        time.sleep(warmup_s)
        n0 = len(out.server.reports())
        time.sleep(seconds)
        reports = out.server.reports()[n0:]
        hub = out.hub.stats()
    finally:
        browser.kill()
        browser.wait()
        stop.set()
        feeder.join(30)
        out.close()
        shutil.rmtree(profile, ignore_errors=True)
    lat = [r["latency_ms"] for r in reports if r.get("latency_ms") is not None]
    last = reports[-1]
    return {
        "delivery": delivery, "segment_s": seg or None, "sound": sound, "size": f"{fmt.width}x{fmt.height}", "fps": fmt.fps,
        "seconds_measured": seconds, "reports": len(reports),
        "glass_to_glass_ms_median": round(statistics.median(lat), 1) if lat else None,
        "glass_to_glass_ms_p95_last_100_frames": last.get("latency_p95_ms"),
        "glass_to_glass_ms_each_second": [round(x) for x in lat],
        "decoded_fps_median": statistics.median(r["fps"] for r in reports),
        "decoded_latency_ms_last": last.get("decoded_latency_ms"),
        "audio_arrival_ms_last": last.get("audio_arrival_ms"),
        "audio_scheduled_ahead_ms_last": last.get("audio_scheduled_ahead_ms"),
        "av_offset_playout_ms_median": statistics.median(r["av_offset_ms"] for r in reports
                                                         if r.get("av_offset_ms") is not None)
        if any(r.get("av_offset_ms") is not None for r in reports) else None,
        "stream_av_offset_ms": last.get("stream_av_offset_ms"), "flashes": last.get("flashes"),
        "audio": last.get("audio"), "audio_resets": last.get("audio_resets"), "audio_trims": last.get("audio_trims"),
        "page_errors": last.get("errors"),
        "page_dropped": last.get("dropped"), "encoder": hub["encoder"], "encode_ms_median":
            round(hub["encode_ms_median"], 2), "hub_dropped": hub["dropped"], **_machine(),
    }


# -- nv12 --------------------------------------------------------------------------------------------------------------

def check_nv12(device: str, heights: list[int], repeats: int = 50) -> dict:
    import numpy as np
    import torch

    from studio.encode.colour import rgb_to_i420, rgb_to_nv12

    results = []
    for h in heights:
        w = h * 16 // 9 + (h * 16 // 9) % 2
        gen = torch.Generator().manual_seed(0)
        rgb = torch.rand(1, 3, h, w, generator=gen) * 255  # 1 x 3 x H x W float 0..255
        row: dict = {"size": f"{w}x{h}"}
        if device.startswith("cuda"):
            x = rgb.to(device)
            for name, fn in (("gpu_nv12_ms", rgb_to_nv12), ("gpu_i420_ms", rgb_to_i420)):
                for _ in range(10):
                    fn(x)
                torch.cuda.synchronize()
                times = []
                for _ in range(repeats):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn(x)
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1))
                row[name] = round(statistics.median(times), 4)
            # what crosses PCIe: NV12 (1.5 bytes per pixel) against RGB (3), into pinned host memory
            for name, t in (("copy_nv12_to_host_ms", rgb_to_nv12(x)),
                            ("copy_rgb_to_host_ms", x.clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1))):
                host = torch.empty(t.shape, dtype=torch.uint8, pin_memory=True)
                times = []
                for _ in range(repeats):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    host.copy_(t, non_blocking=True)
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1))
                row[name] = round(statistics.median(times), 4)
        cpu_rgb = rgb
        times = []
        for _ in range(max(5, repeats // 5)):
            t0 = time.perf_counter()
            rgb_to_nv12(cpu_rgb)
            times.append((time.perf_counter() - t0) * 1e3)
        row["cpu_torch_nv12_ms"] = round(statistics.median(times), 3)
        try:
            import av
        except ImportError:
            row["cpu_swscale_ms"] = "PyAV is not installed here"
        else:
            arr = np.ascontiguousarray(rgb[0].permute(1, 2, 0).to(torch.uint8).numpy())
            for fmt_name in ("nv12", "yuv420p"):
                times = []
                for _ in range(max(5, repeats // 5)):
                    t0 = time.perf_counter()
                    av.VideoFrame.from_ndarray(arr, format="rgb24").reformat(format=fmt_name, dst_colorspace="ITU709")
                    times.append((time.perf_counter() - t0) * 1e3)
                row[f"cpu_swscale_{fmt_name}_ms"] = round(statistics.median(times), 3)
        results.append(row)
    info = {"device": device, "torch": torch.__version__, "threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(device)
    return {**info, "results": results, **_machine()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studio.encode.check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("stream")
    s.add_argument("--kind", choices=("rtmp", "tcp", "udp"), default="rtmp")
    s.add_argument("--seconds", type=float, default=60.0)
    s.add_argument("--height", type=int, default=720)
    b = sub.add_parser("browser")
    b.add_argument("--seconds", type=float, default=30.0)
    b.add_argument("--height", type=int, default=720)
    b.add_argument("--delivery", choices=("push", "segments", "both"), default="both")
    b.add_argument("--segment-s", type=float, default=1.0)
    b.add_argument("--no-sound", action="store_true", help="the page draws pictures as decoded (no audio clock)")
    n = sub.add_parser("nv12")
    n.add_argument("--device", default="cuda")
    n.add_argument("--heights", type=int, nargs="+", default=[720, 1080])
    for p in (s, b, n):
        p.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.what == "stream":
        result = check_stream(args.kind, args.seconds, args.height)
    elif args.what == "browser":
        runs = ["push", "segments"] if args.delivery == "both" else [args.delivery]
        result = {d: check_browser(args.seconds, args.height, d, args.segment_s, sound=not args.no_sound)
                  for d in runs}
        if len(runs) == 2 and result["push"]["glass_to_glass_ms_median"] and \
                result["segments"]["glass_to_glass_ms_median"]:
            result["segments_minus_push_ms"] = round(result["segments"]["glass_to_glass_ms_median"]
                                                     - result["push"]["glass_to_glass_ms_median"], 1)
    else:
        result = check_nv12(args.device, args.heights)
    result = {"command": "python -m studio.encode.check " + " ".join(argv if argv is not None else sys.argv[1:]),
              **result}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
