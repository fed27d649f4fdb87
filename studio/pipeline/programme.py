"""``render --rundown``: a whole rundown as one programme through the core, its segments in order.

Each segment is spoken by its anchor's voice (the cast member's, else the segment's own) and placed on one timeline
with a pause after it; what is on air names the segment's title, row and speaker. A cast of two or more is one
generator call a chunk, its anchors the rows (``studio.presenter.cast_warp``), each with its own motion
(``studio.pipeline.cast_motion``): the speaker's row driven by the speech, the others listening. The picture is a
two-shot (all on the set side by side) or cuts to the speaker; the speaker's name strap shows. A rundown without a
cast is one anchor, as before. The studio puts a cast on air with the same pieces (``programme_settings``,
``member_pack``, ``with_name_straps``, ``studio.pipeline.cast_motion.programme_motion``: ``studio.runtime.cast``)
through its one core; the render farm renders each segment of a cast rundown through ``render_segments``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import replace
from pathlib import Path

from studio.contracts import CastLayout, OnAir
from studio.errors import StudioError
from studio.pipeline.render import RenderProgress, RenderRequest, RenderResult, run_program

PAUSE_AFTER_SEGMENT_S = 0.5


def programme_settings(core, cast_size: int, layout: CastLayout):
    """The core's settings for a cast of ``cast_size`` shown as ``layout``."""
    return replace(core, cast_size=max(1, cast_size), cast_layout=layout)


def check_rundown(path: Path) -> tuple[list, tuple]:
    """The rundown's segments and cast, every speaker, portrait and voice checked (before any work)."""
    from studio.pipeline.cast import check_portraits, segment_voice
    from studio.pipeline.rundown import load_cast, load_rundown
    from studio.speech import check_request
    from studio.errors import InputError

    segments = load_rundown(path)
    if not segments:
        raise InputError(f"{path.name} has no segments: add at least one.")
    cast = load_cast(path)
    check_portraits(cast)
    for seg in segments:
        check_request(seg.text, segment_voice(seg, cast))
    return segments, cast


def member_pack(member, output_px: int, anchor_path: Path | None = None, progress=None):
    """The anchor pack of one cast member (``member`` None: the one anchor, ``anchor_path`` or the built-in
    presenter), built at ``output_px``; the anchor build's errors name the member (``CastMemberError``)."""
    from studio.errors import CastMemberError
    from studio.presenter.anchor import build_anchor

    if member is None:
        return build_anchor(anchor_path, output_px=output_px, progress=progress)
    try:
        return build_anchor(member.portrait, output_px=output_px, name=member.name, progress=progress)
    except StudioError as exc:
        raise CastMemberError(member.name, f"{member.name}: {exc}") from exc
    except (ValueError, OSError) as exc:  # what the image libraries raise past the anchor build's own checks
        raise CastMemberError(member.name, f"{member.name}: cannot use this portrait ({exc}); try another.") from exc


def with_name_straps(segments, cast) -> list:
    """``segments`` with their speaker's name strap under their own graphics (a segment that names someone else
    keeps that); without a cast, as they are."""
    from studio.graphics.look import Graphics
    from studio.pipeline.cast import speaker_index

    if not cast:
        return list(segments)
    return [replace(s, graphics=(s.graphics or Graphics()).over(
        Graphics(name=cast[speaker_index(cast, s.anchor)].name))) for s in segments]


def segment_item(segments, cast, i: int, warnings: list[str] | None = None):
    """Segment ``i`` spoken by its anchor's voice, as a program item (with the pause after it) whose on-air names
    its title, row and speaker."""
    from studio.pipeline.cast import segment_voice, speaker_index
    from studio.pipeline.sources import item_from_utterance
    from studio.speech import synthesize

    seg = segments[i]
    who = speaker_index(cast, seg.anchor) if cast else 0
    utt = synthesize(seg.text, segment_voice(seg, cast))
    if warnings is not None:
        warnings.extend(utt.warnings)
    return item_from_utterance(utt, OnAir(title=seg.title, row=i, speaker=who), PAUSE_AFTER_SEGMENT_S)


def render_rundown(req: RenderRequest, rundown: Path, layout: CastLayout = CastLayout.TWO_SHOT,
                   abort: Callable[[], bool] = lambda: False) -> Generator[RenderProgress, None, RenderResult]:
    """Render the rundown at ``rundown`` to ``req.out_path`` (see the module docstring)."""
    from studio.pipeline.factory import presenter_px
    from studio.pipeline.rundown import load_programme_graphics

    segments, cast = check_rundown(rundown)
    core = programme_settings(req.core, len(cast), layout)
    stage: dict[str, float] = {}
    c0 = time.process_time()
    t0 = time.perf_counter()
    members = cast or (None,)
    packs = []
    for i, m in enumerate(members):
        yield RenderProgress("anchor", i / len(members), f"anchor {i + 1} of {len(members)}")
        packs.append(member_pack(m, presenter_px(core), req.anchor_path))
    stage["anchor"] = time.perf_counter() - t0
    return (yield from render_segments(replace(req, core=core), segments, cast, tuple(packs),
                                       load_programme_graphics(rundown), layout, abort, stage, c0))


def render_segments(req: RenderRequest, segments, cast, packs: tuple, graphics,
                    layout: CastLayout = CastLayout.TWO_SHOT, abort: Callable[[], bool] = lambda: False,
                    stage: dict[str, float] | None = None, c0: float | None = None
                    ) -> Generator[RenderProgress, None, RenderResult]:
    """``segments`` of a rundown with its ``cast`` as one programme under the rundown's ``graphics``: what
    ``render_rundown`` does once the rundown is checked and its anchors built. ``packs``: the anchor packs in cast
    order, built at the presenter's size of ``programme_settings(req.core, len(cast), layout)`` (no cast: the one
    anchor's). ``stage`` / ``c0``: the seconds measured before and the process time they were counted from. The farm
    renders each segment of a cast rundown through here, a list of one."""
    from studio.graphics.look import CanvasStyle, Graphics
    from studio.pipeline.cast_motion import programme_motion
    from studio.pipeline.sources import ProgramSource

    stage = {} if stage is None else stage
    cpu: dict[str, float] = {}
    c0 = time.process_time() if c0 is None else c0
    core = programme_settings(req.core, len(cast), layout)
    t0 = time.perf_counter()
    items: list = []
    warnings: list[str] = []
    for i, seg in enumerate(segments):
        if abort():
            raise StudioError("Render cancelled.")
        yield RenderProgress("speech", i / len(segments), f"segment {i + 1} of {len(segments)}: {seg.title}")
        items.append(segment_item(segments, cast, i, warnings))
    stage["speech"] = time.perf_counter() - t0

    style = req.canvas_style or CanvasStyle()
    seg_graphics = tuple(s.graphics or Graphics() for s in with_name_straps(segments, cast))
    style = replace(style, graphics=style.graphics.over(graphics), segments=seg_graphics)
    req = replace(req, core=core, canvas_style=style, title="")
    motion = programme_motion(len(cast), req.audio_engine, core.seed)
    anchor = tuple(packs) if len(packs) > 1 else packs[0]
    return (yield from run_program(req, anchor, ProgramSource(items), motion, None, tuple(warnings), stage, cpu, c0,
                                   abort))
