cd "$(dirname "$0")/../../.."
for rep in 1 2; do
  for si in 0.001 0.005; do
  echo "== switchinterval $si rep $rep $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s18/switch_probe.py $si 2>&1 | tail -3
  done
done
git checkout -q results/cpu/s12/mic_latency_probe.png
