"""``python main.py bench``: validate the arguments, then run the ablation bench or the leaderboard."""

from __future__ import annotations

import sys
from dataclasses import replace

from studio.errors import InputError


def run_from_args(args) -> int:
    """``python main.py bench``: validate, run, print the one-line summary."""
    from studio.bench.harness import defaults_for, run_bench
    from studio.presenter.renderer import resolve_device

    b = defaults_for(str(resolve_device(args.device)))
    for name, value in (("seconds", args.seconds), ("size_px", args.size), ("fps", args.fps),
                        ("repeats", args.repeats), ("program", args.program), ("save_program", args.save_program),
                        ("canvas", args.canvas), ("engine", args.engine),
                        ("configs", getattr(args, "configs", None)), ("key_stride", getattr(args, "key_stride", None))):
        if value is not None:
            b = replace(b, **{name: value})
    if b.seconds <= 0 or b.repeats < 1 or not 64 <= b.size_px <= 2160 or b.size_px % 2 or not 1 <= b.fps <= 120 \
            or not 1 <= b.key_stride <= 8:
        raise InputError("bench: use --seconds > 0, --repeats >= 1, an even --size of 64..2160, --fps of 1..120 and "
                         "--key-stride of 1..8.")
    if b.program is not None and not b.program.is_file():
        raise InputError(f"Program file not found: {b.program}. Make one with --save-program on a machine with TTS.")
    if getattr(args, "leaderboard", False):
        from studio.bench.leaderboard import budget_for, run_leaderboard

        budget = budget_for(b.device)
        frames = getattr(args, "frames", None) or (round(args.seconds * b.fps) if args.seconds else None)
        budget = replace(budget, frames=frames or budget.frames, repeats=args.repeats or budget.repeats,
                         shares=bool(getattr(args, "shares", False)),
                         budget_s=budget.budget_s if getattr(args, "budget_s", None) is None else args.budget_s)
        if budget.frames < 1 or budget.budget_s < 0:
            raise InputError("bench --leaderboard: use --frames >= 1 and --budget-s >= 0 (0: no limit).")
        engines = tuple(x for x in (getattr(args, "engines", "") or "").split(",") if x)
        _stop_on_sigterm()
        try:
            return run_leaderboard(b, args.json, progress=lambda m: sys.stderr.write(m + "\n"), engines=engines,
                                   append=bool(getattr(args, "append", False)), budget=budget)
        except KeyboardInterrupt:
            sys.stderr.write("leaderboard: cancelled; the rows measured so far are kept\n")
            return 130
    result = run_bench(b, args.json, progress=lambda m: sys.stderr.write(m + "\n"))
    sys.stderr.write(f"plain {result['plain_ms_per_frame']:.3f} ms/frame, optimized "
                     f"{result['optimized_ms_per_frame']:.3f} ms/frame: compute saved "
                     f"{100 * result['compute_saved']:.1f}%; first frame "
                     + (f"{ff:.2f} s" if (ff := result.get("first_frame_from_command_s")) is not None else "-")
                     + " after the command's start" + (f"; wrote {args.json}" if args.json else "") + "\n")
    return 0


def _stop_on_sigterm() -> None:
    """A terminate (the studio's Cancel) stops the leaderboard as Ctrl-C does: the rows measured so far are written."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)
