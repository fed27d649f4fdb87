"""Command line: the studio window by default, subcommands for headless work.

Every command is a thin driver of the one pipeline core (``studio.pipeline.factory``): it validates its arguments
before any work, picks a source, a motion source, settings and outputs, and runs the core. Every user error ends in one
line on stderr that says what to do, and exit status 2; tracebacks go to the log file only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from studio.audio.settings import DEFAULT_AUDIO_ENGINE, AudioEngine
from studio.contracts.formats import CastLayout
from studio.errors import InputError, StudioError

log = logging.getLogger("studio.cli")

EXIT_OK, EXIT_INTERNAL, EXIT_USER = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        words = self.prog.split()
        cmd = f"python main.py {words[-1]} --help" if len(words) > 1 else "python main.py --help"
        raise InputError(f"{message} (see `{cmd}`)")


def _add_picture_args(p: argparse.ArgumentParser, default_size: int = 512) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--size", type=int, help=f"the square presenter's size in pixels (default {default_size})")
    fmt.add_argument("--canvas", choices=["720p", "1080p"], help="a 16:9 program: the presenter over a background "
                                                                 "with a lower third")
    p.add_argument("--fps", type=float, default=25.0, help="output frame rate: 25, 30, 50 or 60 (default 25)")
    p.add_argument("--key-fps", type=float, default=0.0,
                   help="generated keyframe rate with keyframes + interpolation (default: half the frame rate)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto: the GPU where there is one)")
    p.add_argument("--engine", default="builtin", help="the talking-head engine (see `doctor`; default builtin)")
    p.add_argument("--weights", type=Path, help="the engine's release folder (its own file layout)")
    p.add_argument("--optimizations", help="default (what helps this engine here), all, none (the plain pipeline), "
                                           "or a comma list of: "
                                           "pyramidal, audio_cache, frame_interpolation, kv_cache, async_pipeline, "
                                           "silence_sieve, cuda_graphs, gpu_encode")
    p.add_argument("--background", metavar="IMAGE|#RRGGBB", help="canvas: a plain set, an image file or a colour")
    p.add_argument("--set", dest="set_", metavar="builtin|IMAGE|VIDEO",
                   help="canvas: the set behind the presenter: builtin (the studio's own news set, the default), "
                        "an image, or a video played in a loop")
    p.add_argument("--place", choices=["centre", "left", "right"], default="centre",
                   help="canvas: the presenter in the centre, or the left / right third with the box on the other "
                        "side (default centre)")
    p.add_argument("--name", help="canvas: the name strap's name (plain text)")
    p.add_argument("--role", help="canvas: the name strap's second line, e.g. the presenter's role")
    p.add_argument("--ticker", type=Path, metavar="FILE", help="canvas: a UTF-8 text file, one ticker line a line")
    p.add_argument("--clock", action="store_true", help="canvas: show the time of day (beside the ticker)")
    p.add_argument("--logo", type=Path, metavar="IMAGE", help="canvas: the channel's logo, top right")
    p.add_argument("--headline", help="canvas: the over-the-shoulder box's text (with --place left or right)")
    p.add_argument("--box-image", type=Path, metavar="IMAGE",
                   help="canvas: the over-the-shoulder box's picture (with --place left or right)")
    p.add_argument("--framed", action="store_true",
                   help="canvas: show the portrait as a framed photo instead of cutting the presenter out")
    p.add_argument("--seed", type=int, default=0, help="seed of the idle motion (blinks, sway)")


def _add_stream_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", action="append", default=[], metavar="URL",
                   help="also send the program to URL: rtmp://..., tcp://HOST:PORT or udp://HOST:PORT (MPEG-TS), "
                        "ws://127.0.0.1:PORT (a page that plays it in a browser), v4l2 or virtualcam; repeatable")
    p.add_argument("--stream-allow-remote", action="store_true",
                   help="let the ws:// page be reached from other machines (it binds 127.0.0.1 otherwise)")


def stream_outputs(urls, block: bool = False, allow_remote: bool = False) -> list:
    """The outputs for ``--stream`` URLs (studio.encode.streams); the browser page's address is printed."""
    from studio.encode.streams import output_for_url

    outs = []
    for url in urls:
        if allow_remote and url.startswith(("ws://", "http://")):
            from studio.encode.websocket import WebSocketOutput

            out = WebSocketOutput.from_url(url, block=block, allow_remote=True)
        else:
            out = output_for_url(url, block=block)
        outs.append(out)
    return outs


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="main.py", description="NewsStudio: a lip-synced news presenter from one portrait photo.")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log at DEBUG, on stderr too (the level alone: NEWSSTUDIO_LOG_LEVEL=DEBUG)")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    gui = sub.add_parser("gui", help="open the studio window (the default)")
    gui.add_argument("--anchor", type=Path, help="portrait to load instead of the last one")

    r = sub.add_parser("render", help="render one segment headless to MP4 (H.264 + AAC 48 kHz)")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the words the presenter says")
    src.add_argument("--script", type=Path, help="a UTF-8 text file with the words")
    src.add_argument("--audio", type=Path, help="a speech recording to lip-sync to")
    src.add_argument("--rundown", type=Path, metavar="FILE.json",
                     help="a whole rundown as one programme: its segments in order, each spoken by its anchor "
                          "(a cast of up to four shares the set)")
    r.add_argument("--layout", choices=[x.value for x in CastLayout], default=CastLayout.TWO_SHOT.value,
                   help="--rundown with a cast: two-shot (every anchor on the set side by side, the default) or cut "
                        "(to whoever speaks)")
    r.add_argument("--anchor", type=Path, help="portrait image (default: the built-in astronaut)")
    r.add_argument("--voice", help="TTS voice, e.g. piper:joe or espeak:en-us (see `doctor`)")
    r.add_argument("--title", default="", help="the segment title on a canvas (plain text)")
    r.add_argument("--out", type=Path, required=True,
                   help="output .mp4 file (replaced if it exists; a second command writing the same file at the "
                        "same time is refused at start)")
    r.add_argument("--timings", type=Path, help="also write the phone and word timings as JSON")
    r.add_argument("--audio-engine", choices=[e.value for e in AudioEngine], default=DEFAULT_AUDIO_ENGINE.value,
                   help=f"what turns --audio into mouth motion (default {DEFAULT_AUDIO_ENGINE.value}: "
                        "resources/models/audio2motion/metrics.json)")
    _add_stream_args(r)
    r.add_argument("--stream-pace", choices=["on", "off"], default="on",
                   help="on (default): --stream receivers get the program at real time, so the render takes as long "
                        "as the speech; off: as fast as it renders")
    _add_picture_args(r)

    lv = sub.add_parser("live", help="headless live mode from the microphone")
    lv.add_argument("--seconds", type=float, default=10.0, help="how long to stay live (default 10)")
    lv.add_argument("--out", type=Path,
                    help="record to this .mp4 (a second command writing the same file at the same time is refused)")
    lv.add_argument("--anchor", type=Path, help="portrait image (default: the built-in astronaut)")
    lv.add_argument("--input", help="input device name (default: the system default)")
    lv.add_argument("--audio-engine", choices=[e.value for e in AudioEngine], default=DEFAULT_AUDIO_ENGINE.value,
                    help=f"what turns the voice into mouth motion (default {DEFAULT_AUDIO_ENGINE.value})")
    lv.add_argument("--motion-thread", action=argparse.BooleanOptionalAction, default=True,
                    help="neural engine: run the model on its own thread as the audio arrives (default)")
    iv = lv.add_argument_group("interview", "the host (--anchor) speaks a script while the voice at the microphone "
                                            "drives a guest beside it; each listens while the other speaks")
    iv.add_argument("--interview", action="store_true", help="interview mode (needs --script or --text)")
    lines = iv.add_mutually_exclusive_group()
    lines.add_argument("--script", type=Path, help="the host's script, a UTF-8 text file: one turn per paragraph, "
                                                   "and a turn ends after each question")
    lines.add_argument("--text", help="the host's script as text (turns end after each question)")
    iv.add_argument("--guest-portrait", type=Path, metavar="IMAGE",
                    help="the guest's portrait (default: the built-in guest)")
    iv.add_argument("--voice", help="the host's voice, e.g. piper:joe (see `doctor`)")
    iv.add_argument("--layout", choices=[x.value for x in CastLayout], default=CastLayout.TWO_SHOT.value,
                    help="two-shot (both on the set, the default) or cut (to whoever speaks)")
    _add_stream_args(lv)
    _add_picture_args(lv)

    b = sub.add_parser("bench", help="the core with each optimization off and on; engines ranked by latency")
    b.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    b.add_argument("--json", type=Path, help="write the results here (and a PNG chart beside it)")
    b.add_argument("--seconds", type=float, help="length of the rundown to run (default: 6 on CPU, 20 on CUDA)")
    b.add_argument("--size", type=int, help="square presenter size (default: 384 on CPU, 1080 on CUDA)")
    b.add_argument("--canvas", choices=["720p", "1080p"], help="bench a 16:9 canvas instead of the square")
    b.add_argument("--fps", type=float, help="output frame rate (default: 30 on CPU, 60 on CUDA)")
    b.add_argument("--repeats", type=int, help="runs of each configuration; medians are reported (default 3; "
                                               "--leaderboard on a CPU: 1)")
    b.add_argument("--engine", default="builtin", help="the engine to bench (default builtin)")
    b.add_argument("--program", type=Path, help="a saved program (.npz) instead of text-to-speech")
    b.add_argument("--save-program", type=Path, help="save the program used (.npz) for machines without TTS")
    b.add_argument("--configs", choices=["ablation", "all"], help="ablation (default): plain, each optimization "
                                                                   "alone, all; all: also all-but-one rows")
    b.add_argument("--leaderboard", action="store_true", help="rank every engine that fits on this device")
    b.add_argument("--engines", help="with --leaderboard: only these engines (comma list)")
    b.add_argument("--frames", type=int, help="with --leaderboard: output frames a run (default 8 on CPU, 60 on "
                                              "CUDA; --seconds sets it too)")
    b.add_argument("--shares", action="store_true", help="with --leaderboard: also each optimization's share (one "
                                                         "run without each: several times longer)")
    b.add_argument("--budget-s", type=float, help="with --leaderboard: seconds the whole run may take; engines whose "
                                                  "estimate does not fit are listed with it (default 300 on CPU, "
                                                  "0 = no limit on CUDA)")
    b.add_argument("--append", action="store_true", help="with --leaderboard --json FILE: keep FILE's rows that "
                                                         "this run does not measure again (same machine and output)")
    b.add_argument("--key-stride", type=int, help="with keyframes on: one generated frame every N output frames "
                                                  "(default 2; 4 at 60 fps generates 15 frames a second)")

    c = sub.add_parser("compile", help="build inference engines into engines/ (verified against eager, timed)")
    from studio.compile.cli import add_arguments

    add_arguments(c)

    f = sub.add_parser("farm", help="render rundowns on a Ray cluster: one bulletin MP4 and a JSON report each")
    from studio.farm.command import add_arguments as add_farm_arguments

    add_farm_arguments(f)
    _add_picture_args(f)

    d = sub.add_parser("doctor", help="what this machine offers: GPU, audio devices, voices, encoders, engines")
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


