"""The hair's edge over the built-in set, before and after: the old backdrop's light fringe around the cut-out.

One command (CPU, about a minute; BEFORE is a checkout of the code to compare against, e.g. made with
``git worktree add /tmp/before <commit>``):

    python benchmarks/matte_edge.py --before /tmp/before [--size 720]

Each side (in its own process, with its own ``studio`` on the path) builds the anchor pack of both bundled portraits
(``astronaut``: scikit-image's NASA portrait, light grey backdrop; ``hopper``: Grace Hopper from matplotlib's sample
data, sky and flag) at the presenter's size (720: the 720p canvas) and renders the rest frame cut out by its warped
matte (``MatteWarp``, as on a canvas). Both are laid over the built-in set's part behind the presenter, centred, the
way the canvas does (set + alpha (presenter - set)). Measured, printed and kept in ``matte/edge.json``:
- the fringe: the mean luminance (Rec. 709, 0..255) of the composed picture above the set's own in the ring just
  outside the head's edge: the pixels where the BEFORE side's matte is between 0.05 and 0.6, above the upper lip
  (the same pixels on both sides); and, for each side, over its own ring (its own matte's 0.05..0.6);
- the face: the PSNR of the rest frame's person layer against the pack's portrait in the face box (the face oval's
  bounding box: its corners hold hair and backdrop, whose colours the person layer replaces), also over only the
  box's pixels that both sides' mattes call the person (alpha 1); and of the AFTER rest frame against the BEFORE one
  over the same two.
Writes ``matte/hair_edge_NAME_SIZE.png``: the top and the side of the head, BEFORE above AFTER, each crop
scaled 2x (every pixel doubled, so that the edge can be read pixel by pixel).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PORTRAITS = ("astronaut", "hopper")
# the crops of the sheets, (x0, y0, x1, y1) as fractions of the presenter's side: the top and the side of the head
CROPS = {
    "astronaut": ((0.16, 0.06, 0.46, 0.36), (0.58, 0.18, 0.88, 0.48)),
    "hopper": ((0.42, 0.0, 0.72, 0.3), (0.14, 0.22, 0.44, 0.52)),
}
OUT = Path(__file__).resolve().parent / "matte"


def _render(name: str, size: int, out: Path) -> None:
    """Build ``name``'s pack at ``size`` and keep its rest frame (person layer and matte), portrait and landmarks."""
    import inspect

    import matplotlib
    import torch

    from studio.contracts.coeffs import N_COEFFS
    from studio.presenter.anchor import build_anchor
    from studio.presenter.matte import MatteWarp
    from studio.presenter.renderer import WarpRenderer

    source = None if name == "astronaut" else Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    kwargs = {"output_px": size} if "output_px" in inspect.signature(build_anchor).parameters else {}
    anchor = build_anchor(source, **kwargs)
    warp = MatteWarp(WarpRenderer(anchor, size, max(64, size // 4), newton_steps=3).eval(), anchor.matte)
    with torch.inference_mode():
        frame = warp(torch.zeros((1, N_COEFFS)))[0].numpy()  # 4 x S x S: RGB 0..255 and the matte 0..255
    portrait = anchor.image
    if portrait.shape[0] != size:
        from PIL import Image

        portrait = np.asarray(Image.fromarray(portrait).resize((size, size), Image.LANCZOS))
    k = size / anchor.size_px
    np.savez(out / f"{name}.npz", rgb=frame[:3].transpose(1, 2, 0), alpha=frame[3] / 255.0, portrait=portrait,
             landmarks=anchor.landmarks[:, :2] * k)


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb[..., 0] * 0.2126 + rgb[..., 1] * 0.7152 + rgb[..., 2] * 0.0722


def _psnr(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> float:
    err = (a.astype(np.float64) - b.astype(np.float64)) ** 2
    mse = float(err[where].mean() if where is not None else err.mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="a checkout of the code to compare against")
    p.add_argument("--size", type=int, default=720)
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        for name in PORTRAITS:
            _render(name, a.size, a.worker)
        return 0
    if a.before is None:
        p.error("--before CHECKOUT is required")
    from PIL import Image

    from studio.graphics.sets import builtin_set
    from studio.presenter import landmarks as lm

    size = a.size
    width = size * 16 // 9
    x0 = int(round(width / 2 - size / 2))
    behind = builtin_set(width, size)[:, x0:x0 + size]  # the set behind the centred presenter, float 0..255
    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, checkout in (("before", a.before.resolve()), ("after", Path(__file__).resolve().parents[1])):
            folder = Path(tmp) / label
            folder.mkdir()
            env = dict(os.environ, PYTHONPATH=str(checkout))
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(folder), "--size",
                            str(size)], env=env, cwd=str(checkout), check=True)
            sides[label] = {n: dict(np.load(folder / f"{n}.npz")) for n in PORTRAITS}
    OUT.mkdir(exist_ok=True)
    rows = {}
    print(f"presenter {size} px over the built-in set; luminance above the set's in the ring outside the edge")
    print(f"{'portrait':10} {'ring px':>8} {'fringe before':>14} {'after':>7} {'own ring before':>16} {'after':>7} "
          f"{'face box PSNR dB before':>24} {'after':>7} {'after vs before':>16}   (the box's person pixels)")
    for name in PORTRAITS:
        b, f = sides["before"][name], sides["after"][name]
        pts = b["landmarks"]
        lip = float(pts[list(lm.OUTER_UPPER_LIP), 1].min())
        above = np.arange(size)[:, None] < lip
        ring = (b["alpha"] > 0.05) & (b["alpha"] < 0.6) & above
        oval = pts[list(lm.FACE_OVAL)]
        fx0, fy0 = np.floor(oval.min(0)).astype(int).clip(0, size)
        fx1, fy1 = np.ceil(oval.max(0)).astype(int).clip(0, size)
        box = (slice(fy0, fy1), slice(fx0, fx1))
        person = (b["alpha"][box] > 0.999) & (f["alpha"][box] > 0.999)
        row = {"ring_px": int(ring.sum()), "face_box": [int(fx0), int(fy0), int(fx1), int(fy1)],
               "face_box_person_px": int(person.sum()), "face_box_px": int(person.size)}
        composed = {}
        for label, s in (("before", b), ("after", f)):
            al = s["alpha"][..., None]
            composed[label] = behind + al * (s["rgb"] - behind)
            excess = _luma(composed[label]) - _luma(behind)
            own = (s["alpha"] > 0.05) & (s["alpha"] < 0.6) & above
            row[label] = {"fringe": float(excess[ring].mean()), "own_ring_px": int(own.sum()),
                          "own_ring_fringe": float(excess[own].mean()),
                          "face_psnr_db": _psnr(s["rgb"][box], s["portrait"][box]),
                          "face_person_psnr_db": _psnr(s["rgb"][box], s["portrait"][box], person)}
        row["face_after_vs_before_psnr_db"] = _psnr(f["rgb"][box], b["rgb"][box])
        row["face_person_after_vs_before_psnr_db"] = _psnr(f["rgb"][box], b["rgb"][box], person)
        rows[name] = row
        print(f"{name:10} {row['ring_px']:>8} {row['before']['fringe']:>14.2f} {row['after']['fringe']:>7.2f} "
              f"{row['before']['own_ring_fringe']:>16.2f} {row['after']['own_ring_fringe']:>7.2f} "
              f"{row['before']['face_psnr_db']:>24.2f} {row['after']['face_psnr_db']:>7.2f} "
              f"{row['face_after_vs_before_psnr_db']:>16.2f}   ({row['before']['face_person_psnr_db']:.2f} -> "
              f"{row['after']['face_person_psnr_db']:.2f}, {row['face_person_after_vs_before_psnr_db']:.2f}; "
              f"{row['face_box_person_px']} of {row['face_box_px']} px)")
        tiles = []
        for label in ("before", "after"):
            pic = composed[label].clip(0, 255).astype(np.uint8)
            crops = []
            for cx0, cy0, cx1, cy1 in CROPS[name]:
                c = pic[int(cy0 * size):int(cy1 * size), int(cx0 * size):int(cx1 * size)]
                crops.append(np.asarray(Image.fromarray(c).resize((c.shape[1] * 2, c.shape[0] * 2), Image.NEAREST)))
            gap = np.full((crops[0].shape[0], 8, 3), 255, np.uint8)
            tiles.append(np.concatenate([crops[0], gap, crops[1]], 1))
        sheet = np.concatenate([tiles[0], np.full((8, tiles[0].shape[1], 3), 255, np.uint8), tiles[1]], 0)
        Image.fromarray(sheet).save(OUT / f"hair_edge_{name}_{size}.png", optimize=True)
    (OUT / "edge.json").write_text(json.dumps({"size_px": size, "portraits": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
