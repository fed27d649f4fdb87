# run from the repository root, after: git worktree add /tmp/wtold ba10737 (the commit before the meter and charts change)
R=$PWD
for rep in 1 2 3 4 5; do
 for wt in /tmp/wtold $R; do
  cd $wt; echo "== $wt rep $rep $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  $R/.venv/bin/python $wt/results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 | tail -4
  git -C $wt checkout -q results/cpu/s12/mic_latency_probe.png
 done
done
