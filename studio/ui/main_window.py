"""The studio's main window: docks around the program preview, and one timer that pulls frames, meters and
telemetry. What the runtime reports is answered through one table (``studio.ui.event_routes``); the small panels
beside the preview live in ``studio.ui.side_panels``.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QScrollArea, QTabWidget, QVBoxLayout,
                               QWidget)

from studio.paths import data_dir
from studio.pipeline import commands as rt
from studio.pipeline.rundown import load_user_rundown, save_rundown, user_cast, user_programme_graphics
from studio.pipeline.telemetry import RuntimeState, StallMeter, TelemetrySnapshot
from studio.runtime import StudioSettings
from studio.ui.bridge import RuntimeBridge
from studio.ui.cast_form import dropped_image
from studio.ui.charts import TelemetryCharts
from studio.ui.event_routes import APP_TITLE, ON_AIR_STATES, ROUTES
from studio.ui.format_panel import FormatPanel, load_format
from studio.ui.hud import HudStrip, install_hud
from studio.ui.leaderboard_panel import LeaderboardPanel
from studio.ui.compile_panel import CompilePanel
from studio.ui.farm_panel import FarmPanel, OpenRundown
from studio.ui.outputs_panel import OutputsPanel
from studio.ui.preview import PreviewPanel
from studio.ui.rundown_panel import RundownPanel, Teleprompter
from studio.ui.side_panels import AnchorPanel, MicrophonePanel, RecordingPanel, VoicePanel, default_recording_folder

log = logging.getLogger(__name__)

TICK_MS = 16  # the one timer: frames, meters, telemetry (no signal per frame or audio buffer)
TELEMETRY_EVERY_TICKS = 6  # ~100 ms
CHARTS_EVERY_TICKS = 60  # ~1 s between the charts' data points
CHART_DRAW_EVERY_TICKS = 8  # one plot redrawn every 8th tick: seven in 56 ticks, before the next point
FIRST_SIZE = QSize(1600, 1000)  # first start without a screen to fill (offscreen); on a screen: maximized
LAYOUT_VERSION = 7  # bump when the default dock layout changes, so an old saved layout is not restored over it


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class _FrameWake(QObject):
    """Carries the runtime's "a new frame is the latest" from its present thread to the window's (queued)."""

    ready = Signal()


def default_studio_settings(qs: QSettings, cuda: bool) -> StudioSettings:
    """The studio's runtime settings: the machine's defaults (the GPU where there is one, every optimization that
    applies there), then what the producer saved (picture format, engine, device, optimizations)."""
    from dataclasses import replace

    from studio.pipeline.factory import default_optimizations
    from studio.pipeline.settings import Optimization

    base = StudioSettings()
    device = "cuda" if cuda else "cpu"
    core = replace(base.core, device=device)
    core, background = load_format(qs, core, cuda)
    core = replace(core, optimizations=default_optimizations(core.device, core.engine))
    saved = qs.value("pipeline/optimizations", None)
    if saved is not None:
        names = [x for x in str(saved).split(",") if x]
        flags = frozenset(Optimization(x) for x in names if x in {o.value for o in Optimization})
        core = replace(core, optimizations=flags & default_optimizations(core.device, ""))
    return replace(base, core=core, canvas_background=background)


def scrolled(widget: QWidget) -> QScrollArea:
    """``widget`` in a vertical scroll area: a tall panel in a tab scrolls instead of making its dock as tall as it
    (the COMPILE form took 495 px from the rundown above it)."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


def cast_layout(value: object):
    """The saved cast layout (``CastLayout``'s value), two-shot when none or unknown."""
    from studio.contracts import CastLayout

    return next((x for x in CastLayout if x.value == value), CastLayout.TWO_SHOT)


def studio_settings() -> QSettings:
    """The window's persistent settings (an INI file in the data folder, so tests stay isolated)."""
    return QSettings(str(data_dir() / "studio.ini"), QSettings.IniFormat)


