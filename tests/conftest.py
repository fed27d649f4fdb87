"""Test-wide set-up: an isolated data folder, offscreen Qt, quiet native loggers, two torch threads; a virtual
microphone (PulseAudio null sink 'studio') and a way to speak into it, shared by tests/integration and tests/qt."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as studio/__init__.py, before anything loads numpy
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYTEST_QT_API", "pyside6")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
os.environ.setdefault("GLOG_minloglevel", "2")
if "NEWSSTUDIO_HOME" not in os.environ:
    # Anchor caches and logs of the tests live in one folder per run, never in the user's.
    os.environ["NEWSSTUDIO_HOME"] = tempfile.mkdtemp(prefix="newsstudio-tests-")
if "NEWSSTUDIO_ENGINES" not in os.environ:
    # An empty compiled-engine cache: a verdict must not depend on the engines a developer built in engines/.
    os.environ["NEWSSTUDIO_ENGINES"] = tempfile.mkdtemp(prefix="newsstudio-engines-")

import shutil  # noqa: E402
import subprocess  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

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


@pytest.fixture(autouse=True)
def _no_frozen_heap() -> Iterator[None]:
    """A studio window settles the garbage collector (``gc.freeze``) once on its feet; a test's freeze must not change
    what later tests' collections free."""
    yield
    import gc

    if gc.get_freeze_count():
        gc.unfreeze()


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

REPO_ROOT = Path(__file__).resolve().parents[1]
PULSE_SCRIPT = REPO_ROOT / "installers" / "pulse-null-sink.sh"


def start_pulse_sink(runtime_dir: Path) -> dict[str, str]:
    """Run installers/pulse-null-sink.sh with ``runtime_dir``; returns the environment to record from it."""
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime_dir))
    env.pop("PULSE_SERVER", None)
    subprocess.run(["bash", str(PULSE_SCRIPT)], env=env, check=True, capture_output=True, timeout=30)
    return {"XDG_RUNTIME_DIR": str(runtime_dir)}


@pytest.fixture(scope="session")
def pulse_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A PulseAudio daemon whose default source records what is played into sink 'studio'.

    Sets XDG_RUNTIME_DIR for this process (so PortAudio's 'pulse' / 'default' devices reach it) and makes
    PortAudio enumerate devices again. Yields the runtime folder; kills the daemon at the end.
    """
    if shutil.which("pulseaudio") is None or shutil.which("pactl") is None or shutil.which("paplay") is None:
        pytest.skip("pulseaudio / pulseaudio-utils not installed: apt-get install pulseaudio pulseaudio-utils")
    runtime_dir = tmp_path_factory.mktemp("pulse")
    runtime_dir.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "PULSE_SERVER")}
    os.environ.update(start_pulse_sink(runtime_dir))
    os.environ.pop("PULSE_SERVER", None)
    from studio.audio.capture import rescan_devices

    rescan_devices()
    yield runtime_dir
    subprocess.run(["pulseaudio", "--kill"], env=dict(os.environ), capture_output=True, timeout=10)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def restart_pulse_sink(pulse_sink: Path) -> Callable[[], None]:
    """Start the session's sound server again (after a test killed it)."""
    return lambda: start_pulse_sink(pulse_sink) and None


@pytest.fixture
def play_into_sink(pulse_sink: Path) -> Callable[[Path], subprocess.Popen]:
    """Start playing a wav file into the virtual microphone; returns the ``paplay`` process (wait() on it)."""

    def play(path: Path) -> subprocess.Popen:
        return subprocess.Popen(["paplay", "--device=studio", str(path)], env=dict(os.environ))

    return play
