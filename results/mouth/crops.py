"""Mouth crops at four openings for two portraits, rendered by the built-in presenter (how results/mouth/ was made).

``python results/mouth/crops.py --out results/mouth/after [--sizes 512 1080]`` writes, per portrait and size, one PNG
strip of the mouth at closed / small / mid / wide (each crop the same box, scaled to 256 px high with nearest-neighbour
so that pixels stay visible) and one ``*_full.png`` of the wide frame, for looking at the mouth in its face.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from studio.presenter import landmarks as lm  # noqa: E402
from studio.presenter.anchor import build_anchor  # noqa: E402
from studio.contracts.coeffs import N_COEFFS, Coeff  # noqa: E402
from studio.presenter.renderer import Presenter, RenderSettings  # noqa: E402

OPENINGS = {  # name -> (JAW_OPEN, LIP_PART): what the viseme tables give for rest, "f"-like, "eh", "aa"
    "closed": (0.0, 0.0),
    "small": (0.15, 0.25),
    "mid": (0.45, 0.35),
    "wide": (1.0, 0.5),
}


def portraits() -> dict[str, object]:
    import matplotlib

    return {"astronaut": None, "hopper": Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"}


def strip(name: str, source: object, size: int, out: Path) -> None:
    anchor = build_anchor(source)
    pres = Presenter(anchor, RenderSettings(size_px=size, device="cpu"))
    c = np.zeros((len(OPENINGS), N_COEFFS), np.float32)
    for i, (jaw, part) in enumerate(OPENINGS.values()):
        c[i, Coeff.JAW_OPEN], c[i, Coeff.LIP_PART] = jaw, part
    frames = pres.render(c)
    s = size / anchor.size_px
    pts = anchor.landmarks[list(lm.OUTER_UPPER_LIP + lm.OUTER_LOWER_LIP), :2] * s
    w = pts[:, 0].max() - pts[:, 0].min()
    cx, cy = pts[:, 0].mean(), pts[:, 1].mean() + 0.15 * w
    half_w, half_h = 0.8 * w, 0.6 * w
    x0, x1 = int(max(0, cx - half_w)), int(min(size, cx + half_w))
    y0, y1 = int(max(0, cy - half_h)), int(min(size, cy + half_h))
    crops = [f[y0:y1, x0:x1] for f in frames]
    scale = max(1, int(round(256 / (y1 - y0))))
    tiles = [np.kron(cr, np.ones((scale, scale, 1), np.uint8)) if scale > 1 else cr for cr in crops]
    gap = np.full((tiles[0].shape[0], 6, 3), 255, np.uint8)
    row = np.concatenate(sum(([t, gap] for t in tiles), [])[:-1], axis=1)
    out.mkdir(parents=True, exist_ok=True)
    Image.fromarray(row).save(out / f"{name}_{size}.png")
    Image.fromarray(frames[-1]).resize((512, 512), Image.LANCZOS).save(out / f"{name}_{size}_full.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1080])
    a = p.parse_args(argv)
    for name, src in portraits().items():
        for size in a.sizes:
            strip(name, src, size, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
