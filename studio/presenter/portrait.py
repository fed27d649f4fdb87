"""Reading a portrait file into 8-bit RGB, bounded and with every bit depth converted right.

- Bounded: the header's size is checked before any pixel is decoded; an image over ``MAX_PIXELS`` (a 20000x20000 PNG
  would take 1.2 GB as RGB) is refused with its size and what to do, never called "not a JPEG or PNG".
- Bit depths: 16-bit greyscale PNGs open in Pillow as mode ``I;16`` (or ``I``), whose ``convert("RGB")`` clips every
  value above 255 to white; here they are scaled (65535 -> 255). 16-bit RGB, palette, 1-bit, CMYK and float images
  are converted too; transparent pixels are composited over white.
- EXIF orientation is applied.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from studio.errors import AnchorError

MAX_PIXELS = 50_000_000  # 8000 x 6250; a larger photo is refused before decoding
MIN_SIDE_PX = 64


def _megapixels(n: float) -> str:
    return f"{n / 1e6:.0f} million" if n >= 1e6 else f"{n:.0f}"


def rgb8(image: np.ndarray) -> np.ndarray:
    """Any H x W, H x W x 1/2/3/4 array (uint8, uint16, integer or float) -> H x W x 3 uint8 RGB.

    uint16 and integers above 255 are scaled from 0..65535; floats from 0..1 (or 0..their maximum when above 1);
    an alpha channel is composited over white."""
    a = np.asarray(image)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
        raise AnchorError(f"A portrait must be an H x W x 3 picture, got an array of shape {a.shape}.")
    if a.dtype == np.uint8:
        x = a.astype(np.float32) / 255.0
    elif a.dtype == np.uint16 or (a.dtype.kind in "iu" and a.max(initial=0) > 255):
        x = np.clip(a.astype(np.float32) / 65535.0, 0.0, 1.0)
    elif a.dtype.kind in "iub":
        x = np.clip(a.astype(np.float32) / 255.0, 0.0, 1.0)
    elif a.dtype.kind == "f":
        top = float(np.nanmax(a)) if a.size else 1.0
        x = np.nan_to_num(a.astype(np.float32) / (top if top > 1.0 else 1.0), nan=0.0)
        x = np.clip(x, 0.0, 1.0)
    else:
        raise AnchorError(f"A portrait array of type {a.dtype} cannot be shown: give 8- or 16-bit RGB.")
    channels = x.shape[2]
    if channels in (2, 4):
        alpha = x[:, :, -1:]
        x = x[:, :, :-1] * alpha + (1.0 - alpha)
    if x.shape[2] == 1:
        x = np.repeat(x, 3, axis=2)
    if a.dtype == np.uint8 and channels == 3:
        return np.ascontiguousarray(a)
    return np.ascontiguousarray(np.round(x * 255.0).astype(np.uint8))


def _to_array(im) -> np.ndarray:  # noqa: ANN001 (a PIL image)
    """A decoded Pillow image -> H x W x 3 uint8 (see ``rgb8``)."""
    mode = im.mode
    if mode.startswith("I;16") or mode == "I":
        return rgb8(np.asarray(im).astype(np.uint16 if mode.startswith("I;16") else np.int64))
    if mode == "F":
        return rgb8(np.asarray(im))
    if mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in im.info:
        return rgb8(np.asarray(im.convert("RGBA")))
    return rgb8(np.asarray(im.convert("RGB")))


def read_portrait(path: Path | str, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """A portrait file as H x W x 3 uint8 RGB; AnchorError (one line, what to do) for anything else."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    path = Path(path)
    if not path.exists():
        raise AnchorError(f"Portrait not found: {path}. Check the path or pick another image.")
    if path.is_dir():
        raise AnchorError(f"{path} is a folder: pick an image file (JPEG or PNG).")
    too_big = (f"{path.name} has {{n}} pixels; portraits of up to {_megapixels(max_pixels)} pixels are read: scale it "
               "down (e.g. to 4000 px on its long side) and try again.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:  # reads the header only
                width, height = im.size
                if width * height > max_pixels:
                    raise AnchorError(too_big.format(n=f"{width}x{height} = {_megapixels(width * height)}"))
                im = ImageOps.exif_transpose(im)
                rgb = _to_array(im)
    except AnchorError:
        raise
    except Image.DecompressionBombError as exc:  # Pillow's own limit, hit while reading the header
        m = re.search(r"\((\d+) pixels\)", str(exc))
        raise AnchorError(too_big.format(n=_megapixels(int(m.group(1))) if m else "too many")) from exc
    except UnidentifiedImageError as exc:
        raise AnchorError(f"Cannot read {path.name} as an image: use a JPEG or PNG portrait.") from exc
    except (OSError, ValueError, SyntaxError) as exc:
        if "truncated" in str(exc).lower():
            raise AnchorError(f"{path.name} is damaged (the file ends early): save it again or pick another "
                              "image.") from exc
        raise AnchorError(f"Cannot decode {path.name} ({exc}): save it again as a JPEG or PNG.") from exc
    except MemoryError as exc:
        raise AnchorError(f"{path.name} is too large to decode with the memory free here: scale it down.") from exc
    if rgb.shape[0] < MIN_SIDE_PX or rgb.shape[1] < MIN_SIDE_PX:
        raise AnchorError(f"{path.name} is only {rgb.shape[1]}x{rgb.shape[0]} pixels: use a portrait of at least "
                          "256 px.")
    return rgb
