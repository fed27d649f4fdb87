#!/usr/bin/env bash
# Interleaved A/B: torch's intra-op threads (the machine's 2, or 1) with the studio window in microphone mode at the
# 720p canvas (results/cpu/s12/mic_latency_probe.py: the real MainWindow, offscreen, speech into a null sink).
cd "$(dirname "$0")/../../.."
for rep in 1 2; do
  for threads in 2 1; do
    echo "== rep $rep torch_threads $threads load $(cut -d' ' -f1 /proc/loadavg)"
    PROBE_TORCH_THREADS=$threads timeout 400 .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
      | grep -v "^qt\.\|Warning" | tail -5
  done
done
