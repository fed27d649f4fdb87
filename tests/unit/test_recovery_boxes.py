"""The fragment scanner of crash recovery on hand-made MP4 box sequences (no encoder needed)."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from studio.encode.recovery import find_partials, playable_end, target_of_partial


def box(kind: bytes, payload: int = 8) -> bytes:
    return struct.pack(">I4s", 8 + payload, kind) + bytes(payload)


def large_box(kind: bytes, payload: int = 8) -> bytes:
    return struct.pack(">I4sQ", 1, kind, 16 + payload) + bytes(payload)


def _end(data: bytes) -> int:
    return playable_end(io.BytesIO(data), len(data))


def test_header_and_complete_fragments_are_kept() -> None:
    head = box(b"ftyp") + box(b"moov", 40)
    frag = box(b"moof", 20) + box(b"mdat", 100)
    data = head + frag + frag
    assert _end(data) == len(data)
    assert _end(data + box(b"moof", 20) + box(b"mdat", 100)[:50]) == len(data)  # the cut fragment is dropped
    assert _end(data + b"\x00\x00") == len(data)  # a cut box header


def test_nothing_playable() -> None:
    assert _end(box(b"ftyp")) == 0  # killed before the first fragment (delay_moov: no header yet)
    assert _end(box(b"ftyp") + box(b"mdat", 500)) == 0  # a non-fragmented file cut before its moov
    assert _end(box(b"ftyp") + box(b"moov") + box(b"moof")) == 0  # a fragment without its data
    assert _end(b"") == 0
    assert _end(struct.pack(">I4s", 4, b"ftyp")) == 0  # a corrupt length


def test_64_bit_box_sizes() -> None:
    data = box(b"ftyp") + box(b"moov") + box(b"moof") + large_box(b"mdat", 64)
    assert _end(data) == len(data)


class _CountingReader(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.read_bytes += len(out)
        return out


def test_scanner_reads_only_box_headers() -> None:
    frag = box(b"moof", 20) + box(b"mdat", 1_000_000)
    data = box(b"ftyp") + box(b"moov") + frag * 20
    f = _CountingReader(data)
    assert playable_end(f, len(data)) == len(data)
    assert f.read_bytes < 16 * 50


def test_partial_names(tmp_path: Path) -> None:
    assert target_of_partial(tmp_path / ".lk.mp4.part") == tmp_path / "lk.mp4"
    with pytest.raises(ValueError):
        target_of_partial(tmp_path / "lk.mp4")
    for name in (".a.mp4.part", ".b.mp4.part", "c.mp4", ".d.mov.part"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / ".e.mp4.part").mkdir()
    assert [p.name for p in find_partials(tmp_path)] == [".a.mp4.part", ".b.mp4.part"]
    assert find_partials(tmp_path / "missing") == []
