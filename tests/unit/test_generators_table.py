"""engine_table: what doctor and the engine chooser show."""

from __future__ import annotations

from studio.generators import engine_table


def test_every_engine_is_listed_with_what_it_needs(tmp_path):
    rows = {r["name"]: r for r in engine_table({"wav2lip": tmp_path})}
    assert set(rows) == {"builtin", "musetalk-1.5", "wav2lip", "liveportrait", "ditto", "wan2.1-1.3b", "wan2.1-14b",
                         "wan2.1-1.3b-taehv", "wan2.1-1.3b-fp8", "wan2.1-1.3b-taehv-fp8"}
    # on a 2-core CPU: the built-in engine, Wav2Lip and MuseTalk run; the rest say why they need a GPU
    assert {n for n, r in rows.items() if not r["needs_gpu"]} == {"builtin", "wav2lip", "musetalk-1.5"}
    assert all(r["needs_gpu_reason"] for r in rows.values() if r["needs_gpu"])
    assert rows["musetalk-1.5"]["native_px"] == 256 and rows["musetalk-1.5"]["audio_encoder"] == "whisper-tiny"
    assert rows["wan2.1-1.3b"]["pyramidal_px"] == 288 and not rows["wan2.1-1.3b"]["runs_on_weights"]
    assert rows["wan2.1-1.3b-taehv-fp8"]["label"] == ("EchoMimicV3-flash (Wan2.1 1.3B DiT), tiny decoder (TAEHV), fp8 "
                                                     "(rowwise) DiT linears")
    assert rows["builtin"]["weights_present"]
    # a rundown's cast: the engines that draw several anchors as rows of one call
    assert {n for n, r in rows.items() if r["cast"]} == {"builtin", "liveportrait"}
    assert not rows["wan2.1-14b"]["weights_present"] and rows["wan2.1-14b"]["missing"] == "no public weights"
    assert not rows["wav2lip"]["weights_present"] and rows["wav2lip"]["missing"] == "wav2lip_gan.pth"
    (tmp_path / "wav2lip_gan.pth").write_bytes(b"x")
    assert {r["name"]: r for r in engine_table({"wav2lip": tmp_path})}["wav2lip"]["weights_present"]