def core_settings_from(args: argparse.Namespace, live: bool = False):
    """The core's settings from the picture arguments, validated before any work."""
    from studio.pipeline.factory import FRAME_RATES, parse_optimizations
    from studio.contracts import Layout
    from studio.pipeline.settings import CoreSettings, Optimization
    from studio.presenter.renderer import resolve_device

    from studio.validate import check_fps, check_render_memory, check_seed, check_size

    device = str(resolve_device(args.device))
    fps = check_fps(args.fps, FRAME_RATES)
    if args.canvas:
        layout, size, height = Layout.CANVAS, 512, {"720p": 720, "1080p": 1080}[args.canvas]
    else:
        layout, height = Layout.SQUARE, 720
        size = check_size(512 if args.size is None else args.size)
    if args.optimizations is None and live:
        from studio.pipeline.live import live_optimizations

        opts = live_optimizations(device, args.engine)
    else:
        opts = parse_optimizations(args.optimizations, device, args.engine)
    stride = 2
    if args.key_fps:
        if not 0 < args.key_fps <= fps or abs(fps / args.key_fps - round(fps / args.key_fps)) > 1e-6:
            raise InputError(f"--key-fps {args.key_fps:g} must divide --fps {fps:g} (e.g. {fps / 2:g} or "
                             f"{fps / 4:g}).")
        stride = int(round(fps / args.key_fps))
    check_seed(args.seed)
    from studio.contracts import GENERATORS

    if args.engine not in GENERATORS.names():
        raise InputError(f"Unknown engine '{args.engine}': use one of {', '.join(GENERATORS.names())}.")
    if args.weights is not None and not args.weights.is_dir():
        raise InputError(f"--weights {args.weights} is not a folder: give the engine's release folder.")
    chunk = 1 if live else 8
    if live and Optimization.FRAME_INTERPOLATION in opts:
        chunk = stride
    core = CoreSettings(size_px=size, layout=layout, canvas_height_px=height, fps=fps, device=device,
                        engine=args.engine, optimizations=opts, key_stride=stride, chunk_frames=chunk,
                        batch_frames=8, seed=args.seed)
    from studio.pipeline.factory import presenter_px

    check_render_memory(presenter_px(core), core.output_size, core.batch_frames, device=device)
    return core


