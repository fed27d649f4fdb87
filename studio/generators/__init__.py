"""Talking-head engines as generators of the pipeline core (``studio.contracts.Generator``).

Each module registers its generator in ``studio.contracts.GENERATORS``; importing this package loads none of
them (the registry imports a module when its engine is first asked for). ``engine_table`` is what ``doctor`` and the
studio's engine chooser read: every engine, its native size, its audio encoder, whether its weights are installed and
whether it needs a GPU.

Weights: each engine reads its release's own file layout from a folder the user names (``--weights DIR`` or the
studio setting); without one it runs as a timing twin. By default ``engine_table`` looks in
``<data dir>/weights/<engine name>`` (``studio.paths.data_dir``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def default_weights_dir(engine: str) -> Path:
    """Where the studio looks for an engine's release folder when the user names none."""
    from studio.paths import data_dir

    return data_dir() / "weights" / engine


def weights_present(info, folder: Path | None) -> tuple[bool, str]:
    """(all of ``info.weights`` are files under ``folder``, the first missing one or "")."""
    if not info.weights:
        return (False, "no public weights") if info.licence.startswith("no public weights") else (True, "")
    if folder is None or not Path(folder).is_dir():
        return False, info.weights[0]
    for rel in info.weights:
        if not (Path(folder) / rel).is_file():
            return False, rel
    return True, ""


def missing_packages(gen) -> list[str]:
    """The optional packages (the 'engines' extra) an engine needs that are not installed."""
    import importlib.util

    return [m for m in getattr(gen, "requires", ()) if importlib.util.find_spec(m) is None]


def engine_table(weights_dirs: Mapping[str, Path] | None = None) -> list[dict]:
    """One row per registered engine: name, label, family, native and pyramidal px, audio encoder, whether its
    weights are present (and the first missing file), whether the studio can run it on them, whether it needs a GPU
    (and why), the optional packages it lacks, its licence, whether it draws a cast of several anchors."""
    from studio.contracts import GENERATORS

    rows = []
    for name in GENERATORS.names():
        gen = GENERATORS.create(name)
        info = gen.info
        folder = (weights_dirs or {}).get(name) or (default_weights_dir(name) if info.weights else None)
        present, missing = weights_present(info, folder)
        lacking = missing_packages(gen)
        rows.append({
            "name": name, "label": info.label, "family": info.family,
            "native_px": info.native_px, "pyramidal_px": info.pyramidal_px,
            "audio_encoder": info.audio.encoder if info.audio else "",
            "weights_present": present, "weights_dir": str(folder) if folder else "", "missing": missing,
            "runs_on_weights": getattr(gen, "loads_weights", True),
            "needs_gpu": bool(info.needs_gpu_reason), "needs_gpu_reason": info.needs_gpu_reason,
            "missing_packages": lacking,
            "install_hint": "NEWSSTUDIO_EXTRAS=engines ./installers/setup.sh" if lacking else "",
            "licence": info.licence,
            "cast": info.cast_rows,  # draws a rundown's cast of several anchors (rows of one call)
        })
    return rows
