"""Wav2Lip as a generator: the 96 x 96 mouth-inpainting GAN (Prajwal et al. 2020), pasted back into the anchor.

Release layout (``weights_dir``): ``wav2lip_gan.pth`` or ``wav2lip.pth``, a torch checkpoint whose ``state_dict`` keys
carry DataParallel's ``module.`` prefix. Per output frame: the face crop at 96 x 96 with its lower half blacked out,
next to the unmasked reference (6 x 96 x 96, BGR 0..1 as the release feeds it), and 80 x 16 mel frames -> a 96 x 96
face (sigmoid, BGR), which is pasted back into the frame. Licence: the release's weights are for non-commercial use.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from studio.errors import ModelLoadError
from studio.generators.audio_encoders import Wav2LipMel
from studio.generators.common import FacePaste, NeuralGenerator, face_box, image_tensor
from studio.generators.weights import load_strict, read_state, strip_prefix
from studio.contracts import GENERATORS, CompileTarget, GeneratorInfo, InterpolationKind

FACE_PX = 96
WEIGHT_FILES = ("wav2lip_gan.pth", "wav2lip.pth")


class ConvBlock(nn.Module):
    """Conv + BatchNorm + ReLU, optionally residual (the release's ``Conv2d``)."""

    def __init__(self, cin: int, cout: int, k, s, p, residual: bool = False) -> None:
        super().__init__()
        self.conv_block = nn.Sequential(nn.Conv2d(cin, cout, k, s, p), nn.BatchNorm2d(cout))
        self.act = nn.ReLU()
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv_block(x)
        if self.residual:
            out = out + x
        return self.act(out)


class ConvTBlock(nn.Module):
    """Transposed conv + BatchNorm + ReLU (the release's ``Conv2dTranspose``)."""

    def __init__(self, cin: int, cout: int, k, s, p, op: int = 0) -> None:
        super().__init__()
        self.conv_block = nn.Sequential(nn.ConvTranspose2d(cin, cout, k, s, p, op), nn.BatchNorm2d(cout))
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv_block(x))


def _c(cin, cout, k=3, s=1, p=1, r=False):
    return ConvBlock(cin, cout, k, s, p, r)


class Wav2LipNet(nn.Module):
    """The generator network; module names match the release's state dict."""

    def __init__(self) -> None:
        super().__init__()
        self.face_encoder_blocks = nn.ModuleList([
            nn.Sequential(_c(6, 16, 7, 1, 3)),  # 96
            nn.Sequential(_c(16, 32, 3, 2, 1), _c(32, 32, r=True), _c(32, 32, r=True)),  # 48
            nn.Sequential(_c(32, 64, 3, 2, 1), _c(64, 64, r=True), _c(64, 64, r=True), _c(64, 64, r=True)),  # 24
            nn.Sequential(_c(64, 128, 3, 2, 1), _c(128, 128, r=True), _c(128, 128, r=True)),  # 12
            nn.Sequential(_c(128, 256, 3, 2, 1), _c(256, 256, r=True), _c(256, 256, r=True)),  # 6
            nn.Sequential(_c(256, 512, 3, 2, 1), _c(512, 512, r=True)),  # 3
            nn.Sequential(_c(512, 512, 3, 1, 0), _c(512, 512, 1, 1, 0)),  # 1
        ])
        self.audio_encoder = nn.Sequential(
            _c(1, 32), _c(32, 32, r=True), _c(32, 32, r=True),
            _c(32, 64, 3, (3, 1), 1), _c(64, 64, r=True), _c(64, 64, r=True),
            _c(64, 128, 3, 3, 1), _c(128, 128, r=True), _c(128, 128, r=True),
            _c(128, 256, 3, (3, 2), 1), _c(256, 256, r=True),
            _c(256, 512, 3, 1, 0), _c(512, 512, 1, 1, 0))
        self.face_decoder_blocks = nn.ModuleList([
            nn.Sequential(_c(512, 512, 1, 1, 0)),
            nn.Sequential(ConvTBlock(1024, 512, 3, 1, 0), _c(512, 512, r=True)),  # 3
            nn.Sequential(ConvTBlock(1024, 512, 3, 2, 1, 1), _c(512, 512, r=True), _c(512, 512, r=True)),  # 6
            nn.Sequential(ConvTBlock(768, 384, 3, 2, 1, 1), _c(384, 384, r=True), _c(384, 384, r=True)),  # 12
            nn.Sequential(ConvTBlock(512, 256, 3, 2, 1, 1), _c(256, 256, r=True), _c(256, 256, r=True)),  # 24
            nn.Sequential(ConvTBlock(320, 128, 3, 2, 1, 1), _c(128, 128, r=True), _c(128, 128, r=True)),  # 48
            nn.Sequential(ConvTBlock(160, 64, 3, 2, 1, 1), _c(64, 64, r=True), _c(64, 64, r=True)),  # 96
        ])
        self.output_block = nn.Sequential(_c(80, 32), nn.Conv2d(32, 3, 1, 1, 0), nn.Sigmoid())

    def forward(self, mel: torch.Tensor, face: torch.Tensor) -> torch.Tensor:
        """B x 1 x 80 x 16 mel, B x 6 x 96 x 96 (masked + reference, BGR 0..1) -> B x 3 x 96 x 96 (BGR 0..1)."""
        a = self.audio_encoder(mel)  # B x 512 x 1 x 1
        feats = []
        x = face
        for f in self.face_encoder_blocks:
            x = f(x)
            feats.append(x)
        x = a
        for f in self.face_decoder_blocks:
            x = torch.cat((f(x), feats.pop()), dim=1)
        return self.output_block(x)