def _canvas_style(args: argparse.Namespace):
    """The canvas's look from the picture flags (``studio.graphics.options``)."""
    from studio.graphics.options import canvas_style_from

    return canvas_style_from(args)


def _announce(notes) -> None:
    """One line per partial recording found and recovered (or removed) before a new file is written."""
    for note in notes:
        message, path = note.as_pair()
        sys.stderr.write(f"note: {message}\n")


def _cmd_render(args: argparse.Namespace) -> int:
    from studio.validate import check_output_path, check_timings_path

    inputs = [args.audio, args.anchor, args.script, args.rundown]
    check_output_path(args.out, inputs=inputs)
    if args.rundown is not None:
        return _render_rundown(args)
    check_timings_path(args.timings, args.out, inputs=inputs)
    if args.audio is not None:  # a bad header is refused now, before torch loads (seconds on a small machine)
        from studio.audio.io import probe_audio

        probe_audio(args.audio)
    text = args.text
    if args.script is not None:
        text = _read_script(args.script)
    feed = None
    if text is not None:
        from studio.speech import check_request

        check_request(text, args.voice)
        # spoken from here on, beside the rest: the voice loads and the first sentence is synthesized on its own
        # thread while torch is imported, the anchor loaded and the core made
        from studio.contracts import OnAir
        from studio.pipeline.speech_feed import SpeechFeed

        feed = SpeechFeed(text, args.voice, OnAir(title=args.title))
        feed.start()
    try:
        return _render_with(args, text, feed)
    except BaseException:
        if feed is not None:
            feed.cancel()
        raise


