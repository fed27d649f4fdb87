"""``run_farm``: rundowns -> bulletins on Ray, as a generator worker (yields ``FarmProgress``, returns ``FarmResult``).

The driver plans the jobs, skips the segments a previous run finished (verified on disk), has each portrait's anchor
pack built once into the object store, submits one task per segment, and stitches each bulletin as soon as its last
segment is in. A task whose worker process or node died is submitted again (``FarmSettings.max_retries``); a segment
that cannot be made is named in its bulletin's report and the others are made. Ray's own retries are off so that the
report can count the retries.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path

from studio.errors import InputError, OutputPathError, StudioError
from studio.farm import store
from studio.farm.plan import FarmPlan, SegmentJob, job_fingerprint, plan_rundowns
from studio.farm.settings import FarmSettings

log = logging.getLogger(__name__)

MIN_FREE_MB = 200  # below this the output disk is called full before any work starts


@dataclass(frozen=True)
class FarmProgress:
    done: int  # segments finished (made now or found finished)
    total: int  # segments that can be made
    failed: int
    running: int
    elapsed_s: float
    eta_s: float | None  # None until a segment was made in this run
    per_node: dict[str, int]  # node -> segments it made in this run
    message: str


@dataclass(frozen=True)
class FarmResult:
    bulletins: dict[str, Path]  # name -> bulletin MP4 (those with at least one segment made)
    reports: dict[str, Path]  # name -> its JSON report
    failed: tuple[tuple[str, str], ...]  # (segment, reason) for every segment not made
    made: int  # segments rendered in this run
    resumed: int  # segments found finished and reused
    retries: int
    seconds: float
    cluster: dict = field(default_factory=dict)  # what the run ran on


def check_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".farm-write-check"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise OutputPathError(f"Cannot write to {out_dir} ({exc.strerror}): choose a folder you may write to.") \
            from exc
    free_mb = shutil.disk_usage(out_dir).free / 2**20
    if free_mb < MIN_FREE_MB:
        raise OutputPathError(f"The disk holding {out_dir} is full ({free_mb:.0f} MB free): free some space or "
                              "choose another folder.")


def _check_reachable(address: str, timeout_s: float) -> None:
    host, _, port = address.rpartition(":")
    if address.startswith("ray://"):
        raise InputError(f"--address {address}: give the head's host:port as `ray start --head` prints it "
                         "(e.g. 10.0.0.5:6379), not a ray:// client address.")
    if not host or not port.isdigit():
        raise InputError(f"--address {address} is not host:port: give the head's address as `ray start --head` "
                         "prints it (e.g. 10.0.0.5:6379).")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise InputError(f"Cannot reach the Ray cluster at {address} ({exc.strerror or exc}): start it there with "
                         "`ray start --head`, check the address and the firewall, or leave out --address to use "
                         "this machine.") from exc


def connect(settings: FarmSettings) -> dict:
    """Start the embedded cluster or join ``settings.address``; returns what the cluster offers."""
    try:
        import ray
    except ImportError as exc:
        raise StudioError("Ray is not installed: run the README's set-up command (installers/setup.sh).") from exc
    if ray.is_initialized():
        ray.shutdown()
    kwargs = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    if settings.address:
        _check_reachable(settings.address, settings.connect_timeout_s)
        try:
            ray.init(address=settings.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"Cannot join the Ray cluster at {settings.address} ({exc}): check that it runs "
                             "ray==2.60.0 and that this machine has its token (~/.ray/auth_token).") from exc
    else:
        if settings.workers < 1:
            raise InputError(f"--workers {settings.workers}: give at least 1.")
        try:
            ray.init(num_cpus=settings.workers, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise StudioError(f"Cannot start the local Ray cluster ({exc}): see the log, or run `ray stop` and "
                              "try again.") from exc
    res = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"address": settings.address or "embedded", "nodes": len(nodes), "cpus": float(res.get("CPU", 0)),
            "gpus": float(res.get("GPU", 0))}


def run_farm(settings: FarmSettings, rundowns: list[Path], abort: Callable[[], bool] = lambda: False,
             shutdown: bool = True, anchor_pack=None) -> Generator[FarmProgress, None, FarmResult]:
    """Render ``rundowns`` into ``settings.out_dir`` (see the module docstring). ``anchor_pack``: an anchor already
    loaded (the studio's) for the rundowns that name no portrait, instead of ``settings.anchor_path``."""
    t_start = time.perf_counter()
    out_dir = Path(settings.out_dir)
    check_out_dir(out_dir)
    plan = plan_rundowns(rundowns, settings.core, settings.anchor_path, settings.cast_layout)
    cluster = connect(settings)
    try:
        return (yield from _run(settings, plan, cluster, out_dir, abort, t_start, anchor_pack))
    finally:
        if shutdown:
            import ray

            ray.shutdown()


@dataclass
class _Stitch:
    name: str  # the bulletin being joined


@dataclass
class _Seg:
    job: SegmentJob
    fingerprint: str
    status: str = "pending"  # pending, running, done, resumed, failed
    retries: int = 0
    line: dict = field(default_factory=dict)


def _cancel(ray, running: dict) -> None:
    """Stop every task still running (its worker process is killed: a segment half written is never committed)."""
    for ref in list(running):
        try:
            ray.cancel(ref, force=True)
        except (TypeError, ValueError, ray.exceptions.RayError) as exc:  # already finished, or a stitch
            log.info("cancel: %s", exc)


def _lost_errors(ray) -> tuple:
    """What Ray raises when a task's worker process or node died (the task may be tried again)."""
    e = ray.exceptions
    return (e.WorkerCrashedError, e.NodeDiedError, e.ObjectLostError, e.RaySystemError, e.TaskUnschedulableError)


def _run(settings: FarmSettings, plan: FarmPlan, cluster: dict, out_dir: Path, abort, t_start: float,
         anchor_pack=None):
    import ray

    from studio.farm import worker
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.render import render_encode_settings

    if settings.device.startswith("cuda") and cluster["gpus"] == 0:
        raise InputError("--device cuda, but this cluster has no GPU: use --device auto or cpu, or add GPU nodes.")
    use_gpu = cluster["gpus"] > 0 and settings.gpu_core is not None
    core = settings.gpu_core if use_gpu else settings.core
    encode = replace(render_encode_settings(core), encoder_threads=settings.cpus_per_segment)
    enc_d = {k: v for k, v in encode.__dict__.items()}
    failed: list[tuple[str, str]] = [(r.name, r.reason) for r in plan.rejected]
    remote_render = ray.remote(max_retries=0, **({"num_gpus": settings.gpu_share, "num_cpus": settings.cpus_per_segment}
                                                if use_gpu else {"num_cpus": settings.cpus_per_segment})
                               )(worker.render_job)
    remote_pack = ray.remote(max_retries=settings.max_retries, num_cpus=1)(worker.build_pack)
    remote_stitch = ray.remote(max_retries=settings.max_retries, num_cpus=1)(worker.stitch_bulletin)

    # each portrait's pack, built once into the object store (a cached pack loads in a fraction of a second); its
    # content key joins the fingerprint, so a portrait replaced under the same name is never served from old files.
    # A pack is (portrait, presenter px, cast member): a cast shares the presenter's width, so its packs are its own
    packs: dict[tuple, object] = {}
    pack_keys: dict[tuple, str] = {}
    if anchor_pack is not None and settings.anchor_path is None:
        packs[(None, presenter_px(core), None)] = ray.put(anchor_pack)
    needs = {job.name: job.packs(core) for job in plan.jobs}
    for spec in (spec for specs in needs.values() for spec in specs):
        if spec not in packs:
            packs[spec] = remote_pack.remote(*spec)
    bad_packs: dict[tuple, str] = {}
    for spec, ref in list(packs.items()):  # a portrait without a usable face rejects its segments, named
        try:
            pack_keys[spec] = ray.get(ref).key
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            bad_packs[spec] = str(cause) if isinstance(cause, StudioError) else f"the portrait failed ({cause})"
            del packs[spec]
    for job in plan.jobs:
        reason = next((bad_packs[spec] for spec in needs[job.name] if spec in bad_packs), None)
        if reason is not None:
            failed.append((job.name, reason))

    segs: dict[str, list[_Seg]] = {}
    for name, jobs in plan.bulletins.items():
        store.clear_attempts(out_dir, name)
        segs[name] = []
        for j in jobs:
            s = _Seg(j, job_fingerprint(j, core, enc_d, "+".join(pack_keys.get(spec, "") for spec in needs[j.name]),
                                        settings.canvas_style))
            if any(spec not in packs for spec in needs[j.name]):
                s.status = "failed"
                s.line = {"segment": j.name, "error": next(r for n, r in failed if n == j.name)}
            segs[name].append(s)
    resumed = 0
    for name, lst in segs.items():
        for s in lst:
            if s.status != "pending":
                continue
            rec = store.load_done(out_dir, name, s.job.index, s.fingerprint)
            if rec is not None:
                s.status, resumed = "resumed", resumed + 1
                s.line = {"segment": s.job.name, "node": rec.node, "device": rec.device, "seconds": rec.seconds,
                          "n_frames": rec.n_frames, "resumed": True}
    total = sum(len(v) for v in segs.values())
    yield FarmProgress(resumed, total, len(failed), 0, time.perf_counter() - t_start, None, {},
                       f"{cluster['nodes']} node(s), {cluster['cpus']:g} CPUs, {cluster['gpus']:g} GPUs; "
                       f"{resumed} segment(s) already made")
    todo = [s for lst in segs.values() for s in lst if s.status == "pending"]

    def submit(s: _Seg):
        s.status = "running"
        return remote_render.remote(s.job, core, encode, str(out_dir), s.fingerprint,
                                    [packs[spec] for spec in needs[s.job.name]], settings.cpus_per_segment,
                                    settings.canvas_style)

    running: dict[object, _Seg | _Stitch] = {submit(s): s for s in todo}
    made = retries = 0
    per_node: dict[str, int] = {}
    t_run = time.perf_counter()
    bulletins: dict[str, Path] = {}
    reports: dict[str, Path] = {}
    finished = set()
    message = ""
    try:
        while True:
            for name in segs:
                if name not in finished and all(s.status not in ("pending", "running") for s in segs[name]):
                    finished.add(name)
                    ok = [s for s in segs[name] if s.status in ("done", "resumed")]
                    if ok:  # stitched by a task; its report is written when it is in
                        ref = remote_stitch.remote(str(out_dir), name, [s.job.index for s in ok],
                                                   [int(s.line["n_frames"]) for s in ok])
                        running[ref] = _Stitch(name)
                    else:
                        reports[name] = _write_report(name, segs[name], plan, out_dir, cluster, {})
                        message = f"{name}: no segment could be made"
            if not running:
                break
            if abort():
                _cancel(ray, running)
                raise StudioError("The farm run was cancelled; run it again to resume.")
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                item = running.pop(ref)
                if isinstance(item, _Stitch):
                    message = _stitched(ray, ref, item, segs, plan, out_dir, cluster, bulletins, reports, failed)
                    continue
                s = item
                try:
                    line = ray.get(ref)
                except _lost_errors(ray) as exc:
                    if s.retries < settings.max_retries:
                        s.retries += 1
                        retries += 1
                        message = f"{s.job.name}: its worker died ({type(exc).__name__}); retrying"
                        log.warning("%s", message)
                        running[submit(s)] = s
                        continue
                    line = {"segment": s.job.name, "error": f"its worker died {s.retries + 1} times ({exc})"}
                except ray.exceptions.RayTaskError as exc:
                    line = {"segment": s.job.name, "error": f"unexpected failure ({exc.cause!r})"}
                line["retries"] = s.retries
                if "error" not in line and not store.final_path(out_dir, s.job.bulletin, s.job.index).exists():
                    line["error"] = (f"it was written on {line['node']}, but {out_dir} does not show it here: give "
                                     "--out a folder that every node of the cluster shares")
                    line["error_kind"] = "OutputPathError"
                s.line = line
                if "error" in line:
                    s.status = "failed"
                    failed.append((s.job.name, line["error"]))
                    message = f"{s.job.name} could not be made: {line['error']}"
                    if line.get("error_kind") == "OutputPathError":
                        raise OutputPathError(line["error"])
                else:
                    s.status, made = "done", made + 1
                    per_node[line["node"]] = per_node.get(line["node"], 0) + 1
                    message = f"{s.job.name} made on {line['node']} in {line['seconds']:.1f} s"
            done = made + resumed
            elapsed = time.perf_counter() - t_run
            left = total - done - sum(1 for lst in segs.values() for s in lst if s.status == "failed")
            eta = elapsed / made * left if made else None
            yield FarmProgress(done, total, len(failed), len(running), time.perf_counter() - t_start, eta,
                               dict(per_node), message)
    except BaseException:
        if running:
            _cancel(ray, running)
        raise
    return FarmResult(bulletins=bulletins, reports=reports, failed=tuple(failed), made=made, resumed=resumed,
                      retries=retries, seconds=time.perf_counter() - t_start, cluster=cluster)


def _stitched(ray, ref, item: _Stitch, segs: dict, plan: FarmPlan, out_dir: Path, cluster: dict, bulletins: dict,
              reports: dict, failed: list) -> str:
    """A bulletin's stitch task is in: its report, and the bulletin or the reason there is none."""
    name = item.name
    try:
        line = ray.get(ref)
    except (*_lost_errors(ray), ray.exceptions.RayTaskError) as exc:
        line = {"error": f"joining the segments failed ({exc})"}
    if "error" in line:
        failed.append((f"{name}.mp4", line["error"]))
        reports[name] = _write_report(name, segs[name], plan, out_dir, cluster, line)
        if line.get("error_kind") == "OutputPathError":
            raise OutputPathError(line["error"])
        return f"{name}.mp4 could not be joined: {line['error']}"
    bulletins[name] = out_dir / f"{name}.mp4"
    reports[name] = _write_report(name, segs[name], plan, out_dir, cluster, line)
    store.clear_attempts(out_dir, name)
    n_bad = sum(1 for s in segs[name] if s.status == "failed") + sum(
        1 for r in plan.rejected if r.bulletin == name and r.index >= 0)
    n_ok = sum(1 for s in segs[name] if s.status in ("done", "resumed"))
    made = f"{name}.mp4 written ({n_ok} segment{'s' if n_ok != 1 else ''})"
    return made + (f", {n_bad} not made" if n_bad else "")


def _write_report(name: str, segs: list[_Seg], plan: FarmPlan, out_dir: Path, cluster: dict,
                  stitch_line: dict) -> Path:
    by_index = {s.job.index: s for s in segs}
    lines = []
    for i in range(plan.totals.get(name, 0)):
        s = by_index.get(i)
        if s is None:
            why = next((r.reason for r in plan.rejected if r.bulletin == name and r.index == i), "not made")
            lines.append({"index": i + 1, "status": "failed", "error": why})
            continue
        line = {"index": i + 1, "title": s.job.title, "status": s.status, "retries": s.retries}
        for k in ("node", "device", "seconds", "n_frames", "error", "stage_s", "warm_tasks"):
            if k in s.line:
                line[k] = s.line[k]
        lines.append(line)
    for r in plan.rejected:
        if r.bulletin == name and r.index < 0:
            lines.append({"index": None, "status": "failed", "error": r.reason})
    made = "error" not in stitch_line and bool(stitch_line)
    report = {"bulletin": name, "path": str(out_dir / f"{name}.mp4") if made else "", "cluster": cluster,
              "stitch": stitch_line, "segments": lines}
    path = out_dir / f"{name}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(report, indent=1))
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputPathError(f"Cannot write the report {path} ({exc.strerror}): free some space or choose "
                              "another folder.") from exc
    return path
