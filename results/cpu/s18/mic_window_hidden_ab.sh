cd "$(dirname "$0")/../../.."
for rep in 1 2; do
  echo "== hidden rep $rep $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s18/hidden_probe.py 2>&1 | tail -4
  echo "== shown rep $rep $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 | tail -4
done
git checkout -q results/cpu/s12/mic_latency_probe.png
