"""Command line: the studio window by default, subcommands for headless work (see DESIGN.md's contract).

Every user error ends in one line on stderr that says what to do, and a non-zero exit status; tracebacks go to the
log file only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from studio.audio.settings import DEFAULT_AUDIO_ENGINE
from studio.errors import InputError, StudioError

log = logging.getLogger("studio.cli")

EXIT_OK, EXIT_INTERNAL, EXIT_USER = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise InputError(f"{message} (see `python main.py {self.prog.split()[-1]} --help`)")


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="main.py", description="NewsStudio: a lip-synced news presenter from one portrait photo.")
    p.add_argument("-v", "--verbose", action="store_true", help="log details to stderr too")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    gui = sub.add_parser("gui", help="open the studio window (the default)")
    gui.add_argument("--anchor", type=Path, help="portrait to load instead of the last one")

    r = sub.add_parser("render", help="render one segment headless to MP4 (H.264 + AAC)")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the words the presenter says")
    src.add_argument("--script", type=Path, help="a UTF-8 text file with the words")
    src.add_argument("--audio", type=Path, help="a speech recording to lip-sync to")
    r.add_argument("--anchor", type=Path, help="portrait image (default: the built-in astronaut)")
    r.add_argument("--voice", help="TTS voice, e.g. piper:joe or espeak:en-us (see `doctor`)")
    r.add_argument("--size", type=int, default=512, help="output width and height in pixels (default 512)")
    r.add_argument("--fps", type=float, default=25.0, help="output frame rate (default 25)")
    r.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    r.add_argument("--out", type=Path, required=True, help="output .mp4 file")
    r.add_argument("--timings", type=Path, help="also write the phone and word timings as JSON")
    r.add_argument("--seed", type=int, default=0, help="seed of the idle motion (blinks, sway)")
    r.add_argument("--engine", choices=["neural", "pocketsphinx"], default=DEFAULT_AUDIO_ENGINE.value,
                   help=f"what turns --audio into mouth motion (default: {DEFAULT_AUDIO_ENGINE.value}; on human "
                        "speech the neural model beats the pocketsphinx baseline on viseme accuracy and lip closure: "
                        "resources/models/audio2motion/metrics.json)")

    lv = sub.add_parser("live", help="headless live mode from the default microphone")
    lv.add_argument("--seconds", type=float, default=10.0)
    lv.add_argument("--out", type=Path)
    lv.add_argument("--anchor", type=Path)
    lv.add_argument("--size", type=int, default=512)
    lv.add_argument("--fps", type=float, default=25.0)
    lv.add_argument("--device", default="auto")
    lv.add_argument("--input", help="input device name (default: the system default)")
    lv.add_argument("--engine", choices=["neural", "pocketsphinx"], default=DEFAULT_AUDIO_ENGINE.value,
                    help=f"what turns the voice into mouth motion (default: {DEFAULT_AUDIO_ENGINE.value})")
    lv.add_argument("--motion-thread", action=argparse.BooleanOptionalAction, default=True,
                    help="neural engine: run the model on its own thread as the audio arrives (default), or inside "
                         "each frame's step (--no-motion-thread, for comparison)")
    lv.add_argument("--field-divisor", type=int, default=8, choices=[4, 8, 16],
                    help="warp field at size / this: 4 = the plain renderer, 8 = pyramidal (default)")

    b = sub.add_parser("bench", help="plain vs optimized pipeline, with every optimization's share (JSON + PNG)")
    b.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    b.add_argument("--json", type=Path, help="write the results here (and a PNG chart beside it)")
    b.add_argument("--seconds", type=float, help="length of the rundown to run (default: 6 on CPU, 20 on CUDA)")
    b.add_argument("--size", type=int, help="output size in pixels (default: 384 on CPU, 1080 on CUDA)")
    b.add_argument("--fps", type=float, help="output frame rate (default: 30 on CPU, 60 on CUDA)")
    b.add_argument("--repeats", type=int, help="runs of each configuration; medians are reported (default 3)")
    b.add_argument("--program", type=Path, help="a saved program (.npz) instead of text-to-speech")
    b.add_argument("--save-program", type=Path, help="save the program used (.npz) for machines without TTS")

    c = sub.add_parser("compile", help="build one inference engine into engines/")
    c.add_argument("--model", required=True)
    c.add_argument("--backend", required=True)
    c.add_argument("--precision", default="fp16")
    c.add_argument("--batch", type=int, default=1)

    d = sub.add_parser("doctor", help="what this machine offers: GPU, audio devices, voices, encoders, backends")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def _stderr_progress(prefix: str = ""):
    """A progress printer for stderr: one updating line on a terminal, a line per 10 % otherwise."""
    tty = sys.stderr.isatty()
    last = {"key": None}

    def show(stage: str, fraction: float, message: str) -> None:
        if tty:
            sys.stderr.write(f"\r{prefix}{stage:>7}: {fraction * 100:5.1f}%  {message:<40}")
            if fraction >= 1.0:
                sys.stderr.write("\n")
        else:
            key = (stage, int(fraction * 10))
            if key != last["key"]:
                last["key"] = key
                sys.stderr.write(f"{prefix}{stage}: {fraction * 100:.0f}% {message}\n")
        sys.stderr.flush()

    return show


def _cmd_render(args: argparse.Namespace) -> int:
    from studio.pipeline.offline import RenderRequest, render_segment

    text = args.text
    if args.script is not None:
        if not args.script.is_file():
            raise InputError(f"Script file not found: {args.script}. Check the path.")
        try:
            text = args.script.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"Cannot read {args.script} as UTF-8 text: save the script as plain text.") from exc
    req = RenderRequest(out_path=args.out, text=text, audio_path=args.audio, anchor_path=args.anchor,
                        voice=args.voice, size_px=args.size, fps=args.fps, device=args.device,
                        timings_path=args.timings, seed=args.seed, audio_engine=args.engine)
    show = _stderr_progress()
    gen = render_segment(req)
    try:
        while True:
            p = next(gen)
            show(p.stage, p.fraction, p.message)
    except StopIteration as stop:
        result = stop.value
    rtf = result.real_time_factors()
    sys.stderr.write(
        f"wrote {result.out_path} ({result.n_frames} frames, {result.audio_duration_s:.2f} s, device {result.device})\n"
        + "stage seconds (real-time factor): "
        + ", ".join(f"{k} {v:.2f} s ({rtf[k]:.3f})" for k, v in result.stage_s.items()) + "\n"
    )
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    import json

    from studio.doctor import collect, format_report

    report = collect()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return EXIT_OK


def _cmd_gui(args: argparse.Namespace) -> int:
    try:
        from studio.ui.app import run_app
    except ImportError as exc:
        raise StudioError(f"The studio window cannot start: {exc}. Run the README's set-up command first.") from exc
    return run_app(anchor=getattr(args, "anchor", None))


def _cmd_live(args: argparse.Namespace) -> int:
    from studio.pipeline.live import run_live_headless

    return run_live_headless(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from studio.bench.harness import defaults_for, run_bench
    from studio.presenter.renderer import resolve_device

    b = defaults_for(str(resolve_device(args.device)))
    for name, value in (("seconds", args.seconds), ("size_px", args.size), ("fps", args.fps),
                        ("repeats", args.repeats), ("program", args.program), ("save_program", args.save_program)):
        if value is not None:
            b = replace(b, **{name: value})
    if b.seconds <= 0 or b.repeats < 1 or not 64 <= b.size_px <= 4096 or b.size_px % 2 or not 1 <= b.fps <= 120:
        raise InputError("bench: use --seconds > 0, --repeats >= 1, an even --size of 64..4096 and --fps of 1..120.")
    if b.program is not None and not b.program.is_file():
        raise InputError(f"Program file not found: {b.program}. Make one with --save-program on a machine with TTS.")
    result = run_bench(b, args.json, progress=lambda m: sys.stderr.write(m + "\n"))
    sys.stderr.write(f"plain {result['plain_ms_per_frame']:.3f} ms/frame, optimized "
                     f"{result['optimized_ms_per_frame']:.3f} ms/frame: compute saved "
                     f"{100 * result['compute_saved']:.1f}%" + (f"; wrote {args.json}" if args.json else "") + "\n")
    return EXIT_OK


def _cmd_unavailable(args: argparse.Namespace) -> int:
    raise StudioError(f"`{args.command}` is not part of this build yet: see the project's open issues.")


COMMANDS = {"render": _cmd_render, "doctor": _cmd_doctor, "gui": _cmd_gui, "live": _cmd_live,
            "bench": _cmd_bench, "compile": _cmd_unavailable}


def main(argv: list[str] | None = None) -> int:
    from studio.logs import setup_logging

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _build_parser().parse_args(argv)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USER
    setup_logging(verbose=args.verbose)
    command = args.command or "gui"
    try:
        return COMMANDS[command](args)
    except StudioError as exc:
        log.info("%s failed: %s", command, exc, exc_info=True)
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USER
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:  # the last line of defence: log the traceback, say one line
        from studio.paths import data_dir

        log.exception("unexpected failure in %s", command)
        sys.stderr.write(f"error: unexpected failure ({type(exc).__name__}: {exc}); "
                         f"details in {data_dir() / 'logs' / 'studio.log'}\n")
        return EXIT_INTERNAL
