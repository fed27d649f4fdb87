"""LivePortrait as a generator: implicit keypoints, a 3-D feature warp and a SPADE decoder (MIT code; its face
detection parts from InsightFace are non-commercial and not used here).

Release layout (``weights_dir``, the release's ``pretrained_weights/liveportrait`` folder):
``base_models/appearance_feature_extractor.pth`` (F), ``base_models/motion_extractor.pth`` (M),
``base_models/warping_module.pth`` (W), ``base_models/spade_generator.pth`` (G), and
``retargeting_models/stitching_retargeting_module.pth`` (S: ``retarget_shoulder`` / ``retarget_mouth`` /
``retarget_eye`` state dicts with DataParallel's ``module.`` prefix). Shapes are the release's ``models.yaml``.

Once per anchor: F gives the 32 x 16 x 64 x 64 appearance volume of the 256 px portrait and M its keypoints, pose,
expression, scale and shift. Per output frame (driven by our motion coefficients instead of a driving video): the
head angles and shift move the keypoints, the lip and eye retargeting MLPs open the mouth and close the eyes, the
stitching MLP keeps the shoulders in place, then W warps the volume (5-D grid_sample) and G decodes 512 x 512.
A cast of several anchors: each anchor's volume and keypoints are made once, and its frames are rows of the same W and
G calls as the other anchors' (each row warping its own anchor's volume).
The modules are shared with Ditto (``studio.generators.ditto``), which loads the same networks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import spectral_norm

from studio.errors import RenderError
from studio.generators.common import NeuralGenerator, image_tensor, to_size
from studio.generators.weights import load_strict, read_state, require_file, strip_prefix
from studio.contracts import GENERATORS, CompileTarget, GeneratorInfo, InterpolationKind
from studio.contracts.coeffs import Coeff

SOURCE_PX = 256
OUT_PX = 512


@dataclass(frozen=True)
class LivePortraitConfig:
    """``models.yaml`` of the release (tests shrink the widths)."""

    block_expansion: int = 64
    max_features: int = 512
    reshape_channel: int = 32
    reshape_depth: int = 16
    num_resblocks: int = 6
    num_kp: int = 21
    convnext_depths: tuple[int, ...] = (3, 3, 9, 3)
    convnext_dims: tuple[int, ...] = (96, 192, 384, 768)
    dense_block_expansion: int = 32
    dense_max_features: int = 1024
    dense_num_blocks: int = 5
    dense_compress: int = 4
    spade_hidden: int = 128
    stitching_hidden: tuple[int, ...] = (128, 128, 64)
    lip_hidden: tuple[int, ...] = (128, 128, 64)
    eye_hidden: tuple[int, ...] = (256, 256, 128, 128, 64)
    num_bins: int = 66


# -- building blocks (names follow the release's modules/util.py) -----------------------------------------------------

class SameBlock2d(nn.Module):
    def __init__(self, cin: int, cout: int, lrelu: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm2d(cout)
        self.ac = nn.LeakyReLU() if lrelu else nn.ReLU()

    def forward(self, x):
        return self.ac(self.norm(self.conv(x)))


class DownBlock2d(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm2d(cout)
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        return self.pool(F.relu(self.norm(self.conv(x))))


class DownBlock3d(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm3d(cout)
        self.pool = nn.AvgPool3d((1, 2, 2))

    def forward(self, x):
        return self.pool(F.relu(self.norm(self.conv(x))))


class UpBlock3d(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm3d(cout)

    def forward(self, x):
        return F.relu(self.norm(self.conv(F.interpolate(x, scale_factor=(1, 2, 2)))))


class ResBlock3d(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(c, c, 3, padding=1)
        self.conv2 = nn.Conv3d(c, c, 3, padding=1)
        self.norm1 = nn.BatchNorm3d(c)
        self.norm2 = nn.BatchNorm3d(c)

    def forward(self, x):
        out = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(out))) + x


class Encoder(nn.Module):
    def __init__(self, be: int, cin: int, n: int, mx: int) -> None:
        super().__init__()
        self.down_blocks = nn.ModuleList(
            [DownBlock3d(cin if i == 0 else min(mx, be * 2 ** i), min(mx, be * 2 ** (i + 1))) for i in range(n)])

    def forward(self, x):
        outs = [x]
        for b in self.down_blocks:
            outs.append(b(outs[-1]))
        return outs


class Decoder(nn.Module):
    def __init__(self, be: int, cin: int, n: int, mx: int) -> None:
        super().__init__()
        self.up_blocks = nn.ModuleList(
            [UpBlock3d((1 if i == n - 1 else 2) * min(mx, be * 2 ** (i + 1)), min(mx, be * 2 ** i))
             for i in reversed(range(n))])
        self.out_filters = be + cin
        self.conv = nn.Conv3d(self.out_filters, self.out_filters, 3, padding=1)
        self.norm = nn.BatchNorm3d(self.out_filters)

    def forward(self, outs):
        outs = list(outs)
        out = outs.pop()
        for b in self.up_blocks:
            out = torch.cat([b(out), outs.pop()], dim=1)
        return F.relu(self.norm(self.conv(out)))


class Hourglass(nn.Module):
    def __init__(self, be: int, cin: int, n: int, mx: int) -> None:
        super().__init__()
        self.encoder = Encoder(be, cin, n, mx)
        self.decoder = Decoder(be, cin, n, mx)
        self.out_filters = self.decoder.out_filters

    def forward(self, x):
        return self.decoder(self.encoder(x))


def grid_sample_fp32(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """grid_sample computed in fp32 whatever the model's dtype, as the releases get it under autocast (which runs
    grid_sample in fp32): half-precision sampling coordinates are off by up to a pixel at 64 px."""
    return F.grid_sample(x.float(), grid.float(), align_corners=False).to(x.dtype)


def coordinate_grid(d: int, h: int, w: int, ref: torch.Tensor) -> torch.Tensor:
    """d x h x w x 3 (x, y, z) in -1..1."""
    x = 2 * torch.arange(w, dtype=ref.dtype, device=ref.device) / (w - 1) - 1
    y = 2 * torch.arange(h, dtype=ref.dtype, device=ref.device) / (h - 1) - 1
    z = 2 * torch.arange(d, dtype=ref.dtype, device=ref.device) / (d - 1) - 1
    return torch.stack([x.view(1, 1, w).expand(d, h, w), y.view(1, h, 1).expand(d, h, w),
                        z.view(d, 1, 1).expand(d, h, w)], dim=-1)


class DenseMotionNetwork(nn.Module):
    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        k, c = cfg.num_kp, cfg.dense_compress
        self.num_kp = k
        self.hourglass = Hourglass(cfg.dense_block_expansion, (k + 1) * (c + 1), cfg.dense_num_blocks,
                                   cfg.dense_max_features)
        self.mask = nn.Conv3d(self.hourglass.out_filters, k + 1, 7, padding=3)
        self.compress = nn.Conv3d(cfg.reshape_channel, c, 1)
        self.norm = nn.BatchNorm3d(c)
        self.occlusion = nn.Conv2d(self.hourglass.out_filters * cfg.reshape_depth, 1, 7, padding=3)

    def forward(self, feature, kp_driving, kp_source):
        """B x 32 x 16 x 64 x 64, B x K x 3 (twice) -> deformation B x 16 x 64 x 64 x 3, occlusion B x 1 x 64 x 64."""
        bs = feature.shape[0]
        feature = F.relu(self.norm(self.compress(feature)))  # B x 4 x d x h x w
        _, c, d, h, w = feature.shape
        k = self.num_kp
        grid = coordinate_grid(d, h, w, kp_source).view(1, 1, d, h, w, 3)
        driving_to_source = grid - kp_driving.view(bs, k, 1, 1, 1, 3) + kp_source.view(bs, k, 1, 1, 1, 3)
        sparse = torch.cat([grid.expand(bs, 1, d, h, w, 3), driving_to_source], dim=1)  # B x K+1 x d x h x w x 3
        feat = feature[:, None].expand(bs, k + 1, c, d, h, w).reshape(bs * (k + 1), c, d, h, w)
        deformed = grid_sample_fp32(feat, sparse.reshape(bs * (k + 1), d, h, w, 3))
        deformed = deformed.view(bs, k + 1, c, d, h, w)
        g = grid.view(1, 1, d, h, w, 3)

        def gauss(kp):
            return torch.exp(-0.5 * ((g - kp.view(bs, k, 1, 1, 1, 3)) ** 2).sum(-1) / 0.01)

        heat = gauss(kp_driving) - gauss(kp_source)  # B x K x d x h x w
        heat = torch.cat([heat.new_zeros(bs, 1, d, h, w), heat], dim=1)[:, :, None]
        pred = self.hourglass(torch.cat([heat, deformed], dim=2).view(bs, -1, d, h, w))
        mask = F.softmax(self.mask(pred), dim=1)[:, :, None]  # B x K+1 x 1 x d x h x w
        deformation = (sparse.permute(0, 1, 5, 2, 3, 4) * mask).sum(1).permute(0, 2, 3, 4, 1)
        occlusion = torch.sigmoid(self.occlusion(pred.reshape(bs, -1, h, w)))
        return deformation, occlusion


# -- the five networks -------------------------------------------------------------------------------------------------

class AppearanceFeatureExtractor(nn.Module):
    """F: B x 3 x 256 x 256 (0..1) -> B x 32 x 16 x 64 x 64."""

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        be, mx = cfg.block_expansion, cfg.max_features
        self.cfg = cfg
        self.first = SameBlock2d(3, be)
        self.down_blocks = nn.ModuleList([DownBlock2d(min(mx, be * 2 ** i), min(mx, be * 2 ** (i + 1)))
                                          for i in range(2)])
        self.second = nn.Conv2d(min(mx, be * 4), mx, 1)
        self.resblocks_3d = nn.Sequential()
        for i in range(cfg.num_resblocks):
            self.resblocks_3d.add_module(f"3dr{i}", ResBlock3d(cfg.reshape_channel))

    def forward(self, x):
        out = self.second(self.down_blocks[1](self.down_blocks[0](self.first(x))))
        b, _, h, w = out.shape
        return self.resblocks_3d(out.view(b, self.cfg.reshape_channel, self.cfg.reshape_depth, h, w))


class GRN(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, 1, dim))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        return self.gamma * (x * (gx / (gx.mean(dim=-1, keepdim=True) + 1e-6))) + self.beta + x


class ChannelsFirstLayerNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        return self.weight[:, None, None] * ((x - u) / torch.sqrt(s + 1e-6)) + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.grn = GRN(4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        y = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
        y = self.pwconv2(self.grn(self.act(self.pwconv1(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtV2(nn.Module):
    """M's backbone with its heads: B x 3 x 256 x 256 -> kp, pose bins, shift, expression, scale."""

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        dims, depths = cfg.convnext_dims, cfg.convnext_depths
        self.downsample_layers = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4), ChannelsFirstLayerNorm(dims[0]))] +
            [nn.Sequential(ChannelsFirstLayerNorm(dims[i]), nn.Conv2d(dims[i], dims[i + 1], 2, stride=2))
             for i in range(3)])
        self.stages = nn.ModuleList([nn.Sequential(*[ConvNeXtBlock(dims[i]) for _ in range(depths[i])])
                                     for i in range(4)])
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        k, nb = cfg.num_kp, cfg.num_bins
        self.fc_kp = nn.Linear(dims[-1], 3 * k)
        self.fc_scale = nn.Linear(dims[-1], 1)
        self.fc_pitch = nn.Linear(dims[-1], nb)
        self.fc_yaw = nn.Linear(dims[-1], nb)
        self.fc_roll = nn.Linear(dims[-1], nb)
        self.fc_t = nn.Linear(dims[-1], 3)
        self.fc_exp = nn.Linear(dims[-1], 3 * k)

    def forward(self, x) -> dict[str, torch.Tensor]:
        for i in range(4):
            x = self.stages[i](self.downsample_layers[i](x))
        x = self.norm(x.mean([-2, -1]))
        return {"pitch": self.fc_pitch(x), "yaw": self.fc_yaw(x), "roll": self.fc_roll(x), "t": self.fc_t(x),
                "exp": self.fc_exp(x), "scale": self.fc_scale(x), "kp": self.fc_kp(x)}


