"""The program format panel stays narrow whatever the engines' labels: the engine list is sized to a short label
(a long one, such as an engine with its options spelled out, widened the whole left dock), shows the chosen one whole
in its tooltip, and keeps every label whole in its list."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from studio.pipeline.settings import CoreSettings
from studio.ui import format_panel
from studio.ui.format_panel import FormatPanel

pytestmark = pytest.mark.qt

LONG = "EchoMimicV3-flash (Wan2.1 1.3B DiT), tiny decoder (TAEHV), fp8 (rowwise) DiT linears, and more words"


def _panel(qtbot, tmp_path, monkeypatch, labels):
    monkeypatch.setattr(format_panel, "engine_choices", lambda: labels)
    p = FormatPanel(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat), CoreSettings(), cuda=False)
    qtbot.addWidget(p)
    return p


def test_a_long_engine_label_does_not_widen_the_panel(qtbot, tmp_path, monkeypatch) -> None:
    short = _panel(qtbot, tmp_path, monkeypatch, [("builtin", "Built-in presenter (mesh warp)", "")])
    wide = _panel(qtbot, tmp_path, monkeypatch, [("builtin", "Built-in presenter (mesh warp)", ""),
                                                 ("wan", LONG, "timing twin only")])
    assert wide.sizeHint().width() <= short.sizeHint().width() + 20
    assert wide.engine.itemText(1).startswith(LONG)  # the list keeps the label whole
    wide.engine.setCurrentIndex(1)
    assert wide.engine.toolTip().startswith(LONG)


def test_the_keyframe_field_agrees_with_the_keyframes_flag(qtbot, tmp_path, monkeypatch) -> None:
    """With the keyframes flag off (the HUD's pill) the field never claims a keyframe rate: it says every frame is
    generated; turned on, it gives the rate."""
    from dataclasses import replace

    from studio.pipeline.settings import Optimization

    p = _panel(qtbot, tmp_path, monkeypatch, [("builtin", "Built-in presenter (mesh warp)", "")])
    p.show_settings(replace(CoreSettings(), fps=25.0, key_stride=2,
                            optimizations=CoreSettings().optimizations - {Optimization.FRAME_INTERPOLATION}))
    assert p.keys.currentText().startswith("keyframes off: every frame generated")
    p.set_keyframes_on(True)
    assert p.keys.currentText() == "12.5 generated per second, the rest interpolated" and p.keys.currentData() == 2
    p.set_keyframes_on(False)
    assert "generated per second" not in p.keys.currentText()


def test_the_engine_list_says_which_engines_draw_a_cast(qtbot, tmp_path, monkeypatch) -> None:
    """Hovering an engine in the list tells whether it can put a rundown's cast on air; a disabled one says why it
    cannot be chosen instead."""
    p = _panel(qtbot, tmp_path, monkeypatch, [("builtin", "Built-in presenter", "", True),
                                              ("wav2lip", "Wav2Lip", "", False),
                                              ("wan", "Wan", "timing twin only", False)])
    tips = [p.engine.itemData(i, 3) for i in range(p.engine.count())]
    assert tips[0] == "Built-in presenter: draws a rundown's cast (several anchors on the set)"
    assert tips[1].startswith("Wav2Lip: draws one anchor")
    assert tips[2] == "timing twin only" and not p.engine.model().item(2).isEnabled()
    assert format_panel.engine_choices()[0][3] is True  # the real table: the built-in engine draws a cast
