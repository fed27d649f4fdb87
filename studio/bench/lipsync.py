"""Independent lip-sync measurement of a finished MP4.

It uses nothing from our renderer: the mouth opening comes from MediaPipe's face mesh run on the decoded video
(inner-lip gap 13-14 over face height 10-152, in pixels), the loudness from the decoded audio track, and the
optional phone timings from the TTS. Frame ``i`` is shown during ``[t_i, t_i + 1/fps)`` (``t_i`` its decoded
display time, ``i / fps`` for our files); both the audio window and the phone of a frame are taken over / at the
centre of that interval, so a mouth drawn for the sound heard while the frame is on screen scores lag 0.

Usage: ``python -m studio.bench.lipsync FILE.mp4 [--phones PHONES.json] [--min-corr 0.5] [--max-lag 2]
[--max-pbm 0.25]`` prints the report as JSON and exits 0 when it passes, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import enum
import json
import logging
import math
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import av
import numpy as np

from studio.encode.probe import probe_mp4
from studio.errors import InputError, StudioError
from studio.speech.timings import phonemes_from_json, utterance_timings_to_json, words_from_json  # noqa: F401
from studio.speech.types import PhonemeTiming

log = logging.getLogger(__name__)

# MediaPipe face-mesh indices: inner lips (upper, lower) and face height (forehead top, chin).
_LIP_UPPER, _LIP_LOWER, _FOREHEAD, _CHIN = 13, 14, 10, 152
PAUSE_MIN_S = 0.15  # silence shorter than this is a transition, not a pause
_LOG_RMS_FLOOR = 1e-4  # -80 dBFS: keeps digital silence finite


class PhoneClass(enum.IntEnum):
    OTHER = 0
    PBM = 1  # bilabial closures: the lips must meet
    OPEN = 2  # open vowels: the mouth must open wide
    PAUSE = 3  # silence longer than PAUSE_MIN_S


_IPA_OPEN_FIRST = set("aɑæɐʌɔɒɶä")  # a phone starting with one of these opens the mouth (aɪ, aʊ, ɔɪ too)
_ARPA_OPEN = {"AA", "AE", "AH", "AO", "AW", "AY"}  # AH0 (schwa) excluded below
_SILENCE_NAMES = {"sil", "sp", "spn", "pau", "<sil>", "<s>", "</s>"}


def classify_phone(symbol: str) -> PhoneClass:
    """p/b/m, open vowel, silence (as PAUSE: the caller keeps only long ones) or other; IPA or ARPAbet."""
    token = symbol.strip()
    if token.lower() in _SILENCE_NAMES or not any(ch.isalpha() for ch in token):
        return PhoneClass.PAUSE  # "_", "^", "$", " ", punctuation, SIL, sp
    if token.isascii() and token[:1].isupper():  # ARPAbet: upper-case letters and an optional stress digit
        base = token.rstrip("012")
        if base in ("P", "B", "M"):
            return PhoneClass.PBM
        if base in _ARPA_OPEN and not (base == "AH" and token.endswith("0")):
            return PhoneClass.OPEN
        return PhoneClass.OTHER
    # IPA: drop stress / length marks, aspiration and combining diacritics.
    letters = "".join(ch for ch in token if unicodedata.category(ch) not in ("Mn", "Lm", "Sk"))
    if letters in ("p", "b", "m"):
        return PhoneClass.PBM
    if letters[:1] in _IPA_OPEN_FIRST:
        return PhoneClass.OPEN
    return PhoneClass.OTHER


def frame_phone_classes(phonemes: Sequence[PhonemeTiming], frame_centres_s: np.ndarray, end_s: float) -> np.ndarray:
    """PhoneClass per frame (N,) int: the phone under each frame centre; pauses = silence runs > PAUSE_MIN_S.

    A pause run is any stretch covered by silence phones or by no phone at all (also before the first and after the
    last phone, up to ``end_s``), merged, kept when longer than PAUSE_MIN_S.
    """
    classes = np.full(len(frame_centres_s), PhoneClass.OTHER, np.int64)
    phones = sorted(phonemes, key=lambda p: p.start_s)
    silent: list[tuple[float, float]] = []
    cursor = 0.0
    for phone in phones:
        if phone.start_s > cursor:
            silent.append((cursor, phone.start_s))  # a gap
        if classify_phone(phone.phoneme) is PhoneClass.PAUSE:
            silent.append((phone.start_s, phone.end_s))
        cursor = max(cursor, phone.end_s)
    if end_s > cursor:
        silent.append((cursor, end_s))
    runs: list[list[float]] = []
    for start, end in sorted(silent):
        if runs and start <= runs[-1][1] + 1e-9:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    for start, end in runs:
        if end - start > PAUSE_MIN_S:
            classes[(frame_centres_s >= start) & (frame_centres_s < end)] = PhoneClass.PAUSE
    for phone in phones:
        kind = classify_phone(phone.phoneme)
        if kind in (PhoneClass.PBM, PhoneClass.OPEN):
            classes[(frame_centres_s >= phone.start_s) & (frame_centres_s < phone.end_s)] = kind
    return classes


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation over the entries where both are finite; NaN if fewer than 3 or either is constant."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return math.nan
    a, b = a[ok], b[ok]
    if a.min() == a.max() or b.min() == b.max():
        return math.nan
    a, b = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    return float(np.dot(a, b) / denom) if denom > 0 else math.nan


def lagged_correlations(opening: np.ndarray, envelope: np.ndarray, max_lag_frames: int) -> np.ndarray:
    """Pearson correlation (2*max_lag+1,) at lags -max..+max; lag L pairs opening[i] with envelope[i - L].

    Positive lag = the mouth moves after the sound.
    """
    n = min(len(opening), len(envelope))
    out = np.full(2 * max_lag_frames + 1, math.nan)
    for k, lag in enumerate(range(-max_lag_frames, max_lag_frames + 1)):
        if lag >= 0:
            out[k] = pearson(opening[lag:n], envelope[: n - lag])
        else:
            out[k] = pearson(opening[: n + lag], envelope[-lag:n])
    return out


def best_lag(correlations: np.ndarray, max_lag_frames: int) -> tuple[float | None, int | None]:
    """(highest correlation, its lag); ties go to the smaller |lag|; (None, None) when all are NaN."""
    if not np.isfinite(correlations).any():
        return None, None
    lags = np.arange(-max_lag_frames, max_lag_frames + 1)
    order = sorted(range(len(lags)), key=lambda k: (-np.nan_to_num(correlations[k], nan=-np.inf), abs(lags[k])))
    return float(correlations[order[0]]), int(lags[order[0]])


def frame_log_rms(
    audio: np.ndarray, sample_rate_hz: int, audio_start_s: float, frame_starts_s: np.ndarray, frame_period_s: float
) -> np.ndarray:
    """log RMS (N,) of the audio heard while each frame is shown: window [t_i, t_i + period)."""
    out = np.empty(len(frame_starts_s))
    for i, t in enumerate(frame_starts_s):
        lo = max(0, round((t - audio_start_s) * sample_rate_hz))
        hi = max(lo, min(len(audio), round((t + frame_period_s - audio_start_s) * sample_rate_hz)))
        window = audio[lo:hi]
        rms = math.sqrt(float(np.mean(window.astype(np.float64) ** 2))) if window.size else 0.0
        out[i] = math.log(max(rms, _LOG_RMS_FLOOR))
    return out


@dataclass(frozen=True)
class PhoneStats:
    """Mean mouth opening (above the clip's 2nd percentile) per phone class and the ratios the targets use."""

    opening_p2: float | None
    n_pbm_frames: int
    n_open_frames: int
    n_pause_frames: int
    pbm_opening: float | None
    open_opening: float | None
    pause_opening: float | None
    pbm_over_open: float | None
    pause_over_open: float | None


def phone_stats(opening: np.ndarray, classes: np.ndarray) -> PhoneStats:
    """Opening (N,) with NaN where no face was found, classes (N,) PhoneClass."""
    face = np.isfinite(opening)
    if not face.any():
        return PhoneStats(None, 0, 0, 0, None, None, None, None, None)
    p2 = float(np.percentile(opening[face], 2))
    above = np.maximum(opening - p2, 0.0)

    def mean_of(kind: PhoneClass) -> tuple[int, float | None]:
        sel = face & (classes == kind)
        return int(sel.sum()), (float(above[sel].mean()) if sel.any() else None)

    n_pbm, pbm = mean_of(PhoneClass.PBM)
    n_open, open_ = mean_of(PhoneClass.OPEN)
    n_pause, pause = mean_of(PhoneClass.PAUSE)

    def ratio(num: float | None) -> float | None:
        return num / open_ if num is not None and open_ is not None and open_ > 0 else None

    return PhoneStats(p2, n_pbm, n_open, n_pause, pbm, open_, pause, ratio(pbm), ratio(pause))


@dataclass(frozen=True)
class LipSyncReport:
    """What ``measure_lipsync`` found; ``asdict`` gives JSON-ready values (None where not measurable)."""

    path: str
    fps: float
    n_frames: int
    n_frames_no_face: int
    audio_duration_s: float  # as the container presents it (AAC priming and tail padding excluded)
    max_lag_frames: int
    corr_by_lag: tuple[float | None, ...]  # lags -max_lag_frames .. +max_lag_frames
    best_corr: float | None
    best_lag_frames: int | None  # positive: the mouth moves after the sound
    mean_opening: float | None  # inner-lip gap / face height, over frames with a face
    has_phonemes: bool
    phones: PhoneStats

    def failures(
        self, min_corr: float = 0.5, max_lag: int = 2, max_pbm_ratio: float = 0.25, min_face_fraction: float = 0.9
    ) -> list[str]:
        """Why the clip fails the targets (empty when it passes)."""
        out = []
        if self.n_frames == 0 or (self.n_frames - self.n_frames_no_face) / self.n_frames < min_face_fraction:
            out.append(f"a face was found in {self.n_frames - self.n_frames_no_face} of {self.n_frames} frames")
        if self.best_corr is None or self.best_corr < min_corr:
            out.append(f"best correlation {self.best_corr} < {min_corr}")
        if self.best_lag_frames is None or abs(self.best_lag_frames) > max_lag:
            out.append(f"best lag {self.best_lag_frames} frames is beyond +-{max_lag}")
        if self.phones.pbm_over_open is not None and self.phones.pbm_over_open > max_pbm_ratio:
            out.append(
                f"p/b/m opening is {self.phones.pbm_over_open:.2f} of the open-vowel opening (> {max_pbm_ratio})"
            )
        return out

    def passes(
        self, min_corr: float = 0.5, max_lag: int = 2, max_pbm_ratio: float = 0.25, min_face_fraction: float = 0.9
    ) -> bool:
        """True when the correlation, lag, p/b/m closure (if phones were given) and face detection meet the targets."""
        return not self.failures(min_corr, max_lag, max_pbm_ratio, min_face_fraction)


def mouth_openings(path: Path, box: tuple[int, int, int, int] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, float]:
    """(opening per frame (N,) NaN without a face, display start per frame (N,) s, fps) from the video track;
    ``box`` (x0, y0, x1, y1): only that part of each picture (one anchor of a two-shot)."""
    import mediapipe as mp  # heavy: only when a clip is measured

    openings: list[float] = []
    starts: list[float] = []
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise InputError(f"{path} has no video track: give an MP4 with video and audio.")
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        if not rate:
            raise InputError(f"{path} has no frame rate: write it with a constant frame rate.")
        with mp.solutions.face_mesh.FaceMesh(
            static_image_mode=False, refine_landmarks=True, max_num_faces=1
        ) as mesh:
            for frame in container.decode(stream):
                rgb = frame.to_ndarray(format="rgb24")  # H x W x 3
                if box is not None:
                    rgb = np.ascontiguousarray(rgb[box[1]:box[3], box[0]:box[2]])
                h, w = rgb.shape[:2]
                starts.append(float(frame.time) if frame.time is not None else len(starts) / float(rate))
                result = mesh.process(rgb)
                if not result.multi_face_landmarks:
                    openings.append(math.nan)
                    continue
                lm = result.multi_face_landmarks[0].landmark

                def dist(a: int, b: int) -> float:
                    return math.hypot((lm[a].x - lm[b].x) * w, (lm[a].y - lm[b].y) * h)

                face_h = dist(_FOREHEAD, _CHIN)
                openings.append(dist(_LIP_UPPER, _LIP_LOWER) / face_h if face_h > 0 else math.nan)
    return np.array(openings), np.array(starts), float(rate)


def _decode_audio(path: Path) -> tuple[np.ndarray, int, float]:
    """(mono float32 samples, rate, display time of the first sample in s) of the audio track."""
    with av.open(str(path)) as container:
        if not container.streams.audio:
            raise InputError(f"{path} has no audio track: give an MP4 with video and audio.")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="flt", layout="mono", rate=stream.rate)
        chunks: list[np.ndarray] = []
        first_s: float | None = None
        for frame in container.decode(stream):
            if first_s is None:
                first_s = float(frame.time) if frame.time is not None else 0.0
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return audio, int(stream.rate), first_s or 0.0


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def measure_lipsync(
    mp4_path: Path | str, phonemes: Sequence[PhonemeTiming] | None = None, max_lag_frames: int = 5
) -> LipSyncReport:
    """Measure how well the mouth in ``mp4_path`` follows its own audio (and the phones, when given)."""
    path = Path(mp4_path)
    if not path.is_file():
        raise InputError(f"{path} does not exist: give the path of an MP4 file.")
    try:
        opening, starts_s, fps = mouth_openings(path)
        audio, rate, audio_start_s = _decode_audio(path)
    except av.FFmpegError as exc:
        raise InputError(f"Cannot decode {path} ({exc}): give a playable MP4 file.") from exc
    period_s = 1.0 / fps
    envelope = frame_log_rms(audio, rate, audio_start_s, starts_s, period_s)
    corrs = lagged_correlations(opening, envelope, max_lag_frames)
    best_corr, lag = best_lag(corrs, max_lag_frames)
    face = np.isfinite(opening)
    end_s = float(starts_s[-1] + period_s) if len(starts_s) else 0.0
    classes = (
        frame_phone_classes(phonemes, starts_s + period_s / 2, end_s)
        if phonemes is not None
        else np.full(len(opening), PhoneClass.OTHER)
    )
    no_phones = PhoneStats(None, 0, 0, 0, None, None, None, None, None)
    stats = phone_stats(opening, classes) if phonemes is not None else no_phones
    report = LipSyncReport(
        path=str(path),
        fps=fps,
        n_frames=len(opening),
        n_frames_no_face=int((~face).sum()),
        audio_duration_s=probe_mp4(path).audio_duration_s or (len(audio) / rate if rate else 0.0),
        max_lag_frames=max_lag_frames,
        corr_by_lag=tuple(_finite_or_none(c) for c in corrs),
        best_corr=best_corr,
        best_lag_frames=lag,
        mean_opening=float(opening[face].mean()) if face.any() else None,
        has_phonemes=phonemes is not None,
        phones=stats,
    )
    log.info("lip sync of %s: corr %s at lag %s frames", path, best_corr, lag)
    return report


