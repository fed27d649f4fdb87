"""Plain text for the graphics: a font that has the text's letters, and text fitted to a box.

Text is drawn literally (``<b>`` or ``*x*`` appear as typed). A line that does not fit is wrapped onto a second line,
and what does not fit two lines ends in an ellipsis. Fonts are TrueType files found on the machine (DejaVu from the
system or from matplotlib's wheel, and any other fonts installed); for each text the first font that has all its
letters is used, else the one that has most.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

log = logging.getLogger(__name__)

ELLIPSIS = "…"
FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".fonts")
PREFERRED = ("DejaVuSans", "NotoSans", "Noto Sans", "FreeSans", "LiberationSans")


@functools.lru_cache(maxsize=1)
def font_files() -> tuple[Path, ...]:
    """TrueType fonts on this machine, the preferred sans faces first (matplotlib's DejaVu as the last resort)."""
    found: list[Path] = []
    for d in FONT_DIRS:
        if d.is_dir():
            found += sorted(p for p in d.rglob("*") if p.suffix.lower() in (".ttf", ".otf"))
    try:
        import matplotlib

        found.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans-Bold.ttf")
        found.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    except ImportError:
        pass

    def rank(p: Path) -> tuple[int, int]:
        stem = p.stem
        pref = next((i for i, name in enumerate(PREFERRED) if stem.startswith(name)), len(PREFERRED))
        plain = 0 if stem.endswith(("-Bold", "Sans", "-Regular")) else 1
        return pref, plain

    return tuple(sorted(dict.fromkeys(found), key=rank))


@functools.lru_cache(maxsize=64)
def _cmap(path: Path) -> frozenset[int]:
    try:
        from fontTools.ttLib import TTFont

        with TTFont(str(path), lazy=True, fontNumber=0) as f:
            return frozenset(f.getBestCmap() or ())
    except Exception as exc:  # an unreadable font file is skipped
        log.debug("font %s unreadable: %s", path, exc)
        return frozenset()


def font_for(text: str, size_px: int, bold: bool = True):
    """A PIL font of ``size_px`` that has the letters of ``text`` (bold faces first when ``bold``)."""
    from PIL import ImageFont

    need = {ord(c) for c in text if not c.isspace()}
    files = font_files()
    if not bold:
        files = tuple(sorted(files, key=lambda p: "Bold" in p.stem))
    best, best_n = None, -1
    for path in files:
        have = _cmap(path)
        if not have:
            continue
        n = len(need & have)
        if n == len(need):
            best = path
            break
        if n > best_n:
            best, best_n = path, n
    try:
        if best is not None:
            return ImageFont.truetype(str(best), size_px)
    except OSError:
        pass
    return ImageFont.load_default(size_px)


def _width(font, text: str) -> float:
    return float(font.getlength(text))


def _cut(font, text: str, max_w: float) -> str:
    """``text`` shortened to fit ``max_w`` with an ellipsis (whole characters; trailing spaces dropped)."""
    if _width(font, text) <= max_w:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits with the ellipsis
        mid = (lo + hi + 1) // 2
        if _width(font, text[:mid].rstrip() + ELLIPSIS) <= max_w:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + ELLIPSIS


def _first_line(font, words: list[str], max_w: float, joiner: str) -> int:
    """How many of ``words`` fit on one line (at least one)."""
    n = 1
    while n < len(words) and _width(font, joiner.join(words[:n + 1])) <= max_w:
        n += 1
    return n


def fit_lines(text: str, font, max_w: float, max_lines: int = 2) -> list[str]:
    """``text`` as at most ``max_lines`` lines no wider than ``max_w``: wrapped at spaces (at any character in a
    script written without spaces), the last line ending in an ellipsis when the rest does not fit."""
    text = " ".join(text.split())
    if not text:
        return []
    spaced = " " in text
    units = text.split(" ") if spaced else list(text)
    joiner = " " if spaced else ""
    lines: list[str] = []
    while units and len(lines) < max_lines - 1:
        n = _first_line(font, units, max_w, joiner)
        line = joiner.join(units[:n])
        if _width(font, line) > max_w:  # one word wider than the box: break it by characters
            chars = list(line)
            k = _first_line(font, chars, max_w, "")
            lines.append("".join(chars[:k]))
            units = ["".join(chars[k:])] + units[n:]
            continue
        lines.append(line)
        units = units[n:]
    if units:
        lines.append(_cut(font, joiner.join(units), max_w))
    return lines
