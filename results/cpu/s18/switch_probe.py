import runpy, sys
sys.setswitchinterval(float(sys.argv[1]))
sys.argv = ["probe", "--seconds", "45"]
runpy.run_path("results/cpu/s12/mic_latency_probe.py", run_name="__main__")
