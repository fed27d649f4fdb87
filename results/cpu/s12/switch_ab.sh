#!/usr/bin/env bash
# Interleaved A/B of the interpreter's thread switch interval in the studio window, microphone mode, 720p canvas.
cd "$(dirname "$0")/../../.."
for rep in 1 2 3; do
  for sw in 0.005 0.001 0.0005; do
    echo "== rep $rep switch $sw load $(cut -d' ' -f1 /proc/loadavg)"
    PROBE_SWITCH_S=$sw timeout 400 .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 30 2>&1 \
      | grep -v "^qt\.\|Warning" | tail -4
  done
done
