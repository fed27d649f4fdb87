cd "$(dirname "$0")/../../.."
for rep in 1 2; do
  echo "== baseline on rep $rep load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 | tail -3
  echo "== baseline off rep $rep load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s18/nobase_probe.py 2>&1 | tail -3
done
