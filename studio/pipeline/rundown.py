"""The rundown: the ordered list of segments a presenter speaks (a title, a block of text and a voice each).

Stored as JSON ``{"version": 1, "segments": [{"title": ..., "text": ..., "voice": ...}, ...]}``. The default ships in
``resources/rundown.json``; the studio keeps the producer's edited copy in the data folder.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from studio.errors import InputError
from studio.paths import RESOURCES, data_dir

log = logging.getLogger(__name__)

RUNDOWN_VERSION = 1
DEFAULT_RUNDOWN = RESOURCES / "rundown.json"
DEFAULT_VOICE = "piper:joe"


@dataclass(frozen=True)
class Segment:
    """One block of the rundown."""

    title: str
    text: str
    voice: str = DEFAULT_VOICE  # engine:voice, e.g. piper:joe or espeak:en-us

    @property
    def word_count(self) -> int:
        return len(self.text.split())


def user_rundown_path() -> Path:
    """Where the studio saves the producer's rundown."""
    return data_dir() / "rundown.json"


def parse_rundown(data: object, source: str = "rundown") -> list[Segment]:
    """Segments from decoded JSON; raises InputError saying what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise InputError(f"{source} is not a rundown: expected an object with a 'segments' list.")
    out: list[Segment] = []
    for i, item in enumerate(data["segments"]):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InputError(f"Segment {i + 1} of {source} has no 'text': give each segment a text.")
        title = item.get("title") if isinstance(item.get("title"), str) else f"Segment {i + 1}"
        voice = item.get("voice") if isinstance(item.get("voice"), str) and item.get("voice") else DEFAULT_VOICE
        out.append(Segment(title=title, text=item["text"], voice=voice))
    return out


def load_rundown(path: Path | None = None) -> list[Segment]:
    """Read a rundown file (default: the shipped one)."""
    path = DEFAULT_RUNDOWN if path is None else Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"Rundown not found: {path}. Check the path.") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"Cannot read {path.name} as a rundown (JSON): {exc}. Fix or replace the file.") from exc
    return parse_rundown(data, path.name)


def load_user_rundown() -> list[Segment]:
    """The producer's saved rundown, or the shipped default when there is none or it is unreadable."""
    path = user_rundown_path()
    if path.is_file():
        try:
            return load_rundown(path)
        except InputError as exc:
            log.warning("ignoring the saved rundown: %s", exc)
    return load_rundown(DEFAULT_RUNDOWN)


def save_rundown(segments: list[Segment], path: Path | None = None) -> Path:
    """Write ``segments`` as JSON (atomically: a temporary file renamed onto ``path``)."""
    path = user_rundown_path() if path is None else Path(path)
    payload = {"version": RUNDOWN_VERSION, "segments": [asdict(s) for s in segments]}
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise InputError(f"Cannot save the rundown to {path}: {exc.strerror}. Choose a folder you may write to.") \
            from exc
    return path
