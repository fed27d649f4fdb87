"""The repository's commit-msg hook: a subject of 72 characters or more is refused, a shorter one passes."""
import shutil
import subprocess
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / ".githooks" / "commit-msg"

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess:
    msg = tmp_path / "COMMIT_EDITMSG"
    msg.write_text(message, encoding="utf-8")
    return subprocess.run(["sh", str(HOOK), str(msg)], capture_output=True, text=True, timeout=30)


def test_a_short_subject_with_or_without_a_body_passes(tmp_path):
    assert run_hook(tmp_path, "core: one lazy getter for the flow fill\n").returncode == 0
    body = "encode: one encoder per format\n\nWhy: the recorder and the stream encoded twice.\n"
    assert run_hook(tmp_path, body).returncode == 0
    assert run_hook(tmp_path, "x" * 71 + "\n").returncode == 0


def test_a_subject_of_72_characters_or_more_is_refused_with_its_length(tmp_path):
    done = run_hook(tmp_path, "x" * 72 + "\n\nbody\n")
    assert done.returncode == 1
    assert "72 characters" in done.stderr
    assert run_hook(tmp_path, "é" * 80 + "\n").returncode == 1


def test_git_comment_lines_are_not_the_subject_and_an_empty_subject_is_refused(tmp_path):
    assert run_hook(tmp_path, "# Please enter the commit message\nfix: a short subject\n").returncode == 0
    assert run_hook(tmp_path, "# only comments\n").returncode == 1
