"""MediaPipe face-mesh index chains and the detector wrappers (478 landmarks, offline).

``detect_landmarks`` runs the face mesh on a whole image; its face detector (short range, 128 px input) misses faces
narrower than about a tenth of the image (the default portrait pasted into a 1280x720 frame, a face in a 4000x3000
photo). ``find_face`` tries that first, then searches the image with MediaPipe's full-range face detector on square
tiles from the whole image down to ``MIN_TILE_PX`` (coarse to fine, half-tile steps), and traces the mesh on a crop
around the best face it finds, scaled so the face is about ``TRACE_FACE_PX`` wide; the landmarks come back in the
image's pixels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from studio.errors import AnchorError

# Lip chains run from the image-left mouth corner to the image-right one.
OUTER_UPPER_LIP = (61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291)
OUTER_LOWER_LIP = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291)
INNER_UPPER_LIP = (78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308)
INNER_LOWER_LIP = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308)
# Eye chains run from the outer to the inner corner (image-left eye) and mirrored (image-right eye).
LEFT_EYE_UPPER = (33, 246, 161, 160, 159, 158, 157, 173, 133)
LEFT_EYE_LOWER = (33, 7, 163, 144, 145, 153, 154, 155, 133)
RIGHT_EYE_UPPER = (263, 466, 388, 387, 386, 385, 384, 398, 362)
RIGHT_EYE_LOWER = (263, 249, 390, 373, 374, 380, 381, 382, 362)
LEFT_IRIS = (468, 469, 470, 471, 472)
RIGHT_IRIS = (473, 474, 475, 476, 477)
LEFT_BROW = (46, 52, 53, 55, 63, 65, 66, 70, 105, 107)
RIGHT_BROW = (276, 282, 283, 285, 293, 295, 296, 300, 334, 336)
FACE_OVAL = (10, 109, 67, 103, 54, 21, 162, 127, 234, 93, 132, 58, 172, 136, 150, 149, 176, 148, 152, 377, 400,
             378, 379, 365, 397, 288, 361, 323, 454, 356, 389, 251, 284, 332, 297, 338)
FOREHEAD_TOP, CHIN = 10, 152
CHEEK_LEFT, CHEEK_RIGHT = 234, 454
MOUTH_LEFT, MOUTH_RIGHT = 61, 291
N_LANDMARKS = 478

log = logging.getLogger(__name__)
_MP_LOCK = threading.Lock()
MAX_FACES = 4  # faces the mesh looks for in one image (the largest is used)
MIN_TILE_PX = 320  # the smallest search tile (the full-range detector finds faces down to ~7 % of a tile)
TRACE_FACE_PX = 220  # the mesh is traced on a crop scaled so that the face is about this wide
DETECTION_SCORE = 0.5  # candidates to trace (the mesh confirms them)
CONFIDENT_SCORE = 0.8  # a face this sure that fails to trace is reported as a face, not as "no face"


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence the C++ log lines MediaPipe/TFLite print on file descriptor 2 while they run."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def detect_landmarks(image: np.ndarray, say_faces: bool = False) -> np.ndarray | None:
    """478 x 3 landmarks of the largest face in ``image`` (H x W x 3 uint8 RGB), or None; with ``say_faces``, a
    photo with several faces is said so in a warning naming the one used.

    x, y are pixels; z is MediaPipe's relative depth scaled to pixels like x (smaller = nearer the camera).
    """
    os.environ.setdefault("GLOG_minloglevel", "2")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import mediapipe as mp

        with _MP_LOCK, _quiet_native_stderr():
            with mp.solutions.face_mesh.FaceMesh(
                static_image_mode=True, refine_landmarks=True, max_num_faces=MAX_FACES, min_detection_confidence=0.5
            ) as mesh:
                result = mesh.process(np.ascontiguousarray(image))
    except Exception as exc:  # MediaPipe raises plain RuntimeError/ValueError from its graph
        raise AnchorError(f"The face detector failed on this image ({exc}). Try another portrait.") from exc
    if not result.multi_face_landmarks:
        return None
    h, w = image.shape[:2]
    faces = [np.array([[p.x * w, p.y * h, p.z * w] for p in f.landmark], np.float32)
             for f in result.multi_face_landmarks]
    widths = [float(np.linalg.norm(f[CHEEK_LEFT, :2] - f[CHEEK_RIGHT, :2])) for f in faces]
    pts = faces[int(np.argmax(widths))]
    if say_faces:
        _say_faces(len(faces), pts)
    return pts


def _say_faces(n: int, pts: np.ndarray) -> None:
    if n > 1:
        width = float(np.linalg.norm(pts[CHEEK_LEFT, :2] - pts[CHEEK_RIGHT, :2]))
        log.warning("This portrait shows %d faces: the presenter is the one around x=%.0f, y=%.0f (%.0f px wide); "
                    "crop the photo to the one you want.", n, pts[:, 0].mean(), pts[:, 1].mean(), width)


def _distinct_faces(found: list[tuple[float, tuple[float, ...]]]) -> int:
    """How many faces the detections are (overlapping tiles see one face several times)."""
    kept: list[tuple[float, ...]] = []
    for _, (x, y, w, h) in found:
        cx, cy = x + w / 2, y + h / 2
        if not any(abs(cx - (kx + kw / 2)) < kw / 2 and abs(cy - (ky + kh / 2)) < kh / 2 for kx, ky, kw, kh in kept):
            kept.append((x, y, w, h))
    return len(kept)


def person_mask(image: np.ndarray) -> np.ndarray:
    """Soft person/background mask (H x W float32, 1 = person) from MediaPipe selfie segmentation."""
    try:
        import mediapipe as mp

        with _MP_LOCK, _quiet_native_stderr():
            with mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0) as seg:
                mask = seg.process(np.ascontiguousarray(image)).segmentation_mask
    except Exception as exc:
        raise AnchorError(f"Person segmentation failed on this image ({exc}). Try another portrait.") from exc
    return np.clip(mask.astype(np.float32), 0.0, 1.0)


@dataclass(frozen=True)
class FaceSearch:
    """What ``find_face`` found: the landmarks (image pixels), or a detected face whose mesh could not be traced."""

    landmarks: np.ndarray | None  # 478 x 3 float32, x, y, z in image pixels
    box: tuple[float, float, float, float] | None  # x, y, width, height of the detected face (image pixels)
    score: float = 0.0
    method: str = "whole image"  # or "tile search"

    @property
    def face_width_px(self) -> float:
        if self.landmarks is not None:
            return float(np.linalg.norm(self.landmarks[CHEEK_LEFT, :2] - self.landmarks[CHEEK_RIGHT, :2]))
        return float(self.box[2]) if self.box is not None else 0.0


def _tile_origins(length: int, side: int) -> list[int]:
    if side >= length:
        return [0]
    step = max(1, side // 2)
    origins = list(range(0, length - side, step)) + [length - side]
    return sorted(set(origins))


def tile_sides(height: int, width: int, min_tile_px: int = MIN_TILE_PX) -> list[int]:
    """The search's square tile sizes, coarse to fine: the image's short side, halved down to ``min_tile_px``."""
    sides = [min(height, width)]
    while sides[-1] // 2 >= min_tile_px:
        sides.append(sides[-1] // 2)
    return sides


def detect_faces(image: np.ndarray, side: int) -> list[tuple[float, tuple[float, ...]]]:
    """Faces in ``image`` (H x W x 3 uint8) from the full-range detector on square tiles of ``side`` pixels (half-tile
    steps), as (score, (x, y, w, h) in pixels), most prominent first."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    h, w = image.shape[:2]
    found: list[tuple[float, tuple[float, ...]]] = []
    try:
        import mediapipe as mp

        with _MP_LOCK, _quiet_native_stderr():
            with mp.solutions.face_detection.FaceDetection(model_selection=1,
                                                           min_detection_confidence=DETECTION_SCORE) as det:
                for y0 in _tile_origins(h, side):
                    for x0 in _tile_origins(w, side):
                        tile = np.ascontiguousarray(image[y0:y0 + side, x0:x0 + side])
                        for d in det.process(tile).detections or ():
                            b = d.location_data.relative_bounding_box
                            box = (x0 + b.xmin * side, y0 + b.ymin * side, b.width * side, b.height * side)
                            found.append((float(d.score[0]), box))
    except Exception as exc:  # MediaPipe raises plain RuntimeError/ValueError from its graph
        raise AnchorError(f"The face detector failed on this image ({exc}). Try another portrait.") from exc
    found.sort(key=lambda f: (round(f[0], 1), f[1][2] * f[1][3]), reverse=True)
    return found