class MainWindow(QMainWindow):
    """See the module docstring. ``runtime_settings`` lets tests pick a small frame size or no audio output."""

    def __init__(self, anchor: Path | None = None, runtime_settings: StudioSettings | None = None,
                 settings: QSettings | None = None) -> None:
        super().__init__()
        self.settings = settings or studio_settings()
        self.cuda = _cuda_available()
        if runtime_settings is None:
            runtime_settings = default_studio_settings(self.settings, self.cuda)
        self.bridge = RuntimeBridge(runtime_settings, parent=self)
        self.bridge.event.connect(self.on_event)
        self.runtime = self.bridge.runtime
        self.anchor_name = ""
        self.cast_names: tuple[str, ...] = ()  # the rundown's cast on the programme (empty: the one anchor)
        self.heap_settled = False
        self.state = RuntimeState.STARTING
        self.recording_path: Path | None = None
        self.last_recording: Path | None = None
        self.audio_output_ok = False
        self.telemetry: TelemetrySnapshot | None = None
        self._last_frame_index = -1
        self._ticks = 0
        self.want_thumbnail = False  # the next frame becomes the anchor's thumbnail
        self._closing = False
        self.stall = StallMeter(TICK_MS)
        self.live_stall_max_ms = 0.0  # longest GUI stall while on air
        self.mode = rt.PreviewMode.SCRIPT  # the mode the producer asked for
        self.mode_notice = ""  # why the microphone mode is not running ("" when it is, or in script mode)
        self.setWindowTitle(APP_TITLE)
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.setDockOptions(QMainWindow.AnimatedDocks | QMainWindow.AllowNestedDocks | QMainWindow.AllowTabbedDocks)
        self.setTabPosition(Qt.AllDockWidgetAreas, QTabWidget.North)
        self._build_docks()
        self._build_actions()
        self._build_status_bar()
        self._restore(anchor)
        self.timer = QTimer(self)
        self.timer.setTimerType(Qt.PreciseTimer)
        self.timer.timeout.connect(self._tick)
        # a new frame is shown when it is ready, not up to a tick later: the runtime's present thread posts a
        # queued signal (the microphone's sound-to-screen latency waited half a tick on average for the timer)
        self._frame_wake = _FrameWake(self)
        self._frame_wake.ready.connect(self._show_latest_frame, Qt.QueuedConnection)
        self.runtime.set_frame_listener(self._frame_wake.ready.emit)
        self.settle_heap(collect=True)  # modules and widgets built, nothing on air yet: the one full collection
        self.bridge.start()
        self.timer.start(TICK_MS)

    # -- construction ---------------------------------------------------------------------------------------------

    def _dock(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        d = QDockWidget(title, self)
        d.setObjectName(name)
        d.setWidget(widget)
        d.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable)
        return d

    def _build_docks(self) -> None:
        # Preview.
        self.preview = PreviewPanel()
        self.preview.play_toggled.connect(lambda play: self.bridge.send(rt.SetPaused(not play)))
        self.preview.mode_requested.connect(lambda m: self.set_mode(rt.PreviewMode(m)))
        # Rundown and teleprompter.
        self.rundown = RundownPanel()
        self.rundown.go_live_requested.connect(self._go_live)
        self.rundown.stop_requested.connect(lambda: self.bridge.send(rt.Stop()))
        self.teleprompter = Teleprompter()
        # Anchor, voice, microphone, recording.
        self.anchor_panel = AnchorPanel()
        self.anchor_panel.open_button.clicked.connect(self.open_anchor_dialog)
        self.voice_panel = VoicePanel(self.settings, self.bridge.send)
        self.voice_panel.apply_button.clicked.connect(
            lambda: self.rundown.apply_voice_to_selected(self.voice_panel.combo.currentText()))
        self.mic_panel = MicrophonePanel(self.settings, self.bridge.send)
        self.mic_panel.interview_toggled.connect(
            lambda on: self.set_mode(rt.PreviewMode.INTERVIEW if on else rt.PreviewMode.SCRIPT))
        self.record_panel = RecordingPanel(self.settings)
        self.record_panel.record_button.clicked.connect(self.toggle_recording)
        # The program: the preview over the HUD.
        self.hud_strip = HudStrip(self.runtime.bus)
        self.hud_strip.toggled.connect(self._toggle_optimization)
        program = QWidget()
        program_lay = QVBoxLayout(program)
        program_lay.setContentsMargins(0, 0, 0, 0)
        program_lay.setSpacing(0)
        program_lay.addWidget(self.preview, 1)
        program_lay.addWidget(self.hud_strip)
        self.preview_dock = self._dock("PROGRAM", "preview", program)
        self.charts = TelemetryCharts()
        self.charts_dock = self._dock("TELEMETRY", "telemetry", self.charts)
        self.format_panel = FormatPanel(self.settings, self.runtime.core_settings, self.cuda)
        self.format_panel.apply_requested.connect(lambda s, bg: self.bridge.send(rt.SetFormat(s, bg)))
        self.format_dock = self._dock("PROGRAM FORMAT", "format", self.format_panel)
        self.leaderboard = LeaderboardPanel("cuda" if self.cuda else "cpu")

        self.outputs = OutputsPanel()
        self.outputs.start_requested.connect(lambda url, remote: self.bridge.send(rt.StartOutput(url, remote)))
        self.outputs.stop_requested.connect(lambda url: self.bridge.send(rt.StopOutput(url)))

        self.compile_panel = CompilePanel(self.runtime.core_settings.device, lambda: self.runtime.anchor,
                                          lambda: self.runtime.core_settings)
        self.compile_panel.compiled.connect(self._engine_compiled)
        # One dock with tabs (dock tab groups left a stale tab bar over the preview here): outputs, engines, compile
        self.tools = QTabWidget()
        self.tools.addTab(self.outputs, "OUTPUTS")
        self.tools.addTab(self.leaderboard, "LEADERBOARD")
        self.tools.addTab(scrolled(self.compile_panel), "COMPILE")
        self.farm_panel = FarmPanel(self._open_rundown, lambda: self.runtime.core_settings,
                                    lambda: self.runtime.anchor, data_dir() / "farm", style_of=self._farm_style)
        self.tools.addTab(scrolled(self.farm_panel), "FARM")
        self.tools_dock = self._dock("LIVE OUTPUTS · ENGINES", "tools", self.tools)
        self.rundown_dock = self._dock("RUNDOWN", "rundown", self.rundown)
        self.prompter_dock = self._dock("TELEPROMPTER", "teleprompter", self.teleprompter)
        self.anchor_dock = self._dock("ANCHOR", "anchor", self.anchor_panel)
        self.voice_dock = self._dock("VOICE", "voice", self.voice_panel)
        self.mic_dock = self._dock("MICROPHONE", "microphone", self.mic_panel)
        self.record_dock = self._dock("RECORDING", "recording", self.record_panel)
        self.setCentralWidget(None)
        self.addDockWidget(Qt.LeftDockWidgetArea, self.anchor_dock)
        self.splitDockWidget(self.anchor_dock, self.preview_dock, Qt.Horizontal)
        self.splitDockWidget(self.preview_dock, self.rundown_dock, Qt.Horizontal)
        self.splitDockWidget(self.anchor_dock, self.voice_dock, Qt.Vertical)
        self.splitDockWidget(self.voice_dock, self.mic_dock, Qt.Vertical)
        self.splitDockWidget(self.mic_dock, self.record_dock, Qt.Vertical)
        self.splitDockWidget(self.preview_dock, self.prompter_dock, Qt.Vertical)
        self.splitDockWidget(self.prompter_dock, self.charts_dock, Qt.Horizontal)
        self.addDockWidget(Qt.LeftDockWidgetArea, self.format_dock)
        self.tabifyDockWidget(self.voice_dock, self.format_dock)
        self.voice_dock.raise_()
        self.splitDockWidget(self.rundown_dock, self.tools_dock, Qt.Vertical)
        self.setMinimumSize(1100, 700)

    def _default_layout(self) -> None:
        """Dock sizes for a first start: the program preview takes most of the window."""
        w, h = self.width(), self.height()
        side, rundown = 280, 400
        self.resizeDocks([self.anchor_dock, self.preview_dock, self.rundown_dock],
                         [side, max(400, w - side - rundown), rundown], Qt.Horizontal)
        self.resizeDocks([self.preview_dock, self.prompter_dock], [max(400, h - 300), 250], Qt.Vertical)
        self.resizeDocks([self.prompter_dock, self.charts_dock], [420, max(300, w - side - rundown - 420)],
                         Qt.Horizontal)
        # the rundown (segments, cast, graphics) over the outputs' tabs: most of the height to what is edited most
        self.resizeDocks([self.rundown_dock, self.tools_dock], [max(400, h - 340), 300], Qt.Vertical)

    def _build_actions(self) -> None:
        self.live_action = QAction("Go live / Stop", self)
        self.live_action.setShortcut(QKeySequence(Qt.Key_Space))
        self.live_action.triggered.connect(self.rundown.toggle_live)
        self.record_action = QAction("Record", self)
        self.record_action.setShortcut(QKeySequence(Qt.Key_R))
        self.record_action.triggered.connect(self.toggle_recording)
        self.open_action = QAction("Open portrait…", self)
        self.open_action.setShortcut(QKeySequence.Open)
        self.open_action.triggered.connect(self.open_anchor_dialog)
        self.mode_action = QAction("Microphone mode (Script / Microphone)", self)
        self.mode_action.setShortcut(QKeySequence(Qt.Key_M))
        self.mode_action.triggered.connect(self.toggle_mode)
        for a in (self.live_action, self.record_action, self.open_action, self.mode_action):
            a.setShortcutContext(Qt.WindowShortcut)
            self.addAction(a)
        menu = self.menuBar().addMenu("&Studio")
        menu.addAction(self.open_action)
        menu.addAction(self.live_action)
        menu.addAction(self.record_action)
        menu.addAction(self.mode_action)
        view = self.menuBar().addMenu("&View")
        for d in (self.preview_dock, self.rundown_dock, self.prompter_dock, self.charts_dock, self.format_dock,
                  self.tools_dock,
                  self.anchor_dock, self.voice_dock,
                  self.mic_dock, self.record_dock):
            view.addAction(d.toggleViewAction())
        self.hud_action = install_hud(self, self.hud_strip)
        view.addAction(self.hud_action)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        sb.setSizeGripEnabled(False)
        self.status_state = QLabel("● starting")
        self.status_device = QLabel("device: —")
        self.status_fps = QLabel("— fps")
        self.status_audio = QLabel("audio: —")
        self.status_stall = QLabel("GUI stall —")
        self.status_stall.setToolTip("Longest time the window's event loop was blocked (last 5 s / longest on air)")
        self.status_latency = QLabel("")
        self.status_latency.setToolTip("Microphone mode: sound-to-pixel latency, from a sample entering the capture "
                                       "buffer to the frame that shows it reaching the screen (last 10 s)")
        self.status_latency.setVisible(False)
        for w in (self.status_state, self.status_device, self.status_fps, self.status_latency, self.status_audio,
                  self.status_stall):
            sb.addPermanentWidget(w)

    def _restore(self, anchor: Path | None) -> None:
        s = self.settings
        geo, state = s.value(self._geometry_key()), s.value(f"window/state-v{LAYOUT_VERSION}")
        self.first_start = geo is None or not self.restoreGeometry(geo)
        if self.first_start:  # the whole screen (run_app shows it maximized), or FIRST_SIZE where there is none
            screen = QGuiApplication.primaryScreen()
            if screen is not None and QGuiApplication.platformName() not in ("offscreen", "minimal"):
                self.setGeometry(screen.availableGeometry())
            else:
                self.resize(FIRST_SIZE)
            self._default_layout()
        if state is None or not self.restoreState(state, LAYOUT_VERSION):
            self._default_layout()
        folder = s.value("recording/folder", "") or str(default_recording_folder())
        self.record_panel.set_folder(str(folder))
        self.rundown.set_cast(user_cast())  # before the segments: their speakers are checked against it
        self.rundown.cast_form.set_layout_choice(cast_layout(s.value("cast/layout", "")))
        self.rundown.set_segments(load_user_rundown())
        self.rundown.set_programme_graphics(user_programme_graphics())
        self.rundown.changed.connect(self._save_rundown_soon)
        self.rundown.cast_form.changed.connect(self._cast_changed)
        self._rundown_timer = QTimer(self, singleShot=True, interval=1500)
        self._rundown_timer.timeout.connect(self._save_rundown)
        if anchor is None:
            saved = s.value("anchor/path", "")
            anchor = Path(saved) if saved and Path(saved).is_file() else None
        self._requested_anchor = anchor
        self.bridge.send(rt.LoadAnchor(anchor))
        self.bridge.send(rt.SetCast(self.rundown.cast(), self.rundown.cast_form.layout_choice()))
        if Path(str(folder)).is_dir():
            self.bridge.send(rt.RecoverRecordings(Path(str(folder))))
        if self.mic_panel.engine_combo.currentData() != self.runtime.settings.audio_engine.value:
            self.mic_panel.engine_changed()  # the producer's saved choice
        self.mic_panel.fill_devices()

    @staticmethod
    def _geometry_key() -> str:
        """Geometry is saved per platform: a size saved by an offscreen run (tests, scripts) must not shape the
        window on a real screen."""
        return f"window/geometry-{QGuiApplication.platformName() or 'default'}"

    # -- user actions ---------------------------------------------------------------------------------------------

    def load_anchor(self, path: Path | None) -> None:
        self.anchor_panel.loading(path.name if path else "the default anchor")
        self._requested_anchor = path
        self.bridge.send(rt.LoadAnchor(path))

    def open_anchor_dialog(self) -> None:
        start = str(self._requested_anchor.parent) if self._requested_anchor else str(Path.home())
        name, _ = QFileDialog.getOpenFileName(self, "Open a portrait", start,
                                              "Images (*.jpg *.jpeg *.png *.bmp *.webp *.tif *.tiff)")
        if name:
            self.load_anchor(Path(name))

    def set_mode(self, mode: rt.PreviewMode) -> None:
        """Script (the rundown), Microphone (the person at the selected microphone drives the presenter) or
        Interview (the presenter on the rundown, a guest at the microphone beside them)."""
        self.mode = mode
        self.live_stall_max_ms = 0.0
        self.preview.show_mode(mode.value, "Starting the microphone…" if mode.listens else "")
        self.mic_panel.show_interview(mode == rt.PreviewMode.INTERVIEW)
        self.bridge.send(rt.SetMode(mode))

    def toggle_mode(self) -> None:
        self.set_mode(rt.PreviewMode.SCRIPT if self.mode.listens else rt.PreviewMode.MICROPHONE)

    def _toggle_optimization(self, opt, on: bool) -> None:
        """A HUD pill was clicked: that optimization off or on in the running core, kept for the next session."""
        from studio.pipeline.settings import Optimization

        flags = set(self.runtime.core_settings.optimizations)
        (flags.add if on else flags.discard)(opt)
        self.settings.setValue("pipeline/optimizations", ",".join(sorted(o.value for o in flags)))
        self.bridge.send(rt.SetOptimizations(frozenset(flags)))
        self.format_panel.set_keyframes_on(Optimization.FRAME_INTERPOLATION in flags)
        self.statusBar().showMessage(f"{opt.label} {'on' if on else 'off'}: the HUD shows the difference within "
                                     "seconds.", 5000)

    def _engine_compiled(self, model: str) -> None:
        """A compile finished: run the studio on it (the HUD's "graphs / engine" pill), where it is this engine."""
        from studio.pipeline.settings import Optimization

        if model != self.runtime.core_settings.engine:
            return
        flags = set(self.runtime.core_settings.optimizations) | {Optimization.CUDA_GRAPHS}
        self.settings.setValue("pipeline/optimizations", ",".join(sorted(o.value for o in flags)))
        self.bridge.send(rt.SetOptimizations(frozenset(flags)))

    def _cast_changed(self) -> None:
        """The cast or its layout was edited: to the studio (which builds what it needs), and the layout kept."""
        layout = self.rundown.cast_form.layout_choice()
        self.settings.setValue("cast/layout", layout.value)
        self.bridge.send(rt.SetCast(self.rundown.cast(), layout))

    def _go_live(self, rows: list, segments: list) -> None:
        self.live_stall_max_ms = 0.0
        self.bridge.send(rt.GoLive(tuple(segments), tuple(rows), self.rundown.programme_graphics()))
        self.rundown.set_live(True)
        self.teleprompter.show_waiting("Preparing speech…")

    def toggle_recording(self) -> None:
        if self.recording_path is not None:
            self.bridge.send(rt.StopRecording())
            self.record_panel.status.setText("Finishing the file…")
            return
        folder = self.record_panel.folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.record_panel.show_error(f"Cannot create {folder}: {exc.strerror}. Choose another folder.")
            return
        self.settings.setValue("recording/folder", str(folder))
        self.bridge.send(rt.StartRecording(folder))

    def _open_rundown(self) -> OpenRundown:
        """The rundown as edited, whole (the FARM tab submits it)."""
        return OpenRundown(self.rundown.segments(), self.rundown.programme_graphics(), self.rundown.cast(),
                           self.rundown.cast_form.layout_choice())

    def _farm_style(self):
        """The canvas's set as the studio shows it, for the FARM tab (the graphics travel in the rundown file)."""
        from studio.graphics.look import CanvasStyle

        return CanvasStyle(background_image=self.runtime.settings.canvas_background)

    def _save_rundown_soon(self) -> None:
        self._rundown_timer.start()

    def _save_rundown(self) -> None:
        try:
            save_rundown(self.rundown.segments(), graphics=self.rundown.programme_graphics(),
                         cast=self.rundown.cast())
        except Exception as exc:  # InputError with a message; never lose the window over a save
            self.statusBar().showMessage(str(exc), 8000)

    # -- drag and drop ------------------------------------------------------------------------------------------

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt)
        if dropped_image(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 (Qt)
        path = dropped_image(event)
        if path is not None:
            event.acceptProposedAction()
            self.load_anchor(path)

    # -- the one timer ------------------------------------------------------------------------------------------

    def _tick(self) -> None:
        late = self.stall.tick()
        if self.state in ON_AIR_STATES:
            self.live_stall_max_ms = max(self.live_stall_max_ms, late)
        self._ticks += 1
        self._show_latest_frame()
        self.mic_panel.meter.set_level(self.runtime.input_level_dbfs())
        if self._ticks % TELEMETRY_EVERY_TICKS == 0:
            self._refresh_telemetry()
            self.hud_strip.refresh()
            if self.outputs.isVisible() or self._ticks % (TELEMETRY_EVERY_TICKS * 10) == 0:
                self.outputs.refresh(self.runtime.output_stats())
        if self._ticks % CHARTS_EVERY_TICKS == 3:  # offset from the telemetry tick: never both in one tick
            self.charts.update_from(self.runtime.bus.latest("core"), self.telemetry.fps_shown if self.telemetry
                                    else 0.0, draw=False)
        elif self._ticks % CHART_DRAW_EVERY_TICKS == 1:  # one plot a time, all seven within CHARTS_EVERY_TICKS
            self.charts.draw_one()

    def _show_latest_frame(self) -> None:
        """The runtime's newest frame into the preview, once: on the runtime's wake-up (``_FrameWake``), and at each
        tick in case a wake-up was missed."""
        frame = self.runtime.latest_frame()
        if frame is not None and frame.index != self._last_frame_index:
            self._last_frame_index = frame.index
            self.preview.view.set_frame(frame.image)
            self.runtime.note_displayed(frame)
            if self.want_thumbnail:
                self.want_thumbnail = False
                self.anchor_panel.set_thumbnail(frame.image)

    def _refresh_telemetry(self) -> None:
        t = self.runtime.telemetry()
        self.telemetry = t
        self.preview.set_telemetry(t)
        self.status_fps.setText(f"{t.fps_shown:.1f} / {t.fps_target:.0f} fps")
        self.status_device.setText(f"device: {t.device}")
        self.status_stall.setText(f"GUI stall {self.stall.recent_stall_ms:.0f} ms"
                                  + (f" · on air max {self.live_stall_max_ms:.0f} ms" if self.live_stall_max_ms else ""))
        if t.segment_index >= 0:
            self.teleprompter.set_word(t.word_index)
        mic = t.mode != rt.PreviewMode.SCRIPT.value
        self.status_latency.setVisible(mic)
        if mic:
            self.status_latency.setText(
                "sound→pixel —" if math.isnan(t.latency_ms_median)
                else f"sound→pixel {t.latency_ms_median:.0f} ms · p95 {t.latency_ms_p95:.0f} ms")
        if self.recording_path is not None:
            self.record_panel.show_elapsed(t.recording_s)
        self.mic_panel.show_level(t.input_level_dbfs)

    # -- runtime events -----------------------------------------------------------------------------------------

    def settle_heap(self, collect: bool = False) -> None:
        from studio.pipeline import heap

        frozen, ms = heap.settle(collect)
        log.info("garbage collector settled: %d objects frozen in %.0f ms", frozen, ms)

    def on_event(self, e: rt.Event) -> None:
        """Answer a runtime event through the table in ``studio.ui.event_routes``."""
        route = ROUTES.get(type(e))
        if route is None:
            log.warning("no handler for the runtime event %s", type(e).__name__)
            return
        route(self, e)

    # -- closing --------------------------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt)
        if not self._closing:
            self._closing = True
            self.timer.stop()
            self.settings.setValue(self._geometry_key(), self.saveGeometry())
            self.settings.setValue(f"window/state-v{LAYOUT_VERSION}", self.saveState(LAYOUT_VERSION))
            self.settings.sync()
            self._save_rundown()
            self.leaderboard.shutdown()
            self.compile_panel.shutdown()
            self.farm_panel.shutdown()
            self.bridge.shutdown()  # closes the recording into a playable file, then quit() + wait()
        super().closeEvent(event)
