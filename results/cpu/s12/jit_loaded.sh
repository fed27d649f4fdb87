#!/usr/bin/env bash
# The same A/B with one core taken by a busy loop (a loaded machine: the core cannot keep up).
cd "$(dirname "$0")/../../.."
for queued in 1 0; do
  python3 -c "while True: pass" & hog=$!
  echo "== loaded queued $queued"
  PROBE_QUEUED=$queued timeout 400 .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
    | grep -v "^qt\.\|Warning" | tail -13
  kill $hog
done
