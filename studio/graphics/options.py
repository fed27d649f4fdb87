"""The canvas's look from the picture flags (``--set``, ``--name``, ``--ticker``, ...) that ``render``, ``live`` and
``farm`` share: checked here, before any work, into one ``CanvasStyle``."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from studio.errors import InputError
from studio.graphics.look import CanvasStyle, Graphics, parse_colour


def image_arg(flag: str, path: Path | None) -> str | None:
    if path is None:
        return None
    if not Path(path).is_file():
        raise InputError(f"{flag} {path}: no such file. Check the path.")
    return str(path)


def canvas_style_from(args: argparse.Namespace) -> CanvasStyle:
    """The canvas's look from the picture flags; a missing file or a bad colour raises InputError naming the flag."""
    kw: dict = {}
    bg = getattr(args, "background", None)
    chosen = getattr(args, "set_", None)
    if bg and chosen:
        raise InputError("--background and --set both choose the set: give one of them.")
    chosen = chosen or bg
    if chosen and chosen.startswith("#"):
        kw["background_rgb"] = parse_colour(chosen, "--background" if bg else "--set")
    elif chosen and chosen != "builtin":
        if not Path(chosen).is_file():
            flag = "--background" if bg else "--set"
            raise InputError(f"{flag} {chosen}: no such file. Give an image or video file, builtin, or a colour like "
                             "#10203a.")
        kw["background_image"] = Path(chosen)
    ticker = None
    if getattr(args, "ticker", None) is not None:
        try:
            ticker = tuple(t.strip() for t in args.ticker.read_text(encoding="utf-8").splitlines() if t.strip())
        except FileNotFoundError:
            raise InputError(f"--ticker {args.ticker}: no such file. Give a text file, one line per item.") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"Cannot read {args.ticker} as UTF-8 text: save the ticker as plain text.") from exc
    g = Graphics(name=getattr(args, "name", None) or None, role=getattr(args, "role", None) or None,
                 ticker=ticker or None, clock=bool(getattr(args, "clock", False)) or None,
                 logo=image_arg("--logo", getattr(args, "logo", None)), headline=getattr(args, "headline", None),
                 box_image=image_arg("--box-image", getattr(args, "box_image", None)))
    return CanvasStyle(place=getattr(args, "place", None) or "centre", graphics=g,
                       use_matte=not getattr(args, "framed", False), **kw)


def with_absolute_paths(style: CanvasStyle) -> CanvasStyle:
    """``style`` with its files (set, logo, box picture) as absolute paths: what a process started elsewhere (a
    farm worker, whose working folder is not the command's) can open. The ticker's lines are in the style already."""
    g = style.graphics
    g = replace(g, logo=str(Path(g.logo).resolve()) if g.logo else g.logo,
                box_image=str(Path(g.box_image).resolve()) if g.box_image else g.box_image)
    bg = Path(style.background_image).resolve() if style.background_image is not None else None
    return replace(style, graphics=g, background_image=bg)
