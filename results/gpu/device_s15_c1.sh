# Session 15, call C1: call B's two scripts again (they ran without the repo on PYTHONPATH), the graphed post stage's
# GPU test (it called the graph outside inference mode), then the Wan 1.3B rows with whole-window programs at 15
# generated fps of 60 (key stride 4). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-560}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
run tests_post 60 python3 -m pytest -q -rA -p no:cacheprovider -o timeout_method=signal --timeout 50 \
  tests/gpu/test_core_cuda.py -k graphed_post > $OUT/tests_gpu_post_s15.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|Error" $OUT/tests_gpu_post_s15.log | tail -6
run profile 100 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/profile_core.py --program .gpu_home/bench_program.npz \
  --seconds 4 --json $OUT/profile_core_s15.json > $OUT/profile_core_s15.log 2>&1
grep -A9 "^==" $OUT/profile_core_s15.log | cut -c1-140
run dit_parts 130 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/dit_parts.py --sizes 288 512 \
  --json $OUT/dit_parts_s15.json > $OUT/dit_parts_s15.log 2>&1
grep -vE "Warning|warn" $OUT/dit_parts_s15.log | tail -14
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan 220 $LB --key-stride 4 --engines wan2.1-1.3b --json $OUT/leaderboard_wan_k4_s15.json 2>&1 \
  | tee $OUT/leaderboard_wan_k4_s15.log | grep -vE "^\s+repeat" | tail -8
echo "call C1 done in $((SECONDS - START)) s"