def _render_with(args: argparse.Namespace, text: str | None, feed) -> int:
    """``render`` once its inputs are read (and its speech started: ``feed``)."""
    from studio.pipeline.render import RenderRequest, render_segment

    core = core_settings_from(args)
    style = _canvas_style(args)
    from studio.encode.claim import claim_output
    from studio.encode.recovery import recover_for_output

    with claim_output(args.out):
        _announce(recover_for_output(args.out))
        streams = tuple(stream_outputs(args.stream, block=True, allow_remote=args.stream_allow_remote))
        req = RenderRequest(out_path=args.out, text=text, audio_path=args.audio, anchor_path=args.anchor,
                            voice=args.voice, title=args.title, core=core, timings_path=args.timings,
                            audio_engine=AudioEngine(args.audio_engine), weights_dir=args.weights,
                            canvas_background=style.background_image, canvas_style=style, streams=streams,
                            stream_pace=args.stream_pace == "on", speech=feed)
        import time

        from studio import startup

        before_s, before_cpu_s = startup.since_start_s(), time.process_time()  # imports and checks
        show = _stderr_progress()
        gen = render_segment(req)
        try:
            while True:
                p = next(gen)
                show(p.stage, p.fraction, p.message)
        except StopIteration as stop:
            result = stop.value
    # result.warnings were logged where they arose, and the console log handler has shown them once already
    rtf = result.real_time_factors()
    rep = result.report
    ff = rep.first_frame_from_command_s
    sys.stderr.write(
        f"wrote {result.out_path} ({result.n_frames} frames, {result.audio_duration_s:.2f} s, device {result.device}, "
        f"engine {core.engine}, {_optimizations(rep, core.device)}"
        f"; first frame {f'{ff:.2f} s' if ff is not None else '-'} after the command's start"
        f" ({rep.first_frame_from_core_s or 0:.2f} s after the core's), "
        f"done {startup.since_start_s():.2f} s after it)\n"
        + "stage seconds (real-time factor): "
        + f"startup {before_s:.2f} s ({before_s / max(result.audio_duration_s, 1e-9):.3f}), "
        + ", ".join(f"{k} {v:.2f} s ({rtf[k]:.3f})" for k, v in result.stage_s.items()) + "\n"
        + f"stage CPU seconds (the process, every thread): startup {before_cpu_s:.2f} s, "
        + ", ".join(f"{k} {v:.2f} s" for k, v in result.stage_cpu_s.items()) + "\n")
    return EXIT_OK


