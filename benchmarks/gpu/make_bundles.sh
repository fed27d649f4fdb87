# Makes, on a CPU machine (repo root, .venv active), what benchmarks/gpu/run.sh needs on a GPU machine that has
# torch but no MediaPipe, TTS, PyAV, pocketsphinx, silero-vad, websockets or diffusers, and no network.
#   .gpu_home/               NEWSSTUDIO_HOME there: anchor packs (default + Grace Hopper), converted RIFE / SPAN
#                            weights, the bench program (default rundown, 20 s, 16 kHz) and beckett.wav
#   .gpu_home/site_common.tar.xz   pocketsphinx 5.0.4, silero-vad, websockets, importlib_metadata (cp312 wheels),
#                                  less the model files the studio never reads
#   .whl/av/site_av.tar.xz         PyAV 17.1.0 (the version pyproject.toml allows)
#   .whl/dif/site_dif.tar.xz       diffusers 0.42.1, torchao 0.18.0 (the Wan engine's fp8 DiT linears);
#                                  .whl/dif/rife4_fp16.pt   RIFE's weights in fp16 (the post stage runs RIFE in
#                                  fp16 on CUDA: the same numbers there; half the bytes of the 64 MiB a call
#                                  carries); restore_rife.py writes them into .gpu_home there
# Both folders are in .gitignore; copy or carry them to the GPU machine beside the checkout (about 40 MB).
# Usage: bash benchmarks/gpu/make_bundles.sh
set -euo pipefail
W=${WHEELS:-/tmp/wheels312}
mkdir -p "$W" .gpu_home .whl/av .whl/dif
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
for p in av==17.1.0 pocketsphinx==5.0.4 silero-vad==6.2.3 websockets==15.0.1 diffusers==0.42.1 importlib_metadata==10.2.0 \
         torchao==0.18.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$W" $p \
    2>&1 | grep -v "^WARNING: Location" || true
done
pack() {  # pack OUT WHEEL...: unzip the wheels into site/ and xz it (extracted under /tmp there)
  local out=$1; shift
  local d; d=$(mktemp -d); mkdir "$d/site"
  for w in "$@"; do python3 -m zipfile -e "$w" "$d/site"; done
  # what the studio never reads (the call's 64 MiB): pocketsphinx's word LM (live search is allphone, align has no
  # LM) and Silero's models other than the ONNX one studio/audio/sieve.py loads
  rm -f "$d/site/pocketsphinx/model/en-us/en-us.lm.bin"
  [ -d "$d/site/silero_vad/data" ] && find "$d/site/silero_vad/data" -type f ! -name silero_vad.onnx -delete
  tar -C "$d" -cJf "$out" site; rm -rf "$d"; ls -la "$out"
}
pack .gpu_home/site_common.tar.xz "$W"/pocketsphinx-5.0.4-*.whl "$W"/silero_vad-6.2.3-*.whl "$W"/websockets-15.0.1-*.whl \
  "$W"/importlib_metadata-10.2.0-*.whl
pack .whl/av/site_av.tar.xz "$W"/av-17.1.0-*.whl
pack .whl/dif/site_dif.tar.xz "$W"/diffusers-0.42.1-*.whl "$W"/torchao-0.18.0-*.whl
NEWSSTUDIO_HOME=$PWD/.gpu_home python3 - <<'PY'
import shutil
from pathlib import Path
import matplotlib
from studio.bench.harness import build_program, save_program
from studio.enhance.rife import cache_weights
from studio.enhance.upscale import load_span
from studio.presenter.anchor import build_anchor

hopper = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
# the packs the GPU runs put on air (the device has no MediaPipe to build them): the tests' default size, and both
# portraits at the 1080p canvas's presenter size alone and in a cast of four (benchmarks/gpu/cast_core.py)
for px in (None, 480, 1080):
    build_anchor(output_px=px)
    build_anchor(hopper, output_px=px)
import torch
rife = cache_weights()
state = torch.load(rife, map_location="cpu", weights_only=True)
torch.save({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, ".whl/dif/rife4_fp16.pt")
rife.unlink()
load_span()  # converts the ncnn wheel's SPAN into the cache
save_program(build_program(20.0), Path(".gpu_home/bench_program.npz"))
import importlib.util
spec = importlib.util.find_spec("moonshine_voice")
shutil.copy(Path(list(spec.submodule_search_locations)[0]) / "assets" / "beckett.wav", ".gpu_home/beckett.wav")
PY
# the program above is spoken here; the GPU machine reads it from bench_program.npz and never needs the voice model
rm -rf .gpu_home/cache/voices
du -sh .gpu_home .whl