class MotionExtractor(nn.Module):
    """M (its state dict nests the backbone under ``detector.``)."""

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        self.detector = ConvNeXtV2(cfg)

    def forward(self, x):
        return self.detector(x)


class WarpingNetwork(nn.Module):
    """W: volume B x 32 x 16 x 64 x 64 + keypoints (B x 21 x 3 each) -> B x 256 x 64 x 64."""

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        c = cfg.block_expansion * 4
        self.dense_motion_network = DenseMotionNetwork(cfg)
        self.third = SameBlock2d(cfg.max_features, c, lrelu=True)
        self.fourth = nn.Conv2d(c, c, 1)

    def forward(self, feature_3d, kp_source, kp_driving):
        deformation, occlusion = self.dense_motion_network(feature_3d, kp_driving, kp_source)
        out = grid_sample_fp32(feature_3d, deformation)  # B x 32 x 16 x 64 x 64
        b, c, d, h, w = out.shape
        return self.fourth(self.third(out.view(b, c * d, h, w))) * occlusion


class SPADE(nn.Module):
    def __init__(self, norm_nc: int, label_nc: int, hidden: int) -> None:
        super().__init__()
        self.param_free_norm = nn.InstanceNorm2d(norm_nc, affine=False)
        self.mlp_shared = nn.Sequential(nn.Conv2d(label_nc, hidden, 3, padding=1), nn.ReLU())
        self.mlp_gamma = nn.Conv2d(hidden, norm_nc, 3, padding=1)
        self.mlp_beta = nn.Conv2d(hidden, norm_nc, 3, padding=1)

    def forward(self, x, seg):
        actv = self.mlp_shared(F.interpolate(seg, size=x.shape[2:], mode="nearest"))
        return self.param_free_norm(x) * (1 + self.mlp_gamma(actv)) + self.mlp_beta(actv)


