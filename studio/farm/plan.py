"""Rundown files -> segment jobs, each with everything a worker needs (and nothing that depends on the worker).

A rundown file is the studio's rundown JSON (``studio.pipeline.rundown``). A rundown without a cast is one anchor:
the farm reads its optional portrait, ``"anchor": "PATH"`` on the rundown or on a segment (relative to the rundown
file), else ``--anchor``, else the built-in one. A rundown with a cast (``studio.pipeline.cast``) is rendered as
``render --rundown`` renders it: every segment's job carries the cast (each member's portrait and voice), its speaker,
the layout and the rundown's graphics, and a segment's ``"anchor"`` names its speaker. A segment that cannot be made
(unknown voice, missing portrait, an unknown speaker, empty text) is named in ``FarmPlan.rejected`` with the reason and
left out; the others are made. A cast member whose portrait is missing is on every picture of its rundown: every
segment of it is named.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from studio.contracts import CastLayout
from studio.errors import InputError, StudioError
from studio.graphics.look import Graphics
from studio.pipeline.cast import Member, parse_cast, portrait_problem, segment_voice, speaker_index, speaker_problem
from studio.pipeline.rundown import Segment, parse_programme_graphics, parse_rundown
from studio.pipeline.settings import CoreSettings

# Python's hash() is salted per process: seeds come from this digest instead, so every worker agrees.
_SEED_SPACE = 2**31 - 1


@dataclass(frozen=True)
class SegmentJob:
    """One unit of farm work: one rundown segment, rendered alone."""

    bulletin: str  # the rundown's name: the bulletin is DIR/<bulletin>.mp4
    index: int  # 0-based place in the rundown
    title: str
    text: str
    voice: str
    anchor_path: str | None  # absolute, or None for the built-in portrait (a cast: unused)
    seed: int  # idle motion seed: from the bulletin, the index and the base seed only
    # a rundown with a cast: its anchors (portraits absolute), rows of one warp; empty: one anchor, as above
    cast: tuple[Member, ...] = ()
    speaker: str | None = None  # the member who speaks it (None: the first)
    layout: CastLayout = CastLayout.TWO_SHOT
    graphics: Graphics | None = None  # the segment's own graphics
    programme_graphics: Graphics | None = None  # the rundown's

    @property
    def name(self) -> str:
        return f"{self.bulletin}#{self.index + 1}"

    @property
    def segment(self) -> Segment:
        """The rundown segment, as ``render --rundown`` reads it."""
        return Segment(title=self.title, text=self.text, voice=self.voice, graphics=self.graphics,
                       anchor=self.speaker)

    def settings(self, core: CoreSettings) -> CoreSettings:
        """The core's settings of this segment: its seed; a cast's programme (cast size, layout)."""
        from studio.pipeline.programme import programme_settings

        core = replace(core, seed=self.seed)
        return programme_settings(core, len(self.cast), self.layout) if self.cast else core

    def canvas_style(self, style):
        """The look of this segment of one anchor, as ``render --rundown`` shows it (``render_segments``): the
        command line's ``style`` (a ``CanvasStyle`` or None) over the rundown's graphics, the segment's own over both.
        A cast's segment goes through ``render_segments`` itself, which combines them the same way."""
        from studio.graphics.look import CanvasStyle

        style = style or CanvasStyle()
        g = style.graphics.over(self.programme_graphics or Graphics())
        return replace(style, graphics=self.graphics.over(g) if self.graphics is not None else g, segments=())

    def packs(self, core: CoreSettings) -> tuple[tuple[str | None, int, str | None], ...]:
        """The anchor packs it needs, in cast order: (portrait or None for the built-in one, presenter px, the cast
        member's name or None for the one anchor)."""
        from studio.pipeline.factory import presenter_px

        px = presenter_px(self.settings(core))
        if not self.cast:
            return ((self.anchor_path, px, None),)
        return tuple((str(m.portrait) if m.portrait is not None else None, px, m.name) for m in self.cast)


@dataclass(frozen=True)
class Rejected:
    bulletin: str
    index: int  # 0-based; -1 for the whole rundown
    reason: str

    @property
    def name(self) -> str:
        return self.bulletin if self.index < 0 else f"{self.bulletin}#{self.index + 1}"


@dataclass(frozen=True)
class FarmPlan:
    bulletins: dict[str, list[SegmentJob]] = field(default_factory=dict)  # name -> its segments that can be made
    totals: dict[str, int] = field(default_factory=dict)  # name -> segments in its rundown
    rejected: tuple[Rejected, ...] = ()

    @property
    def jobs(self) -> list[SegmentJob]:
        return [job for jobs in self.bulletins.values() for job in jobs]


