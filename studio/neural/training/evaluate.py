"""Neural engine vs the pocketsphinx engine on human speech the model never saw.

Reference: pocketsphinx forced alignment of each clip's transcript -> viseme per 25 fps frame. Engines:
- pocketsphinx: streaming phone recognition (``recognize_file_phones``) -> visemes, and ``mouth_track`` with the
  loudness envelope (exactly what ``render --audio --engine pocketsphinx`` animates);
- neural: ``NeuralMotionEngine.motion`` -> viseme logits and mouth coefficients (with the engine's VAD gate unless
  ``--no-vad-gate``).
Metrics per engine, over all clips' frames: viseme accuracy (all frames; speech frames only), lip closure on p/b/m
(share of reference p/b/m frames with LIP_PART < 0.15, i.e. lips together), mean LIP_PART on p/b/m over that on open
vowels; the same per speaker and per voice group (f / m).
Clips: ``studio.neural.training.humans`` (about 19 minutes by five sources, eight voices), in a validation split (for
choosing) and a test split (reported once for the weights that ship).
``python -m studio.neural.training.evaluate [--split validation|test|both] [--weights W] [--no-vad-gate]
[--[no-]pbm-closure] [--json FILE]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from studio.bench.lipsync import PhoneClass, classify_phone
from studio.neural.settings import EVAL_TRANSCRIPTS
from studio.speech.types import PhonemeTiming
from studio.speech.visemes import Viseme

log = logging.getLogger(__name__)

TRANSCRIPTS = EVAL_TRANSCRIPTS
CLOSED_PART = 0.15  # LIP_PART below this: lips together
FPS = 25.0


def clip_path(key: str) -> Path | None:
    """``alsa:NAME`` or ``moonshine:NAME`` -> the file, or None where the package is not installed."""
    src, _, name = key.partition(":")
    if src == "alsa":
        p = Path("/usr/share/sounds/alsa") / name
        return p if p.is_file() else None
    spec = importlib.util.find_spec("moonshine_voice")  # finds the folder without importing (its deps may be absent)
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "assets" / name
    return p if p.is_file() else None


def reference_phones(
    audio: np.ndarray, rate: int, text: str | list
) -> tuple[list[PhonemeTiming], list[tuple[float, float]]]:
    """Forced-aligned phones of the transcript (whole clip, or piece by piece) and the scored spans (s): a piece
    that pocketsphinx cannot align is left out of the scores."""
    from studio.audio.recognizer import align
    from studio.errors import SpeechError

    if isinstance(text, str):
        try:
            return align(audio, rate, text), [(0.0, len(audio) / rate)]
        except SpeechError:
            log.warning("clip (%s) does not align: not scored", text[:60])
            return [], []
    out: list[PhonemeTiming] = []
    spans = []
    for a_s, b_s, piece in text:
        try:
            phones = align(audio[int(a_s * rate) : int(b_s * rate)], rate, piece)
        except SpeechError:
            log.warning("piece %.2f-%.2f s (%s) does not align: not scored", a_s, b_s, piece)
            continue
        spans.append((float(a_s), float(b_s)))
        out += [PhonemeTiming(p.phoneme, p.start_s + a_s, p.end_s + a_s, p.stress) for p in phones]
    return out, spans


def load_clips() -> list[tuple[str, Path, str | list]]:
    data = json.loads(TRANSCRIPTS.read_text(encoding="utf-8"))
    out = []
    for key, text in data.items():
        if key.startswith("_"):
            continue
        p = clip_path(key)
        if p is None:
            log.warning("%s not found: skipped", key)
            continue
        out.append((key, p, text))
    return out


def frame_classes(phones: list[PhonemeTiming], n: int) -> np.ndarray:
    """lipsync PhoneClass at each frame centre (n,)."""
    out = np.full(n, int(PhoneClass.OTHER))
    centres = (np.arange(n) + 0.5) / FPS
    for p in phones:
        a, b = np.searchsorted(centres, p.start_s), np.searchsorted(centres, p.end_s)
        out[a:b] = int(classify_phone(p.phoneme))
    return out


def _scores(vis: np.ndarray, part: np.ndarray, ref: np.ndarray, cls: np.ndarray) -> dict:
    speech = ref != int(Viseme.SIL)
    pbm = ref == int(Viseme.PBM)
    open_ = cls == int(PhoneClass.OPEN)
    return {
        "viseme_acc": float((vis == ref).mean()),
        "viseme_acc_speech": float((vis[speech] == ref[speech]).mean()) if speech.any() else None,
        "pbm_closure": float((part[pbm] < CLOSED_PART).mean()) if pbm.any() else None,
        "pbm_viseme_recall": float((vis[pbm] == int(Viseme.PBM)).mean()) if pbm.any() else None,
        "part_pbm_over_open": float(part[pbm].mean() / max(part[open_].mean(), 1e-9))
        if pbm.any() and open_.any() else None,
    }


def evaluate(clips: list, weights: Path | None = None, dump: Path | None = None,
             vad_gate: bool = True, pbm_closure: bool | None = None) -> dict:
    """Score both engines on ``clips`` (``HumanClip``s, or (key, path, text) triples)."""
    from studio.audio.recognizer import recognize_file_phones
    from studio.neural.training.data import MOUTH_IDX, frame_visemes
    from studio.neural.engine import NeuralMotionEngine
    from studio.audio.io import load_audio_file
    from studio.presenter.motion import loudness_envelope
    from studio.speech.visemes import mouth_track

    from studio.neural.settings import NeuralSettings

    overrides: dict = {"vad_gate": vad_gate}
    if pbm_closure is not None:
        overrides["pbm_closure"] = pbm_closure
    if weights:
        overrides["weights_path"] = weights
    settings = replace(NeuralSettings(), **overrides)
    eng = NeuralMotionEngine(settings)
    acc: dict[str, dict[str, list]] = {e: {"vis": [], "part": []} for e in ("pocketsphinx", "neural")}
    refs, classes, per_clip, speakers, probs = [], [], {}, [], []
    for clip in clips:
        key, path, text = (clip.key, clip.path, clip.text) if hasattr(clip, "key") else clip
        speaker = getattr(clip, "speaker", key.split(":")[0])
        audio, rate = load_audio_file(path)
        n = -(-len(audio) // 640)
        ref_ph, spans = reference_phones(audio, rate, text)
        centres = (np.arange(n) + 0.5) / FPS
        scored = np.zeros(n, bool)
        for a_s, b_s in spans:
            scored |= (centres >= a_s) & (centres < b_s)
        ref = frame_visemes(ref_ph, n).astype(np.int64)
        cls = frame_classes(ref_ph, n)
        ps_ph = recognize_file_phones(audio, rate)
        loud = loudness_envelope(audio, rate, FPS, n)
        ps_vis = frame_visemes(ps_ph, n).astype(np.int64)
        ps_part = mouth_track(ps_ph, FPS, n, loudness=loud)[:, MOUTH_IDX][:, 1]
        nm = eng.motion(audio)
        nn_vis, nn_part, nn_probs = nm.visemes[:n], nm.mouth[:n, 1], nm.viseme_probs[:n]
        n = int(scored.sum())
        ref, cls, ps_vis, ps_part, nn_vis, nn_part, nn_probs = (
            x[:len(scored)][scored] for x in (ref, cls, ps_vis, ps_part, nn_vis, nn_part, nn_probs))
        probs.append(nn_probs)
        acc["pocketsphinx"]["vis"].append(ps_vis)
        acc["pocketsphinx"]["part"].append(ps_part)
        acc["neural"]["vis"].append(nn_vis)
        acc["neural"]["part"].append(nn_part)
        refs.append(ref)
        classes.append(cls)
        speakers += [speaker] * len(ref)
        per_clip[key] = {"speaker": speaker, "seconds": len(audio) / rate, "frames_scored": n,
                         "viseme_acc_pocketsphinx": float((ps_vis == ref).mean()) if n else None,
                         "viseme_acc_neural": float((nn_vis == ref).mean()) if n else None}
    ref_all, cls_all = np.concatenate(refs), np.concatenate(classes)
    if dump is not None:  # the scored frames, for a confusion matrix or a second look
        np.savez_compressed(dump, ref=ref_all, cls=cls_all, speaker=np.asarray(speakers),
                            clip_frames=np.array([len(r) for r in refs]), neural_probs=np.concatenate(probs),
                            **{f"{e}_{k}": np.concatenate(v) for e, d in acc.items() for k, v in d.items()})
    speaker_all = np.asarray(speakers)
    res: dict = {"neural_vad_gate": vad_gate, "neural_pbm_closure": settings.pbm_closure,
                 "clips": len(per_clip), "seconds_scored": len(ref_all) / FPS, "frames": int(len(ref_all)),
                 "speech_frames": int((ref_all != int(Viseme.SIL)).sum()),
                 "pbm_frames": int((ref_all == int(Viseme.PBM)).sum()),
                 "open_vowel_frames": int((cls_all == int(PhoneClass.OPEN)).sum()), "per_clip": per_clip}
    groups = {"all": np.ones(len(ref_all), bool)}
    for name in sorted(set(speakers)):
        groups[f"speaker {name}"] = speaker_all == name
    for tag in ("(f)", "(m)"):
        groups[f"voices {tag}"] = np.char.endswith(speaker_all.astype(str), tag)
    engines = {e: (np.concatenate(d["vis"]), np.concatenate(d["part"])) for e, d in acc.items()}
    for e, (vis, part) in engines.items():
        res[e] = _scores(vis, part, ref_all, cls_all)
    res["groups"] = {g: {"frames": int(m.sum()), "pbm_frames": int((ref_all[m] == int(Viseme.PBM)).sum()),
                         **{e: _scores(vis[m], part[m], ref_all[m], cls_all[m]) for e, (vis, part) in engines.items()}}
                     for g, m in groups.items() if m.any()}
    return res


PBM_TAUS = (None, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1)  # None: the viseme head's argmax alone (the shipped setting)
PBM_HOLDS = (0, 1, 2)


def close_lips(part: np.ndarray, vis: np.ndarray, probs: np.ndarray, clip_frames: np.ndarray, tau: float | None,
               hold: int) -> np.ndarray:
    """LIP_PART with the engine's p/b/m closure applied to frames of an engine run without it: closed where the
    viseme is p/b/m or P(p/b/m) >= ``tau``, and for ``hold`` frames after (per clip, as ``MotionSession`` does)."""
    out = part.copy()
    start = 0
    for n in clip_frames:
        trig = vis[start:start + n] == int(Viseme.PBM)
        if tau is not None:
            trig = trig | (probs[start:start + n, int(Viseme.PBM)] >= tau)
        left = 0
        for i in range(n):
            if trig[i]:
                left = hold
                out[start + i] = 0.0
            elif left > 0:
                left -= 1
                out[start + i] = 0.0
        start += n
    return out


def closure_sweep(dump: Path, bias: np.ndarray | None = None) -> list[dict]:
    """Every (tau, hold) candidate of the p/b/m decoding rule (metrics.json validation_split) scored on a dump of
    ``evaluate --no-pbm-closure --dump``: p/b/m closure, closure on other speech frames and on open vowels. With
    ``bias``: on the calibrated visemes and probabilities (``calibrated``)."""
    z = np.load(dump)
    ref, cls = z["ref"], z["cls"]
    vis, probs = z["neural_vis"], z["neural_probs"]
    if bias is not None:
        vis, probs = calibrated(vis, probs, bias)
    pbm = ref == int(Viseme.PBM)
    other = (ref != int(Viseme.SIL)) & ~pbm
    open_ = cls == int(PhoneClass.OPEN)
    rows = []
    for tau in PBM_TAUS:
        for hold in PBM_HOLDS:
            part = close_lips(z["neural_part"], vis, probs, z["clip_frames"], tau, hold)
            rows.append({"tau": tau, "hold": hold, "pbm_closure": float((part[pbm] < CLOSED_PART).mean()),
                         "closed_other_speech": float((part[other] < CLOSED_PART).mean()),
                         "closed_open_vowels": float((part[open_] < CLOSED_PART).mean()),
                         "part_pbm_over_open": float(part[pbm].mean() / max(part[open_].mean(), 1e-9))})
    return rows


def calibrated(vis: np.ndarray, probs: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Visemes and probabilities with a per-class offset on the log-probabilities; frames the VAD gate put to rest
    (viseme SIL whatever the head said) stay SIL, as in the engine."""
    lp = np.log(np.maximum(probs, 1e-12)) + bias[None, :]
    out = np.where(vis == int(Viseme.SIL), int(Viseme.SIL), lp.argmax(1))
    e = np.exp(lp - lp.max(1, keepdims=True))
    return out, e / e.sum(1, keepdims=True)


