"""How the window answers each runtime event: one table, event type -> handler (``routes``).

The runtime's events (``studio.pipeline.commands``) arrive on the GUI thread through the bridge; the window looks the
event's type up here and calls its handler with itself and the event. A type missing from the table is logged, never
raised: an older window must not fall over on a newer runtime.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer

from studio.pipeline import commands as rt
from studio.pipeline.telemetry import ClockSource, RuntimeState
from studio.ui import theme
from studio.ui.side_panels import set_role

MainWindow = Any  # studio.ui.main_window.MainWindow, not imported: the window imports this table
APP_TITLE = "NewsStudio"
ON_AIR_STATES = (RuntimeState.LIVE, RuntimeState.PREPARING, RuntimeState.MICROPHONE)
STATE_COLOURS = {RuntimeState.LIVE: theme.ON_AIR, RuntimeState.PREPARING: theme.WARN, RuntimeState.IDLE: theme.READY,
                 RuntimeState.PAUSED: theme.WARN, RuntimeState.MICROPHONE: theme.ON_AIR,
                 RuntimeState.FAILED: theme.ON_AIR}


def _message(seconds: int, text: Callable[[rt.Event], str]) -> Callable:
    """A handler that shows ``text(event)`` in the status bar for ``seconds``."""
    return lambda w, e: w.statusBar().showMessage(text(e), seconds * 1000)


def _anchor_loaded(w: MainWindow, e: rt.AnchorLoaded) -> None:
    w.anchor_name = e.name
    w.setWindowTitle(f"{APP_TITLE} — {' & '.join(w.cast_names) or e.name}")
    w.anchor_panel.loaded(e.name, on_air=w.state == RuntimeState.LIVE)
    w.settings.setValue("anchor/path", str(e.path) if e.path else "")
    w.want_thumbnail = not w.cast_names  # the next frame is this face's (not a cast's picture)
    if not w.heap_settled:  # the presenter is up: what the engines loaded lives as long as the studio
        w.heap_settled = True
        QTimer.singleShot(2000, w, w.settle_heap)  # a freeze alone: it may be on air by then


def _anchor_failed(w: MainWindow, e: rt.AnchorFailed) -> None:
    w.anchor_panel.failed(e.message, e.kept_anchor)
    w.statusBar().showMessage(f"Anchor not loaded: {e.message}", 10000)
    if not w.anchor_name and e.path is not None:
        w.bridge.send(rt.LoadAnchor(None))  # never leave the producer without a face


def _cast_on_air(w: MainWindow, e: rt.CastOnAir) -> None:
    w.cast_names = e.names
    w.rundown.cast_form.show_on_air(e.names)
    w.anchor_panel.status.setText("Off the programme while the rundown's cast is on it (back in the microphone "
                                  "mode)." if e.names else "Ready")
    w.setWindowTitle(f"{APP_TITLE} — {' & '.join(e.names) or w.anchor_name}")
    if e.names:
        w.statusBar().showMessage(f"The cast is on the programme: {', '.join(e.names)}.", 8000)


def _cast_failed(w: MainWindow, e: rt.CastFailed) -> None:
    w.rundown.cast_form.show_error(e.member, e.message)
    w.statusBar().showMessage(f"Cast not on the programme: {e.message}", 15000)


def _state_changed(w: MainWindow, e: rt.StateChanged) -> None:
    state = w.state = e.state
    w.status_state.setText(f"<span style='color:{STATE_COLOURS.get(state, theme.MUTED)}'>●</span> {state.label}")
    w.rundown.set_live(state in (RuntimeState.LIVE, RuntimeState.PREPARING))
    if state == RuntimeState.IDLE and w.teleprompter.current_word >= 0:
        w.teleprompter.show_waiting("Select segments and press Go live.")
    if state == RuntimeState.NO_ANCHOR:
        w.preview.view.message = "No anchor: open a portrait (Ctrl+O) or drop one here."
        w.preview.view.update()


def _audio_output(w: MainWindow, e: rt.AudioOutputStatus) -> None:
    w.audio_output_ok = e.clock_source == ClockSource.AUDIO_OUTPUT
    if w.audio_output_ok:
        w.status_audio.setText(f"audio: {e.message}")
        w.preview.source_label.setText(f"Audio: {e.message} (audio clock)")
    else:
        w.status_audio.setText(f"<span style='color:{theme.WARN}'>No audio output</span>")
        w.preview.source_label.setText(e.message)
        set_role(w.preview.source_label, "notice")


def _voices_listed(w: MainWindow, e: rt.VoicesListed) -> None:
    names = [v.name for v in e.voices]
    w.voice_panel.set_voices(names)
    w.rundown.set_voices(names)


def _mode_changed(w: MainWindow, e: rt.ModeChanged) -> None:
    if e.requested != w.mode:  # an answer to an older request is stale
        return
    w.mode_notice = e.message
    w.preview.show_mode(w.mode.value, e.message)
    if e.active == rt.PreviewMode.MICROPHONE:
        w.teleprompter.show_waiting("Microphone mode: the presenter follows the voice at the microphone. Press M "
                                    "for the script.")
    elif e.active == rt.PreviewMode.INTERVIEW and w.state not in ON_AIR_STATES:
        w.teleprompter.show_waiting("Interview: the guest at the microphone drives the second anchor. Go live: "
                                    "the presenter speaks the selected segments, one turn each, waiting for the "
                                    "guest's answers.")
    elif w.state not in ON_AIR_STATES:
        w.teleprompter.show_waiting("Select segments and press Go live.")
    if e.message:
        w.statusBar().showMessage(e.message, 10000)


def _segment_started(w: MainWindow, e: rt.SegmentStarted) -> None:
    item = w.rundown.list.item(e.rundown_row)
    title = item.data(Qt.UserRole).title if item is not None else ""
    w.teleprompter.set_segment(title, e.text, e.words)
    w.rundown.mark_on_air(e.rundown_row)


def _rundown_finished(w: MainWindow, e: rt.RundownFinished) -> None:
    w.rundown.set_live(False)
    w.rundown.mark_on_air(-1)
    w.teleprompter.show_waiting("Rundown finished. Select segments and press Go live.")


def _recording_started(w: MainWindow, e: rt.RecordingStarted) -> None:
    w.recording_path = e.path
    w.record_panel.started(e.path)


def _recording_stopped(w: MainWindow, e: rt.RecordingStopped) -> None:
    w.recording_path = None
    w.last_recording = e.path
    w.record_panel.ended()
    w.record_panel.status.setText(f"Saved {e.path.name} ({e.duration_s:.1f} s)")


def _recording_failed(w: MainWindow, e: rt.RecordingFailed) -> None:
    w.recording_path = None
    w.record_panel.ended()
    w.record_panel.show_error(e.message)


def _outputs_changed(w: MainWindow, e: rt.OutputsChanged) -> None:
    w.outputs.set_outputs(e.urls, e.message)
    if e.message:
        w.statusBar().showMessage(e.message, 15000)


def _format_changed(w: MainWindow, e: rt.FormatChanged) -> None:
    w.format_panel.result(e.settings, e.message)
    if e.message:
        w.statusBar().showMessage(e.message, 15000)


ROUTES: dict[type, Callable[[MainWindow, rt.Event], None]] = {
    rt.AnchorProgress: lambda w, e: w.anchor_panel.progress(e.fraction, e.message),
    rt.AnchorLoaded: _anchor_loaded,
    rt.AnchorFailed: _anchor_failed,
    rt.CastProgress: lambda w, e: w.rundown.cast_form.show_progress(e.fraction, e.message),
    rt.CastOnAir: _cast_on_air,
    rt.CastFailed: _cast_failed,
    rt.StateChanged: _state_changed,
    rt.AudioOutputStatus: _audio_output,
    rt.VoicesListed: _voices_listed,
    rt.MicrophoneStatus: lambda w, e: w.mic_panel.device_status(e.ok, e.device_name, e.message),
    rt.GuestChanged: lambda w, e: w.mic_panel.guest_status(e.path, e.message),
    rt.ModeChanged: _mode_changed,
    rt.SegmentStarted: _segment_started,
    rt.SegmentFailed: _message(10, lambda e: f"Segment {e.rundown_row + 1} skipped: {e.message}"),
    rt.RundownFinished: _rundown_finished,
    rt.RecordingStarted: _recording_started,
    rt.RecordingStopped: _recording_stopped,
    rt.RecordingFailed: _recording_failed,
    rt.RecordingsRecovered: _message(
        15, lambda e: f"Recovered recordings cut short last time: {', '.join(p.name for p in e.paths)}"),
    rt.Notice: _message(15, lambda e: e.message),
    rt.OutputsChanged: _outputs_changed,
    rt.FormatChanged: _format_changed,
    rt.Error: _message(15, lambda e: e.message),
}
