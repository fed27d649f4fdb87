"""The rundown panel's graphics form: programme and segment graphics edited and read back."""

from __future__ import annotations

from studio.graphics.look import Graphics
from studio.pipeline.rundown import Segment
from studio.ui.rundown_panel import RundownPanel


def test_the_rundown_panel_edits_the_graphics(qtbot) -> None:
    panel = RundownPanel()
    qtbot.addWidget(panel)
    panel.set_segments([Segment("One", "Hello."), Segment("Two", "Bye.", graphics=Graphics(headline="Storm"))])
    panel.set_programme_graphics(Graphics(name="Eileen Collins", ticker=("A", "B")))
    form = panel.graphics
    assert form.name_edit.text() == "Eileen Collins" and form.ticker_edit.toPlainText() == "A\nB"
    changed = []
    panel.changed.connect(lambda: changed.append(1))
    qtbot.keyClicks(form.role_edit, "Evening <b>news</b>")
    assert panel.programme_graphics() == Graphics(name="Eileen Collins", role="Evening <b>news</b>",
                                                  ticker=("A", "B"))
    assert changed
    panel.list.setCurrentRow(1)
    assert form.headline_edit.text() == "Storm"
    form.dissolve_check.setChecked(True)
    assert panel.segments()[1].graphics == Graphics(headline="Storm", transition="dissolve")
    panel.list.setCurrentRow(0)
    assert form.headline_edit.text() == "" and panel.segments()[0].graphics is None
    qtbot.keyClicks(form.headline_edit, "Parks")
    assert panel.segments()[0].graphics == Graphics(headline="Parks")
