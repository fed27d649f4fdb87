# Session 15, call D (issue 16, the device time left): Ditto's leaderboard row (call A ran out of time on it), the 14B
# twin (optimized only, key stride 4), then the generator / enhance / compile GPU tests. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-500}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_ditto 140 $LB --engines ditto --json $OUT/leaderboard_ditto_s15.json 2>&1 | tee $OUT/leaderboard_ditto_s15.log \
  | grep -vE "^\s+repeat" | tail -4
run lb_14b 160 $LB --key-stride 4 --engines wan2.1-14b --json $OUT/leaderboard_14b_s15.json 2>&1 \
  | tee $OUT/leaderboard_14b_s15.log | grep -vE "^\s+repeat" | tail -4
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_rest 200 $PT --timeout 100 tests/gpu/test_generators_cuda.py tests/gpu/test_enhance_cuda.py \
  tests/gpu/test_compile_cuda.py > $OUT/tests_gpu_rest_s15.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" $OUT/tests_gpu_rest_s15.log | tail -40
echo "call D done in $((SECONDS - START)) s"
