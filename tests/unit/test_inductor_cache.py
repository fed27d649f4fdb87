"""TorchInductor's cache folder: in the data folder, keyed by the GPU architecture and versions; a folder the user
named wins (studio/generators/inductor_cache.py)."""

from __future__ import annotations

import os

import torch


def test_the_cache_goes_in_the_data_folder_under_a_key_of_this_machine(monkeypatch, tmp_path):
    from studio.generators import inductor_cache

    monkeypatch.setenv("NEWSSTUDIO_HOME", str(tmp_path))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setattr(inductor_cache, "_done", None)
    key = inductor_cache.cache_key()
    assert f"torch{torch.__version__}".replace("+", "-") in key and "/" not in key
    assert key.startswith("sm_" if torch.cuda.is_available() else "cpu")
    folder = inductor_cache.use_compile_cache()
    assert folder == tmp_path / "cache" / "inductor" / key and folder.parent.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)
    assert os.environ["TRITON_CACHE_DIR"] == str(folder / "triton")
    assert inductor_cache.use_compile_cache() == folder  # once a process


def test_a_folder_the_user_named_wins(monkeypatch, tmp_path):
    from studio.generators import inductor_cache

    monkeypatch.setenv("NEWSSTUDIO_HOME", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setattr(inductor_cache, "_done", None)
    assert inductor_cache.use_compile_cache() == tmp_path / "mine"
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "mine" / "triton")