def bulletin_name(path: Path) -> str:
    """The bulletin's file stem: the rundown file's stem, kept to safe characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem).strip("._") or "rundown"
    return name


def segment_seed(bulletin: str, index: int, base_seed: int) -> int:
    digest = hashlib.sha256(f"{bulletin}\0{index}\0{base_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % _SEED_SPACE


def rundown_paths(items: list[Path]) -> list[Path]:
    """The rundown files given: files as they are, folders as their ``*.json`` files (sorted)."""
    out: list[Path] = []
    for item in items:
        item = Path(item)
        if item.is_dir():
            found = sorted(p for p in item.glob("*.json") if p.is_file())
            if not found:
                raise InputError(f"The folder {item} holds no rundown (.json) files: give rundown files or a folder "
                                 "of them.")
            out.extend(found)
        elif item.is_file():
            out.append(item)
        else:
            raise InputError(f"Rundown not found: {item}. Check the path.")
    return out


def _anchor(raw: object, base: Path, default: Path | None) -> tuple[str | None, str | None]:
    """(absolute portrait path or None, reason it cannot be used or None)."""
    if raw is None:
        return (str(default.resolve()) if default is not None else None), None
    if not isinstance(raw, str) or not raw:
        return None, "its 'anchor' is not a file path: give the portrait's path"
    path = Path(raw) if Path(raw).is_absolute() else base / raw
    if not path.is_file():
        return None, f"its portrait {raw} does not exist: fix the 'anchor' path"
    return str(path.resolve()), None


def _voice_problem(seg: Segment, cast: tuple[Member, ...]) -> str | None:
    """Why ``seg`` cannot be spoken by its voice (a cast member's is named), or None."""
    from studio.speech import check_request

    try:
        check_request(seg.text, segment_voice(seg, cast))
    except StudioError as exc:
        member = cast[speaker_index(cast, seg.anchor)] if cast else None
        return f"{member.name}'s voice: {exc}" if member is not None and member.voice else str(exc)
    return None


def _cast_jobs(name: str, path: Path, segments: list[Segment], cast: tuple[Member, ...], programme: Graphics,
               core: CoreSettings, layout: CastLayout, rejected: list[Rejected]) -> list[SegmentJob]:
    """The jobs of a rundown with a cast (``programme``: its graphics); the segments that cannot be made go to
    ``rejected``."""
    cast = tuple(m.resolved() for m in cast)
    missing = next((why for m in cast if (why := portrait_problem(m)) is not None), None)
    jobs: list[SegmentJob] = []
    for i, seg in enumerate(segments):
        reason = missing or speaker_problem(cast, seg.anchor, i, path.name) or _voice_problem(seg, cast)
        if reason is not None:
            rejected.append(Rejected(name, i, reason))
            continue
        jobs.append(SegmentJob(bulletin=name, index=i, title=seg.title, text=seg.text, voice=segment_voice(seg, cast),
                               anchor_path=None, seed=segment_seed(name, i, core.seed), cast=cast, speaker=seg.anchor,
                               layout=layout, graphics=seg.graphics, programme_graphics=programme))
    return jobs


def plan_rundowns(items: list[Path], core: CoreSettings, default_anchor: Path | None = None,
                  layout: CastLayout = CastLayout.TWO_SHOT) -> FarmPlan:
    """Read and check every rundown; raise InputError only when nothing at all can be made. ``layout``: how a cast
    is shown (``render --layout``)."""
    from studio.speech import check_request

    bulletins: dict[str, list[SegmentJob]] = {}
    totals: dict[str, int] = {}
    rejected: list[Rejected] = []
    for path in rundown_paths(items):
        name = bulletin_name(path)
        if name in bulletins or name in totals:
            raise InputError(f"Two rundowns would both make {name}.mp4: rename one of the files.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            segments = parse_rundown(data, path.name)
            cast = parse_cast(data, path.name, base=path.parent)
            programme = parse_programme_graphics(data, path.name)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            rejected.append(Rejected(name, -1, f"cannot be read as a rundown ({exc}): fix the file"))
            totals[name] = 0
            continue
        except InputError as exc:
            rejected.append(Rejected(name, -1, str(exc)))
            totals[name] = 0
            continue
        if cast:
            bulletins[name] = _cast_jobs(name, path, segments, cast, programme, core, layout, rejected)
            totals[name] = len(segments)
            continue
        raw_segments = data["segments"]
        top_anchor, top_reason = _anchor(data.get("anchor"), path.parent, default_anchor)
        jobs: list[SegmentJob] = []
        for i, seg in enumerate(segments):
            raw = raw_segments[i]
            anchor, reason = (_anchor(raw["anchor"], path.parent, None) if "anchor" in raw
                              else (top_anchor, top_reason))
            if reason is None:
                try:
                    check_request(seg.text, seg.voice)
                except StudioError as exc:
                    reason = str(exc)
            if reason is not None:
                rejected.append(Rejected(name, i, reason))
                continue
            jobs.append(SegmentJob(bulletin=name, index=i, title=seg.title, text=seg.text, voice=seg.voice,
                                   anchor_path=anchor, seed=segment_seed(name, i, core.seed), graphics=seg.graphics,
                                   programme_graphics=programme))
        bulletins[name] = jobs
        totals[name] = len(segments)
    if not any(bulletins.values()):
        first = rejected[0] if rejected else None
        why = f" ({first.name}: {first.reason})" if first else ""
        raise InputError(f"No segment of these rundowns can be made{why}.")
    return FarmPlan(bulletins=bulletins, totals=totals, rejected=tuple(rejected))


def job_fingerprint(job: SegmentJob, core: CoreSettings, encode: dict, pack_key: str = "", style=None) -> str:
    """What a finished segment must match to be reused on resume: the job, the portrait's content, the picture, the
    encoder settings and, on a canvas, the command line's look ``style`` (a ``CanvasStyle``)."""
    from studio.contracts import Layout
    from studio.graphics.look import CanvasStyle

    core_d = asdict(core)
    core_d["optimizations"] = sorted(o.value for o in core.optimizations)
    core_d["layout"] = core.layout.value
    core_d.pop("seed", None)  # the job's own seed counts
    job_d = asdict(job)
    if not job.cast:  # one anchor: the fingerprint it always had, so that a resumed run reuses its segments
        for key in ("cast", "speaker", "layout"):
            job_d.pop(key)
        for key in ("graphics", "programme_graphics"):
            if not (getattr(job, key) or Graphics()).to_dict():
                job_d.pop(key)
    blob = {"job": job_d, "pack": pack_key, "core": core_d, "encode": encode}
    if core.layout is Layout.CANVAS and style is not None and style != CanvasStyle():
        blob["style"] = asdict(style)
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