def _optimizations(rep, device: str) -> str:
    """The flags a run ran, and each one asked for that it turned off, with why (``CoreReport.off``)."""
    from studio.pipeline.factory import optimization_labels

    names = ",".join(optimization_labels(rep.optimizations, device)) or "none"
    return f"optimizations {names}" + "".join(f"; {why}" for why in rep.off.values())


def _generate_line(rep) -> str:
    """The generator's cost a frame over the run (its stage's time over the frames produced)."""
    gen = rep.stages.get("generate")
    if gen is None or not rep.frames_produced:
        return "generate - ms a frame"
    return f"generate {gen.total_ms / rep.frames_produced:.1f} ms a frame"


def _render_rundown(args: argparse.Namespace) -> int:
    from studio.encode.claim import claim_output
    from studio.encode.recovery import recover_for_output
    from studio.pipeline.programme import check_rundown, render_rundown
    from studio.pipeline.render import RenderRequest

    if args.timings is not None:
        raise InputError("--timings is for one segment: leave it out with --rundown.")
    if not args.rundown.is_file():
        raise InputError(f"Rundown not found: {args.rundown}. Check the path.")
    check_rundown(args.rundown)
    core = core_settings_from(args)
    style = _canvas_style(args)
    with claim_output(args.out):
        _announce(recover_for_output(args.out))
        streams = tuple(stream_outputs(args.stream, block=True, allow_remote=args.stream_allow_remote))
        req = RenderRequest(out_path=args.out, anchor_path=args.anchor, core=core,
                            audio_engine=AudioEngine(args.audio_engine), weights_dir=args.weights,
                            canvas_background=style.background_image, canvas_style=style, streams=streams,
                            stream_pace=args.stream_pace == "on")
        show = _stderr_progress()
        gen = render_rundown(req, args.rundown, CastLayout(args.layout))
        try:
            while True:
                p = next(gen)
                show(p.stage, p.fraction, p.message)
        except StopIteration as stop:
            result = stop.value
    rep = result.report
    rtf = result.real_time_factors()
    sys.stderr.write(
        f"wrote {result.out_path} ({result.n_frames} frames, {result.audio_duration_s:.2f} s, device {result.device}, "
        f"engine {core.engine}, {_optimizations(rep, core.device)}); stage seconds (real-time factor): "
        + ", ".join(f"{k} {v:.2f} s ({rtf[k]:.3f})" for k, v in result.stage_s.items())
        + f"; {rep.frames_produced} frames produced; {_generate_line(rep)}\n")
    return EXIT_OK


def _cmd_live(args: argparse.Namespace) -> int:
    from studio.pipeline.live import print_line, run_live

    from studio.validate import check_output_path, check_seconds

    seconds = check_seconds(args.seconds)
    interview = _interview_request(args)
    core = core_settings_from(args, live=True)
    from contextlib import nullcontext

    from studio.encode.claim import claim_output

    claim = nullcontext()
    if args.out is not None:
        check_output_path(Path(args.out), inputs=[args.anchor])
        from studio.encode.recovery import recover_for_output

        claim = claim_output(Path(args.out))
        _announce(recover_for_output(Path(args.out)))
    with claim:
        summary = run_live(core, seconds, out=args.out, input_device=args.input, anchor_path=args.anchor,
                           audio_engine=AudioEngine(args.audio_engine), motion_thread=args.motion_thread,
                           streams=tuple(stream_outputs(args.stream, allow_remote=args.stream_allow_remote)),
                           say=print_line, canvas_style=_canvas_style(args), interview=interview)
    print(f"live: {summary.line()}", flush=True)
    return EXIT_OK


