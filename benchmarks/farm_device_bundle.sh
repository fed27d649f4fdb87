#!/usr/bin/env bash
# Builds .farmwhl/ (ignored by git) for a GPU machine that has Python 3.12 and torch but no Ray and no registry:
#   ray-2.60.0-cp312-stripped.tar.xz  Ray for CPython 3.12 without what the farm never loads (jars/, rllib/,
#                                     dashboard/client/, tune/, train/, serve/, llm/, data/, air/) and without the
#                                     native binaries' symbols, so that it fits beside the repository in one call
#   wheels/                           Ray's dependencies that such a machine lacks (jsonschema and its own)
#   program.npz, anchor.npz           the inputs of `benchmarks/farm_scaling.py --gpu-sweep` (speech made here with
#                                     TTS, the default anchor pack), since that machine has no TTS and no MediaPipe
# Then, on the GPU machine, from the repository's root:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .farmwhl/wheels/*.whl && \
#   tar xJf .farmwhl/ray-2.60.0-cp312-stripped.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD && \
#   python3 benchmarks/farm_scaling.py --gpu-sweep --segments 16 --size 1080 --json farm_gpu_sweep.json
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=.farmwhl
rm -rf "$OUT/dl" "$OUT/site"
mkdir -p "$OUT/dl" "$OUT/site" "$OUT/wheels"
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" \
  -d "$OUT/dl" ray==2.60.0
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" \
  -d "$OUT/wheels" jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
"$PY" - "$OUT" <<'PYEOF'
import sys, zipfile, pathlib
out = pathlib.Path(sys.argv[1])
wheel = next((out / "dl").glob("ray-2.60.0-cp312-*.whl"))
drop = ("ray/jars/", "ray/rllib/", "ray/dashboard/client/", "ray/tune/", "ray/train/", "ray/serve/", "ray/llm/",
        "ray/data/", "ray/air/")
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(drop):
            z.extract(info, out / "site")
            mode = info.external_attr >> 16
            if mode:
                (out / "site" / info.filename).chmod(mode & 0o777)
PYEOF
# symbols out of the three native parts (119 MB -> about 70 MB unpacked; Ray ran tasks from such a copy here)
strip --strip-unneeded "$OUT/site/ray/_raylet.so" "$OUT/site/ray/core/src/ray/gcs/gcs_server" \
  "$OUT/site/ray/core/src/ray/raylet/raylet"
tar cJf "$OUT/ray-2.60.0-cp312-stripped.tar.xz" -C "$OUT/site" .
rm -rf "$OUT/dl" "$OUT/site"
PYTHONPATH=$PWD "$PY" benchmarks/farm_scaling.py --make-inputs 8 --inputs "$OUT"
du -sh "$OUT"/* "$OUT"
