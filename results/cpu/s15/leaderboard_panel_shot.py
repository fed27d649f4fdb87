"""The studio's LEADERBOARD panel (offscreen Qt) showing a leaderboard JSON, grabbed to a PNG: the best set's figure in
the "optimized ms" column and its tooltip text printed.

    python results/cpu/s15/leaderboard_panel_shot.py results/cpu/s15/leaderboard_cpu_s15.json OUT.png
"""
import json
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from PySide6.QtWidgets import QApplication  # noqa: E402

from studio.ui.leaderboard_panel import LeaderboardPanel  # noqa: E402
from studio.ui.theme import apply_theme  # noqa: E402

app = QApplication(sys.argv[:1])
apply_theme(app)
panel = LeaderboardPanel("cpu")
panel.show_result(json.loads(open(sys.argv[1]).read()))
panel.resize(1500, 420)
panel.show()
for _ in range(20):
    app.processEvents()
panel.grab().save(sys.argv[2])
t = panel.table
for i in range(t.rowCount()):
    print(" | ".join(t.item(i, j).text() if t.item(i, j) else "" for j in range(t.columnCount())))
    tip = t.item(i, 6).toolTip() if t.item(i, 6) else ""
    if tip:
        print("   tooltip:", tip)
print(panel.status.text())
