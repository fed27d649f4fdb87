"""Session 21 (issue 19): how far would combining the two engines go? On a validation dump (``evaluate --split
validation --dump``): viseme accuracy of the neural engine's argmax, of its log-probabilities plus w on the class the
pocketsphinx engine recognised (w swept here, on the split that would choose it: an optimistic figure), and of an
oracle that takes whichever engine is right on each frame (the most any per-frame choice between them can score).

    python results/cpu/s21/fusion_check.py /tmp/val_dump_validation.npz results/cpu/s21/fusion_check.json
"""

import json
import sys

import numpy as np


def main() -> None:
    d = np.load(sys.argv[1])
    ref, probs, ps, nv = d["ref"], d["neural_probs"], d["pocketsphinx_vis"], d["neural_vis"]
    lp = np.log(np.clip(probs, 1e-6, None))
    fused = {}
    for w in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0):
        s = lp.copy()
        s[np.arange(len(ps)), ps] += w
        fused[str(w)] = float((s.argmax(1) == ref).mean())
    agree = nv == ps
    out = {"frames": int(len(ref)), "neural_engine": float((nv == ref).mean()), "pocketsphinx": float((ps == ref).mean()),
           "neural_argmax_plus_w_on_pocketsphinx": fused, "engines_agree": float(agree.mean()),
           "accuracy_where_they_agree": float((ps[agree] == ref[agree]).mean()),
           "oracle_either_right": float(((nv == ref) | (ps == ref)).mean())}
    print(json.dumps(out, indent=1))
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
