cd "$(dirname "$0")/../../.."
for rep in 1 2; do
  for v in nocharts nometer none; do
  echo "== $v rep $rep $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/python results/cpu/s18/gui_parts_probe.py $v 2>&1 | tail -4
  done
done
git checkout -q results/cpu/s12/mic_latency_probe.png
