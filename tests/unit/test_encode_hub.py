"""The encode hub without receivers: one encode shared by several outputs, sinks joining at keyframes, gaps repeated,
a slow sink dropping to the next keyframe without holding the others back."""

from __future__ import annotations

import itertools
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

from studio.encode.encoders import (
    EncodedPacket,
    StreamEncoder,
    StreamEncodeSettings,
    avc_codec_string,
    choose_video_encoder,
    encoder_report,
    split_annexb,
)
from studio.encode.hub import EncodeHub, Sink, acquire_hub, release_hub
from studio.contracts import ProgramBatch, ProgramFormat

FMT = ProgramFormat(160, 96, 25.0)


class RecordingSink(Sink):
    """A sink in the style of a mock transport: keeps what it is sent; ``gate`` (when set) blocks each send."""

    def __init__(self, gate: threading.Event | None = None, max_queue_frames: int = 50) -> None:
        super().__init__("recording", max_queue_frames)
        self.packets: list[tuple[EncodedPacket, Fraction]] = []
        self.gate = gate

    def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
        if self.gate is not None:
            self.gate.wait(30)
        self.packets.append((pkt, rel_s))
        return len(pkt.data)

    def video(self) -> list[EncodedPacket]:
        return [p for p, _ in self.packets if p.video]


