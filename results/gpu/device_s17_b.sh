# Session 17, call B (issue 16): the post stage's SPAN form against fp32, then the Wan 1.3B rows of the leaderboard at
# key stride 4 with each form of the engine built (and compiled) once per row. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-575}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_enhance 60 $PT --timeout 50 tests/gpu/test_enhance_cuda.py > $OUT/tests_gpu_enhance_s17.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|assert" $OUT/tests_gpu_enhance_s17.log | tail -8
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan 500 $LB --key-stride 4 --engines wan2.1-1.3b --json $OUT/lb_wan_k4_s17.json 2>&1 \
  | tee $OUT/lb_wan_k4_s17.log | grep -vE "^\s+repeat|Warning|warn" | tail -12
echo "call B done in $((SECONDS - START)) s"