def fit_viseme_bias(dump: Path, passes: int = 5) -> tuple[np.ndarray, list[float]]:
    """The calibration of the rule in metrics.json validation_split (viseme_calibration_rule): coordinate ascent on
    viseme accuracy over per-class log-probability offsets in -3..3 (steps of 0.1); returns the offsets and the
    accuracy after each pass."""
    z = np.load(dump)
    ref, vis, lp = z["ref"], z["neural_vis"], np.log(np.maximum(z["neural_probs"], 1e-12))
    gated = vis == int(Viseme.SIL)
    grid = np.round(np.arange(-30, 31) / 10.0, 1)
    bias = np.zeros(lp.shape[1])

    def accuracy(b: np.ndarray) -> float:
        return float((np.where(gated, int(Viseme.SIL), (lp + b).argmax(1)) == ref).mean())

    best, history = accuracy(bias), []
    for _ in range(passes):
        for k in range(len(bias)):
            for v in grid:
                trial = bias.copy()
                trial[k] = v
                a = accuracy(trial)
                if a > best + 1e-12:
                    best, bias = a, trial
        history.append(best)
    return bias, history


def held_out_frames(folder: Path, prefix: str = "", weights: Path | None = None,
                    max_clips: int = 0) -> dict[str, np.ndarray]:
    """The engine's streaming path on the recipe's held-out voices (``folder``/val shards, stored log-mel): per frame
    the reference viseme and coefficients, and the engine's viseme probabilities and mouth coefficients. For choosing
    decoding settings on voices the model never trained on, without looking at the human clips."""
    from studio.neural.training.data import MEL_FRONT_PAD, dequantize_mel
    from studio.neural.engine import NeuralMotionEngine
    from studio.neural.settings import NeuralSettings

    settings = NeuralSettings(fingerprint_capacity=0)
    eng = NeuralMotionEngine(replace(settings, weights_path=weights) if weights else settings)
    out: dict[str, list[np.ndarray]] = {"ref": [], "ref_coeffs": [], "probs": [], "mouth": []}
    for f in sorted((folder / "val").glob(f"{prefix}*.npz")):
        z = np.load(f)
        mo, fo = z["mel_offsets"], z["frame_offsets"]
        n_clips = len(fo) - 1 if not max_clips else min(max_clips, len(fo) - 1)
        for i in range(n_clips):
            mel = dequantize_mel(z["mel"][mo[i]:mo[i + 1]])[MEL_FRONT_PAD:]
            n = int(fo[i + 1] - fo[i])
            ses = eng.session()
            m1, _ = ses.push_mel(mel)
            p1 = ses.last_probs
            m2, _ = ses.flush(frames=n)
            mouth, probs = np.concatenate([m1, m2])[:n], np.concatenate([p1, ses.last_probs])[:n]
            out["ref"].append(z["vis"][fo[i]:fo[i + 1]].astype(np.int64))
            out["ref_coeffs"].append(z["coeffs"][fo[i]:fo[i + 1]].astype(np.float32))
            out["probs"].append(probs)
            out["mouth"].append(mouth)
    return {k: np.concatenate(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", choices=["validation", "test", "both"], default="validation",
                   help="validation (default; for choosing), test (report once, for the weights that ship) or both")
    p.add_argument("--json", type=Path)
    p.add_argument("--sweep", type=Path, metavar="DUMP", help="no engine run: score the p/b/m closure candidates on a "
                   "dump written by --no-pbm-closure --dump")
    p.add_argument("--calibrate", type=Path, metavar="DUMP", help="no engine run: fit the per-class viseme offsets "
                   "(rule_viseme_calibration) on a dump and score the closure candidates with them")
    p.add_argument("--weights", type=Path, help="default: the shipped weights")
    p.add_argument("--dump", type=Path, help="also save the scored frames (reference, both engines) as .npz")
    p.add_argument("--no-vad-gate", action="store_true", help="the neural engine without its VAD gate")
    p.add_argument("--pbm-closure", action=argparse.BooleanOptionalAction, default=None,
                   help="close the lips where the viseme head says p/b/m (default: the engine's setting)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.calibrate:
        bias, history = fit_viseme_bias(args.calibrate)
        out = {"bias": [round(float(b), 1) for b in bias], "accuracy_per_pass": history,
               "closure_sweep": closure_sweep(args.calibrate, bias)}
        print(json.dumps(out, indent=1))
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))
        return 0
    if args.sweep:
        rows = closure_sweep(args.sweep)
        print(json.dumps(rows, indent=1))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    from studio.neural.training.humans import SPLIT_RULE, human_clips

    splits = ["validation", "test"] if args.split == "both" else [args.split]
    r: dict = {"split_rule": SPLIT_RULE, "weights": str(args.weights or "shipped")}
    for split in splits:
        dump = args.dump.with_name(f"{args.dump.stem}_{split}{args.dump.suffix}") if args.dump else None
        r[split] = evaluate(human_clips(split), args.weights, dump, vad_gate=not args.no_vad_gate,
                            pbm_closure=args.pbm_closure)
    text = json.dumps(r, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
