"""The built-in presenter engine as a generator: the landmark-mesh warp renderer (``studio.presenter.renderer``).

It needs no downloaded weights, renders at any size, and can re-render in-between frames from interpolated warp
fields (motion-space interpolation, ``render_span``). Its pyramidal route is a low-resolution warp field
(``field_divisor`` 8: the field at size / 8 instead of size / 4) sampling the full-resolution portrait. With CUDA graphs
the field, the composite and the whole frame are captured per batch size and replayed; the whole frame compiled by
TorchInductor first (its full-resolution elementwise passes fused). A cast (several anchors as rows of one warp) runs
eager, and says so (``graphs_off``): its warp decides on the host which anchors' mouths to compose. A cast whose
picture shows one anchor a frame (cut to the speaker: ``shown``) has only those rows made
(``studio.presenter.cast_warp.ShownRows``); every anchor's motion still comes and goes on. On CUDA they run eager
too: a graph replays a fixed batch of rows, and the rows a chunk shows are one anchor's, or at a turn two anchors' in
any split, and where a mouth is closed is still decided on the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch

from studio.enhance.interp import Carry, MotionSpaceInterpolator, max_error_px
from studio.errors import RenderError
from studio.generators.graphs import Graphed, graphed
from studio.contracts import (GENERATORS, CompileTarget, Generator, GeneratorInfo, GeneratorSettings,
                                   InterpolationKind)
from studio.contracts.coeffs import N_COEFFS

log = logging.getLogger(__name__)

PLAIN_FIELD_DIVISOR = 4  # the renderer's own field: size / 4 (46 dB PSNR against a full-resolution field)


def landmark_planner(module):
    """The renderer's landmark geometry alone, on the CPU: the keyframe planner asks it where the landmarks of a
    chunk go without a GPU -> host synchronisation."""
    from torch import nn

    from studio.presenter.renderer import WarpRenderer

    p = WarpRenderer.__new__(WarpRenderer)
    nn.Module.__init__(p)
    for name in ("lm_src", "bases", "pivot"):
        p.register_buffer(name, getattr(module, name).detach().cpu())
    p.face_w, p.face_h = module.face_w, module.face_h
    p._index_cache = {}
    p.static_shapes = False
    return p


class _GraphedInterpolator(MotionSpaceInterpolator):
    def __init__(self, module, max_err: float, field_graph: Graphed, compose_graph: Graphed, planner=None) -> None:
        super().__init__(module, max_err, planner)
        self._field, self._compose = field_graph, compose_graph

    def warp_field(self, coeffs):
        return self._field(coeffs)

    def compose(self, coeffs, grid, mask):
        return self._compose(coeffs, grid, mask)


class BuiltinGenerator(Generator):
    """See the module docstring. ``field_divisor``: 4 = the plain renderer, 8 = the pyramidal route."""

    info = GeneratorInfo(
        name="builtin", label="Built-in presenter (mesh warp)", family="landmark mesh warp + synthesized mouth",
        native_px=0, pyramidal_px=0, audio=None, interpolation=InterpolationKind.MOTION_SPACE,
        batch_sizes=(1, 4, 8, 16, 32, 64), compile_backends=("inductor", "cuda_graphs", "onnxruntime", "tensorrt"),
        weights=(), licence="ours (no third-party weights)", warp_field=True, cuda_precision="fp32",
        cast_rows=True)

    def __init__(self, field_divisor: int = PLAIN_FIELD_DIVISOR, max_interp_error_px_at_512: float = 2.0) -> None:
        super().__init__()
        self.twin = False  # nothing to download: always the real engine
        self.field_divisor = field_divisor
        self.max_err_at_512 = max_interp_error_px_at_512
        self.module = None
        self._forward: Callable | None = None
        self.interp: MotionSpaceInterpolator | None = None
        # set before ``open`` for a canvas: frames then carry the warped matte as a fourth channel (a good matte only)
        self.emit_matte = False
        self.matte = None
        self.cast: tuple | None = None
        self.shown_rows = None  # a cast: its frames when the picture shows one anchor a frame

    @property
    def label(self) -> str:
        return self.info.label

    @property
    def out_channels(self) -> int:
        """4 when frames carry the warped matte (``emit_matte`` and a good matte), else 3; a cast: that per anchor,
        anchors in cast order."""
        if self.cast is not None:
            return self.module.out_channels
        return 4 if self.matte is not None else 3

    def open(self, anchor, settings: GeneratorSettings) -> None:
        from studio.presenter.renderer import WarpRenderer, resolve_device

        self.settings = settings
        self.device = resolve_device(settings.device)
        s = settings.size_px
        field = max(16, s // self.field_divisor) if self.field_divisor != PLAIN_FIELD_DIVISOR else max(64, s // 4)
        # a cast (several anchor packs): its anchors are rows of one warp (``studio.presenter.cast_warp``)
        self.cast = tuple(anchor) if isinstance(anchor, (tuple, list)) and len(anchor) > 1 else None
        if isinstance(anchor, (tuple, list)) and self.cast is None:
            anchor = anchor[0]
        try:
            if self.cast is not None:
                from studio.presenter.cast_warp import CastWarp

                mattes = [getattr(a, "matte", None) for a in self.cast]
                good = self.emit_matte and all(m is not None and not m.poor for m in mattes)
                self.module = CastWarp(self.cast, s, field, 3, mattes if good else None).to(self.device).eval()
            else:
                self.module = WarpRenderer(anchor, s, field, newton_steps=3).to(self.device).eval()
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError("The GPU ran out of memory preparing the presenter: choose a smaller size.") from exc
        self.field_px = field
        self.matte = None
        err = max_error_px(self.max_err_at_512, s)
        if self.cast is not None:
            from studio.presenter.cast_warp import ShownRows

            self._forward = self.module
            self.planner = None
            self.shown_rows = ShownRows(self.module, err)
        else:
            m = getattr(anchor, "matte", None)
            if self.emit_matte and m is not None and not m.poor:
                from studio.presenter.matte import MatteWarp

                self.matte = MatteWarp(self.module, m)
            self._forward = self.matte or self.module
            self.planner = landmark_planner(self.module) if self.device.type == "cuda" else None
        self.interp = MotionSpaceInterpolator(self.matte or self.module, err, self.planner)
        if settings.cuda_graphs:
            if self.device.type != "cuda":
                raise RenderError("CUDA graphs need a CUDA device.")
            if self.cast is None:
                self._capture(err)
            else:
                log.info("CUDA graphs: %s (%s)", *self.graphs_off())

    def graphs_off(self) -> tuple[str, str]:
        """A cast's warp is not captured: it reads back, chunk by chunk, which anchors' mouths are closed and composes
        only the others' (``CastWarp.compose``), a host decision a replayed graph cannot make; nor is it compiled (a
        compiled renderer draws one face)."""
        if self.cast is None:
            return "", ""
        return (f"off for a cast of {len(self.cast)}", "the cast's warp chooses on the host which anchors' mouths "
                "to draw, chunk by chunk, which a captured graph or a compiled one-face engine cannot; it runs eager")

    def _capture(self, err: float) -> None:
        self.module.static_shapes = True
        m = self.matte or self.module
        b = self.settings.batch_frames
        c = torch.zeros((b, N_COEFFS), device=self.device)
        stream = torch.cuda.Stream(self.device)
        with torch.inference_mode():
            grid, mask = m.warp_field(c)
            field_graph = Graphed(m.warp_field, (c,), stream)
            compose_graph = Graphed(m.compose, (c, grid, mask), stream)
            whole = m.forward if self.matte is None else m
            self._forward = graphed(whole, (c,), stream, compile=True, name="the renderer")
        self.interp = _GraphedInterpolator(m, err, field_graph, compose_graph, self.planner)

    def _check_shown(self, shown: np.ndarray | None) -> None:
        if shown is not None and self.shown_rows is None:
            raise RenderError("Only a cast of several anchors has rows to show: this engine has one anchor.")

    @torch.inference_mode()
    def generate(self, coeffs: torch.Tensor, features: torch.Tensor | None = None,
                 shown: np.ndarray | None = None) -> torch.Tensor:
        """B x N_COEFFS -> B x 3 x S x S in 0..255 (not clamped), in batches of ``batch_frames``; a cast's
        B x A x N_COEFFS -> every anchor's channels in turn, or with ``shown`` (B anchor rows) each frame's shown
        anchor alone."""
        self._check_shown(shown)
        bs = self.settings.batch_frames
        n = coeffs.shape[0]
        try:
            if shown is not None:
                parts = [self.shown_rows.frames(coeffs[i:i + bs], shown[i:i + bs]) for i in range(0, n, bs)]
                return parts[0] if len(parts) == 1 else torch.cat(parts)
            if n <= bs:
                return self._forward(coeffs)
            return torch.cat([self._forward(coeffs[i:i + bs]) for i in range(0, n, bs)])
        except torch.cuda.OutOfMemoryError as exc:
            raise RenderError("The GPU ran out of memory while rendering: lower the batch size or the size.") from exc

    @torch.inference_mode()
    def render_span(self, coeffs: torch.Tensor, strides: np.ndarray, carry: object | None,
                    shown: np.ndarray | None = None) -> tuple[torch.Tensor, object]:
        """Motion-space keyframes + interpolation over a span (``MotionSpaceInterpolator.render_causal``; with
        ``shown``, the shown rows alone: ``ShownRows.span``). A carry of the other kind (the picture changed
        between showing every row and one) is not used: the span starts afresh."""
        self._check_shown(shown)
        if shown is not None:
            from studio.presenter.cast_warp import CutCarry

            return self.shown_rows.span(coeffs, strides, carry if isinstance(carry, CutCarry) else None, shown)
        return self.interp.render_causal(coeffs, strides, carry if isinstance(carry, Carry) else None)

    def counts(self) -> tuple[int, int, int]:
        """(frames generated in full, interpolated, fallen back to full) by ``render_span`` so far."""
        got = [(x.frames_full, x.frames_interpolated, x.frames_fallback) for x in (self.interp, self.shown_rows)
               if x is not None]
        return tuple(int(sum(v)) for v in zip(*got)) if got else (0, 0, 0)

    def compile_targets(self) -> list[CompileTarget]:
        """The renderer, with fixed shapes and no host synchronisation (``static_shapes``: the same pixels), and
        example motion that runs every path of it (mouth open and closed, blinks, head turns)."""
        from studio.contracts.coeffs import example_motion

        if self.module is None or self.matte is not None or self.cast is not None:  # a compiled renderer draws no
            # matte (none on a cut-out) and one face
            return []
        self.module.static_shapes = True
        c = torch.from_numpy(example_motion(self.settings.batch_frames)).to(self.device)
        return [CompileTarget("renderer", self.module, (c,), dynamic_batch=True)]

    def install_engine(self, name: str, fn: Callable) -> None:
        if name != "renderer":
            super().install_engine(name, fn)
        self._forward = fn

    def close(self) -> None:
        self.module = None
        self.interp = None
        self.shown_rows = None
        self._forward = None


@GENERATORS.register("builtin")
def _make(**kwargs) -> BuiltinGenerator:
    return BuiltinGenerator(**kwargs)
