"""A command's claim on its output path: a second claim is refused in one line, a dead holder's lock is no claim,
and nothing is left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from studio.encode.claim import claim_output, lock_path_for
from studio.errors import OutputPathError

REPO = Path(__file__).resolve().parents[2]


def test_a_second_claim_is_refused_and_the_first_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "show.mp4"
    with claim_output(out):
        with pytest.raises(OutputPathError, match="Another command is writing") as err:
            claim_output(out)
        assert "\n" not in str(err.value) and "--out" in str(err.value)
    assert list(tmp_path.iterdir()) == []
    with claim_output(out):  # free again
        pass


def test_the_lock_of_a_killed_command_is_no_claim(tmp_path: Path) -> None:
    out = tmp_path / "show.mp4"
    code = ("import os, sys; from studio.encode.claim import claim_output; "
            "claim_output(sys.argv[1]); os._exit(0)")  # dies holding it, the file stays
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=REPO)
    assert lock_path_for(out).is_file()
    with claim_output(out) as claim:
        assert lock_path_for(out).read_text().strip().isdigit()
    assert not claim.lock_path.exists()
