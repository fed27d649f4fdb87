#!/usr/bin/env bash
# Session 19: the studio window from the microphone at 720p25 (mic_latency_probe.py, studio settings) with the live
# KV-cache probe's thread (8c7236b) off and on, interleaved pairs on a quiet machine.
cd "$(dirname "$0")/../../.."
source .venv/bin/activate
for i in $(seq 1 ${PAIRS:-4}); do
  for kv in 0 1; do
    echo "== pair $i probe $kv load $(cut -d' ' -f1 /proc/loadavg)"
    PROBE_NO_KV_PROBE=$((1 - kv)) python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
      | grep -E '"seconds"|stages_ms'
  done
done
