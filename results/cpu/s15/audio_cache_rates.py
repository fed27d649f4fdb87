"""Issue 16: each audio encoder's fingerprint-cache hit rate on the whole default rundown (stories with the station
ident after each), and the encoder milliseconds a hit saves, measured on this machine (the CPU; the GPU's ms per
call are in the leaderboard rows). Runs the core's own feature stage (``studio.pipeline.features.FeatureStage``) item
by item, as stage A does, with the cache on and (for the cost of the plain run) off.

    python results/cpu/s15/audio_cache_rates.py --fps 25 --json results/cpu/s15/audio_cache_rates.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fps", type=float, default=25.0)
    ap.add_argument("--engines", default="wav2lip,musetalk-1.5,wan2.1-1.3b,ditto")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import numpy as np
    import torch

    from studio.bench.harness import build_program
    from studio.pipeline.features import FeatureStage
    from studio.contracts import GENERATORS, ANALYSIS_RATE_HZ
    from studio.pipeline.settings import CoreSettings

    torch.set_num_threads(2)
    t0 = time.perf_counter()
    program = build_program(10_000.0)  # the whole rundown
    secs = sum(len(it.audio_16k) for it in program) / ANALYSIS_RATE_HZ
    out = {"machine": "CPU", "fps": a.fps, "program_s": secs, "items": len(program),
           "idents": sum(it.title == "NewsStudio" for it in program), "tts_s": time.perf_counter() - t0, "encoders": {}}
    print(f"program: {len(program)} items, {secs:.1f} s, made in {out['tts_s']:.0f} s", flush=True)
    for name in a.engines.split(","):
        gen = GENERATORS.create(name)
        # the encoder alone: the generator's settings say where it runs; the generator's networks are not built
        from studio.contracts import GeneratorSettings

        gen.settings = GeneratorSettings(device="cpu", precision="fp32")
        gen.twin, gen.device = True, torch.device("cpu")
        enc_name = gen.info.audio.encoder
        stage = FeatureStage(gen, CoreSettings(fps=a.fps))
        with torch.inference_mode():
            t1 = time.perf_counter()
            for idx, it in enumerate(program):
                n = int(len(it.audio_16k) / ANALYSIS_RATE_HZ * a.fps)
                times = np.arange(n) / a.fps
                stage.encoder.features_for_slots(it.audio_16k, times, a.fps, encode=stage._encode_fn(True, idx))
            wall = time.perf_counter() - t1
        st = stage.stats()
        st.update(hit_rate=st["hits"] / max(1, st["hits"] + st["misses"]), wall_s=wall, engine=name)
        out["encoders"][enc_name] = st
        print(f"{enc_name} ({name}): {st['hits']} hits of {st['hits'] + st['misses']} windows "
              f"({100 * st['hit_rate']:.1f} %), {st['encoder_ms_per_call']:.1f} ms a call on the CPU, "
              f"{st['saved_ms']:.0f} ms saved, {wall:.0f} s", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
