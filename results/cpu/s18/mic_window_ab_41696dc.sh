# The studio window's microphone probe on session 14's commit and on this one, interleaved. Needs
# `git worktree add /tmp/wt41 41696dc`; run from the repository root (its .venv serves both).
R=$PWD
for rep in 1 2; do
 for wt in /tmp/wt41 $R; do
  cd $wt; echo "== $wt rep $rep load $(cut -d' ' -f1 /proc/loadavg)"
  $R/.venv/bin/python $wt/results/cpu/s12/mic_latency_probe.py --seconds 45 2>&1 | tail -4
 done
done
