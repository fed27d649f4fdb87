#!/usr/bin/env bash
# `live` at the 720p canvas, 25 fps, from the microphone (a PulseAudio null sink), with speech played into it from
# 6 s on (Moonshine's beckett.wav and two_cities.wav in turn); the neural audio engine and the default flags.
cd "$(dirname "$0")/../../.."
export XDG_RUNTIME_DIR=$(mktemp -d) NEWSSTUDIO_HOME=${NEWSSTUDIO_HOME:-$(mktemp -d)}
chmod 700 "$XDG_RUNTIME_DIR"
bash installers/pulse-null-sink.sh > /dev/null
A=$(.venv/bin/python -c "import importlib.util, pathlib; print(pathlib.Path(list(importlib.util.find_spec('moonshine_voice').submodule_search_locations)[0]) / 'assets')")
( sleep 6; for i in 1 2 3; do paplay --device=studio "$A/beckett.wav"; paplay --device=studio "$A/two_cities.wav"; done ) &
player=$!
.venv/bin/python main.py live --canvas 720p --fps 25 --seconds 60 --input pulse 2>&1 | grep -v "^qt\.\|Warning"
kill $player 2>/dev/null; pulseaudio --kill 2>/dev/null