def wait_for(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the hub did not get there in time"
        time.sleep(0.01)


def batch(first: int, n: int, slots: list[int] | None = None) -> ProgramBatch:
    s = np.array(slots if slots is not None else range(first, first + n), np.int64)
    frames = np.zeros((len(s), FMT.height, FMT.width, 3), np.uint8)
    frames[:, :, :, 0] = (s[:, None, None] * 7) % 256
    a0 = FMT.samples_at(int(s[0])) if len(s) else 0
    a1 = FMT.samples_at(int(s[-1]) + 1) if len(s) else 0
    audio = np.sin(np.arange(a0, a1) * 0.01).astype(np.float32) * 0.1
    return ProgramBatch(slots=s, pts_s=s / FMT.fps, frames=frames, audio=audio, audio_start=a0)


def test_annexb_split_and_codec_string() -> None:
    data = b"\x00\x00\x00\x01\x67\x64\x00\x1f\xaa\x00\x00\x01\x68\xce\x00\x00\x00\x01\x65\x88"
    assert split_annexb(data) == [b"\x67\x64\x00\x1f\xaa", b"\x68\xce", b"\x65\x88"]
    assert avc_codec_string(data) == "avc1.64001f"
    assert avc_codec_string(b"\x00\x00\x01\x41\x9a") is None  # no SPS in a delta frame


def test_encoder_access_units_are_annexb_with_sps_on_keyframes() -> None:
    enc = StreamEncoder(FMT.width, FMT.height, FMT.fps, FMT.audio_rate_hz)
    pic = np.full((FMT.height, FMT.width, 3), 90, np.uint8)
    out = []
    for i in range(5):
        out += enc.encode_picture(pic, "rgb24", i, keyframe=(i == 3))
    assert [p.keyframe for p in out] == [True, False, False, True, False]  # one access unit per frame, IDR forced
    for p in out:
        assert p.data.startswith(b"\x00\x00\x00\x01") or p.data.startswith(b"\x00\x00\x01")
        nal_types = {n[0] & 0x1F for n in split_annexb(p.data)}
        assert (7 in nal_types and 8 in nal_types) == p.keyframe  # SPS + PPS in front of every keyframe
    assert enc.aac_config[0] >> 3 == 2  # AudioSpecificConfig: object type 2, AAC-LC
    audio = enc.encode_audio(np.zeros(3000, np.float32)) + enc.flush()
    assert audio[0].pts == -1024  # the priming frame sits before the program's first sample


def test_choice_says_why() -> None:
    choice = choose_video_encoder()
    assert choice.reason
    assert choice.kind.value in choice.pill
    lines = encoder_report()
    assert any(line.startswith("NVENC (PyAV h264_nvenc): ") for line in lines)
    assert not choose_video_encoder(prefer_hardware=False).hardware


def test_two_outputs_share_one_encode_and_each_slot_is_taken_once() -> None:
    hub_a = acquire_hub(FMT, StreamEncodeSettings(), block=True)
    hub_b = acquire_hub(FMT, StreamEncodeSettings(), block=True)
    other = acquire_hub(FMT, StreamEncodeSettings(video_bitrate_kbps=500), block=True)
    assert hub_a is hub_b and other is not hub_a
    sink = RecordingSink()
    hub_a.add_sink(sink)
    for k in range(6):
        b = batch(4 * k, 4)
        hub_a.submit(b)  # every output of the core hands the hub the same batch
        hub_b.submit(b)
    release_hub(other)
    release_hub(hub_b)
    release_hub(hub_a, sink)
    assert hub_a.frames == 24 and hub_a.repeated == 0
    video = sink.video()
    assert [p.pts for p in video] == list(range(24))
    audio = [p for p, _ in sink.packets if not p.video]
    covered = audio[-1].pts + audio[-1].duration
    assert covered >= FMT.samples_at(24)  # the audio runs to the end of the video, taken once


def test_gaps_repeat_the_previous_picture_and_audio_holes_are_silence() -> None:
    hub = EncodeHub(FMT, block=True)
    sink = RecordingSink()
    hub.add_sink(sink)
    hub.submit(batch(0, 4))
    hub.submit(batch(0, 0, slots=[7, 8]))  # slots 4..6 were dropped upstream
    hub.close()
    assert hub.frames == 6 and hub.repeated == 3
    assert [p.pts for p in sink.video()] == list(range(9))  # the video covers the timeline


def test_a_sink_added_while_running_starts_at_a_forced_keyframe() -> None:
    hub = EncodeHub(FMT, StreamEncodeSettings(keyframe_interval_s=100.0), block=True)
    first = RecordingSink()
    hub.add_sink(first)
    for k in range(3):
        hub.submit(batch(4 * k, 4))
    wait_for(lambda: hub.frames == 12)  # the hub is under way when the second sink joins
    late = RecordingSink()
    hub.add_sink(late)
    for k in range(3, 6):
        hub.submit(batch(4 * k, 4))
    hub.close()
    assert len(first.video()) == 24
    v = late.video()
    assert v and v[0].keyframe and 0 < v[0].pts < 24  # not the hub's first frame: a keyframe forced for it
    assert sum(p.keyframe for p in first.video()) == 2  # the hub's first frame and the forced one
    rel = {id(p): r for p, r in late.packets}
    assert rel[id(v[0])] == 0  # its own timeline starts at its first frame
    first_audio = next(p for p, _ in late.packets if not p.video)
    assert -2 * 1024 < rel[id(first_audio)] * FMT.audio_rate_hz <= -1024 + 1  # one AAC frame of priming before it


def test_a_stalled_sink_drops_to_a_keyframe_and_the_others_get_everything() -> None:
    gate = threading.Event()
    hub = EncodeHub(FMT, StreamEncodeSettings(keyframe_interval_s=100.0), block=True)
    fast, slow = RecordingSink(), RecordingSink(gate=gate, max_queue_frames=5)
    hub.add_sink(fast)
    hub.add_sink(slow)
    for k in range(10):
        hub.submit(batch(4 * k, 4))
    wait_for(lambda: hub.frames == 40)
    gate.set()
    for k in range(10, 12):
        hub.submit(batch(4 * k, 4))
    hub.close()
    assert len(fast.video()) == 48
    assert slow.dropped > 0
    assert len(slow.video()) + slow.dropped == 48  # every frame it did not send, it counted
    v = slow.video()
    run_starts = [v[0]] + [b for a, b in itertools.pairwise(v) if b.pts != a.pts + 1]
    assert all(p.keyframe for p in run_starts)  # it began, and resumed after each drop, at a keyframe


def test_a_full_live_hub_drops_and_counts_but_never_blocks() -> None:
    hub = EncodeHub(FMT, block=False, queue_frames=2)
    sink = RecordingSink()
    hub.add_sink(sink)
    for k in range(20):
        hub.submit(batch(3 * k, 3))
    hub.close()
    assert hub.frames + hub.dropped == 60  # every picture was encoded or counted
    assert len(sink.video()) == hub.frames + hub.repeated  # dropped slots repeat the previous picture


@pytest.mark.parametrize("bad", [{"video_bitrate_kbps": -1}, {"keyframe_interval_s": 0}])
def test_settings_refuse_nonsense(bad: dict) -> None:
    with pytest.raises(ValueError):
        StreamEncodeSettings(**bad)


def _decode_annexb(packets: list[EncodedPacket]) -> np.ndarray:
    import av

    ctx = av.CodecContext.create("h264", "r")
    frames = []
    for p in packets:
        frames += ctx.decode(av.Packet(p.data))
    frames += ctx.decode(None)
    return frames[-1].to_ndarray(format="rgb24", dst_colorspace="ITU709").astype(int)


def test_cpu_and_gpu_colour_paths_show_the_same_colours() -> None:
    """RGB converted by swscale (the CPU path) and I420 converted by studio.encode.colour (the GPU path, run here on
    the CPU) decode to the same picture: both BT.709, as the stream's SPS says."""
    import torch

    from studio.encode.colour import rgb_to_i420

    h, w = 96, 160
    rgb = np.zeros((h, w, 3), np.uint8)
    for i, colour in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255), (240, 200, 40), (30, 30, 30)]):
        rgb[:, i * 32:(i + 1) * 32] = colour  # blocks aligned to the 2 x 2 chroma grid
    i420 = rgb_to_i420(torch.from_numpy(rgb).permute(2, 0, 1)[None].float())[0].numpy()
    a = StreamEncoder(w, h, 25.0, 48_000, StreamEncodeSettings(video_bitrate_kbps=4000))
    b = StreamEncoder(w, h, 25.0, 48_000, StreamEncodeSettings(video_bitrate_kbps=4000))
    via_rgb = _decode_annexb([p for i in range(3) for p in a.encode_picture(rgb, "rgb24", i)] + a.flush())
    via_yuv = _decode_annexb([p for i in range(3) for p in b.encode_picture(i420, "yuv420p", i)] + b.flush())
    inner = (slice(8, -8), slice(None))
    for i in range(5):
        block = (inner[0], slice(i * 32 + 6, (i + 1) * 32 - 6))
        assert np.abs(via_rgb[block].mean((0, 1)) - rgb[block].mean((0, 1))).max() < 6
        assert np.abs(via_yuv[block].mean((0, 1)) - via_rgb[block].mean((0, 1))).max() < 4


