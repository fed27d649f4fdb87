"""The up-front memory check's estimate against the renderer's measured peak (resident memory of a fresh process,
its peak reset after the anchor is ready, so that the verdict does not depend on whether the anchor was cached)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from studio.validate import estimate_render_memory

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, json, sys
import numpy as np, torch
torch.set_num_threads(1)
from studio.presenter.anchor import build_anchor
from studio.contracts.coeffs import N_COEFFS
from studio.presenter.renderer import Presenter, RenderSettings

def status_kb(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

size, batch = int(sys.argv[1]), int(sys.argv[2])
anchor = build_anchor()  # built or loaded from the cache: either way its peak is forgotten below
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak resident size (VmHWM) to the current one
base = status_kb("VmRSS")
presenter = Presenter(anchor, RenderSettings(size_px=size, batch_frames=batch))
presenter.render(np.zeros((batch, N_COEFFS), np.float32))
print(json.dumps({"bytes": (status_kb("VmHWM") - base) * 1024}))
"""


def test_estimate_covers_the_measured_peak_without_wasting_half() -> None:
    size, batch = 1024, 4
    out = subprocess.run([sys.executable, "-c", _PROBE, str(size), str(batch)], cwd=REPO, env=dict(os.environ),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])["bytes"]
    est = estimate_render_memory(size, (size, size), batch, available_bytes=1 << 40)
    assert 0.5 * est.renderer_bytes <= measured <= 1.2 * est.renderer_bytes, (measured, est.renderer_bytes)
