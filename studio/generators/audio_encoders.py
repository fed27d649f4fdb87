"""The audio encoders of the engines, on 16 kHz windows, with the per-slot slicing each engine reads.

| encoder | engine | frames | per frame | per slot (``AudioFeatureSpec.shape_per_frame``) |
|---|---|---|---|---|
| whisper-tiny | MuseTalk 1.5 | 50 Hz | 5 hidden states x 384 | 10 frames from t - 80 ms: 50 x 384 |
| wav2vec2-base | EchoMimicV3 (Wan DiT) | 25 Hz (interpolated, as the release) | 12 layers x 768 | 12 x 768 |
| hubert-large | Ditto | 25 Hz (pairs averaged, as Ditto) | 1024 | 1 x 1024 |
| wav2lip-mel | Wav2Lip | 80 Hz | 80 mel bands | 16 frames from t: 1 x 80 x 16 |

The neural encoders are transformers' modules built from a config (random seeded weights: a timing twin) or loaded
from a folder in the Hugging Face layout (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``), strictly.

Windows: ``features_for_slots`` cuts the audio into windows of ``WINDOW_S`` on a grid anchored at the audio's first
sample, each encoded with ``CONTEXT_S`` of audio either side (features near a window's edge see their neighbours), and
calls ``encode`` once per window: that call is what the core puts behind the fingerprint cache (``cached``), so a
repeated ident at the same grid offset costs a lookup. Frames before the audio's start or past its end are zeros, as
the releases pad. Whisper here runs on windows shorter than its 30 s training context (positions 0..T of its
embedding): the release pads every call to 30 s, which costs 15 times more.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from studio.errors import ModelLoadError
from studio.generators.weights import load_strict, read_state, seeded, torch_dtype
from studio.contracts import ANALYSIS_RATE_HZ, AudioFeatureSpec

WINDOW_S = 2.0  # encoder call: 2 s of new audio ...
CONTEXT_S = 0.4  # ... plus 0.4 s either side (multiples of 640 samples: whole frames of every encoder)


def slaney_mel(sr: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """n_mels x (n_fft // 2 + 1) triangular filters on the Slaney mel scale, area-normalized (librosa's default)."""
    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        lin = m * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    hz = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(hz)
    ramps = hz[:, None] - freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (hz[2:n_mels + 2] - hz[:n_mels]))[:, None]
    return w.astype(np.float32)


def _stft_mag(x: torch.Tensor, n_fft: int, hop: int, win: int) -> torch.Tensor:
    """Centred (reflect-padded) STFT magnitude, frames x bins, with a periodic Hann window (librosa / whisper)."""
    w = torch.hann_window(win, periodic=True, dtype=x.dtype, device=x.device)
    s = torch.stft(x, n_fft=n_fft, hop_length=hop, win_length=win, window=w, center=True, pad_mode="reflect",
                   return_complex=True)
    return s.abs().T


