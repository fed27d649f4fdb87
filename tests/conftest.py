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


@pytest.fixture(scope="session")
def default_anchor():
    """The built-in anchor pack (astronaut), built once per test session."""
    from studio.presenter.anchor import build_anchor

    return build_anchor()


@pytest.fixture(scope="session")
def hopper_path():
    """Path of the Grace Hopper portrait shipped in matplotlib's wheel (public domain)."""
    import matplotlib
    from pathlib import Path

    return Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
