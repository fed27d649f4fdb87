"""Session 21 (issue 19): is the neural engine's timing centred on the evaluation's reference? Viseme accuracy on the
validation split with each engine's visemes shifted by k frames (40 ms) within each clip.

    python -m studio.neural.training.evaluate --split validation --dump /tmp/val_dump.npz   # writes /tmp/val_dump_validation.npz
    python results/cpu/s21/shift_check.py /tmp/val_dump_validation.npz results/cpu/s21/shift_check.json
"""

import json
import sys

import numpy as np


def shifted_accuracy(ref: np.ndarray, pred: np.ndarray, clip_frames: np.ndarray, k: int) -> float:
    """k > 0: the prediction at t scored against the reference at t + k (the engine k frames early)."""
    ok = tot = 0
    start = 0
    for n in clip_frames:
        r, p = ref[start:start + n], pred[start:start + n]
        start += n
        if k > 0:
            r, p = r[k:], p[:-k]
        elif k < 0:
            r, p = r[:k], p[-k:]
        ok += int((r == p).sum())
        tot += len(r)
    return ok / tot


def main() -> None:
    d = np.load(sys.argv[1])
    out = {e: {f"{k:+d}": shifted_accuracy(d["ref"], d[f"{e}_vis"], d["clip_frames"], k) for k in range(-3, 4)}
           for e in ("neural", "pocketsphinx")}
    print(json.dumps(out, indent=1))
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
