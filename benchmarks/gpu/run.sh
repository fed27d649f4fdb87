#!/usr/bin/env bash
# The GPU benchmarks, one suite per call of a machine with one NVIDIA GPU (each suite ends inside 10 minutes).
# From the repository root, after benchmarks/gpu/make_bundles.sh has made .gpu_home and .whl on a CPU machine
# (the GPU machine needs neither network nor TTS; carry both folders):
#
#     bash benchmarks/gpu/run.sh [core|dit|dit-row|firstframe|startup|tests|tests-engines|picture|cast]
#
#   core (default)  the optimizations ablation at 1920x1080, 60 fps (`main.py bench --device cuda`), RGB -> NV12 on
#                   the GPU against the CPU (`studio.encode.check nv12`), the leaderboard of the engines that fit in
#                   a call (built-in, Wav2Lip, MuseTalk 1.5, LivePortrait)
#   dit             where the Wan 1.3B engine's milliseconds go (benchmarks/gpu/dit_parts.py: DiT steps, decode,
#                   SPAN, RIFE, by CUDA events)
#   dit-row         the leaderboard row of the Wan 1.3B engine (TAEHV decoder, fp8 DiT linears, key stride 4) with
#                   each flag's share; alone in its call (two compiles of the DiT)
#   firstframe      the Wan 1.3B engine's time to the first frame and throughput, whole windows against its
#                   streaming form, on the dit-row's form (TAEHV, fp8 DiT linears, 288 px, CUDA graphs, key stride 4):
#                   the engine alone and in the core (benchmarks/gpu/first_frame.py; its compile is most of the call)
#   startup         `render --device cuda --canvas 1080p --fps 60` of a 10-s clip (the bench program's audio), twice
#                   on a fresh copy of the data folder (no TorchInductor cache): the first run compiles and fills the
#                   cache, the second loads it; each prints its stage seconds and its time to the first frame
#   tests           the GPU tests (`python3 -m pytest tests/gpu`) but the engines' file, in six worker processes
#                   where pytest-xdist is installed
#   tests-engines   the engines' GPU tests (tests/gpu/test_generators_cuda.py: the twins, the Wan DiT's compile), in
#                   three worker processes where pytest-xdist is installed
#   picture         the canvas at 1080p60 with the matte, the news set and the graphics against the framed photo on a
#                   plain set (benchmarks/matte_graphics_cost.py: wall and GPU ms a frame)
#   cast            a cast of four anchors on the 1080p60 canvas in the core, the built-in engine and LivePortrait's
#                   twin: ms a frame, GPU ms, peak GPU memory (benchmarks/gpu/cast_core.py; needs the 480-px packs of
#                   .gpu_home, not the 1080-px ones, and RIFE from .whl/dif)
# Writes JSON (and PNG charts) under $OUT, or benchmarks/gpu/out when OUT is unset, and prints a summary.
set -o pipefail
SUITE=${1:-core}
START=$SECONDS
# seconds this script may take (each step gets at most what is left); the Wan row needs nearly all of a 600-s call
[ "$SUITE" = dit-row ] && BUDGET=${BUDGET:-590} || BUDGET=${BUDGET:-570}
O=${OUT:-benchmarks/gpu/out}
mkdir -p "$O" /tmp/site /tmp/engines
export PYTHONUNBUFFERED=1 NEWSSTUDIO_HOME=$PWD/.gpu_home NEWSSTUDIO_ENGINES=/tmp/engines HF_HUB_OFFLINE=1 \
       TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD:/tmp/site
[ -f .gpu_home/bench_program.npz ] || { echo "run.sh: .gpu_home is missing: run benchmarks/gpu/make_bundles.sh \
on a CPU machine and carry .gpu_home and .whl"; exit 2; }
for t in .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz .whl/av/site_av.tar.xz; do
  [ -f "$t" ] && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp', filter='data')" "$t" \
    || echo "run.sh: no $t (its steps may fail)"
done
if [ -f .whl/dif/rife4_fp16.pt ]; then  # RIFE travels in fp16; the studio's cache holds it in fp32
  mkdir -p .gpu_home/cache/enhance
  python3 benchmarks/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