def test_a_blocking_batch_larger_than_the_queue_goes_through() -> None:
    hub = EncodeHub(FMT, block=True, queue_frames=3)
    sink = RecordingSink()
    hub.add_sink(sink)
    hub.submit(batch(0, 10))  # more pictures than the queue holds: handed over in parts, none dropped
    hub.close()
    assert hub.frames == 10 and hub.dropped == 0
    assert [p.pts for p in sink.video()] == list(range(10))


def test_a_failed_sink_takes_its_output_out_and_the_others_go_on(tmp_path) -> None:
    from studio.encode.hub import HubOutput
    from studio.errors import EncoderError

    class FailingSink(RecordingSink):
        def send(self, pkt: EncodedPacket, rel_s: Fraction) -> int:
            raise EncoderError("The disk is full: free some space.")

    class Out(HubOutput):
        def __init__(self, sink: Sink) -> None:
            super().__init__(block=True)
            self._made = sink

        def make_sink(self) -> Sink:
            return self._made

    good, bad = Out(RecordingSink()), Out(FailingSink())
    good.open(FMT)
    bad.open(FMT)
    assert good.hub is bad.hub  # one encode
    good.write(batch(0, 4))
    bad.write(batch(0, 4))
    wait_for(lambda: bad.sink.error is not None)
    with pytest.raises(EncoderError, match="disk is full"):
        bad.write(batch(4, 4))
    good.write(batch(4, 4))
    assert bad.stats().state.value == "failed" and "disk is full" in bad.stats().detail
    with pytest.raises(EncoderError):
        bad.close()
    good.close()
    assert [p.pts for p in good.sink.video()] == list(range(8))


def test_a_blocking_sink_holds_the_hub_instead_of_dropping() -> None:
    """Offline renders with a stream: a slow but reachable receiver gets every frame (the core waits)."""
    gate = threading.Event()
    hub = EncodeHub(FMT, StreamEncodeSettings(keyframe_interval_s=100.0), block=True, queue_frames=4)
    slow = RecordingSink(gate=gate, max_queue_frames=3)
    slow.block = True
    hub.add_sink(slow)
    done = threading.Event()

    def feed() -> None:
        for k in range(6):
            hub.submit(batch(4 * k, 4))
        done.set()

    feeder = threading.Thread(target=feed)
    feeder.start()
    assert not done.wait(1.0)  # held back by the sink (and the hub's queue behind it)
    gate.set()
    feeder.join(60)
    hub.close()
    assert slow.dropped == 0 and [p.pts for p in slow.video()] == list(range(24))


def test_the_video_bitrate_follows_the_picture_unless_set() -> None:
    """0 (the default) scales with pixels and frame rate, within 1.5-12 Mbit/s; a set value is kept."""
    from studio.encode.encoders import StreamEncodeSettings

    auto = StreamEncodeSettings()
    assert 2400 <= auto.video_kbps(1280, 720, 25) <= 2600
    assert auto.video_kbps(1920, 1080, 60) > 3 * auto.video_kbps(1280, 720, 25)
    assert auto.video_kbps(1920, 1080, 60) <= 12_000 and auto.video_kbps(256, 256, 25) >= 1500
    assert StreamEncodeSettings(video_bitrate_kbps=3000).video_kbps(1920, 1080, 60) == 3000
    with pytest.raises(ValueError):
        StreamEncodeSettings(video_bitrate_kbps=-1)