class Wav2LipGenerator(NeuralGenerator):
    info = GeneratorInfo(
        name="wav2lip", label="Wav2Lip", family="mouth-inpainting GAN (96 px face)", native_px=FACE_PX,
        pyramidal_px=0, audio=Wav2LipMel.spec, interpolation=InterpolationKind.FLOW,
        batch_sizes=(1, 8, 16, 32, 64, 128), compile_backends=("inductor", "cuda_graphs", "onnxruntime", "tensorrt"),
        weights=WEIGHT_FILES[:1], licence="code and weights: non-commercial (research) use only",
        pastes_face=True)


    def _build_twin(self) -> None:
        self.net = Wav2LipNet()

    def _load(self, folder: Path) -> None:
        path = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
        if path is None:
            raise ModelLoadError(f"Wav2Lip: missing {WEIGHT_FILES[0]} (or {WEIGHT_FILES[1]}) in {folder}: copy the "
                                 "release's checkpoint there.")
        self.net = Wav2LipNet()
        load_strict(self.net, strip_prefix(read_state(path, "Wav2Lip", key="state_dict"), "module."),
                    f"Wav2Lip: {path.name}")

    def _to_device(self) -> None:
        self.net.to(self.device, self.dtype).eval()
        self.fns = {"wav2lip": self.net}

    def _prepare(self, anchor) -> None:
        box = face_box(anchor)
        x0, y0, side = box
        face = image_tensor(anchor.image[y0:y0 + side, x0:x0 + side], FACE_PX, self.device).flip(1)  # RGB -> BGR
        masked = face.clone()
        masked[:, :, FACE_PX // 2:] = 0
        self.face_in = torch.cat([masked, face], 1).to(self.dtype)  # 1 x 6 x 96 x 96
        self.paste = FacePaste(anchor, box, self.settings.size_px, self.device)

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        mel = features.reshape(-1, 1, 80, 16).to(self.device, self.dtype)  # B x 1 x 80 x 16
        bs = self.settings.batch_frames
        out = []
        for i in range(0, mel.shape[0], bs):
            m = mel[i:i + bs]
            out.append(self.fns["wav2lip"](m, self.face_in.expand(m.shape[0], -1, -1, -1)))
        faces = torch.cat(out).float().flip(1) * 255.0  # B x 3 x 96 x 96 RGB 0..255
        return self.paste(faces)

    def _targets(self) -> list[CompileTarget]:
        b = self.settings.batch_frames
        mel = torch.zeros((b, 1, 80, 16), device=self.device, dtype=self.dtype)
        return [CompileTarget("wav2lip", self.net, (mel, self.face_in.expand(b, -1, -1, -1).contiguous()))]


@GENERATORS.register("wav2lip")
def _make(**kwargs) -> Wav2LipGenerator:
    return Wav2LipGenerator()
