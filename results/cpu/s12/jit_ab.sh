#!/usr/bin/env bash
# Interleaved A/B: the microphone source just in time (now) vs queued (before), studio window, mic mode, 720p canvas.
cd "$(dirname "$0")/../../.."
for rep in 1 2 3; do
  for queued in 1 0; do
    echo "== rep $rep queued $queued load $(cut -d' ' -f1 /proc/loadavg)"
    PROBE_QUEUED=$queued timeout 400 .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
      | grep -v "^qt\.\|Warning" | tail -5
  done
done
