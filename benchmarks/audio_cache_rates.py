"""Each audio encoder's fingerprint-cache hit rate on the default rundown, and the encoder milliseconds a hit saves.

The rundown's stories with the station ident after each (the ident repeats, so its windows hit the cache), run item
by item through the core's own feature stage (``studio.pipeline.features.FeatureStage``) as stage A does, with the
cache on; the encoders run on this machine's CPU (the GPU's ms per call are in the leaderboard's rows).

    python benchmarks/audio_cache_rates.py --json benchmarks/cpu/audio_cache_rates.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

DEFAULT_ENGINES = "wav2lip,musetalk-1.5,wan2.1-1.3b,ditto"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fps", type=float, default=25.0, help="output frame rate (default 25)")
    ap.add_argument("--engines", default=DEFAULT_ENGINES, help=f"comma list of engines (default {DEFAULT_ENGINES})")
    ap.add_argument("--seconds", type=float, default=10_000.0, help="cut the rundown to this length (default: whole)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap.parse_args(argv)


def measure(program, engines: list[str], fps: float) -> dict[str, dict]:
    """Hit rate, encoder ms per call and ms saved, per audio encoder, over ``program`` (``BenchItem``s)."""
    import numpy as np
    import torch

    from studio.contracts import ANALYSIS_RATE_HZ, GENERATORS, GeneratorSettings
    from studio.pipeline.features import FeatureStage
    from studio.pipeline.settings import CoreSettings

    out: dict[str, dict] = {}
    for name in engines:
        gen = GENERATORS.create(name)
        # the encoder alone, on the CPU: the generator's networks are not built
        gen.settings = GeneratorSettings(device="cpu", precision="fp32")
        gen.twin, gen.device = True, torch.device("cpu")
        stage = FeatureStage(gen, CoreSettings(fps=fps))
        with torch.inference_mode():
            t0 = time.perf_counter()
            for idx, it in enumerate(program):
                n = int(len(it.audio_16k) / ANALYSIS_RATE_HZ * fps)
                times = np.arange(n) / fps
                stage.encoder.features_for_slots(it.audio_16k, times, fps, encode=stage._encode_fn(True, idx))
            wall = time.perf_counter() - t0
        st = stage.stats()
        st.update(hit_rate=st["hits"] / max(1, st["hits"] + st["misses"]), wall_s=wall, engine=name)
        out[gen.info.audio.encoder] = st
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    from studio.bench.harness import build_program, machine_info
    from studio.contracts import ANALYSIS_RATE_HZ

    torch.set_num_threads(2)
    t0 = time.perf_counter()
    program = build_program(a.seconds)
    secs = sum(len(it.audio_16k) for it in program) / ANALYSIS_RATE_HZ
    result = {"command": "python benchmarks/audio_cache_rates.py", "machine": machine_info("cpu"), "fps": a.fps,
              "program_s": secs, "items": len(program), "idents": sum(it.title == "NewsStudio" for it in program),
              "tts_s": time.perf_counter() - t0}
    print(f"program: {len(program)} items, {secs:.1f} s, made in {result['tts_s']:.0f} s", flush=True)
    result["encoders"] = measure(program, a.engines.split(","), a.fps)
    for enc, st in result["encoders"].items():
        print(f"{enc} ({st['engine']}): {st['hits']} hits of {st['hits'] + st['misses']} windows "
              f"({100 * st['hit_rate']:.1f} %), {st['encoder_ms_per_call']:.1f} ms a call on the CPU, "
              f"{st['saved_ms']:.0f} ms saved, {st['wall_s']:.1f} s", flush=True)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
