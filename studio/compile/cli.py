"""``python main.py compile``: list what can be built here, build engines into engines/, with a progress bar.

    compile --list
    compile --model NAME | --all  [--backend B] [--precision P] [--batch N] [--device auto|cpu|cuda]
            [--size PX] [--mode M] [--int8 dynamic|static] [--repeats N] [--min-psnr DB] [--force] [--json FILE]

A choice this machine cannot build (TensorRT where it is not installed, FP8 on a CPU, CUDA graphs without a GPU) ends
in one line that says why and a non-zero exit status, before anything is built.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from studio.compile.settings import BACKEND_LABELS, BACKENDS, INDUCTOR_MODES, INT8_METHODS, BuildSettings
from studio.compile.silicon import PRECISION_LABELS, PRECISIONS
from studio.errors import CompileError, InputError, StudioError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The compile subcommand's arguments (studio/cli.py calls this on its subparser)."""
    p.add_argument("--list", action="store_true", help="what can be built here, and what is cached")
    p.add_argument("--model", help="the engine to compile (see --list)")
    p.add_argument("--all", action="store_true", help="every engine that fits on this device")
    p.add_argument("--backend", default="onnxruntime", choices=BACKENDS, help="default onnxruntime")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="what the device supports (see --list)")
    p.add_argument("--batch", type=int, default=1, help="batch size of the engine (profiles 1, 16, 32, 64)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--size", type=int, default=0, help="picture size the engine is built for (default: native)")
    p.add_argument("--mode", default="default", choices=INDUCTOR_MODES, help="TorchInductor mode")
    p.add_argument("--int8", default="dynamic", choices=INT8_METHODS, help="ONNX Runtime INT8 quantization")
    p.add_argument("--repeats", type=int, default=20, help="timed calls of eager and of the engine (median)")
    p.add_argument("--min-psnr", type=float, default=0.0, help="verification threshold in dB (0: by precision)")
    p.add_argument("--force", action="store_true", help="rebuild even when a ready engine is cached")
    p.add_argument("--json", type=Path, help="write the engines' reports to this JSON file")


