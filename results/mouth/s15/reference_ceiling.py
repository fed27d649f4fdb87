"""Issue 19: how far the human-speech evaluation's reference can be trusted frame by frame. The reference is a
pocketsphinx forced alignment of the transcript (``studio.neural.training.evaluate.reference_phones``). On speech
whose true phone timings are known - Festival's own segment times for the speech it synthesized - the same alignment
is scored the way the evaluation scores an engine: viseme accuracy per 25 fps frame and the share of true p/b/m
frames the reference calls p/b/m. An engine that knew the true visemes exactly would score about this against the
reference.

    python results/mouth/s15/reference_ceiling.py --sentences 60 --json results/mouth/s15/reference_ceiling.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=60)
    ap.add_argument("--voices", default="cmu_us_slt_arctic_hts,kal_diphone,ked_diphone")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import numpy as np

    import random

    from studio.neural.training.data import SAMPLE_RATE_HZ, _festival, frame_visemes, news_text
    from studio.neural.training.text import spoken_numbers
    from studio.neural.training.evaluate import reference_phones
    from studio.speech.visemes import Viseme

    texts = [spoken_numbers(news_text(random.Random(i))) for i in range(a.sentences)]  # the recipe's news text
    out: dict = {"sentences": len(texts), "fps": 25, "voices": {}}
    for voice in a.voices.split(","):
        clips = _festival(texts, voice)
        truth_all, ref_all, shift_all = [], [], []
        failed = 0
        for c in clips:
            n = len(c.audio) // (SAMPLE_RATE_HZ // 25)
            ref_ph, spans = reference_phones(c.audio, SAMPLE_RATE_HZ, c.text)
            if not spans:
                failed += 1
                continue
            truth = frame_visemes(c.phones, n).astype(int)
            ref = frame_visemes(ref_ph, n).astype(int)
            truth_all.append(truth)
            ref_all.append(ref)
            shift_all.append(np.concatenate([truth[:1], truth[:-1]]))  # the truth one frame late
        t, r, s = (np.concatenate(x) for x in (truth_all, ref_all, shift_all))
        speech = r != int(Viseme.SIL)
        pbm = r == int(Viseme.PBM)
        row = {"clips_scored": len(truth_all), "clips_not_aligned": failed, "frames": int(len(r)),
               "viseme_acc_of_truth_against_reference": float((t == r).mean()),
               "viseme_acc_speech_frames": float((t[speech] == r[speech]).mean()),
               "reference_pbm_frames_truly_pbm": float((t[pbm] == int(Viseme.PBM)).mean()),
               "truth_one_frame_late_against_truth": float((s == t).mean())}
        out["voices"][voice] = row
        print(f"{voice}: {row['clips_scored']} clips ({failed} not aligned), {row['frames']} frames: the true visemes "
              f"score {row['viseme_acc_of_truth_against_reference']:.3f} against the reference "
              f"({row['viseme_acc_speech_frames']:.3f} on speech frames); of the reference's p/b/m frames "
              f"{row['reference_pbm_frames_truly_pbm']:.3f} are p/b/m in truth; the truth one frame late scores "
              f"{row['truth_one_frame_late_against_truth']:.3f} against itself", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