def _trace_on_crop(image: np.ndarray, box: tuple[float, ...]) -> np.ndarray | None:
    """The mesh on a square crop around ``box`` (three face widths), scaled to ``TRACE_FACE_PX``; image pixels."""
    from PIL import Image

    h, w = image.shape[:2]
    bx, by, bw, bh = box
    side = int(min(max(h, w), max(3.0 * max(bw, bh), 64)))
    cx, cy = bx + bw / 2, by + bh / 2
    x0 = int(round(min(max(cx - side / 2, 0), max(0, w - side))))
    y0 = int(round(min(max(cy - side / 2, 0), max(0, h - side))))
    crop = image[y0:y0 + side, x0:x0 + side]
    scale = TRACE_FACE_PX / max(bw, 1.0)
    out = max(64, int(round(max(crop.shape[:2]) * scale)))
    resized = np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize(
        (int(round(crop.shape[1] * out / max(crop.shape[:2]))), int(round(crop.shape[0] * out / max(crop.shape[:2])))),
        Image.LANCZOS))
    pts = detect_landmarks(resized)
    if pts is None:
        return None
    k = crop.shape[1] / resized.shape[1]
    pts = pts.astype(np.float64)
    pts[:, 0] = pts[:, 0] * k + x0
    pts[:, 1] = pts[:, 1] * (crop.shape[0] / resized.shape[0]) + y0
    pts[:, 2] = pts[:, 2] * k
    return pts.astype(np.float32)


def find_face(image: np.ndarray) -> FaceSearch:
    """The most prominent face at any size (see the module docstring). ``landmarks`` is None when none was traced;
    ``box`` then holds a face the detector was sure of (score >= ``CONFIDENT_SCORE``) but the mesh could not trace."""
    pts = detect_landmarks(image, say_faces=True)
    if pts is not None:
        return FaceSearch(pts, None, 1.0, "whole image")
    untraced: tuple[float, tuple[float, ...]] | None = None
    for side in tile_sides(*image.shape[:2]):
        faces = detect_faces(image, side)
        for score, box in faces[:3]:
            pts = _trace_on_crop(image, box)
            if pts is not None:
                _say_faces(_distinct_faces(faces), pts)
                return FaceSearch(pts, tuple(box), score, "tile search")  # type: ignore[arg-type]
            if score >= CONFIDENT_SCORE and (untraced is None or score > untraced[0]):
                untraced = (score, box)
    if untraced is not None:
        return FaceSearch(None, tuple(untraced[1]), untraced[0], "tile search")  # type: ignore[arg-type]
    return FaceSearch(None, None)
