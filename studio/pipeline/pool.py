"""The generator of a core in each form the optimization flags ask for (plain or pyramidal, eager or graphed), and
whether a compiled engine for it is cached on this machine."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from studio.contracts import GENERATORS, Generator, GeneratorSettings, Layout, cast_refusal
from studio.errors import RenderError
from studio.pipeline.settings import CoreSettings

log = logging.getLogger(__name__)


def compiled_engine_note(engine: str, device: str) -> str:
    """"" when ``engines/`` holds a ready compiled engine of ``engine`` for this machine (what CUDA_GRAPHS means on
    the CPU: the cached ONNX Runtime engine instead of eager), else why there is none, in words."""
    if device.startswith("cuda"):
        return ""
    try:
        from studio.compile.cache import scan
        from studio.compile.silicon import fingerprint
        from studio.paths import ENGINES

        ready = [e for e in scan(ENGINES, fingerprint(device)) if e.record.get("model") == engine and e.ready]
    except (ImportError, OSError, ValueError) as exc:
        return f"the engine cache cannot be read ({exc})"
    if ready:
        return ""
    return (f"no compiled engine of {engine} for this CPU in engines/: build one in the COMPILE panel or with "
            f"`python main.py compile --model {engine} --backend onnxruntime`")


def graphs_off_line(what: str, why: str, device: str) -> tuple[str, str]:
    """What the CUDA_GRAPHS flag's pill and a run's list of optimizations say when an opened form cannot use it
    (``Generator.graphs_off``): ("CUDA graphs: off for a cast of 2", the same with the reason in brackets); on the
    CPU the flag means a compiled engine, named so."""
    label = "CUDA graphs" if str(device).startswith("cuda") else "compiled engine"
    return f"{label}: {what}", f"{label}: {what} ({why})"


class GeneratorPool:
    """The generator in each form the core may ask for: plain or pyramidal, eager or graphed. Made on first use and
    kept; all share the anchor and the device. A cast (``cast_size`` > 1: ``anchor`` is its packs) is refused here,
    with the reason, for an engine that draws one anchor (``GeneratorInfo.cast_rows``). ``shared`` (the
    leaderboard's runs of one engine): forms are kept in that dict instead, keyed by everything they were opened
    with, so that the next pool of the same engine reuses them (no second model build or compile); they outlive this
    pool, and whoever made the dict closes them (``close_forms``)."""

    def __init__(self, engine: str, anchor, settings: CoreSettings, presenter_px: int,
                 weights_dir=None, on_open: Callable[[Generator, tuple[bool, bool]], None] | None = None,
                 shared: dict | None = None) -> None:
        self.engine = engine
        self.anchor = anchor
        self.s = settings
        self.presenter_px = presenter_px
        self.weights_dir = weights_dir
        self._factory = GENERATORS.get(engine)
        self._gens: dict[tuple[bool, bool], Generator] = {}
        self._shared = shared
        self.engine_notes: list[str] = []  # which compiled engines the forms run (or why eager), for the studio
        self.compiled_installed: bool | None = None  # CPU: whether a compiled engine runs (None: not tried yet)
        # why the CUDA_GRAPHS flag does not run with this anchor (``graphs_off_line``: headline, line); None: it does
        self.graphs_off: tuple[str, str] | None = None
        self._lock = threading.Lock()
        self._on_open = on_open
        self.info = self._factory().info  # its class facts only: opening a form builds the model
        # a window engine streams as the settings say: its factory takes the short first window's size
        self._stream = {"stream_first_latents": settings.stream_first_latents} if self.info.stream_windows else {}
        if self._stream:
            self.info = self._factory(**self._stream).info  # first_window_frames as these settings make it
        if settings.cast_size > 1 and not self.info.cast_rows:
            raise RenderError(cast_refusal(self.info, settings.cast_size))
        self.matte = True  # on a canvas: frames carry the warped matte where the engine can (False: framed photo)

    def size_for(self, pyramidal: bool) -> int:
        """The size a generator form renders at."""
        info = self.info
        if info.any_size:
            # a warp field's pyramidal route is a coarser field; a face-pasting engine (Wav2Lip, MuseTalk) makes its
            # crop at its own size and pastes it into a frame of any size
            return self.presenter_px
        native = self.s.native_px or info.native_px or self.presenter_px
        if pyramidal:  # an engine without a smaller size of its own has no pyramidal route
            return info.pyramidal_px or native
        return native

    def get(self, pyramidal: bool, graphs: bool) -> Generator:
        key = (pyramidal, graphs)
        with self._lock:
            gen = self._gens.get(key)
            if gen is None and graphs and (eager := self._gens.get((pyramidal, False))) is not None \
                    and eager.graphs_off()[0]:
                gen = self._gens[key] = eager  # this anchor runs eager in either form: one form, not two
                self._note_graphs_off(eager)
            if gen is not None:
                return gen
            size = self.size_for(pyramidal)
            sizes = self.info.batch_sizes  # a DiT generates whole windows: its one batch size is the window
            batch = sizes[0] if len(sizes) == 1 else self.s.batch_frames
            precision = self.s.precision
            if precision == "auto":  # tensor-core precision for the neural engines on a GPU (fp32 ran 14x slower)
                precision = self.info.cuda_precision if self.s.device.startswith("cuda") else "fp32"
            cuda = self.s.device.startswith("cuda")
            field_divisor = self.s.field_divisor if pyramidal else 4
            skey = (self.engine, key, size, precision, batch, self.s.device, self.s.seed, str(self.weights_dir),
                    field_divisor, self.s.max_interp_error_px_at_512, self.s.layout, self.matte,
                    tuple(self._stream.items()))
            entry = self._shared.get(skey) if self._shared is not None else None
            if entry is None:
                entry = self._open(size, precision, batch, field_divisor, graphs and cuda, graphs and not cuda)
                if self._shared is not None:
                    self._shared[skey] = entry
            gen, installed = entry
            if graphs and not cuda:
                for inst in installed:
                    log.info("%s", inst.message)
                    self.engine_notes.append(inst.message)
                self.compiled_installed = any(inst.engine for inst in installed)
            if self._on_open is not None:
                self._on_open(gen, key)
            self._gens[key] = gen
            if gen.graphs_off()[0]:
                self._gens.setdefault((pyramidal, False), gen)
                if graphs:
                    self._note_graphs_off(gen)
            return gen

    def _note_graphs_off(self, gen: Generator) -> None:
        if self.graphs_off is None:
            self.graphs_off = graphs_off_line(*gen.graphs_off(), self.s.device)
            log.info("%s", self.graphs_off[1])
            self.engine_notes.append(self.graphs_off[1])

    def forms(self) -> dict[tuple[bool, bool], Generator]:
        with self._lock:
            return dict(self._gens)

    def _open(self, size: int, precision: str, batch: int, field_divisor: int, cuda_graphs: bool,
              compiled_cpu: bool) -> tuple[Generator, list]:
        """A new generator form, opened; with ``compiled_cpu`` the cached compiled engine installed in it (and what
        ``install_cached`` said)."""
        if self.info.warp_field:  # its pyramidal form is a coarser warp field
            gen = self._factory(field_divisor=field_divisor,
                                max_interp_error_px_at_512=self.s.max_interp_error_px_at_512)
        else:
            gen = self._factory(**self._stream)
        if self.s.layout is Layout.CANVAS and self.matte:
            gen.emit_matte = True  # the canvas sets the presenter over its set by the warped matte
        gen.open(self.anchor, GeneratorSettings(
            device=self.s.device, size_px=size, precision=precision, batch_frames=batch,
            weights_dir=self.weights_dir, cuda_graphs=cuda_graphs, seed=self.s.seed))
        if not compiled_cpu:
            return gen, []
        from studio.compile.jobs import install_cached

        return gen, install_cached(self.engine, gen, precision, batch)

    def close(self) -> None:
        with self._lock:
            if self._shared is None:
                for g in {id(g): g for g in self._gens.values()}.values():  # a form kept under two keys: once
                    g.close()
            self._gens.clear()


def close_forms(shared: dict) -> None:
    """Close the generator forms ``GeneratorPool`` kept in ``shared``."""
    for g, _ in shared.values():
        g.close()
    shared.clear()
