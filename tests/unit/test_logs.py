"""Logging that cannot fail loudly: a full disk or an unwritable data folder costs one warning line, never a traceback."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from studio.logs import file_handler

REPO = Path(__file__).resolve().parents[2]


class _FullDisk:
    """A stream whose every write fails like a full disk (ENOSPC)."""

    def __init__(self) -> None:
        self.closed = False

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        self.closed = True

    def seek(self, *args: int) -> int:
        return 0

    def tell(self) -> int:
        return 0


def _record(i: int) -> logging.LogRecord:
    return logging.LogRecord("studio.test", logging.INFO, __file__, 1, "record %d", (i,), None)


def test_full_disk_warns_once_and_drops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    handler = file_handler(tmp_path / "studio.log")
    handler.stream = _FullDisk()  # type: ignore[assignment]
    for i in range(14):
        handler.handle(_record(i))
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    assert err.count("warning:") == 1 and "No space left on device" in err
    assert handler.failed and handler.dropped_records == 14
    handler.close()


def test_writable_file_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    handler = file_handler(tmp_path / "studio.log")
    handler.handle(_record(7))
    handler.close()
    assert "record 7" in (tmp_path / "studio.log").read_text(encoding="utf-8")
    assert not handler.failed and capsys.readouterr().err == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_cli_run_on_a_full_disk_prints_one_warning(tmp_path: Path) -> None:
    """A real full device (/dev/full fails every write with ENOSPC) behind the data folder's log file."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "studio.log").symlink_to("/dev/full")
    code = ("import logging; from studio.logs import setup_logging; setup_logging(); "
            "log = logging.getLogger('studio.x'); [log.info('line %d', i) for i in range(50)]; "
            "log.warning('visible'); print('done')")
    env = dict(os.environ, NEWSSTUDIO_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "done"
    assert "Logging error" not in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.count("cannot write the log file") == 1
    assert "WARNING: visible" in out.stderr


def test_unwritable_data_folder_costs_one_warning(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the log folder should be", encoding="utf-8")
    code = "from studio.logs import setup_logging; print(setup_logging())"
    env = dict(os.environ, NEWSSTUDIO_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "None"
    assert out.stderr.count("warning:") == 1 and "Traceback" not in out.stderr



_LEVEL_PROBE = (
    "import logging; from studio.logs import setup_logging; setup_logging(); "
    "ours = logging.getLogger('studio.encode.websocket'); ours.debug('ours-debug'); ours.info('ours-info'); "
    "[logging.getLogger(n).debug(n + '-debug') for n in ('websockets.server', 'asyncio', 'PIL', 'numba', 'ray')]; "
    "[logging.getLogger(n).info(n + '-info') for n in ('websockets.server', 'matplotlib', 'ray')]; "
    "r = logging.getLogger('ray'); r.setLevel(logging.DEBUG); r.info('ray-own-level-info'); "
    "logging.getLogger('websockets.server').warning('websockets-warning'); print('done')"
)


def _log_after(tmp_path: Path, **env: str) -> tuple[str, str]:
    run_env = {k: v for k, v in os.environ.items() if k != "NEWSSTUDIO_LOG_LEVEL"}
    run_env.update(NEWSSTUDIO_HOME=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "-c", _LEVEL_PROBE], cwd=REPO, env=run_env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr
    return (tmp_path / "logs" / "studio.log").read_text(encoding="utf-8"), out.stderr


def test_ours_at_info_and_other_libraries_at_warning(tmp_path: Path) -> None:
    text, err = _log_after(tmp_path)
    assert "ours-info" in text and "ours-debug" not in text
    assert "websockets-warning" in text
    for quiet in ("websockets.server-debug", "asyncio-debug", "PIL-debug", "numba-debug", "websockets.server-info",
                  "matplotlib-info", "ray-info", "ray-own-level-info"):
        assert quiet not in text
    assert err.strip() == "WARNING: websockets-warning"


def test_debug_on_request_for_ours_only(tmp_path: Path) -> None:
    text, _ = _log_after(tmp_path, NEWSSTUDIO_LOG_LEVEL="debug")
    assert "ours-debug" in text and "ours-info" in text
    assert "websockets.server-debug" not in text and "asyncio-debug" not in text and "ray-own-level-info" not in text


def test_an_unreadable_level_costs_one_line(tmp_path: Path) -> None:
    text, err = _log_after(tmp_path, NEWSSTUDIO_LOG_LEVEL="loud")
    assert "ours-info" in text and "ours-debug" not in text
    assert err.count("NEWSSTUDIO_LOG_LEVEL") == 1 and "Traceback" not in err
