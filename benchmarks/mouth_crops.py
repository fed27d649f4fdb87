"""Mouth crops at four openings (closed, small, mid, wide) for the two bundled portraits, before and after.

One command (CPU, a few minutes; BEFORE is a checkout of the code to compare against, e.g. made with
``git worktree add /tmp/before <commit>``):

    python benchmarks/mouth_crops.py --before /tmp/before

writes into ``benchmarks/mouth/``:
- ``NAME_SIZE.png`` per portrait (``astronaut``: scikit-image's NASA portrait, teeth showing; ``hopper``: Grace Hopper
  from matplotlib's sample data, mouth closed) and presenter size (512, 1080): a contact sheet, the BEFORE code's four
  openings above this checkout's, each crop the same box of the frame;
- ``lighting_hopper.png``: Grace Hopper darkened, brightened and backlit (face in shadow against a bright backdrop), at
  the mid and wide openings, before above after: the synthesized teeth and mouth should take the face's own light.

Each side renders in its own process with its own ``studio`` package on the path; the anchor pack is built at the
presenter's size where the code supports it (``build_anchor(..., output_px=...)``).
"""

from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

OPENINGS = {  # name -> (JAW_OPEN, LIP_PART): rest, an "f"-like, an "eh", an "aa"
    "closed": (0.0, 0.0),
    "small": (0.15, 0.25),
    "mid": (0.45, 0.35),
    "wide": (1.0, 0.5),
}
SIZES = (512, 1080)
TILE_H = 160  # every crop is scaled to this height on the sheets
LIGHTING = ("dark", "bright", "backlit")


def portrait(name: str) -> np.ndarray:
    """The bundled portrait ``astronaut`` or ``hopper`` (RGB uint8), or a lighting variant ``hopper-dark`` etc."""
    from PIL import Image

    base, _, light = name.partition("-")
    if base == "astronaut":
        from skimage import data

        img = np.ascontiguousarray(data.astronaut()[:, :, :3])
    else:
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
        img = np.asarray(Image.open(path).convert("RGB"))
    if not light:
        return img
    x = img.astype(np.float32) / 255.0
    if light == "dark":  # an underexposed photo: the brightest pixel about 60/255
        x = x ** 1.6 * 0.25
    elif light == "bright":  # overexposed
        x = 1 - (1 - x) ** 2.2
    elif light == "backlit":  # the person in shadow, the backdrop blown out around them
        h, w = x.shape[:2]
        yy, xx = np.mgrid[0:h, 0:w]
        centre = np.exp(-(((xx - w * 0.5) / (0.28 * w)) ** 2 + ((yy - h * 0.42) / (0.3 * h)) ** 2))
        x = x * (0.22 + 0.08 * centre[..., None]) + (1 - centre[..., None]) * 0.55
    return (np.clip(x, 0, 1) * 255 + 0.5).astype(np.uint8)


def render_crops(name: str, size: int, openings: tuple[str, ...]) -> list[np.ndarray]:
    """The mouth box of frames rendered at the given openings (this process's ``studio``)."""
    from studio.presenter import landmarks as lm
    from studio.presenter.anchor import build_anchor
    from studio.contracts.coeffs import N_COEFFS, Coeff
    from studio.presenter.renderer import Presenter, RenderSettings

    kwargs = {"output_px": size} if "output_px" in inspect.signature(build_anchor).parameters else {}
    anchor = build_anchor(portrait(name), name=name, **kwargs)
    pres = Presenter(anchor, RenderSettings(size_px=size, device="cpu"))
    c = np.zeros((len(openings), N_COEFFS), np.float32)
    for i, o in enumerate(openings):
        c[i, Coeff.JAW_OPEN], c[i, Coeff.LIP_PART] = OPENINGS[o]
    frames = pres.render(c)
    s = size / anchor.size_px
    pts = anchor.landmarks[list(lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP), :2] * s
    w = pts[:, 0].max() - pts[:, 0].min()
    cx, cy = pts[:, 0].mean(), pts[:, 1].mean() + 0.15 * w
    x0, x1 = int(max(0, cx - 0.8 * w)), int(min(size, cx + 0.8 * w))
    y0, y1 = int(max(0, cy - 0.6 * w)), int(min(size, cy + 0.6 * w))
    return [np.ascontiguousarray(f[y0:y1, x0:x1]) for f in frames]


def _worker(out: Path) -> None:
    """Render every crop with the ``studio`` on this process's path into ``out`` (npz per sheet)."""
    for name in ("astronaut", "hopper"):
        for size in SIZES:
            np.savez(out / f"{name}_{size}.npz", *render_crops(name, size, tuple(OPENINGS)))
    crops = []
    for light in LIGHTING:
        crops += render_crops(f"hopper-{light}", 512, ("mid", "wide"))
    np.savez(out / "lighting_hopper.npz", *crops)


def _row(tiles: list[np.ndarray]) -> np.ndarray:
    from PIL import Image

    scaled = []
    for t in tiles:
        w = int(round(t.shape[1] * TILE_H / t.shape[0]))
        scaled.append(np.asarray(Image.fromarray(t).resize((w, TILE_H), Image.LANCZOS)))
    gap = np.full((TILE_H, 4, 3), 255, np.uint8)
    return np.concatenate(sum(([t, gap] for t in scaled), [])[:-1], axis=1)


def _sheet(before: list[np.ndarray], after: list[np.ndarray]) -> np.ndarray:
    top, bottom = _row(before), _row(after)
    width = max(top.shape[1], bottom.shape[1])
    pad = lambda r: np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255)  # noqa: E731
    return np.concatenate([pad(top), np.full((8, width, 3), 255, np.uint8), pad(bottom)])


def _run_side(checkout: Path, out: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(out)], env=env, check=True,
                   cwd=str(checkout))


def main(argv: list[str] | None = None) -> int:
    from PIL import Image

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="a checkout of the code to compare against")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "mouth")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        _worker(a.worker)
        return 0
    if a.before is None:
        p.error("--before CHECKOUT is required")
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for label, checkout in (("before", a.before.resolve()), ("after", root)):
            d = Path(tmp) / label
            d.mkdir()
            print(f"rendering {label} with {checkout}", flush=True)
            _run_side(checkout, d)
            sides[label] = d
        a.out.mkdir(parents=True, exist_ok=True)
        for f in sorted(sides["after"].glob("*.npz")):
            with np.load(sides["before"] / f.name) as zb, np.load(f) as za:
                before = [zb[k] for k in sorted(zb.files, key=lambda k: int(k.split("_")[1]))]
                after = [za[k] for k in sorted(za.files, key=lambda k: int(k.split("_")[1]))]
            target = a.out / f"{f.stem}.png"
            # 256 colours (no dithering): the sheets stay small enough to keep in the repository.
            sheet = Image.fromarray(_sheet(before, after)).quantize(256, method=Image.Quantize.MEDIANCUT,
                                                                    dither=Image.Dither.NONE)
            sheet.save(target, optimize=True)
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
