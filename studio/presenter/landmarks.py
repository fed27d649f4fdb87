"""MediaPipe face-mesh index chains and the detector wrapper (478 landmarks, offline)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

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

_MP_LOCK = threading.Lock()


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


def detect_landmarks(image: np.ndarray) -> np.ndarray | None:
    """478 x 3 landmarks of the most prominent face in ``image`` (H x W x 3 uint8 RGB), or None.

    x, y are pixels; z is MediaPipe's relative depth scaled to pixels like x (smaller = nearer the camera).
    """
    os.environ.setdefault("GLOG_minloglevel", "2")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import mediapipe as mp

        with _MP_LOCK, _quiet_native_stderr():
            with mp.solutions.face_mesh.FaceMesh(
                static_image_mode=True, refine_landmarks=True, max_num_faces=1, min_detection_confidence=0.5
            ) as mesh:
                result = mesh.process(np.ascontiguousarray(image))
    except Exception as exc:  # MediaPipe raises plain RuntimeError/ValueError from its graph
        raise AnchorError(f"The face detector failed on this image ({exc}). Try another portrait.") from exc
    if not result.multi_face_landmarks:
        return None
    h, w = image.shape[:2]
    pts = np.array([[p.x * w, p.y * h, p.z * w] for p in result.multi_face_landmarks[0].landmark], np.float32)
    return pts


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
