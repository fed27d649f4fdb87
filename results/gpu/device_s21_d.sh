# Session 21, call D (issue 16): the Wan 1.3B TAEHV fp8 engine over the whole 20-s bench program with every flag,
# plain on its first window (81 frames, 1.35 s), every flag again, then all-but-one for the flags a rundown exercises
# while the budget lasts. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-150}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
nvidia-smi -L
run rundown $(( BUDGET - 10 )) env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/rundown_s21.py \
  --program .gpu_home/bench_program.npz --budget $(( BUDGET - 25 )) --plain-seconds 1.35 \
  --json $OUT/rundown_s21.json 2>&1 | tee $OUT/rundown_s21.log | grep -vE "Warning|warn|Configuration class" | tail -16
echo "call D done in $((SECONDS - START)) s"
