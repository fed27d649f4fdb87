"""Framing of the neural audio-to-motion engine, defined once for the runtime and the training tools."""

from __future__ import annotations

import numpy as np

from studio.audio.features import HOP

FPS = 25.0  # motion frames per second
MEL_PER_FRAME = 4  # mel frames (10 ms) per motion frame (40 ms)
SAMPLES_PER_FRAME = HOP * MEL_PER_FRAME  # 640 samples at 16 kHz
MEL_FRONT_PAD = 8  # silent mel frames before every stream (left context of the causal encoder)
LOOKAHEAD_MEL = 4  # mel frames after a motion frame's own 4 that it may see (see model.py)
SILENT_MEL = float(np.log(1e-5))  # the log-mel floor: what silence looks like to the encoder
