#!/usr/bin/env bash
# Session 19: the studio window from the microphone at 720p25 (results/cpu/s12/mic_latency_probe.py, studio
# settings), interleaved pairs on a quiet machine: VAR=1 (the change under test switched off) then VAR=0 (on), where
# VAR is one of the probe's switches: PROBE_NO_KV_PROBE (kvprobe_ab.log), PROBE_NO_WAKE (wake_ab.log),
# PROBE_NO_LABEL_CACHE (labels_ab.log).   bash results/cpu/s19/window_ab.sh VAR [PAIRS] > LOG
VAR=$1
cd "$(dirname "$0")/../../.."
source .venv/bin/activate
for i in $(seq 1 ${2:-4}); do
  for off in 1 0; do
    echo "== pair $i $VAR=$off load $(cut -d' ' -f1 /proc/loadavg)"
    env "$VAR=$off" python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 \
      | grep -E '"seconds"|stages_ms|frames_traced'
  done
done
