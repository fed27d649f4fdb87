# Session 16, call B (commit in the file's history): the core's GPU tests with the compiled post stage, SPAN's forms
# against fp32, the 1080p60 bench (issue 15) and the Wan 1.3B rows of the leaderboard at key stride 4 (issue 16).
# Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_core 60 $PT --timeout 50 tests/gpu/test_core_cuda.py -k "graphed or post" > $OUT/tests_gpu_core_s16.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|Error" $OUT/tests_gpu_core_s16.log | tail -8
run spanq 40 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s16.py --parts spanq \
  --json $OUT/parts_spanq_s16.json 2>&1 | tee $OUT/parts_spanq_s16.log | grep -v "^  File"
run bench 240 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 4 --repeats 3 \
  --program .gpu_home/bench_program.npz --json $OUT/bench_cuda_1080p60_s16.json > $OUT/bench_cuda_1080p60_s16.log 2>&1
tail -4 $OUT/bench_cuda_1080p60_s16.log
python3 -c "
import json; d = json.load(open('$OUT/bench_cuda_1080p60_s16.json'))
print('gpu ms/frame', {k: round(v, 3) for k, v in d['gpu_ms_per_frame'].items()}); print('helpful', d.get('helpful_flags'))"
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan 300 $LB --key-stride 4 --engines wan2.1-1.3b --json $OUT/lb_s16.json 2>&1 | tee $OUT/lb_wan_s16.log \
  | grep -vE "^\s+repeat|Warning|warn" | tail -6
echo "call B done in $((SECONDS - START)) s"