class SPADEResnetBlock(nn.Module):
    def __init__(self, fin: int, fout: int, label_nc: int, hidden: int) -> None:
        super().__init__()
        self.learned_shortcut = fin != fout
        fmid = min(fin, fout)
        self.conv_0 = spectral_norm(nn.Conv2d(fin, fmid, 3, padding=1))
        self.conv_1 = spectral_norm(nn.Conv2d(fmid, fout, 3, padding=1))
        if self.learned_shortcut:
            self.conv_s = spectral_norm(nn.Conv2d(fin, fout, 1, bias=False))
        self.norm_0 = SPADE(fin, label_nc, hidden)
        self.norm_1 = SPADE(fmid, label_nc, hidden)
        if self.learned_shortcut:
            self.norm_s = SPADE(fin, label_nc, hidden)

    def forward(self, x, seg):
        xs = self.conv_s(self.norm_s(x, seg)) if self.learned_shortcut else x
        dx = self.conv_0(F.leaky_relu(self.norm_0(x, seg), 2e-1))
        return xs + self.conv_1(F.leaky_relu(self.norm_1(dx, seg), 2e-1))


class SPADEDecoder(nn.Module):
    """G: B x 256 x 64 x 64 -> B x 3 x 512 x 512 (sigmoid, 0..1)."""

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        c = min(cfg.max_features, cfg.block_expansion * 4)
        h = cfg.spade_hidden
        self.fc = nn.Conv2d(c, 2 * c, 3, padding=1)
        for i in range(6):
            setattr(self, f"G_middle_{i}", SPADEResnetBlock(2 * c, 2 * c, c, h))
        self.up_0 = SPADEResnetBlock(2 * c, c, c, h)
        self.up_1 = SPADEResnetBlock(c, cfg.block_expansion, c, h)
        self.up = nn.Upsample(scale_factor=2)
        self.conv_img = nn.Sequential(nn.Conv2d(cfg.block_expansion, 12, 3, padding=1), nn.PixelShuffle(2))

    def forward(self, feature):
        x = self.fc(feature)
        for i in range(6):
            x = getattr(self, f"G_middle_{i}")(x, feature)
        x = self.up_1(self.up(self.up_0(self.up(x), feature)), feature)
        return torch.sigmoid(self.conv_img(F.leaky_relu(x, 2e-1)))


