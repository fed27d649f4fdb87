#!/usr/bin/env bash
# Session 19: issue 15's CPU items on one commit (results/cpu/s18/closure.sh's steps, written beside this script),
# then the studio window from the microphone twice more, as the window starts (the probe's --settings studio: chunks
# of 4 and live baseline chunks for the HUD, which sessions 12-18's probe left out).
set -u
H=$(cd "$(dirname "$0")" && pwd)
D=${1:-$H}  # where the files go (results/cpu/s19/final for the session's last commit)
mkdir -p "$D"
OUT="$D" bash "$H/../s18/closure.sh"
cd "$H/../../.."
source .venv/bin/activate
for i in 2 3; do
  python results/cpu/s12/mic_latency_probe.py --seconds 45 > "$D/mic_window_720p_$i.log" 2>&1
done
echo "closure s19 done"
