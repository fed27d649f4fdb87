"""Rundown files -> segment jobs, each with everything a worker needs (and nothing that depends on the worker).

A rundown file is the studio's rundown JSON (``studio.pipeline.rundown``). The farm also reads an optional portrait:
``"anchor": "PATH"`` on the rundown or on a segment (relative to the rundown file), else ``--anchor``, else the
built-in one. A segment that cannot be made (unknown voice, missing portrait, empty text) is named in
``FarmPlan.rejected`` with the reason and left out; the others are made.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from studio.errors import InputError, StudioError
from studio.pipeline.rundown import parse_rundown
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
    anchor_path: str | None  # absolute, or None for the built-in portrait
    seed: int  # idle motion seed: from the bulletin, the index and the base seed only

    @property
    def name(self) -> str:
        return f"{self.bulletin}#{self.index + 1}"


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


def plan_rundowns(items: list[Path], core: CoreSettings, default_anchor: Path | None = None) -> FarmPlan:
    """Read and check every rundown; raise InputError only when nothing at all can be made."""
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
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            rejected.append(Rejected(name, -1, f"cannot be read as a rundown ({exc}): fix the file"))
            totals[name] = 0
            continue
        except InputError as exc:
            rejected.append(Rejected(name, -1, str(exc)))
            totals[name] = 0
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
                                   anchor_path=anchor, seed=segment_seed(name, i, core.seed)))
        bulletins[name] = jobs
        totals[name] = len(segments)
    if not any(bulletins.values()):
        first = rejected[0] if rejected else None
        why = f" ({first.name}: {first.reason})" if first else ""
        raise InputError(f"No segment of these rundowns can be made{why}.")
    return FarmPlan(bulletins=bulletins, totals=totals, rejected=tuple(rejected))


def job_fingerprint(job: SegmentJob, core: CoreSettings, encode: dict, pack_key: str = "") -> str:
    """What a finished segment must match to be reused on resume: the job, the portrait's content, the picture and
    the encoder settings."""
    core_d = asdict(core)
    core_d["optimizations"] = sorted(o.value for o in core.optimizations)
    core_d["layout"] = core.layout.value
    core_d.pop("seed", None)  # the job's own seed counts
    blob = json.dumps({"job": asdict(job), "pack": pack_key, "core": core_d, "encode": encode}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
