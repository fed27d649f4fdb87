import dataclasses, runpy, sys
sys.path.insert(0, ".")
import studio.pipeline.studio as st
f = st.StudioSettings.__dataclass_fields__["core"]
f.default = dataclasses.replace(f.default, measure_baseline=False)
st.StudioSettings.__init__.__defaults__ = tuple(f.default if isinstance(d, type(f.default)) else d for d in st.StudioSettings.__init__.__defaults__)
sys.argv = ["probe", "--seconds", "45"]
runpy.run_path("results/cpu/s12/mic_latency_probe.py", run_name="__main__")
