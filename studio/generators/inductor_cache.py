"""TorchInductor's and Triton's on-disk caches in the data folder, one folder per GPU architecture and versions.

A CUDA run compiles its graphs with TorchInductor (studio/generators/graphs.py). Inductor keeps what it compiled (FX
graphs, autotuning results, Triton kernels) in a cache folder, by default under /tmp, which a fresh machine or a
cleaned /tmp loses: every such run pays the whole compile again. Here the caches live in the data folder under
``cache/inductor/<key>``, where the key names the GPU architecture and the versions of torch, Triton and CUDA (a
cache of another GPU or version is never read: Inductor keys its entries too, this only keeps them apart), so the
second run of a command loads its kernels instead of compiling them. A folder the user named wins
(``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

_done: Path | None = None


def cache_key() -> str:
    """``sm_90-torch2.11.0-cu130-triton3.5.0``: what a cached kernel depends on besides its own source."""
    import torch

    parts = []
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        parts.append(f"sm_{major}{minor}")
    else:
        parts.append("cpu")
    parts.append(f"torch{torch.__version__}")
    try:
        import triton

        parts.append(f"triton{triton.__version__}")
    except ImportError:
        pass
    return re.sub(r"[^A-Za-z0-9.\-_]+", "-", "-".join(parts))


def use_compile_cache() -> Path:
    """Point Inductor and Triton at the data folder's cache for this machine (once a process, before the first
    compile); returns the folder."""
    global _done
    if _done is not None:
        return _done
    from studio.paths import cache_dir

    root = cache_dir("inductor") / cache_key()
    inductor = Path(os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root)))
    os.environ.setdefault("TRITON_CACHE_DIR", str(inductor / "triton"))
    try:
        from torch._inductor import config

        config.fx_graph_cache = True  # compiled graphs kept on disk (the default in recent torch: said here)
        config.autotune_local_cache = True
    except (ImportError, AttributeError) as exc:  # an older torch without these switches still uses the folder
        log.info("TorchInductor cache switches not set: %s", exc)
    _done = inductor
    log.info("TorchInductor cache: %s", inductor)
    return inductor
