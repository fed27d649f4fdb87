import runpy, sys
sys.path.insert(0, ".")
v = sys.argv[1]
import studio.ui.main_window as mw
import studio.ui.preview as pv
if v in ("nocharts", "both"):
    import studio.ui.charts as ch
    for name in dir(ch):
        cls = getattr(ch, name)
        if isinstance(cls, type) and hasattr(cls, "draw_one"):
            cls.draw_one = lambda self: None
            cls.update_from = lambda self, *a, **k: None
if v in ("nometer", "both"):
    pv.LevelMeter.set_level = lambda self, dbfs: None
sys.argv = ["probe", "--seconds", "45"]
runpy.run_path("results/cpu/s12/mic_latency_probe.py", run_name="__main__")
