"""`main.py doctor`: what this machine offers, each item probed at run time (nothing assumed)."""

from __future__ import annotations

import importlib.util
import platform
import sys
from typing import Any


def _gpu() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
    if torch.cuda.is_available():
        idx = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(idx)
        props = torch.cuda.get_device_properties(idx)
        info.update(device=torch.cuda.get_device_name(idx), arch=f"sm_{major}{minor}",
                    memory_gib=round(props.total_memory / 2**30, 1))
    else:
        info.update(device="cpu", arch=None)
    info["cpu_threads"] = torch.get_num_threads()
    if torch.cuda.is_available():
        info["pipeline_device"] = "cuda: the studio, render and live run the core on the GPU"
    elif torch.version.cuda is None:
        info["pipeline_device"] = ("cpu: this torch is the CPU build (installers/setup.sh installs the CUDA build "
                                   "where an NVIDIA driver is present)")
    else:
        info["pipeline_device"] = "cpu: no CUDA GPU is visible to this CUDA build of torch (check the driver)"
    return info


def _audio_devices() -> dict[str, Any]:
    try:
        import sounddevice as sd

        devices = sd.query_devices()
    except Exception as exc:  # PortAudio missing or broken: report, never crash
        return {"error": f"PortAudio unavailable: {exc}", "inputs": [], "outputs": []}
    inputs = [d["name"] for d in devices if d["max_input_channels"] > 0]
    outputs = [d["name"] for d in devices if d["max_output_channels"] > 0]
    return {"inputs": inputs, "outputs": outputs}


def _voices() -> list[str] | dict[str, str]:
    try:
        from studio.speech import list_voices

        return [v.name for v in list_voices()]
    except Exception as exc:
        return {"error": str(exc)}


def _encoders() -> list[str] | dict[str, str]:
    try:
        from studio.encode import available_video_encoders

        return available_video_encoders()
    except Exception as exc:
        return {"error": str(exc)}


def _live_outputs() -> dict[str, Any]:
    """The encoder the live outputs use and why (NVENC: available or the reason), and the virtual camera."""
    try:
        from studio.encode.encoders import encoder_report
        from studio.encode.virtualcam import virtualcam_status

        return {"encoders": encoder_report(), "virtual_camera": virtualcam_status()[1]}
    except Exception as exc:  # doctor reports whatever fails instead of failing itself
        return {"error": str(exc)}


def _onnxruntime() -> dict[str, Any]:
    try:
        import onnxruntime as ort

        return {"version": ort.__version__, "providers": ort.get_available_providers()}
    except Exception as exc:
        return {"error": str(exc)}


def _tensorrt() -> dict[str, Any]:
    if importlib.util.find_spec("tensorrt") is None:
        return {"available": False, "reason": "the tensorrt package is not installed"}
    try:
        import tensorrt as trt

        return {"available": True, "version": trt.__version__}
    except Exception as exc:  # the PyPI stub raises when its libraries are absent
        return {"available": False, "reason": f"tensorrt does not load: {exc}"}


def _engines() -> list[dict[str, Any]] | dict[str, str]:
    try:
        from studio.generators import engine_table

        return engine_table()
    except Exception as exc:  # doctor reports whatever fails instead of failing itself
        return {"error": str(exc)}


def _engine_line(e: dict[str, Any]) -> str:
    if e["weights_present"]:
        weights = f"weights in {e['weights_dir']}" if e["weights_dir"] else "no weights needed"
    elif e["missing"] == "no public weights":
        weights = "timing twin only (no public weights)"
    else:
        weights = f"timing twin only (missing {e['missing']} in {e['weights_dir']})"
    where = "needs a GPU" if e["needs_gpu"] else "runs on the CPU"
    extra = f"; install: {e['install_hint']}" if e.get("missing_packages") else ""
    px = f"{e['native_px']} px" if e["native_px"] else "any size"
    cast = ", draws a cast" if e.get("cast") else ", one anchor"
    return (f"engine        {e['name']}: {px}, {e['audio_encoder'] or 'motion-driven'}{cast}, {weights}, "
            f"{where}{extra}")


def collect() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "gpu": _gpu(),
        "audio": _audio_devices(),
        "voices": _voices(),
        "video_encoders": _encoders(),
        "live_outputs": _live_outputs(),
        "onnxruntime": _onnxruntime(),
        "tensorrt": _tensorrt(),
        "engines": _engines(),
    }


def format_report(r: dict[str, Any]) -> str:
    g, a = r["gpu"], r["audio"]
    gpu = f"{g['device']} ({g['arch']}, {g['memory_gib']} GiB)" if g.get("arch") else "cpu (no CUDA GPU found)"
    lines = [
        f"Python        {r['python']} on {r['platform']}",
        f"torch         {g['torch']} (CUDA build: {g['cuda_build'] or 'none'}), {g['cpu_threads']} CPU threads",
        f"GPU           {gpu}",
        f"pipeline      {g.get('pipeline_device', '')}",
        f"microphones   {', '.join(a['inputs']) or 'none found' + (' (' + a['error'] + ')' if a.get('error') else '')}",
        f"audio outputs {', '.join(a['outputs']) or 'none found'}",
        f"voices        {', '.join(r['voices']) if isinstance(r['voices'], list) else r['voices']['error']}",
        f"encoders      {', '.join(r['video_encoders']) if isinstance(r['video_encoders'], list) else r['video_encoders']['error']}",
    ]
    live = r.get("live_outputs", {})
    lines += [f"live encode   {line}" for line in live.get("encoders", [])] or [f"live encode   {live.get('error')}"]
    if "virtual_camera" in live:
        lines.append(f"virtual cam   {live['virtual_camera']}")
    ort = r["onnxruntime"]
    lines.append(f"onnxruntime   {ort.get('version', '')} providers: {', '.join(ort.get('providers', [])) or ort.get('error')}")
    trt = r["tensorrt"]
    lines.append(f"TensorRT      {'version ' + trt['version'] if trt['available'] else 'not available: ' + trt['reason']}")
    eng = r.get("engines", [])
    lines += [_engine_line(e) for e in eng] if isinstance(eng, list) else [f"engines       {eng['error']}"]
    return "\n".join(lines)
