"""What the studio window and the studio runtime say to each other: command objects in, frozen events out."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from studio.audio.settings import AudioEngine
from studio.contracts import CastLayout
from studio.pipeline.rundown import Segment
from studio.pipeline.telemetry import ClockSource, RuntimeState
from studio.speech.types import VoiceInfo, WordTiming


class PreviewMode(enum.Enum):
    """What drives the presenter."""

    SCRIPT = "script"  # the rundown, spoken by text-to-speech (idles between segments)
    MICROPHONE = "microphone"  # the person at the selected microphone, live
    INTERVIEW = "interview"  # the presenter speaks the rundown, a guest at the microphone drives a second anchor

    @property
    def listens(self) -> bool:
        """The microphone paces the programme (it cannot be paused; latency is sound-to-pixel)."""
        return self is not PreviewMode.SCRIPT


# -- commands (UI -> runtime) -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadAnchor:
    path: Path | None  # None = the built-in portrait


@dataclass(frozen=True)
class GoLive:
    segments: tuple[Segment, ...]
    rundown_rows: tuple[int, ...] = ()  # the rundown row of each segment (reported back for the teleprompter)
    graphics: object = None  # the programme's graphics (studio.graphics.look.Graphics); None: none


@dataclass(frozen=True)
class SetCast:
    """The open rundown's cast (``studio.pipeline.cast.Member``s): two or more go on the programme as ``layout``
    once their faces are built; fewer leave the one anchor on air. Its voices speak the segments of the next Go
    live."""

    members: tuple = ()
    layout: CastLayout = CastLayout.TWO_SHOT


@dataclass(frozen=True)
class Stop:
    """Stop speaking now; the presenter goes back to idling."""


@dataclass(frozen=True)
class SetPaused:
    paused: bool


@dataclass(frozen=True)
class StartRecording:
    folder: Path


@dataclass(frozen=True)
class StopRecording:
    pass


@dataclass(frozen=True)
class SetVoice:
    voice: str  # used for segments whose voice is empty


@dataclass(frozen=True)
class SetMicrophone:
    name: str | None  # None = system default; "" = no microphone


@dataclass(frozen=True)
class SetMode:
    mode: PreviewMode


@dataclass(frozen=True)
class SetGuestPortrait:
    """The interview's guest: a portrait, or None for the built-in guest (applied at once in an interview)."""

    path: Path | None


@dataclass(frozen=True)
class SetAudioEngine:
    """What turns the microphone's voice into mouth motion (the microphone mode restarts with it when running)."""

    engine: AudioEngine


@dataclass(frozen=True)
class RecoverRecordings:
    folder: Path


@dataclass(frozen=True)
class SetOptimizations:
    """The core's optimization flags (the HUD's pills); applied from the next chunk."""

    optimizations: frozenset


@dataclass(frozen=True)
class SetFormat:
    """The program picture: the core's settings (size or canvas, frame rates, engine, device); refused while on air
    or recording, applied when idle."""

    settings: object  # studio.pipeline.settings.CoreSettings
    background: Path | None = None  # canvas background image (None: the plain colour)


@dataclass(frozen=True)
class StartOutput:
    """Send the program to ``url`` too (studio.encode.streams.output_for_url)."""

    url: str
    allow_remote: bool = False


@dataclass(frozen=True)
class StopOutput:
    url: str


@dataclass(frozen=True)
class Shutdown:
    pass


Command = Union[LoadAnchor, GoLive, SetCast, Stop, SetPaused, StartRecording, StopRecording, SetVoice, SetMicrophone,
                SetMode, SetGuestPortrait, SetAudioEngine, RecoverRecordings, SetOptimizations, SetFormat, StartOutput,
                StopOutput,
                Shutdown]


# -- events (runtime -> UI) -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AnchorProgress:
    fraction: float
    message: str


@dataclass(frozen=True)
class AnchorLoaded:
    name: str
    path: Path | None


@dataclass(frozen=True)
class GuestChanged:
    """The interview's guest face is ready ("" message), or why it cannot be used."""

    path: Path | None  # None: the built-in guest
    message: str


@dataclass(frozen=True)
class AnchorFailed:
    path: Path | None
    message: str
    kept_anchor: str  # name of the anchor still on air, "" if none


@dataclass(frozen=True)
class CastProgress:
    fraction: float  # of the whole cast's build
    message: str


@dataclass(frozen=True)
class CastOnAir:
    names: tuple[str, ...]  # the cast on the programme; () when the one anchor is back


@dataclass(frozen=True)
class CastFailed:
    member: str  # the anchor whose portrait could not be used
    message: str


@dataclass(frozen=True)
class StateChanged:
    state: RuntimeState


@dataclass(frozen=True)
class AudioOutputStatus:
    clock_source: ClockSource
    message: str  # device name, or why there is no audio output


@dataclass(frozen=True)
class VoicesListed:
    voices: tuple[VoiceInfo, ...]


@dataclass(frozen=True)
class MicrophoneStatus:
    ok: bool
    device_name: str
    message: str


@dataclass(frozen=True)
class ModeChanged:
    requested: PreviewMode
    active: PreviewMode  # the mode in effect: SCRIPT (idling) when the microphone mode cannot run
    message: str  # "" when ``active == requested``; else why not, in words for the producer


@dataclass(frozen=True)
class SegmentStarted:
    rundown_row: int
    text: str
    words: tuple[WordTiming, ...]


@dataclass(frozen=True)
class SegmentFailed:
    rundown_row: int
    message: str


@dataclass(frozen=True)
class RundownFinished:
    pass


@dataclass(frozen=True)
class RecordingStarted:
    path: Path


@dataclass(frozen=True)
class RecordingStopped:
    path: Path
    duration_s: float
    frames_repeated: int  # slots where the recorder repeated the previous picture (renderer or encoder behind)


@dataclass(frozen=True)
class RecordingFailed:
    message: str


@dataclass(frozen=True)
class RecordingsRecovered:
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class OutputsChanged:
    """The stream outputs now on (their URLs), and what went wrong with the last request ("" when nothing)."""

    urls: tuple[str, ...]
    message: str = ""


@dataclass(frozen=True)
class FormatChanged:
    settings: object  # the CoreSettings now in effect
    message: str  # "" when applied as asked; else why not


@dataclass(frozen=True)
class Notice:
    """Something the producer should know that is not an error (e.g. which compiled engine the core runs)."""

    message: str


@dataclass(frozen=True)
class Error:
    message: str


Event = Union[AnchorProgress, AnchorLoaded, AnchorFailed, CastProgress, CastOnAir, CastFailed, GuestChanged,
              StateChanged, AudioOutputStatus, VoicesListed,
              MicrophoneStatus, ModeChanged, SegmentStarted, SegmentFailed, RundownFinished, RecordingStarted, RecordingStopped,
              RecordingFailed, RecordingsRecovered, FormatChanged, OutputsChanged, Notice, Error]