# -- phone timings as JSON (written by `main.py render`, read here) ----------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studio.bench.lipsync", description=__doc__.splitlines()[0])
    parser.add_argument("mp4", type=Path)
    parser.add_argument("--phones", type=Path, help="PHONES.json written by `main.py render`")
    parser.add_argument("--min-corr", type=float, default=0.5)
    parser.add_argument("--max-lag", type=int, default=2, help="frames")
    parser.add_argument("--max-pbm", type=float, default=0.25, help="p/b/m opening over open-vowel opening")
    parser.add_argument("--search-lag", type=int, default=5, help="frames searched either side")
    args = parser.parse_args(argv)
    try:
        phonemes = None
        if args.phones is not None:
            try:
                phonemes = phonemes_from_json(json.loads(args.phones.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError) as exc:
                raise InputError(f"Cannot read {args.phones} ({exc}): give the PHONES.json of the clip.") from exc
        report = measure_lipsync(args.mp4, phonemes, max_lag_frames=args.search_lag)
    except StudioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    thresholds = {"min_corr": args.min_corr, "max_lag": args.max_lag, "max_pbm_ratio": args.max_pbm}
    failures = report.failures(**thresholds)
    result = {**asdict(report), "thresholds": thresholds, "passes": not failures, "failures": failures}
    print(json.dumps(result, indent=2))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