class MLP(nn.Module):
    """The stitching / retargeting MLPs (``mlp.0``, ``mlp.2``, ...)."""

    def __init__(self, n_in: int, hidden: tuple[int, ...], n_out: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, h in enumerate(hidden):
            layers += [nn.Linear(n_in if i == 0 else hidden[i - 1], h), nn.ReLU()]
        self.mlp = nn.Sequential(*layers, nn.Linear(hidden[-1], n_out))

    def forward(self, x):
        return self.mlp(x)


# -- keypoint maths (the release's camera.py and wrapper) --------------------------------------------------------------

def bins_to_degrees(pred: torch.Tensor) -> torch.Tensor:
    """B x 66 pose bins -> B degrees (softmax expectation x 3 - 97.5)."""
    idx = torch.arange(pred.shape[1], device=pred.device, dtype=pred.dtype)
    return (F.softmax(pred, dim=1) * idx).sum(1) * 3 - 97.5


def rotation(pitch: torch.Tensor, yaw: torch.Tensor, roll: torch.Tensor) -> torch.Tensor:
    """Degrees (B each) -> B x 3 x 3, transposed as the release applies it (``kp @ R``)."""
    x, y, z = (a * (np.pi / 180) for a in (pitch, yaw, roll))
    o, n = torch.ones_like(x), torch.zeros_like(x)
    rx = torch.stack([o, n, n, n, x.cos(), -x.sin(), n, x.sin(), x.cos()], -1).view(-1, 3, 3)
    ry = torch.stack([y.cos(), n, y.sin(), n, o, n, -y.sin(), n, y.cos()], -1).view(-1, 3, 3)
    rz = torch.stack([z.cos(), -z.sin(), n, z.sin(), z.cos(), n, n, n, o], -1).view(-1, 3, 3)
    return (rz @ ry @ rx).transpose(1, 2)


def transform_keypoints(kp_c, pitch, yaw, roll, exp, scale, t) -> torch.Tensor:
    """s * (x_c R + exp) + t (t's x and y only): B x K x 3."""
    out = (kp_c @ rotation(pitch, yaw, roll) + exp) * scale.view(-1, 1, 1)
    return torch.cat([out[..., :2] + t[:, None, :2], out[..., 2:]], dim=-1)


def stitch(stitching: nn.Module, kp_source, kp_driving) -> torch.Tensor:
    """The stitching MLP's correction of the driving keypoints (expression delta + x / y shift)."""
    b, k, _ = kp_source.shape
    delta = stitching(torch.cat([kp_source.reshape(b, -1), kp_driving.reshape(b, -1)], dim=1))
    kp = kp_driving + delta[:, :3 * k].reshape(b, k, 3)
    return torch.cat([kp[..., :2] + delta[:, 3 * k:3 * k + 2].reshape(b, 1, 2), kp[..., 2:]], dim=-1)


def open_ratio(landmarks: np.ndarray, top: int, bottom: int, left: int, right: int) -> float:
    """Opening / width of a landmark pair (mouth or eye), as the release's close ratios measure."""
    p = np.asarray(landmarks)[:, :2]
    return float(np.linalg.norm(p[top] - p[bottom]) / max(np.linalg.norm(p[left] - p[right]), 1e-6))


class LivePortraitNets(nn.Module):
    """F, M, W, G and S of one release, with the release's file layout."""

    FILES = {"appearance_feature_extractor": "base_models/appearance_feature_extractor.pth",
             "motion_extractor": "base_models/motion_extractor.pth",
             "warping_module": "base_models/warping_module.pth",
             "spade_generator": "base_models/spade_generator.pth"}
    STITCHING = "retargeting_models/stitching_retargeting_module.pth"
    STITCH_KEYS = {"stitching": "retarget_shoulder", "lip": "retarget_mouth", "eye": "retarget_eye"}

    def __init__(self, cfg: LivePortraitConfig) -> None:
        super().__init__()
        k = cfg.num_kp
        self.appearance_feature_extractor = AppearanceFeatureExtractor(cfg)
        self.motion_extractor = MotionExtractor(cfg)
        self.warping_module = WarpingNetwork(cfg)
        self.spade_generator = SPADEDecoder(cfg)
        self.stitching = MLP(6 * k, cfg.stitching_hidden, 3 * k + 2)
        self.lip = MLP(3 * k + 2, cfg.lip_hidden, 3 * k)
        self.eye = MLP(3 * k + 3, cfg.eye_hidden, 3 * k)

    def load_release(self, folder: Path, engine: str) -> None:
        for name, rel in self.FILES.items():
            path = require_file(folder, rel, engine)
            load_strict(getattr(self, name), read_state(path, engine), f"{engine}: {rel}")
        path = require_file(folder, self.STITCHING, engine)
        for name, key in self.STITCH_KEYS.items():
            state = strip_prefix(read_state(path, engine, key=key), "module.")
            load_strict(getattr(self, name), state, f"{engine}: {self.STITCHING} [{key}]")


@dataclass
class AnchorState:
    """What LivePortrait keeps of one anchor, made once when it opens (``LivePortraitGenerator.anchor_state``)."""

    feature: torch.Tensor  # 1 x 32 x 16 x 64 x 64 appearance volume, in the model's dtype
    src: dict[str, torch.Tensor]  # the portrait's pose (degrees), shift, scale, expression, canonical keypoints
    kp_source: torch.Tensor  # 1 x K x 3 source keypoints, float32
    lip_ratio: float  # the portrait's mouth opening / width
    eye_ratio: tuple[float, float]  # each eye's opening / width
    face_width: float  # in -1..1 image units


class LivePortraitGenerator(NeuralGenerator):
    """See the module docstring. A cast (several anchor packs): every anchor keeps its own ``AnchorState``; a call's
    rows (every anchor of every frame, or with ``shown`` each frame's shown anchor) get their driving keypoints from
    their own anchor's state and go through the warp and the decoder in batches of ``batch_frames`` rows, each row
    with its anchor's volume and source keypoints: the anchors are rows of the same calls."""

    info = GeneratorInfo(
        name="liveportrait", label="LivePortrait", family="implicit keypoints + 3-D warp + SPADE decoder",
        native_px=OUT_PX, pyramidal_px=0, audio=None, interpolation=InterpolationKind.FLOW,
        batch_sizes=(1, 4, 8, 16), compile_backends=("inductor", "cuda_graphs", "onnxruntime"),
        weights=tuple(LivePortraitNets.FILES.values()) + (LivePortraitNets.STITCHING,),
        licence="MIT (code and weights); InsightFace detection models: non-commercial (not used here)",
        needs_gpu_reason="its warp (5-D grid_sample over a 32 x 16 x 64 x 64 volume) and 512 px SPADE decoder take "
                         "seconds per frame on a 2-core CPU", cast_rows=True)

    def __init__(self, config: LivePortraitConfig | None = None, source_px: int = SOURCE_PX) -> None:
        super().__init__()
        self.cfg = config or LivePortraitConfig()
        self.source_px = source_px  # the release's 256; tests shrink it
        self.anchors: list[AnchorState] = []  # in cast order
        self.volumes: torch.Tensor | None = None  # a cast: A x 32 x 16 x 64 x 64, each anchor's volume
        self.kp_sources: torch.Tensor | None = None  # a cast: A x K x 3, each anchor's source keypoints

    @property
    def cast_size(self) -> int:
        return max(1, len(self.anchors))

    @property
    def out_channels(self) -> int:
        """3 (RGB) per anchor: a cast's frames carry every anchor's channels in turn."""
        return 3 * self.cast_size

    def _build_twin(self) -> None:
        self.nets = LivePortraitNets(self.cfg)

    def _load(self, folder: Path) -> None:
        self.nets = LivePortraitNets(self.cfg)
        self.nets.load_release(folder, self.info.label)

    def _to_device(self) -> None:
        self.nets.to(self.device, self.dtype).eval()
        self.fns = {"warping_module": self.nets.warping_module, "spade_generator": self.nets.spade_generator}

    def _prepare(self, anchor) -> None:
        """One anchor pack, or a cast's packs (a tuple or list): each anchor's state, and a cast's volumes and source
        keypoints stacked for the rows of a call to pick from."""
        packs = tuple(anchor) if isinstance(anchor, (tuple, list)) else (anchor,)
        self.anchors = [self.anchor_state(p) for p in packs]
        self.volumes = self.kp_sources = None
        if len(self.anchors) > 1:
            self.volumes = torch.cat([a.feature for a in self.anchors])
            self.kp_sources = torch.cat([a.kp_source for a in self.anchors])
            for i, a in enumerate(self.anchors):  # views of the stack: each volume is held once
                a.feature = self.volumes[i:i + 1]

    def anchor_state(self, anchor) -> AnchorState:
        """F's volume and M's keypoints and pose of one anchor's portrait, and its mouth and eye ratios."""
        n = self.nets
        src = image_tensor(anchor.image, self.source_px, self.device).to(self.dtype)  # 1 x 3 x 256 x 256, 0..1
        feature = n.appearance_feature_extractor(src)  # 1 x 32 x 16 x 64 x 64
        info = {k: v.float() for k, v in n.motion_extractor(src).items()}
        k = self.cfg.num_kp
        s = {"pitch": bins_to_degrees(info["pitch"]), "yaw": bins_to_degrees(info["yaw"]),
             "roll": bins_to_degrees(info["roll"]), "t": info["t"], "scale": info["scale"][:, 0],
             "exp": info["exp"].view(1, k, 3), "kp": info["kp"].view(1, k, 3)}
        kp_source = transform_keypoints(s["kp"], s["pitch"], s["yaw"], s["roll"], s["exp"], s["scale"], s["t"])
        lm = anchor.landmarks
        return AnchorState(
            feature=feature, src=s, kp_source=kp_source, lip_ratio=open_ratio(lm, 13, 14, 61, 291),
            eye_ratio=(open_ratio(lm, 159, 145, 33, 133), open_ratio(lm, 386, 374, 263, 362)),
            face_width=float(np.ptp(np.asarray(lm)[:, 0])) / anchor.image.shape[1] * 2)

    def driving_keypoints(self, coeffs: torch.Tensor, anchor: AnchorState | None = None) -> torch.Tensor:
        """B x N_COEFFS -> B x K x 3 driving keypoints of ``anchor`` (default: the first; head pose, shift, lips and
        eyes by retargeting, stitched)."""
        a = anchor or self.anchors[0]
        c = coeffs.float()
        b = c.shape[0]
        s = a.src
        k = self.cfg.num_kp
        n = self.nets
        pitch = s["pitch"] + c[:, Coeff.HEAD_PITCH_DEG]
        yaw = s["yaw"] + c[:, Coeff.HEAD_YAW_DEG]
        roll = s["roll"] + c[:, Coeff.HEAD_ROLL_DEG]
        t = s["t"].expand(b, 3).clone()
        t[:, 0] += c[:, Coeff.SHIFT_X] * a.face_width
        t[:, 1] += c[:, Coeff.SHIFT_Y] * a.face_width
        kp = transform_keypoints(s["kp"].expand(b, k, 3), pitch, yaw, roll, s["exp"].expand(b, k, 3),
                                 s["scale"].expand(b), t)
        src = a.kp_source.expand(b, k, 3).float()
        lip_open = (c[:, Coeff.JAW_OPEN] * 0.6 + c[:, Coeff.LIP_PART] * 0.2) * (1 - c[:, Coeff.LIP_PRESS])
        lip = torch.stack([torch.full_like(lip_open, a.lip_ratio), lip_open], 1)  # B x 2: source, driving
        blink = (c[:, Coeff.BLINK_L] + c[:, Coeff.BLINK_R]) / 2
        eye_d = (1 - blink) * (sum(a.eye_ratio) / 2)
        eye = torch.stack([torch.full_like(eye_d, a.eye_ratio[0]), torch.full_like(eye_d, a.eye_ratio[1]),
                           eye_d], 1)  # B x 3
        dt = self.dtype
        flat = src.reshape(b, -1)
        kp = kp + n.lip(torch.cat([flat, lip], 1).to(dt)).float().view(b, k, 3)
        kp = kp + n.eye(torch.cat([flat, eye], 1).to(dt)).float().view(b, k, 3)
        return stitch(lambda x: n.stitching(x.to(dt)).float(), src, kp)

    def _rows(self, coeffs: torch.Tensor, shown: np.ndarray | None) -> tuple[torch.Tensor, np.ndarray]:
        """The rows of a call: R x N_COEFFS motion and each row's anchor (R ints, on the host). One anchor: the
        frames; a cast's B x A x N_COEFFS: every anchor of every frame, frame by frame, or with ``shown`` each
        frame's shown anchor."""
        a = self.cast_size
        if a == 1:
            return coeffs, np.zeros(coeffs.shape[0], np.int64)
        if coeffs.dim() != 3 or coeffs.shape[1] != a:
            raise RenderError(f"{self.info.label} opened on a cast of {a} takes B x {a} x N_COEFFS motion, not "
                              f"{tuple(coeffs.shape)}.")
        b = coeffs.shape[0]
        if shown is None:
            return coeffs.reshape(b * a, -1), np.tile(np.arange(a), b)
        owner = np.asarray(shown, np.int64)
        if owner.shape != (b,) or (b and not 0 <= owner.min() <= owner.max() < a):
            raise RenderError(f"{self.info.label}: the rows to show must be one anchor of 0..{a - 1} per frame, "
                              f"{b} of them.")
        pick = torch.as_tensor(owner, device=coeffs.device)
        return coeffs[torch.arange(b, device=coeffs.device), pick], owner

    def _driving_rows(self, coeffs: torch.Tensor, owner: np.ndarray) -> torch.Tensor:
        """R x N_COEFFS -> R x K x 3 driving keypoints, each anchor's rows from that anchor's state."""
        groups = np.unique(owner)
        if len(groups) == 1:
            return self.driving_keypoints(coeffs, self.anchors[int(groups[0])])
        kp = torch.empty((coeffs.shape[0], self.cfg.num_kp, 3), device=coeffs.device)
        for a in groups:
            idx = torch.as_tensor(np.flatnonzero(owner == a), device=coeffs.device)
            kp.index_copy_(0, idx, self.driving_keypoints(coeffs.index_select(0, idx), self.anchors[int(a)]))
        return kp

    def _sources(self, owner: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The volume (R x 32 x 16 x 64 x 64) and source keypoints (R x K x 3) of each row's anchor, in the model's
        dtype."""
        first = int(owner[0])
        b = len(owner)
        if (owner == first).all():
            a = self.anchors[first]
            return a.feature.expand(b, -1, -1, -1, -1), a.kp_source.expand(b, -1, -1).to(self.dtype)
        idx = torch.as_tensor(owner, device=self.device)
        return self.volumes.index_select(0, idx), self.kp_sources.index_select(0, idx).to(self.dtype)

    def _generate(self, coeffs: torch.Tensor, features: torch.Tensor | None,
                  shown: np.ndarray | None = None) -> torch.Tensor:
        """B x N_COEFFS -> B x 3 x S x S; a cast's B x A x N_COEFFS -> B x 3A x S x S (every anchor's channels in
        turn), or with ``shown`` B x 3 x S x S (each frame's shown anchor)."""
        rows, owner = self._rows(coeffs, shown)
        bs = self.settings.batch_frames
        out = []
        for i in range(0, rows.shape[0], bs):
            part = owner[i:i + bs]
            kp_d = self._driving_rows(rows[i:i + bs].to(self.device), part).to(self.dtype)
            vol, kp_s = self._sources(part)
            out.append(self.fns["spade_generator"](self.fns["warping_module"](vol, kp_s, kp_d)))
        frames = to_size(torch.cat(out).float() * 255.0, self.settings.size_px)  # R x 3 x S x S
        if self.cast_size > 1 and shown is None:
            frames = frames.reshape(coeffs.shape[0], -1, *frames.shape[-2:])  # rows (frame, anchor) -> channels
        return frames

    def _targets(self) -> list[CompileTarget]:
        b = self.settings.batch_frames
        a = self.anchors[0]
        kp = a.kp_source.expand(b, -1, -1).to(self.dtype).contiguous()
        vol = a.feature.expand(b, -1, -1, -1, -1).contiguous()
        c = self.cfg.block_expansion * 4
        w = a.feature.shape[-1]
        feat = torch.zeros((b, c, w, w), device=self.device, dtype=self.dtype)
        return [CompileTarget("warping_module", self.nets.warping_module, (vol, kp, kp)),
                CompileTarget("spade_generator", self.nets.spade_generator, (feat,))]

    def close(self) -> None:
        """Drop the modules and every anchor's tensors."""
        self.anchors = []
        super().close()


@GENERATORS.register("liveportrait")
def _make(**kwargs) -> LivePortraitGenerator:
    return LivePortraitGenerator()
