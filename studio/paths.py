"""Where NewsStudio keeps its files: user data (logs, caches) and the repository's resources."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESOURCES = REPO_ROOT / "resources"
# compiled engines: the repository's engines/ unless $NEWSSTUDIO_ENGINES names another folder (a shared cache)
ENGINES = Path(os.environ.get("NEWSSTUDIO_ENGINES") or REPO_ROOT / "engines")


def data_dir() -> Path:
    """The user's data folder (``$NEWSSTUDIO_HOME`` or ``$XDG_DATA_HOME/newsstudio``), created on demand."""
    root = os.environ.get("NEWSSTUDIO_HOME")
    if root:
        path = Path(root)
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        path = Path(xdg) / "newsstudio"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(kind: str) -> Path:
    """A cache sub-folder of the data folder (e.g. ``anchors``), created on demand."""
    path = data_dir() / "cache" / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
