"""The engine cache in ``engines/``: file names, JSON sidecars, and which cached engines may be used.

An engine is ``{model}_{arch}_{precision}_b{batch}.{ext}`` (``model`` is the generator and its compile target, e.g.
``builtin-renderer``; ``arch`` is ``sm_XX`` or ``cpu``) beside a sidecar ``{file}.json`` that records the versions it
was built with (torch, CUDA, driver, ONNX Runtime, TensorRT, this package), the target's input shapes, a digest of
the module's weights, and the verification and timing figures. In-process backends (TorchInductor, CUDA graphs,
eager) have no engine file: their sidecar alone records the build, and loading rebuilds them in the process.

A cached engine is used only when it is *ready*: its sidecar names this machine's architecture and the versions
installed now, it passed verification, and (serializable backends) its file is present with the recorded SHA-256.
Anything else is stale, foreign, failed or corrupt: it is reported, rebuilt by the next compile, never loaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from studio.compile.silicon import PRECISIONS, Fingerprint

if TYPE_CHECKING:
    from studio.contracts import CompileTarget

SIDECAR_FORMAT = 1
_NAME = re.compile(r"^(?P<model>[a-z0-9.\-]+)_(?P<arch>cpu|sm_\d+)_(?P<precision>" + "|".join(PRECISIONS)
                   + r")_b(?P<batch>\d+)\.(?P<ext>[a-z]+)$")


def model_key(model: str, target: str) -> str:
    """The file name's model part: ``{generator}-{target}``, lower case, no underscores (they separate fields)."""
    key = f"{model}-{target}" if target and target != model else model
    key = re.sub(r"[^a-z0-9.\-]+", "-", key.lower().replace("_", "-")).strip("-")
    return key or "model"


def engine_name(model: str, target: str, arch: str, precision: str, batch: int, ext: str) -> str:
    return f"{model_key(model, target)}_{arch}_{precision}_b{batch}.{ext}"


def parse_name(name: str) -> dict | None:
    """The fields of an engine file name, or None when it is not one."""
    m = _NAME.match(name)
    if m is None:
        return None
    d = m.groupdict()
    d["batch"] = int(d["batch"])
    return d


def sidecar_of(engine_path: Path) -> Path:
    return engine_path.with_name(engine_path.name + ".json")


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return ""


def versions(fp: Fingerprint, backend: str) -> dict[str, str]:
    """What an engine of ``backend`` on ``fp`` depends on; a cached engine whose record differs is stale."""
    import torch

    v = {"newsstudio": _version("newsstudio"), "python": ".".join(map(str, sys.version_info[:2])),
         "torch": torch.__version__, "cuda": torch.version.cuda or "", "driver": fp.driver if fp.is_cuda else ""}
    if backend == "onnxruntime":
        v.update(onnxruntime=_version("onnxruntime") or _version("onnxruntime-gpu"), onnx=_version("onnx"),
                 onnxscript=_version("onnxscript"))
    if backend == "tensorrt":
        import tensorrt

        v.update(tensorrt=tensorrt.__version__, onnx=_version("onnx"))
    if backend == "inductor":
        v.update(triton=_version("triton") if fp.is_cuda else "")
    return v


