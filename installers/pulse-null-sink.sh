#!/usr/bin/env bash
# A virtual microphone for machines without a sound card (tests, CI, kiosks).
#
# Starts a PulseAudio daemon with a null sink "studio" (48 kHz mono) whose monitor is the default source:
# whatever is played into the sink (`paplay --device=studio speech.wav`) is what the app records from device
# 'pulse'. Idempotent: when a daemon already answers on $XDG_RUNTIME_DIR it only (re)creates the sink.
# Prints the line to eval, e.g.:  eval "$(installers/pulse-null-sink.sh)"
# Needs the Debian packages pulseaudio pulseaudio-utils libportaudio2.
set -euo pipefail

if ! command -v pulseaudio >/dev/null 2>&1 || ! command -v pactl >/dev/null 2>&1; then
    echo "pulseaudio is not installed: apt-get install -y --no-install-recommends pulseaudio pulseaudio-utils" >&2
    exit 2
fi

if [[ -z "${XDG_RUNTIME_DIR:-}" || ! -d "${XDG_RUNTIME_DIR}" || ! -w "${XDG_RUNTIME_DIR}" ]]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
fi
chmod 700 "$XDG_RUNTIME_DIR"
export XDG_RUNTIME_DIR
unset PULSE_SERVER

if ! pactl info >/dev/null 2>&1; then
    pulseaudio --daemonize=yes --exit-idle-time=-1 --disallow-exit -n \
        --load=module-native-protocol-unix --load=module-always-sink >&2
    for _ in $(seq 1 50); do
        pactl info >/dev/null 2>&1 && break
        sleep 0.1
    done
    pactl info >/dev/null 2>&1 || { echo "pulseaudio did not start (see its log in the journal / stderr)" >&2; exit 1; }
fi

if ! pactl list short sinks | awk '{print $2}' | grep -qx studio; then
    pactl load-module module-null-sink sink_name=studio rate=48000 channels=1 >/dev/null
fi
pactl set-default-source studio.monitor

echo "export XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR"