def _read_script(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"Script file not found: {path}. Check the path.")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Cannot read {path} as UTF-8 text: save the script as plain text.") from exc


def _interview_request(args: argparse.Namespace):
    """``live --interview``'s request, every input checked before any work; None without --interview."""
    if not args.interview:
        for flag, value in (("--script", args.script), ("--text", args.text),
                            ("--guest-portrait", args.guest_portrait), ("--voice", args.voice)):
            if value is not None:
                raise InputError(f"{flag} is for the interview mode: add --interview, or leave {flag} out.")
        return None
    if args.script is None and args.text is None:
        raise InputError("--interview needs the host's script: give --script FILE or --text \"...\".")
    from studio.graphics.options import image_arg
    from studio.pipeline.interview import InterviewRequest, split_turns
    from studio.speech import check_request

    text = _read_script(args.script) if args.script is not None else args.text
    turns = tuple(split_turns(text))
    if not turns:
        raise InputError("The host's script is empty: write what the host says.")
    check_request(" ".join(turns), args.voice)
    image_arg("--guest-portrait", args.guest_portrait)
    image_arg("--anchor", args.anchor)
    return InterviewRequest(turns=turns, voice=args.voice, host_portrait=args.anchor,
                            guest_portrait=args.guest_portrait, layout=CastLayout(args.layout))


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


def _cmd_bench(args: argparse.Namespace) -> int:
    from studio.bench.command import run_from_args

    return run_from_args(args)


def _cmd_farm(args: argparse.Namespace) -> int:
    from studio.farm.command import cpu_arguments, run_from_args

    return run_from_args(args, core_settings_from(cpu_arguments(args)))


def _cmd_compile(args: argparse.Namespace) -> int:
    try:
        from studio.compile.cli import run_compile
    except ImportError as exc:
        raise StudioError(f"The compiler is not part of this build: {exc}.") from exc
    return run_compile(args)


COMMANDS = {"render": _cmd_render, "doctor": _cmd_doctor, "gui": _cmd_gui, "live": _cmd_live,
            "bench": _cmd_bench, "compile": _cmd_compile, "farm": _cmd_farm}
# commands that have closed all their work when they return (the file written and checked, the encoder process
# ended): ``main(leave=True)`` ends their process without the interpreter's teardown (``startup.leave``)
ENDS_CLOSED = frozenset({"render"})


def main(argv: list[str] | None = None, leave: bool = False) -> int:
    """Run the command of ``argv`` (default: the process's arguments) and return its exit status; with ``leave``
    (``main.py``) a command of ``ENDS_CLOSED`` ends the process there instead."""
    command, code = _run(argv)
    if leave and command in ENDS_CLOSED:
        from studio import startup

        startup.leave(code)
    return code


def _run(argv: list[str] | None) -> tuple[str, int]:
    """(the command, its exit status)."""
    from studio.logs import setup_logging

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _build_parser().parse_args(argv)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return "", EXIT_USER
    setup_logging(verbose=args.verbose)
    command = args.command or "gui"
    return command, _run_command(command, args)


def _run_command(command: str, args: argparse.Namespace) -> int:
    try:
        return COMMANDS[command](args)
    except StudioError as exc:
        log.info("%s failed: %s", command, exc, exc_info=True)
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USER
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except MemoryError:
        log.exception("out of memory in %s", command)
        sys.stderr.write("error: the machine ran out of memory: choose a smaller --size or a shorter input.\n")
        return EXIT_USER
    except Exception as exc:  # the last line of defence: log the traceback, say one line
        from studio.paths import data_dir

        log.exception("unexpected failure in %s", command)
        sys.stderr.write(f"error: unexpected failure ({type(exc).__name__}: {exc}); "
                         f"details in {data_dir() / 'logs' / 'studio.log'}\n")
        return EXIT_INTERNAL