class AudioEncoder:
    """One engine's audio encoder; see the module docstring."""

    name = ""
    has_weights = True  # False: a fixed transform (nothing to load)
    feature_fps = 50.0
    left_frames = 0  # frames before the slot's own
    frames_per_slot = 1
    samples_per_frame = 320
    spec: AudioFeatureSpec

    def __init__(self, device: str = "cpu", precision: str = "fp32") -> None:
        self.device = torch.device(device)
        self.dtype = torch_dtype(precision, self.device)
        self.twin = True

    # -- subclasses ------------------------------------------------------------------------------------------------
    def _encode(self, audio: np.ndarray) -> np.ndarray:
        """Audio of a whole number of frames -> frames x per-frame shape, float32."""
        raise NotImplementedError

    def _slot(self, frames: np.ndarray) -> np.ndarray:
        """frames_per_slot x per-frame shape -> shape_per_frame."""
        return frames.reshape(self.spec.shape_per_frame)

    # -- the contract with the core ----------------------------------------------------------------------------------
    @property
    def window_samples(self) -> int:
        return int(round((WINDOW_S + 2 * CONTEXT_S) * ANALYSIS_RATE_HZ))

    def encode_window(self, audio: np.ndarray) -> np.ndarray:
        """One window (``window_samples`` float32 at 16 kHz) -> its frames (window + context) x per-frame shape.
        This is the call the fingerprint cache stands in front of."""
        audio = np.asarray(audio, np.float32).reshape(-1)
        if len(audio) != self.window_samples:
            raise ValueError(f"{self.name}: a window is {self.window_samples} samples, got {len(audio)}")
        return self._encode(audio)

    def features_for_slots(self, audio_16k: np.ndarray, slot_times_s: np.ndarray, fps: float,
                           encode: Callable[[np.ndarray], np.ndarray] | None = None,
                           memo: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """K x shape_per_frame features for slots shown at ``slot_times_s`` (seconds from ``audio_16k[0]``).
        ``encode`` replaces ``encode_window`` (e.g. ``cached(...)``); ``fps`` is the slot rate (the slicing is by
        time, so any rate works; the releases use 25). ``memo`` keeps the frames of windows whose audio was complete
        (``SegmentFeatures``: a window is encoded once per segment)."""
        del fps  # slots are placed by their times
        audio = np.asarray(audio_16k, np.float32).reshape(-1)
        encode = encode or self.encode_window
        t = np.asarray(slot_times_s, np.float64).reshape(-1)
        if not len(t):
            return np.zeros((0, *self.spec.shape_per_frame), np.float32)
        start = np.floor(t * self.feature_fps + 1e-6).astype(np.int64) - self.left_frames
        idx = start[:, None] + np.arange(self.frames_per_slot)[None, :]  # K x n frame indices
        n_total = len(audio) // self.samples_per_frame
        win_f = int(round(WINDOW_S * self.feature_fps))
        ctx_f = int(round(CONTEXT_S * self.feature_fps))
        ctx_n = int(round(CONTEXT_S * ANALYSIS_RATE_HZ))
        win_n = int(round(WINDOW_S * ANALYSIS_RATE_HZ))
        valid = (idx >= 0) & (idx < n_total)
        frames: dict[int, np.ndarray] = {}
        for w in (int(w) for w in np.unique(idx[valid] // win_f)):
            if memo is not None and w in memo:
                frames[w] = memo[w]
                continue
            a = w * win_n - ctx_n
            seg = audio[max(a, 0):a + win_n + 2 * ctx_n]
            seg = np.pad(seg, (max(0, -a), self.window_samples - len(seg) - max(0, -a)))
            frames[w] = np.asarray(encode(seg), np.float32)[ctx_f:ctx_f + win_f]
            if memo is not None and len(audio) >= a + win_n + 2 * ctx_n:
                memo[w] = frames[w]
        out = np.zeros((len(t), self.frames_per_slot, *self._frame_shape()), np.float32)
        for k, j in zip(*np.nonzero(valid)):
            w, r = divmod(int(idx[k, j]), win_f)
            out[k, j] = frames[w][r]
        return np.stack([self._slot(o) for o in out]).reshape(len(t), *self.spec.shape_per_frame)

    def _frame_shape(self) -> tuple[int, ...]:
        raise NotImplementedError


class SegmentFeatures:
    """The features of one program segment (a rundown item, a file, a stretch of microphone) as its audio arrives:
    the window grid is anchored at the segment's first sample, so a repeated ident or phrase at the same offset gives
    the same windows (fingerprint-cache hits across segments), and each window whose audio is complete is encoded
    once per segment (later chunks reuse it without counting as cache hits).

    ``features(audio_so_far, slot_times_s)``: ``audio_so_far`` starts at the segment's start; ``slot_times_s`` are
    seconds from that start."""

    def __init__(self, encoder: AudioEncoder, encode: Callable[[np.ndarray], np.ndarray] | None = None,
                 fps: float = 25.0) -> None:
        self.encoder = encoder
        self.encode = encode
        self.fps = fps
        self.memo: dict[int, np.ndarray] = {}

    def features(self, audio_so_far: np.ndarray, slot_times_s: np.ndarray) -> np.ndarray:
        return self.encoder.features_for_slots(audio_so_far, slot_times_s, self.fps, self.encode, self.memo)


def cached(encoder: AudioEncoder, cache) -> Callable[[np.ndarray], np.ndarray]:
    """``encode`` for ``features_for_slots`` through a ``studio.audio.fingerprint.FingerprintCache``: the key is the
    window's quantized log-mel, the value the encoder's frames."""
    from studio.audio.features import log_mel

    def encode(window: np.ndarray) -> np.ndarray:
        return cache.get_or_compute(log_mel(window), lambda _mel: encoder.encode_window(window))

    return encode


# -- Wav2Lip's mel -----------------------------------------------------------------------------------------------------

class Wav2LipMel(AudioEncoder):
    """Wav2Lip's mel spectrogram (its ``audio.melspectrogram``): pre-emphasis 0.97, n_fft 800, hop 200, Slaney mel 80
    bands 55..7600 Hz, dB - 20, normalized symmetric to -4..4. No network: the same on every machine."""

    name = "wav2lip-mel"
    has_weights = False
    feature_fps = 80.0
    frames_per_slot = 16  # mel_step_size
    samples_per_frame = 200
    spec = AudioFeatureSpec("wav2lip-mel", 80 * 16, (1, 80, 16))

    def __init__(self, device: str = "cpu", precision: str = "fp32") -> None:
        super().__init__("cpu", "fp32")  # a spectrogram: numpy-sized work
        self.twin = False
        self._basis = torch.from_numpy(slaney_mel(16000, 800, 80, 55.0, 7600.0))

    def _frame_shape(self) -> tuple[int, ...]:
        return (80,)

    def _encode(self, audio: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(audio).double()
        x = torch.cat([x[:1], x[1:] - 0.97 * x[:-1]])  # pre-emphasis (lfilter [1, -0.97])
        mag = _stft_mag(x, 800, 200, 800)[:-1]  # frames x 401 (the centred STFT's last frame starts past the end)
        mel = mag @ self._basis.double().T
        db = 20 * torch.log10(torch.clamp(mel, min=1e-5)) - 20.0
        return torch.clamp(8.0 * (db + 100.0) / 100.0 - 4.0, -4.0, 4.0).float().numpy()  # frames x 80

    def _slot(self, frames: np.ndarray) -> np.ndarray:
        return frames.T[None]  # 1 x 80 x 16


# -- transformer encoders ----------------------------------------------------------------------------------------------

def _hf_folder_state(folder: Path, name: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config dict, tensors) of a Hugging Face model folder."""
    from studio.generators.weights import require_file

    cfg_path = require_file(folder, "config.json", name)
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{name}: {cfg_path} is not readable JSON: copy the release's config.json again.") from exc
    for f in ("model.safetensors", "pytorch_model.bin"):
        if (folder / f).is_file():
            return cfg, read_state(folder / f, name)
    raise ModelLoadError(f"{name}: missing model.safetensors (or pytorch_model.bin) in {folder}: copy the model's "
                         "files there.")


def _rename_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoints saved before torch's parametrized weight norm name its halves weight_g / weight_v."""
    out = {}
    for k, v in state.items():
        k = k.replace(".weight_g", ".parametrizations.weight.original0")
        k = k.replace(".weight_v", ".parametrizations.weight.original1")
        out[k] = v
    return out


class WhisperTiny(AudioEncoder):
    """Whisper-tiny's encoder (MuseTalk's ``whisper.encoder(..., output_hidden_states=True)``): the embeddings and
    the four layers' outputs (the last after the final layer norm), stacked: 50 Hz x 5 x 384."""

    name = "whisper-tiny"
    feature_fps = 50.0
    left_frames = 4  # audio_padding_length_left 2 x 2 frames per video frame
    frames_per_slot = 10  # 2 x (2 + 2 + 1)
    samples_per_frame = 320
    spec = AudioFeatureSpec("whisper-tiny", 50 * 384, (50, 384))
    TWIN_CONFIG = dict(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                       decoder_layers=4, decoder_attention_heads=6, decoder_ffn_dim=1536, num_mel_bins=80,
                       max_source_positions=1500, vocab_size=51865)

    def __init__(self, device: str = "cpu", precision: str = "fp32", folder: Path | None = None, seed: int = 0,
                 config: dict | None = None) -> None:
        super().__init__(device, precision)
        from transformers import WhisperConfig
        from transformers.models.whisper.modeling_whisper import WhisperEncoder

        if folder is None:
            cfg = WhisperConfig(**{**self.TWIN_CONFIG, **(config or {})})
            with seeded(seed):
                self.model = WhisperEncoder(cfg)
        else:
            raw, state = _hf_folder_state(Path(folder), self.name)
            cfg = WhisperConfig(**raw)
            self.model = WhisperEncoder(cfg)
            enc = {k.split("encoder.", 1)[1]: v for k, v in state.items()
                   if k.startswith(("model.encoder.", "encoder."))}
            load_strict(self.model, enc, f"{self.name}: {folder}")
            self.twin = False
        self.n_layers = cfg.encoder_layers
        self.d_model = cfg.d_model
        self.spec = AudioFeatureSpec(self.name, 10 * (cfg.encoder_layers + 1) * cfg.d_model,
                                     (10 * (cfg.encoder_layers + 1), cfg.d_model))
        self.model.to(self.device, self.dtype).eval()
        self._basis = torch.from_numpy(slaney_mel(16000, 400, cfg.num_mel_bins, 0.0, 8000.0))

    def _frame_shape(self) -> tuple[int, ...]:
        return (self.n_layers + 1, self.d_model)

    def log_mel(self, audio: np.ndarray) -> torch.Tensor:
        """Whisper's log-mel: 100 Hz, 80 bands, log10 clamped to 8 below the maximum, scaled (x + 4) / 4."""
        x = torch.from_numpy(audio).float()
        power = _stft_mag(x, 400, 160, 400)[:-1] ** 2  # frames x 201 (whisper drops the last frame)
        mel = power @ self._basis.T
        lg = torch.log10(torch.clamp(mel, min=1e-10))
        lg = torch.maximum(lg, lg.max() - 8.0)
        return ((lg + 4.0) / 4.0).T  # 80 x frames

    @torch.inference_mode()
    def hidden_states(self, mel: torch.Tensor) -> torch.Tensor:
        """B x 80 x T mel -> B x T/2 x (layers + 1) x d: the embeddings and every layer's output."""
        m = self.model
        x = torch.nn.functional.gelu(m.conv1(mel))
        x = torch.nn.functional.gelu(m.conv2(x)).permute(0, 2, 1)  # B x T/2 x d
        if x.shape[1] > m.embed_positions.num_embeddings:
            raise ValueError(f"whisper: at most 30 s per call, got {x.shape[1] / 50:.1f} s")
        x = x + m.embed_positions.weight[:x.shape[1]]
        states = [x]
        for layer in m.layers:
            out = layer(x, None)
            x = out[0] if isinstance(out, tuple) else out
            states.append(x)
        states[-1] = m.layer_norm(x)
        return torch.stack(states, dim=2)

    def _encode(self, audio: np.ndarray) -> np.ndarray:
        mel = self.log_mel(audio)[None].to(self.device, self.dtype)
        return self.hidden_states(mel)[0].float().cpu().numpy()  # frames x 5 x 384


class _Wav2Vec2Family(AudioEncoder):
    """wav2vec2 / HuBERT: the convolutional feature encoder (400-sample receptive field, 320 hop) and a transformer;
    the last hidden state, on input normalized to zero mean and unit variance per window (the feature extractor's
    ``do_normalize``)."""

    config_cls = ""
    model_cls = ""
    prefixes: tuple[str, ...] = ()
    TWIN_CONFIG: dict = {}

    def __init__(self, device: str = "cpu", precision: str = "fp32", folder: Path | None = None, seed: int = 0,
                 config: dict | None = None) -> None:
        super().__init__(device, precision)
        import transformers

        cfg_cls = getattr(transformers, self.config_cls)
        model_cls = getattr(transformers, self.model_cls)
        if folder is None:
            cfg = cfg_cls(**{**self.TWIN_CONFIG, **(config or {})})
            with seeded(seed):
                self.model = model_cls(cfg)
        else:
            raw, state = _hf_folder_state(Path(folder), self.name)
            cfg = cfg_cls(**raw)
            self.model = model_cls(cfg)
            for p in self.prefixes:
                state = {(k[len(p):] if k.startswith(p) else k): v for k, v in state.items()}
            state = _rename_weight_norm(state)
            own = self.model.state_dict()
            for k in ("masked_spec_embed",):  # a training-only parameter some releases leave out
                if k in own and k not in state:
                    state[k] = own[k]
            load_strict(self.model, state, f"{self.name}: {folder}",
                        ignore_prefixes=("lm_head.", "quantizer.", "project_q.", "project_hid.", "final_proj.",
                                         "label_embs_concat"))
            self.twin = False
        self.hidden = cfg.hidden_size
        self.model.to(self.device, self.dtype).eval()

    def _frame_shape(self) -> tuple[int, ...]:
        return (self.hidden,)

    @torch.inference_mode()
    def _hidden(self, audio: np.ndarray) -> np.ndarray:
        x = np.asarray(audio, np.float32)
        x = (x - x.mean()) / math.sqrt(float(x.var()) + 1e-7)
        x = np.pad(x, (0, 80))  # (n + 80 - 400) / 320 + 1 = n / 320 frames
        inp = torch.from_numpy(x)[None].to(self.device, self.dtype)
        return self.model(inp).last_hidden_state[0].float().cpu().numpy()  # frames x hidden


class Wav2Vec2Base(_Wav2Vec2Family):
    """wav2vec2-base as EchoMimicV3 runs it (its ``src/wav2vec2.py``): the convolutional features (50 Hz) are
    linearly interpolated to the video rate (25 Hz, align_corners) before the transformer, and all 12 layers' outputs
    are kept: 25 Hz x 12 x 768."""

    name = "wav2vec2-base"
    feature_fps = 25.0
    frames_per_slot = 1
    samples_per_frame = 640
    spec = AudioFeatureSpec("wav2vec2-base", 12 * 768, (12, 768))
    config_cls, model_cls = "Wav2Vec2Config", "Wav2Vec2Model"
    prefixes = ("wav2vec2.",)
    TWIN_CONFIG = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                       feat_extract_norm="group", do_stable_layer_norm=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.layers = self.model.config.num_hidden_layers
        self.spec = AudioFeatureSpec(self.name, self.layers * self.hidden, (self.layers, self.hidden))

    def _frame_shape(self) -> tuple[int, ...]:
        return (self.layers, self.hidden)

    @torch.inference_mode()
    def _encode(self, audio: np.ndarray) -> np.ndarray:
        m = self.model
        x = np.asarray(audio, np.float32)
        x = (x - x.mean()) / math.sqrt(float(x.var()) + 1e-7)
        inp = torch.from_numpy(np.pad(x, (0, 80)))[None].to(self.device, self.dtype)
        feats = m.feature_extractor(inp)  # 1 x 512 x n/320 (50 Hz)
        feats = torch.nn.functional.interpolate(feats.float(), size=len(audio) // 640, mode="linear",
                                                align_corners=True).to(self.dtype).transpose(1, 2)  # 1 x T25 x 512
        hidden, _ = m.feature_projection(feats)
        return torch.stack(self.layer_outputs(hidden), dim=2)[0].float().cpu().numpy()  # T25 x 12 x 768

    def layer_outputs(self, hidden: torch.Tensor) -> list[torch.Tensor]:
        """wav2vec2-base's (post-norm) encoder run layer by layer, keeping each layer's output (B x T x 768 each)."""
        enc = self.model.encoder
        hidden = enc.layer_norm(hidden + enc.pos_conv_embed(hidden))
        states = []
        for layer in enc.layers:
            out = layer(hidden)
            hidden = out[0] if isinstance(out, tuple) else out
            states.append(hidden)
        return states


class HubertLarge(_Wav2Vec2Family):
    """HuBERT-large (Ditto's audio encoder): 50 Hz x 1024, consecutive pairs averaged to 25 Hz as Ditto does
    (``reshape(5, 2, 1024).mean(1)``)."""

    name = "hubert-large"
    feature_fps = 25.0
    frames_per_slot = 1
    samples_per_frame = 640
    spec = AudioFeatureSpec("hubert-large", 1024, (1, 1024))
    config_cls, model_cls = "HubertConfig", "HubertModel"
    prefixes = ("hubert.",)
    TWIN_CONFIG = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                       feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spec = AudioFeatureSpec(self.name, self.hidden, (1, self.hidden))

    def _encode(self, audio: np.ndarray) -> np.ndarray:
        h = self._hidden(audio)
        n = h.shape[0] // 2
        return h[:2 * n].reshape(n, 2, -1).mean(1)


class HubertOnnx(AudioEncoder):
    """Ditto's own HuBERT export (``hubert_streaming_fix_kv.onnx``: 6,480 samples in, 20 x 1024 out) through ONNX
    Runtime, fed as Ditto's ``Wav2FeatHubert.wav2feat`` feeds it: chunks of 6,480 samples advancing 5 frames (3,200
    samples), 2,000 samples of silence before the first, rows [-14:-4] of each output averaged in pairs: 25 Hz."""

    name = "hubert-large"
    feature_fps = 25.0
    frames_per_slot = 1
    samples_per_frame = 640
    spec = HubertLarge.spec
    CHUNK = 6480
    LEAD = 6480 - 7 * 640  # 2,000

    def __init__(self, device: str = "cpu", precision: str = "fp32", path: Path | None = None) -> None:
        super().__init__("cpu", "fp32")
        import onnxruntime as ort

        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if str(device).startswith("cuda") else [
            "CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(path), providers=[p for p in providers
                                                                      if p in ort.get_available_providers()])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise ModelLoadError(f"hubert-large: cannot open {path} ({type(exc).__name__}): copy the release's "
                                 "ONNX file again.") from exc
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if [i.name for i in ins] != ["input_values"] or outs[0].shape[-1] != 1024:
            raise ModelLoadError(f"hubert-large: {path.name} is not Ditto's HuBERT (input 'input_values', 1024 "
                                 "features out).")
        self.twin = False

    def _frame_shape(self) -> tuple[int, ...]:
        return (1024,)

    def _encode(self, audio: np.ndarray) -> np.ndarray:
        n = len(audio) // 640
        pad = np.concatenate([np.zeros(self.LEAD, np.float32), audio, np.zeros(self.CHUNK, np.float32)])
        rows = []
        for i in range(0, n, 5):
            chunk = pad[i * 640:i * 640 + self.CHUNK][None]
            out = np.asarray(self.session.run(None, {"input_values": chunk})[0]).reshape(-1, 1024)
            rows.append(out[-14:-4].reshape(5, 2, 1024).mean(1))
        return np.concatenate(rows)[:n].astype(np.float32)


ENCODERS: dict[str, type[AudioEncoder]] = {
    "whisper-tiny": WhisperTiny,
    "wav2vec2-base": Wav2Vec2Base,
    "hubert-large": HubertLarge,
    "wav2lip-mel": Wav2LipMel,
}
