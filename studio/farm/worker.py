"""What runs inside a Ray worker process: anchor packs cached per process, the engine kept warm, one segment a task.

A worker process lives across tasks, so what is loaded once stays loaded: torch and its thread count, the speech
engines (``studio.speech.registry`` keeps them per process) and the anchor packs. A pack is built once per farm run
(``build_pack``, a task whose result sits in Ray's object store) and fetched by each worker the first time it needs it:
its reference travels inside a list so that Ray does not fetch it again for every task. A segment of a rundown with a
cast gets the list of its members' packs (cast order) and renders as ``render --rundown`` does
(``studio.pipeline.programme.render_segments``): the anchors rows of one warp, the speaker's row speaking.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

from studio.errors import StudioError

log = logging.getLogger(__name__)

_PACKS: OrderedDict[str, object] = OrderedDict()  # object id -> AnchorPack, per worker process, newest last
_MAX_PACKS = 8  # a worker of a long-lived cluster serves many runs: keep the packs of the last few (two casts of four)
_STATE: dict[str, object] = {"threads": None, "tasks": 0}


def build_pack(anchor_path: str | None, output_px: int | None = None, member: str | None = None):
    """The anchor pack of a portrait at the presenter's size ``output_px``, as ``render`` builds it (a Ray task: the
    result goes to the object store once); ``member``: the cast member it is, as ``render --rundown`` builds it (its
    errors name the member). A pack just built and the same pack loaded from the anchor cache render the same frames,
    so machines with a warm or an empty cache make identical segments."""
    from studio.pipeline.cast import Member
    from studio.pipeline.programme import member_pack

    path = Path(anchor_path) if anchor_path else None
    if member is None:
        return member_pack(None, output_px, path)
    return member_pack(Member(name=member, portrait=path), output_px)


def _warm(threads: int) -> None:
    if _STATE["threads"] != threads:
        import torch

        torch.set_num_threads(threads)
        _STATE["threads"] = threads


def _packs(box: list) -> tuple:
    """The packs whose object references ``box`` holds (one, or a cast's in cast order): each fetched from the object
    store the first time only (an object id is unique to one run's pack, so a cluster that outlives runs never serves
    a stale one)."""
    out = []
    for ref in box:
        key = ref.hex()
        pack = _PACKS.get(key)
        if pack is None:
            import ray

            pack = ray.get(ref)
            _PACKS[key] = pack
        _PACKS.move_to_end(key)
        out.append(pack)
    while len(_PACKS) > max(_MAX_PACKS, len(box)):
        _PACKS.popitem(last=False)
    return tuple(out)


def node_label() -> str:
    """This worker's node: host name and the first characters of Ray's node id."""
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()[:8]
    except Exception:  # outside Ray (tests call the function directly)
        node_id = "local"
    return f"{socket.gethostname()}/{node_id}"


def worker_device(device: str) -> str:
    """``auto`` becomes this worker's own device: the GPU Ray gave it, else the CPU."""
    if device != "auto":
        return device
    try:
        import ray

        return "cuda" if ray.get_gpu_ids() else "cpu"
    except Exception:
        return "cpu"


def render_job(job, core, encode, out_dir: str, fingerprint: str, box: list, threads: int, style=None) -> dict:
    """Render one segment to its own file, verify it, commit it once; returns its report line.

    ``style``: the command line's look (a ``CanvasStyle`` or None), under the rundown's and the segment's graphics
    as ``render --rundown`` puts them. Never raises for a segment that cannot be made: the reason comes back in ``error`` so that the driver keeps
    going with the others. A killed process is what Ray reports to the driver instead (and the driver retries)."""
    from studio.farm import store
    from studio.pipeline.programme import render_segments
    from studio.pipeline.render import RenderRequest, render_segment

    t0 = time.perf_counter()
    node = node_label()
    pid = os.getpid()
    line = {"segment": job.name, "index": job.index, "title": job.title, "node": node, "pid": pid,
            "warm_tasks": _STATE["tasks"]}
    out = Path(out_dir)
    attempt = store.attempt_path(out, job.bulletin, job.index, node, pid)
    try:
        _warm(threads)
        settings = job.settings(replace(core, device=worker_device(core.device)))
        line["device"] = settings.device
        packs = _packs(box)
        store.segment_dir(out, job.bulletin).mkdir(parents=True, exist_ok=True)
        if job.cast:  # the programme of render --rundown, this segment alone
            req = RenderRequest(out_path=attempt, core=settings, encode=encode, canvas_style=style)
            gen = render_segments(req, [job.segment], job.cast, packs, job.programme_graphics, job.layout)
        else:
            req = RenderRequest(out_path=attempt, text=job.text, voice=job.voice, title=job.title, core=settings,
                                encode=encode, canvas_style=job.canvas_style(style))
            gen = render_segment(req, anchor=packs[0])
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            result = stop.value
        n = store.verify(attempt, result.n_frames)
        seconds = time.perf_counter() - t0
        record = store.SegmentRecord(fingerprint=fingerprint, n_frames=n, fps=settings.fps, node=node,
                                     device=settings.device, seconds=round(seconds, 3),
                                     stage_s={k: round(v, 3) for k, v in result.stage_s.items()})
        line["committed"] = store.commit(attempt, out, job.bulletin, job.index, record)
        line.update(n_frames=n, seconds=round(seconds, 3), stage_s=record.stage_s)
    except StudioError as exc:
        attempt.unlink(missing_ok=True)
        line["error"] = str(exc)
        line["error_kind"] = type(exc).__name__
    except Exception as exc:  # anything unforeseen in one segment: named in the report, the others go on
        log.exception("segment %s failed", job.name)
        attempt.unlink(missing_ok=True)
        line["error"] = f"unexpected failure ({type(exc).__name__}: {exc})"
        line["error_kind"] = type(exc).__name__
    _STATE["tasks"] = int(_STATE["tasks"]) + 1
    return line


def stitch_bulletin(out_dir: str, bulletin: str, indices: list[int], frames: list[int]) -> dict:
    """Join a bulletin's committed segments (a Ray task: bulletins are stitched in parallel, off the driver)."""
    from studio.farm import store
    from studio.farm.stitch import stitch

    out = Path(out_dir)
    try:
        fps = store.load_fps(out, bulletin, indices[0])
        rep = stitch([store.final_path(out, bulletin, i) for i in indices], frames, fps, out / f"{bulletin}.mp4")
    except StudioError as exc:
        return {"error": str(exc), "error_kind": type(exc).__name__}
    except OSError as exc:
        return {"error": f"cannot read the segments of {bulletin} ({exc.strerror}): check {out}",
                "error_kind": "OutputPathError"}
    return {"seconds": round(rep.seconds, 3), "remuxed": rep.remuxed, "n_frames": rep.n_frames,
            "duration_s": round(rep.duration_s, 3), "node": node_label()}