fi
step() {  # step NAME MAXSECONDS CMD...: CMD under timeout min(MAXSECONDS, time left - 5), its log in $O/NAME.log
  local name=$1 max=$2; shift 2
  local left=$(( BUDGET - (SECONDS - START) - 5 )); [ $left -lt $max ] && max=$left
  if [ $max -lt 15 ]; then echo "=== $name: skipped, $((left + 5)) s left"; return 0; fi
  echo "=== $name (limit $max s): $*"
  local t0=$SECONDS
  timeout -k 5 $max "$@" > "$O/$name.log" 2>&1; local rc=$?
  echo "=== $name: exit $rc in $((SECONDS - t0)) s"
  grep -vE "^\s+repeat|[Ww]arn" "$O/$name.log" | tail -6
}
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
PROGRAM=.gpu_home/bench_program.npz
T="python3 -m pytest -v --tb=short -rfE -p no:cacheprovider"
xdist() {  # xdist N: pytest's options for N worker processes, none without pytest-xdist
  python3 -c "import xdist" 2>/dev/null && echo "-n $1"
}
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --shares --program $PROGRAM"
case $SUITE in
  core)
    step ablation_1080p60 300 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 4 --repeats 3 \
      --program $PROGRAM --json "$O/ablation_1080p60.json"
    step nv12 60 python3 -m studio.encode.check nv12 --device cuda --heights 720 1080 --json "$O/nv12.json"
    step leaderboard 300 $LB --engines builtin,wav2lip,musetalk-1.5,liveportrait --json "$O/leaderboard.json" ;;
  dit)
    step dit_parts 560 python3 benchmarks/gpu/dit_parts.py --program $PROGRAM --json "$O/dit_parts.json" ;;
  tests)
    # the quick files and the compile tests in one pytest, spread over worker processes where pytest-xdist is there
    # (the compile tests are mostly TorchInductor on the CPU); the engines' file is a call of its own (tests-engines)
    step tests_gpu 560 $T $(xdist 6) $(ls tests/gpu/test_*.py | grep -v generators) ;;
  tests-engines)
    step tests_gpu_engines 560 $T $(xdist 3) tests/gpu/test_generators_cuda.py ;;
  picture)
    step matte_graphics_1080p60 200 python3 benchmarks/matte_graphics_cost.py --device cuda --canvas 1080 --fps 60 \
      --json "$O/matte_graphics_cost.json" ;;
  cast)
    step cast_core_1080p60 400 python3 benchmarks/gpu/cast_core.py --program $PROGRAM --json "$O/cast_core_1080p60.json" ;;
  firstframe)
    step first_frame 250 python3 benchmarks/gpu/first_frame.py --program $PROGRAM --budget-s 200 \
      --json "$O/first_frame.json" ;;
  dit-row)
    step leaderboard_dit 585 $LB --repeats 1 --key-stride 4 --engines wan2.1-1.3b-taehv-fp8 --json "$O/leaderboard_dit.json" ;;
  startup)
    FRESH=/tmp/startup_home
    rm -rf "$FRESH" && mkdir -p "$FRESH" && cp -r .gpu_home/. "$FRESH"/ && rm -rf "$FRESH/cache/inductor"
    python3 - "$PROGRAM" /tmp/clip10.wav <<'PY'
import sys, wave
import numpy as np
z = np.load(sys.argv[1])
audio = np.concatenate([z[f"audio{i}"] for i in range(int(z["n"]))])[:10 * 16000]  # 16 kHz mono
with wave.open(sys.argv[2], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
print(f"clip: {len(audio) / 16000:.2f} s")
PY
    for i in 1 2; do
      step "startup_$i" 280 env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR NEWSSTUDIO_HOME="$FRESH" \
        python3 main.py render --device cuda --canvas 1080p --fps 60 --audio /tmp/clip10.wav --out "/tmp/startup_$i.mp4"
      grep -E "^wrote|^stage seconds" "$O/startup_$i.log"
    done
    du -sh "$FRESH/cache/inductor" 2>/dev/null ;;
  *) echo "run.sh: unknown suite '$SUITE' (core, dit, dit-row, firstframe, startup, tests, tests-engines, picture or cast)"; exit 2 ;;
esac
python3 - "$O" <<'PY'
import json, sys
from pathlib import Path
for p in sorted(Path(sys.argv[1]).glob("*.json")):
    d = json.loads(p.read_text())
    if "gpu_ms_per_frame" in d:
        print(p.name, "GPU ms/frame", {k: round(v, 3) for k, v in d["gpu_ms_per_frame"].items()})
    elif "rows" in d:
        for r in d["rows"]:
            print(p.name, {k: r.get(k) for k in ("engine", "status", "ms_per_frame_plain", "ms_per_frame_optimized",
                                                    "ms_per_frame_best", "gpu_ms_per_frame_optimized")
                           if k in r})
    elif "summary" in d:
        print(p.name, json.dumps(d["summary"]))
    elif "results" in d:
        print(p.name, json.dumps(d["results"]))
PY
echo "run.sh $SUITE: done in $((SECONDS - START)) s"
