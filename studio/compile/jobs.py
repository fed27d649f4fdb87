"""Compile jobs: generator workers (superqt style) that build, verify, time and install one engine.

``compile_target`` yields ``Progress`` (fraction, message, log line) between steps, checks its abort flag at every
yield (a cancelled job returns None), and raises ``CompileError`` on failure. Files are written into a private build
folder inside the cache (``engines/.build-*``) and renamed into place only once the engine has passed verification;
the folder is removed whatever happens (finished, failed, cancelled, or the generator closed by its worker), so a
cancelled or failed compile leaves no half-written engine. An engine failing verification is reported (its sidecar
records the figures, marked failed), never installed and never returned.

``load_engine`` gives the callable of a cached engine (re-verified against eager output for in-process backends,
which are rebuilt); ``compile_generator`` runs ``compile_target`` over a generator's compile targets.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from studio.compile import cache
from studio.compile.backend import Built, target_device
from studio.compile.builders import backend
from studio.compile.settings import BuildSettings
from studio.compile.silicon import PRECISION_LABELS, Fingerprint, fingerprint
from studio.compile.verify import Timing, Verification, at_batch, compare, flatten_outputs, perturbed, time_pair
from studio.errors import CompileError

if TYPE_CHECKING:
    from studio.contracts import CompileTarget, Generator as StudioGenerator

log = logging.getLogger(__name__)

VERIFY_SETS = 3  # the example inputs and two seeded perturbations of them


@dataclass(frozen=True)
class Progress:
    """What a compile job yields: overall fraction 0..1, a short status, and a line for the log ("" for none)."""

    fraction: float
    message: str
    log: str = ""


@dataclass
class EngineReport:
    """The outcome of one compile: where the engine is, how it verified, how fast it is."""

    model: str
    target: str
    backend: str
    precision: str
    batch: int
    arch: str
    path: Path  # the engine file (in-process backends: the name their sidecar goes by)
    sidecar: Path
    verification: Verification
    timing: Timing | None
    build_s: float
    serializable: bool
    cached: bool = False  # True: a ready engine was found in the cache; nothing was built
    details: dict = field(default_factory=dict)

    def summary(self) -> str:
        head = f"{self.path.name}: " + ("cached, " if self.cached else f"built in {self.build_s:.1f} s, ")
        timing = self.timing.summary() if self.timing else "not timed"
        return head + f"verification {self.verification.summary()}; {timing}"


def _check_choice(fp: Fingerprint, settings: BuildSettings) -> None:
    settings.check()
    reason = backend(settings.backend).precision_reasons(fp)[settings.precision]
    if reason is not None:
        raise CompileError(reason)


def _record(model: str, target: "CompileTarget", settings: BuildSettings, fp: Fingerprint, path: Path,
            verification: Verification, timing: Timing | None, build_s: float, details: dict, files: dict) -> dict:
    b = backend(settings.backend)
    shapes = [list(x.shape) for x in target.example_inputs if isinstance(x, torch.Tensor)]
    dtypes = [str(x.dtype) for x in target.example_inputs if isinstance(x, torch.Tensor)]
    return {
        "format": cache.SIDECAR_FORMAT, "model": model, "target": target.name, "backend": settings.backend,
        "precision": settings.precision, "precision_label": PRECISION_LABELS[settings.precision],
        "batch": settings.batch, "arch": fp.arch, "engine": path.name, "serializable": b.serializable,
        "files": files, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "silicon": fp.as_dict(), "versions": cache.versions(fp, settings.backend),
        "module_digest": cache.module_digest(target), "module": type(target.module).__qualname__,
        "input_shapes": shapes, "input_dtypes": dtypes, "dynamic_batch": target.dynamic_batch,
        "settings": {"inductor_mode": settings.inductor_mode, "int8_method": settings.int8_method,
                     "opset": settings.opset, "trt_profiles": list(settings.trt_profiles)},
        "verification": verification.as_dict(), "timing": timing.as_dict() if timing else None,
        "build_s": round(build_s, 3), "details": details,
    }


def _reference(target: "CompileTarget", sets: list[tuple]) -> list[list[torch.Tensor]]:
    with torch.inference_mode():
        return [[o.clone() for o in flatten_outputs(target.module(*s))] for s in sets]


def _run_sets(fn: Callable, sets: list[tuple]) -> list[list[torch.Tensor]]:
    out = []
    with torch.inference_mode():
        for s in sets:
            try:
                out.append([o.clone() for o in flatten_outputs(fn(*s))])
            except CompileError:
                raise
            except Exception as exc:  # the engine's runtime (ONNX Runtime, TensorRT, compiled code) at its boundary
                raise CompileError(f"The engine failed on the verification inputs: {exc}") from exc
    return out


def verification_sets(target: "CompileTarget", settings: BuildSettings) -> list[tuple]:
    base = at_batch(target.example_inputs, settings.batch, target.dynamic_batch)
    return [base] + [perturbed(base, settings.verify_seed + k) for k in range(1, VERIFY_SETS)]


def compile_target(model: str, target: "CompileTarget", settings: BuildSettings, *, fp: Fingerprint | None = None,
                   root: Path | None = None, abort: threading.Event | None = None, force: bool = False
                   ) -> Generator[Progress, None, EngineReport | None]:
    """Build, verify, time and install one engine (see the module docstring). Returns its report, or None when
    cancelled. With ``force`` False a ready cached engine from the same weights is reported instead of rebuilt."""
    from studio.paths import ENGINES

    fp = fp or fingerprint(str(target_device(target.example_inputs)))
    root = Path(root or ENGINES)
    _check_choice(fp, settings)
    target.module.eval()  # the contract's mode for a compile target (a wrapper module may have been left training)
    b = backend(settings.backend)
    name = cache.engine_name(model, target.name, fp.arch, settings.precision, settings.batch, b.ext)
    path = root / name
    sidecar = cache.sidecar_of(path)

    def stopped() -> bool:
        return abort is not None and abort.is_set()

    yield Progress(0.0, f"{b.label} {PRECISION_LABELS[settings.precision]} b{settings.batch}: {target.name}",
                   f"engine {name} on {fp.summary()}")

    if not force and sidecar.exists():
        entry = cache.read_entry(sidecar, fp)
        if entry is not None and entry.ready and entry.record.get("module_digest") == cache.module_digest(target):
            yield Progress(1.0, "cached", f"{name}: ready in the cache (use --force to rebuild)")
            return _report_of(entry, cached=True)
        if entry is not None:
            reason = entry.status if not entry.ready else "built from other weights (or another anchor)"
            yield Progress(0.02, "rebuilding", f"{name} in the cache is not used: {reason}; rebuilding")

    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=root))
    t0 = time.perf_counter()
    try:
        sets = verification_sets(target, settings)
        yield Progress(0.05, "eager reference", f"eager reference on {len(sets)} input sets at batch {settings.batch}")
        reference = _reference(target, sets)
        if stopped():
            return _cancelled()

        steps = b.build(target, sets[0], settings, fp, workdir, name[: -len(b.ext) - 1])
        frac = 0.1
        try:
            while True:
                try:
                    line = next(steps)
                except StopIteration as stop:
                    built: Built = stop.value
                    break
                if stopped():
                    return _cancelled()
                if line:
                    frac = min(0.6, frac + 0.08)
                    yield Progress(frac, "building", line)
        finally:
            steps.close()  # a builder still running (TensorRT's thread) is told to stop and joined
        build_s = time.perf_counter() - t0

        yield Progress(0.62, "verifying", "checking the engine against eager output")
        verification = compare(reference, _run_sets(built.fn, sets), settings.psnr_threshold_db)
        yield Progress(0.72, "verified" if verification.passed else "verification failed",
                       f"verification {verification.summary()}")
        if stopped():
            return _cancelled()
        if not verification.passed:
            _discard_installed(path, sidecar, root)
            cache.write_json_atomic(sidecar, _record(model, target, settings, fp, path, verification, None, build_s,
                                                     built.details, {}))
            raise CompileError(f"{name} failed verification against eager output ({verification.summary()}); "
                               "it is not used. Try a higher precision or another backend.")

        yield Progress(0.75, "timing", f"timing eager and engine alternately ({settings.timed_calls} calls each)")
        device = target_device(sets[0])
        timing = time_pair(target.module, built.fn, sets[0], device, settings.warmup_calls, settings.timed_calls,
                           abort)
        if timing is None or stopped():
            return _cancelled()
        yield Progress(0.95, "installing", timing.summary())

        files = _install(built, path, sidecar, root) if b.serializable else {}
        record = _record(model, target, settings, fp, path, verification, timing, build_s, built.details, files)
        cache.write_json_atomic(sidecar, record)
        report = EngineReport(model, target.name, settings.backend, settings.precision, settings.batch, fp.arch,
                              path, sidecar, verification, timing, build_s, b.serializable, details=built.details)
        yield Progress(1.0, "done", report.summary())
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _cancelled() -> None:
    log.info("compile cancelled")
    return None


def _discard_installed(path: Path, sidecar: Path, root: Path) -> None:
    """Remove a previously installed engine of this name (it is being replaced): sidecar first, so that no sidecar
    ever describes a file that is not the one it verified."""
    sidecar.unlink(missing_ok=True)
    for f in root.glob(path.name + "*"):
        if f.is_file() and f != sidecar:
            f.unlink()


def _install(built: Built, path: Path, sidecar: Path, root: Path) -> dict[str, dict]:
    """Move the verified files from the build folder into the cache; returns name -> {sha256, bytes}."""
    _discard_installed(path, sidecar, root)
    files = {}
    for f in built.files:
        files[f.name] = {"sha256": cache.file_sha256(f), "bytes": f.stat().st_size}
        os.replace(f, root / f.name)
    return files


def _report_of(entry: cache.CachedEngine, cached: bool) -> EngineReport:
    r = entry.record
    return EngineReport(r["model"], r["target"], r["backend"], r["precision"], int(r["batch"]), r["arch"],
                        entry.path, cache.sidecar_of(entry.path), Verification.from_dict(r["verification"]),
                        Timing.from_dict(r["timing"]) if r.get("timing") else None, float(r.get("build_s", 0.0)),
                        bool(r.get("serializable")), cached=cached, details=r.get("details") or {})


def load_engine(entry: cache.CachedEngine, target: "CompileTarget", *, fp: Fingerprint | None = None) -> Callable:
    """The callable of a ready cached engine for ``target``. File engines are loaded; in-process ones are rebuilt.
    Either is verified against eager output again before it is returned (an engine is never used unverified)."""
    fp = fp or fingerprint(str(target_device(target.example_inputs)))
    if not entry.ready:
        raise CompileError(f"{entry.path.name} cannot be used: {entry.status}. Rebuild it with `python main.py "
                           "compile`.")
    if entry.record.get("module_digest") != cache.module_digest(target):
        raise CompileError(f"{entry.path.name} was built from other weights (or another anchor): rebuild it.")
    r = entry.record
    s = r.get("settings") or {}
    settings = BuildSettings(backend=r["backend"], precision=r["precision"], batch=int(r["batch"]),
                             inductor_mode=s.get("inductor_mode", "default"),
                             int8_method=s.get("int8_method", "dynamic"), opset=int(s.get("opset", 18)),
                             trt_profiles=tuple(s.get("trt_profiles", ())) or BuildSettings().trt_profiles,
                             min_psnr_db=float(r["verification"]["threshold_db"]))
    b = backend(settings.backend)
    sets = verification_sets(target, settings)
    if b.serializable:
        bad = cache.check_files(entry, hashes=True)
        if bad:
            raise CompileError(f"{entry.path.name} cannot be used: {bad}. Rebuild it with `python main.py compile "
                               "--force`.")
        fn = b.load(entry.path, target, sets[0], settings, fp, r.get("details") or {})
    else:
        with tempfile.TemporaryDirectory(prefix=".load-", dir=entry.path.parent) as tmp:
            steps = b.build(target, sets[0], settings, fp, Path(tmp), entry.path.stem)
            while True:
                try:
                    next(steps)
                except StopIteration as stop:
                    fn = stop.value.fn
                    break
    verification = compare(_reference(target, sets), _run_sets(fn, sets), settings.psnr_threshold_db)
    if not verification.passed:
        raise CompileError(f"{entry.path.name} no longer matches eager output ({verification.summary()}): it is not "
                           "used. Rebuild it with `python main.py compile --force`.")
    log.info("engine %s loaded: %s", entry.path.name, verification.summary())
    return fn


@dataclass(frozen=True)
class Installed:
    """A cached engine a generator now runs (or why one was not used), for the studio's start-up line."""

    target: str
    engine: str  # file name ("" when none was used)
    message: str


