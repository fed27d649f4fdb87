"""``python main.py farm``: its arguments and its run (the command line's thin driver of ``run_farm``)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from studio.contracts import CastLayout
from studio.errors import InputError

EXIT_OK, EXIT_PARTIAL = 0, 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rundowns", nargs="+", type=Path, metavar="RUNDOWN",
                   help="rundown JSON files, or folders of them: one bulletin each")
    p.add_argument("--out", type=Path, required=True, help="folder for the bulletins (<rundown>.mp4 + .json report)")
    p.add_argument("--workers", type=int,
                   help="worker processes of the cluster started on this machine (default 2; not with --address)")
    p.add_argument("--address", help="join a running cluster at HOST:PORT (`ray start --head` prints it) instead")
    p.add_argument("--anchor", type=Path, help="portrait for rundowns that name none (default: the built-in one)")
    p.add_argument("--layout", choices=[x.value for x in CastLayout], default=CastLayout.TWO_SHOT.value,
                   help="rundowns with a cast: two-shot (every anchor on the set side by side, the default) or cut "
                        "(to whoever speaks), as render --rundown")
    p.add_argument("--gpu-share", type=float, default=0.25,
                   help="on GPU nodes, the fraction of a GPU one segment takes (default 0.25: four share a GPU)")
    p.add_argument("--retries", type=int, default=2, help="times a segment whose worker died is tried again "
                                                          "(default 2)")


def cpu_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """The picture arguments as the command line checks them for a CPU: the workers' device is theirs (CPU settings
    here, CUDA ones made from them in ``farm_settings_from``)."""
    return argparse.Namespace(**{**vars(args), "device": "cpu"})


def farm_settings_from(args: argparse.Namespace, core):
    """``core``: the CPU workers' settings, from ``cpu_arguments(args)`` checked by the command line."""
    from studio.farm.settings import FarmSettings
    from studio.pipeline.factory import parse_optimizations

    if args.address and args.workers is not None:
        raise InputError("--workers sizes the cluster this machine starts: leave it out with --address (the "
                         "cluster's own workers are used).")
    if not 0 < args.gpu_share <= 1:
        raise InputError(f"--gpu-share {args.gpu_share:g}: give a fraction above 0 and at most 1, e.g. 0.25.")
    if args.retries < 0:
        raise InputError(f"--retries {args.retries}: give 0 or more.")
    if args.anchor is not None and not args.anchor.is_file():
        raise InputError(f"Portrait not found: {args.anchor}. Check the path.")
    from studio.graphics.options import canvas_style_from, with_absolute_paths

    style = with_absolute_paths(canvas_style_from(args))  # a bad flag is this line, before any cluster starts
    gpu_core = None
    if args.device != "cpu":
        gpu_core = replace(core, device="cuda", optimizations=parse_optimizations(args.optimizations, "cuda",
                                                                                  args.engine))
    return FarmSettings(out_dir=args.out, core=core, gpu_core=gpu_core, workers=args.workers or 2, device=args.device,
                        address=args.address, anchor_path=args.anchor, cast_layout=CastLayout(args.layout),
                        gpu_share=args.gpu_share, max_retries=args.retries, canvas_style=style)


def run_from_args(args: argparse.Namespace, core) -> int:
    from studio.farm.console import ConsoleProgress
    from studio.farm.driver import run_farm

    settings = farm_settings_from(args, core)
    console = ConsoleProgress()
    gen = run_farm(settings, list(args.rundowns))
    try:
        while True:
            console.show(next(gen))
    except StopIteration as stop:
        result = stop.value
    finally:
        console.close()
    for name, path in result.bulletins.items():
        sys.stderr.write(f"wrote {path} (report {result.reports[name]})\n")
    for seg, reason in result.failed:
        sys.stderr.write(f"not made: {seg}: {reason}\n")
    c = result.cluster
    sys.stderr.write(f"farm: {result.made} segment(s) made, {result.resumed} reused, {result.retries} retried, "
                     f"{len(result.failed)} not made, in {result.seconds:.1f} s on {c.get('nodes')} node(s) "
                     f"({c.get('address')})\n")
    return EXIT_OK if not result.failed else EXIT_PARTIAL

