"""Neural engine vs the pocketsphinx engine on human speech the model never saw.

Reference: pocketsphinx forced alignment of each clip's transcript (``resources/models/audio2motion/
eval_transcripts.json``) -> viseme per 25 fps frame. Engines:
- pocketsphinx: streaming phone recognition (``recognize_file_phones``) -> visemes, and ``mouth_track`` with the
  loudness envelope (exactly what ``render --audio --engine pocketsphinx`` animates);
- neural: ``NeuralMotionEngine.motion`` -> viseme logits and mouth coefficients (with the engine's VAD gate unless
  ``--no-vad-gate``).
Metrics per engine, over all clips' frames: viseme accuracy (all frames; speech frames only), lip closure on p/b/m
(share of reference p/b/m frames with LIP_PART < 0.15, i.e. lips together), mean LIP_PART on p/b/m over that on open
vowels.   ``python -m studio.neural.training.evaluate [--weights W] [--no-vad-gate] [--[no-]pbm-closure] [--json FILE]``
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
        return align(audio, rate, text), [(0.0, len(audio) / rate)]
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


def evaluate(clips: list[tuple[str, Path, str | list]], weights: Path | None = None, dump: Path | None = None,
             vad_gate: bool = True, pbm_closure: bool | None = None) -> dict:
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
    refs, classes, per_clip = [], [], {}
    for key, path, text in clips:
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
        nn_vis, nn_part = nm.visemes[:n], nm.mouth[:n, 1]
        n = int(scored.sum())
        ref, cls, ps_vis, ps_part, nn_vis, nn_part = (
            x[:len(scored)][scored] for x in (ref, cls, ps_vis, ps_part, nn_vis, nn_part))
        acc["pocketsphinx"]["vis"].append(ps_vis)
        acc["pocketsphinx"]["part"].append(ps_part)
        acc["neural"]["vis"].append(nn_vis)
        acc["neural"]["part"].append(nn_part)
        refs.append(ref)
        classes.append(cls)
        per_clip[key] = {"seconds": len(audio) / rate, "frames_scored": n,
                         "viseme_acc_pocketsphinx": float((ps_vis == ref).mean()),
                         "viseme_acc_neural": float((nn_vis == ref).mean())}
    ref_all, cls_all = np.concatenate(refs), np.concatenate(classes)
    if dump is not None:  # the scored frames, for a confusion matrix or a second look
        np.savez_compressed(dump, ref=ref_all, cls=cls_all, **{f"{e}_{k}": np.concatenate(v) for e, d in acc.items()
                                                             for k, v in d.items()})
    speech = ref_all != int(Viseme.SIL)
    pbm = ref_all == int(Viseme.PBM)
    open_ = cls_all == int(PhoneClass.OPEN)
    res: dict = {"neural_vad_gate": vad_gate, "neural_pbm_closure": settings.pbm_closure,
                 "clips": [c[0] for c in clips], "frames": int(len(ref_all)), "speech_frames": int(speech.sum()),
                 "pbm_frames": int(pbm.sum()), "open_vowel_frames": int(open_.sum()), "per_clip": per_clip}
    for e, d in acc.items():
        vis, part = np.concatenate(d["vis"]), np.concatenate(d["part"])
        res[e] = {
            "viseme_acc": float((vis == ref_all).mean()),
            "viseme_acc_speech": float((vis[speech] == ref_all[speech]).mean()),
            "pbm_closure": float((part[pbm] < CLOSED_PART).mean()) if pbm.any() else None,
            "pbm_viseme_recall": float((vis[pbm] == int(Viseme.PBM)).mean()) if pbm.any() else None,
            "part_pbm_over_open": float(part[pbm].mean() / max(part[open_].mean(), 1e-9)) if pbm.any() else None,
        }
    return res


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
    p.add_argument("--json", type=Path)
    p.add_argument("--weights", type=Path, help="default: the shipped weights")
    p.add_argument("--dump", type=Path, help="also save the scored frames (reference, both engines) as .npz")
    p.add_argument("--no-vad-gate", action="store_true", help="the neural engine without its VAD gate")
    p.add_argument("--pbm-closure", action=argparse.BooleanOptionalAction, default=None,
                   help="close the lips where the viseme head says p/b/m (default: the engine's setting)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    r = evaluate(load_clips(), args.weights, args.dump, vad_gate=not args.no_vad_gate, pbm_closure=args.pbm_closure)
    text = json.dumps(r, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