class ProgressBar:
    """A progress bar on stderr: one updating line on a terminal (log lines printed above it), else a line for every
    log line with its percentage."""

    def __init__(self, stream: TextIO | None = None, width: int = 28) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.width = width

    def show(self, fraction: float, message: str, log_line: str = "") -> None:
        pct = max(0.0, min(1.0, fraction))
        if self.tty:
            if log_line:
                self.stream.write("\r\033[K" + log_line + "\n")
            filled = int(round(pct * self.width))
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {pct * 100:3.0f}%  {message}"
            self.stream.write("\r\033[K" + bar[:160])
            if pct >= 1.0:
                self.stream.write("\n")
        elif log_line:
            self.stream.write(f"{pct * 100:3.0f}%  {log_line}\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _fingerprint(device: str):
    from studio.compile.silicon import fingerprint

    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise InputError(f"Unknown device {device!r}: use auto, cpu or cuda.")
    return fingerprint(device)


def list_text(fp, root: Path) -> str:
    """The --list report: silicon, backends x precisions here (with reasons), models, cached engines."""
    from studio.compile import cache
    from studio.compile.builders import BACKENDS as IMPLS
    from studio.contracts import GENERATORS

    lines = [f"silicon   {fp.summary()}", "", "backend              " + "".join(f"{PRECISION_LABELS[p]:<10}"
                                                                         for p in PRECISIONS)]
    reasons: dict[str, int] = {}
    for name, b in IMPLS.items():
        choices = b.precision_reasons(fp)
        cells = []
        for p in PRECISIONS:
            r = choices[p]
            if r is None:
                cells.append(f"{'yes':<10}")
            else:
                k = reasons.setdefault(r, len(reasons) + 1)
                cells.append(f"{f'no [{k}]':<10}")
        kept = "file" if b.serializable else "in-process"
        lines.append(f"{BACKEND_LABELS[name]:<21}" + "".join(cells) + f"({kept})")
    lines.append("")
    lines += [f"[{k}] {r}" for r, k in reasons.items()]
    lines += ["", "models (timing twins build with seeded random weights until the release's weights are given):"]
    for name in GENERATORS.names():
        info = GENERATORS.create(name).info
        here = [x for x in info.compile_backends if x in IMPLS and IMPLS[x].unavailable(fp) is None]
        not_here = [b for b in info.compile_backends if b not in here]
        text = f"  {name:<18} {info.label}: " + (", ".join(here) or "nothing here")
        if not_here:
            text += f" (not here: {', '.join(not_here)})"
        if info.needs_gpu_reason and not fp.is_cuda:
            text += f"; needs a GPU: {info.needs_gpu_reason}"
        lines.append(text)
    entries = cache.scan(root, fp)
    lines += ["", f"cached engines in {root} ({len(entries)}; in-process ones are rebuilt and re-verified on load):"]
    lines += [f"  {e.describe()}" for e in entries] or ["  none"]
    return "\n".join(lines)


def _open_generator(name: str, fp, args: argparse.Namespace, precision: str):
    """The generator ``name`` opened on the default anchor at the engine's batch; its compile targets are what is
    built. FP16 / BF16 engines are compared with eager at that precision (what the studio would run without them)."""
    import torch

    from studio.contracts import GENERATORS, GeneratorSettings
    from studio.presenter.anchor import build_anchor

    from studio.generators import missing_packages

    gen = GENERATORS.create(name)
    info = gen.info
    if info.needs_gpu_reason and not fp.is_cuda:
        raise CompileError(f"{name} needs a GPU: {info.needs_gpu_reason}")
    lacking = missing_packages(gen)
    if lacking:
        raise CompileError(f"{name} needs {', '.join(lacking)}, not installed here: "
                           "NEWSSTUDIO_EXTRAS=engines ./installers/setup.sh installs them.")
    device = "cuda" if fp.is_cuda else "cpu"
    size = args.size or info.native_px or 512
    model_precision = precision if precision in ("fp16", "bf16") else "fp32"
    gen.open(build_anchor(), GeneratorSettings(device=device, size_px=size, precision=model_precision,
                                               batch_frames=args.batch))
    if device == "cuda":
        torch.cuda.synchronize()
    return gen


def _compile_one(name: str, fp, settings: BuildSettings, args: argparse.Namespace, root: Path, bar: ProgressBar):
    from studio.compile.jobs import compile_generator
    from studio.contracts import GENERATORS

    info = GENERATORS.create(name).info
    if settings.backend != "eager" and info.compile_backends and settings.backend not in info.compile_backends:
        raise CompileError(f"{name} is not offered for {BACKEND_LABELS[settings.backend]}: it declares "
                           f"{', '.join(info.compile_backends)}.")
    bar.show(0.0, f"{name}: opening", f"{name}: opening the engine ({info.label})")
    gen = _open_generator(name, fp, args, settings.precision)
    try:
        job = compile_generator(name, gen, settings, fp=fp, root=root, force=args.force)
        while True:
            try:
                p = next(job)
            except StopIteration as stop:
                return stop.value or []
            bar.show(p.fraction, f"{name}/{p.message}", p.log)
    finally:
        gen.close()


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` completed with this module's defaults for the arguments a caller's parser does not define."""
    p = argparse.ArgumentParser(add_help=False)
    add_arguments(p)
    values = vars(p.parse_args([]))
    values.update(vars(args))
    return argparse.Namespace(**values)


def run_compile(args: argparse.Namespace) -> int:
    """Run the compile subcommand; returns the exit status (errors raise StudioError: one line, status 2)."""
    from studio.compile.builders import backend as backend_of
    from studio.paths import ENGINES
    from studio.contracts import GENERATORS

    args = _with_defaults(args)
    root = Path(getattr(args, "engines_dir", None) or ENGINES)
    fp = _fingerprint(args.device)
    if args.list:
        print(list_text(fp, root))
        return 0
    if not args.model and not args.all:
        raise InputError("Say what to compile: --model NAME (see --list) or --all.")
    settings = BuildSettings(backend=args.backend, precision=args.precision, batch=args.batch,
                             inductor_mode=args.mode, int8_method=args.int8, timed_calls=max(1, args.repeats),
                             min_psnr_db=args.min_psnr)
    settings.check()
    reason = backend_of(settings.backend).precision_reasons(fp)[settings.precision]
    if reason is not None:  # one line, before anything is opened or built
        raise CompileError(reason)
    names = list(GENERATORS.names()) if args.all else [args.model]
    if args.model and args.model not in GENERATORS.names():
        raise InputError(f"Unknown engine '{args.model}': use one of {', '.join(GENERATORS.names())}.")
    bar = ProgressBar()
    reports, failures = [], []
    for name in names:
        try:
            reports += _compile_one(name, fp, settings, args, root, bar)
        except StudioError as exc:  # with --all, one engine that cannot be built does not stop the others
            if len(names) == 1:
                raise
            bar.end()
            failures.append(f"{name}: {exc}")
            sys.stderr.write(f"skipped {name}: {exc}\n")
    for r in reports:
        print(r.summary())
    if args.json:
        data = [{"model": r.model, "target": r.target, "backend": r.backend, "precision": r.precision,
                 "batch": r.batch, "arch": r.arch, "engine": str(r.path), "cached": r.cached,
                 "verification": r.verification.as_dict(), "timing": r.timing.as_dict() if r.timing else None,
                 "build_s": r.build_s, "details": r.details} for r in reports]
        Path(args.json).write_text(json.dumps({"silicon": fp.as_dict(), "engines": data}, indent=2) + "\n",
                                   encoding="utf-8")
    if failures:
        raise CompileError(f"{len(failures)} of {len(names)} engines were not compiled (see above).")
    return 0
