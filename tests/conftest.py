"""Test-wide set-up: an isolated data folder, offscreen Qt, quiet native loggers, two torch threads."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYTEST_QT_API", "pyside6")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
os.environ.setdefault("GLOG_minloglevel", "2")
if "NEWSSTUDIO_HOME" not in os.environ:
    # Anchor caches and logs of the tests live in one folder per run, never in the user's.
    os.environ["NEWSSTUDIO_HOME"] = tempfile.mkdtemp(prefix="newsstudio-tests-")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
