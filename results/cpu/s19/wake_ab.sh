#!/usr/bin/env bash
# Session 19: the studio window from the microphone at 720p25 (mic_latency_probe.py, studio settings): new frames
# picked up by the window's 16-ms timer only (wake 0) or also on the runtime's wake-up signal (wake 1), interleaved
# pairs on a quiet machine.
cd "$(dirname "$0")/../../.."
source .venv/bin/activate
for i in $(seq 1 ${PAIRS:-4}); do
  for wk in 0 1; do
    echo "== pair $i wake $wk load $(cut -d' ' -f1 /proc/loadavg)"
    PROBE_NO_WAKE=$((1 - wk)) python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
      | grep -E '"seconds"|stages_ms|frames_traced'
  done
done