def module_digest(target: "CompileTarget") -> str:
    """A digest of what the engine bakes in: the module's class and the source files of its classes, every
    parameter and buffer (name, shape, dtype and a strided sample of its values plus their sum) and the example
    inputs' shapes. Two anchors (the built-in renderer's portrait is a buffer), two sets of weights or an edited
    forward give two digests; reading a sample keeps it cheap for a 1.3 B-parameter network."""
    import torch

    h = hashlib.sha256()
    m = target.module
    h.update(f"{type(m).__module__}.{type(m).__qualname__}".encode())
    # The forward's code (file contents, not paths: another clone is the same engine); an edited renderer is not.
    for digest in sorted(hashlib.sha256(Path(src).read_bytes()).hexdigest() for src in _source_files(m)):
        h.update(digest.encode())
    with torch.no_grad():
        tensors = list(m.named_parameters()) + list(m.named_buffers())
        for name, t in tensors:
            h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
            flat = t.detach().reshape(-1)
            if flat.numel() == 0:
                continue
            step = max(1, flat.numel() // 4096)
            sample = flat[::step][:4096]
            if sample.is_floating_point() or sample.is_complex():
                sample = sample.double()
                h.update(repr(float(flat.double().sum())).encode())
            h.update(sample.cpu().numpy().tobytes())
    for x in target.example_inputs:
        if isinstance(x, torch.Tensor):
            h.update(f"in:{tuple(x.shape[1:]) if target.dynamic_batch else tuple(x.shape)}:{x.dtype}".encode())
    return h.hexdigest()[:32]


def _source_files(module) -> set[str]:
    """The Python files defining the classes of ``module`` and its submodules (those that can be read)."""
    import inspect

    files = set()
    for sub in module.modules():
        try:
            src = inspect.getsourcefile(type(sub))
        except TypeError:  # a class defined in C: its code is the installed package's version
            continue
        if src and Path(src).is_file():
            files.add(src)
    return files


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename (never half a file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a sidecar is as readable as its engine
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class CachedEngine:
    """One engine of the cache as read from its sidecar, and whether it may be used here and now."""

    path: Path  # the engine file (for in-process backends: its name only, nothing on disk)
    record: dict  # the sidecar
    status: str  # "ready", or why not: "stale: ...", "foreign: ...", "failed verification: ...", "missing ..."

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def model(self) -> str:
        return self.record.get("model", "")

    @property
    def target(self) -> str:
        return self.record.get("target", "")

    @property
    def backend(self) -> str:
        return self.record.get("backend", "")

    @property
    def precision(self) -> str:
        return self.record.get("precision", "")

    @property
    def batch(self) -> int:
        return int(self.record.get("batch", 0))

    @property
    def serializable(self) -> bool:
        return bool(self.record.get("serializable", False))

    @property
    def engine_ms(self) -> float:
        return float(self.record.get("timing", {}).get("engine_ms", float("inf")))

    def describe(self) -> str:
        """One line for ``compile --list`` and the panel."""
        r = self.record
        t = r.get("timing") or {}
        v = r.get("verification") or {}
        kept = "file" if self.serializable else "rebuilt in-process on load"
        figures = ""
        if t and v:
            per_frame = float(t.get("engine_ms_per_frame", "nan"))
            psnr, mae = float(v.get("psnr_db", "nan")), float(v.get("max_abs_error", "nan"))
            figures = (f", {float(t.get('speedup', 'nan')):.2f}x vs eager, {per_frame:.4g} ms per frame, "
                       f"PSNR {psnr:.1f} dB, max abs error {mae:.3g}")
        return f"{self.path.name} [{r.get('backend')}, {kept}]{figures}: {self.status}"


def _status(path: Path, rec: dict, fp: Fingerprint) -> str:
    if rec.get("format") != SIDECAR_FORMAT:
        return f"stale: sidecar format {rec.get('format')} (this build writes {SIDECAR_FORMAT})"
    if rec.get("arch") != fp.arch:
        return f"foreign: built for {rec.get('arch')}, this machine is {fp.arch}"
    if not (rec.get("verification") or {}).get("passed", False):
        return "failed verification: " + str((rec.get("verification") or {}).get("detail", "not verified"))
    try:
        now = versions(fp, rec.get("backend", ""))
    except ImportError as exc:  # the backend's package was removed since the build
        return f"stale: {exc}"
    then = rec.get("versions") or {}
    changed = [f"{k} {then.get(k) or '-'} -> {v or '-'}" for k, v in sorted(now.items()) if then.get(k, "") != v]
    if changed:
        return "stale: " + ", ".join(changed)
    if rec.get("serializable"):
        bad = check_files(CachedEngine(path, rec, ""), hashes=False)
        if bad:
            return bad
    return "ready"


def check_files(entry: "CachedEngine", hashes: bool) -> str:
    """"" when the engine's files are those that were verified (sizes; with ``hashes`` also SHA-256), else what is
    wrong. Listing checks sizes; loading checks hashes too."""
    files = entry.record.get("files") or {}
    if not files or entry.path.name not in files:
        return f"missing file {entry.path.name}"
    for name, meta in files.items():
        f = entry.path.parent / name
        if not f.is_file():
            return f"missing file {name}"
        if f.stat().st_size != meta.get("bytes") or (hashes and file_sha256(f) != meta.get("sha256")):
            return f"corrupt: {name} differs from the file that was verified"
    return ""


def read_entry(sidecar: Path, fp: Fingerprint) -> CachedEngine | None:
    """The cache entry of a sidecar, None when it is not a readable engine sidecar."""
    try:
        rec = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or "backend" not in rec:
        return None
    path = sidecar.with_name(sidecar.name[: -len(".json")])
    return CachedEngine(path, rec, _status(path, rec, fp))


def scan(root: Path, fp: Fingerprint) -> list[CachedEngine]:
    """Every engine sidecar in ``root`` (any architecture), with its status on ``fp``."""
    if not root.is_dir():
        return []
    out = []
    for sidecar in sorted(root.glob("*.json")):
        if parse_name(sidecar.name[: -len(".json")]) is None:
            continue
        entry = read_entry(sidecar, fp)
        if entry is not None:
            out.append(entry)
    return out


def find_engine(model: str, target: "CompileTarget | str", precision: str, batch: int, *,
                backend: str | None = None, fp: Fingerprint | None = None, root: Path | None = None
                ) -> CachedEngine | None:
    """The cached engine the studio should use for ``model``'s ``target`` at ``precision`` and ``batch`` on this
    machine: ready (see the module docstring), built from the same weights when ``target`` is a ``CompileTarget``,
    of ``backend`` if given, else the fastest measured. None when there is none."""
    from studio.compile.silicon import fingerprint
    from studio.paths import ENGINES

    fp = fp or fingerprint()
    root = root or ENGINES
    name = target if isinstance(target, str) else target.name
    digest = None if isinstance(target, str) else module_digest(target)
    best = None
    for entry in scan(root, fp):
        r = entry.record
        if (r.get("model"), r.get("target"), r.get("precision"), int(r.get("batch", -1))) != (model, name, precision,
                                                                                               batch):
            continue
        if backend is not None and r.get("backend") != backend:
            continue
        if not entry.ready or (digest is not None and r.get("module_digest") != digest):
            continue
        if best is None or entry.engine_ms < best.engine_ms:
            best = entry
    return best