def install_cached(model: str, gen: "StudioGenerator", precision: str, batch: int, *, backend: str | None = None,
                   fp: Fingerprint | None = None, root: Path | None = None,
                   min_speedup: float = 1.0) -> list[Installed]:
    """For each compile target of an opened generator: find the ready cached engine for this machine, precision
    and batch (the fastest, or ``backend``'s), load and re-verify it, and install it with ``install_engine``.
    A target without one, whose engine was not faster than eager by ``min_speedup`` when built (MuseTalk's VAE
    decoder as dynamic INT8 measured 0.28x on the CPU), or whose engine no longer verifies, stays eager; the messages
    say which and why."""
    out = []
    for target in gen.compile_targets():
        fp_t = fp or fingerprint(str(target_device(target.example_inputs)))
        entry = cache.find_engine(model, target, precision, batch, backend=backend, fp=fp_t, root=root)
        if entry is None:
            out.append(Installed(target.name, "", f"{model}/{target.name}: eager (no ready engine for "
                                                  f"{fp_t.arch} {PRECISION_LABELS[precision]} b{batch} in the cache)"))
            continue
        speedup = float((entry.record.get("timing") or {}).get("speedup", float("nan")))
        if not speedup >= min_speedup:
            out.append(Installed(target.name, "", f"{model}/{target.name}: eager ({entry.path.name} measured "
                                                  f"{speedup:.2f}x eager when built)"))
            continue
        try:
            fn = load_engine(entry, target, fp=fp_t)
        except CompileError as exc:
            out.append(Installed(target.name, "", f"{model}/{target.name}: eager ({exc})"))
            continue
        gen.install_engine(target.name, fn)
        t = entry.record.get("timing") or {}
        out.append(Installed(target.name, entry.path.name,
                             f"{model}/{target.name}: engine {entry.path.name} ({entry.backend}, "
                             f"{t.get('speedup', float('nan')):.2f}x eager when built)"))
    return out


def compile_generator(model: str, gen: "StudioGenerator", settings: BuildSettings, *, fp: Fingerprint | None = None,
                      root: Path | None = None, abort: threading.Event | None = None, force: bool = False
                      ) -> Generator[Progress, None, list[EngineReport] | None]:
    """``compile_target`` over every compile target of an opened generator; progress spans all of them."""
    targets = gen.compile_targets()
    if not targets:
        raise CompileError(f"{model} has nothing to compile (no compile targets): it runs eager.")
    reports = []
    for k, target in enumerate(targets):
        job = compile_target(model, target, settings, fp=fp, root=root, abort=abort, force=force)
        while True:
            try:
                p = next(job)
            except StopIteration as stop:
                report = stop.value
                break
            yield Progress((k + p.fraction) / len(targets), f"{target.name}: {p.message}", p.log)
        if report is None:
            return None
        reports.append(report)
    return reports
