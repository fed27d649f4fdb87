import runpy, sys
sys.path.insert(0, ".")
import studio.ui.main_window as mw
mw.MainWindow.show = lambda self: None  # never painted: the GUI's share of the two cores
sys.argv = ["probe", "--seconds", "45"]
runpy.run_path("results/cpu/s12/mic_latency_probe.py", run_name="__main__")
