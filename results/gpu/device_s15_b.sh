# Session 15, call B (issue 15, then 16's GPU tests): the core's GPU tests (the graphed post stage against eager), a
# profile of where the built-in engine's GPU time per 1080p60 frame goes, the 1080p60 ablation bench, then the
# parts of the Wan 1.3B twin's window and of its post stage (dit_parts.py). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-560}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
{ nvidia-smi -L; uptime; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; } \
  > $OUT/env_s15_b.log 2>&1
cat $OUT/env_s15_b.log
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_core 120 $PT --timeout 100 tests/gpu/test_core_cuda.py > $OUT/tests_gpu_core_s15.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|Error" $OUT/tests_gpu_core_s15.log | tail -12
run profile 100 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/profile_core.py --program .gpu_home/bench_program.npz --seconds 4 \
  --json $OUT/profile_core_s15.json > $OUT/profile_core_s15.log 2>&1
grep -A6 "^==" $OUT/profile_core_s15.log | cut -c1-150
run bench 150 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 6 --repeats 3 \
  --program .gpu_home/bench_program.npz --json $OUT/bench_cuda_1080p60_s15.json > $OUT/bench_cuda_1080p60_s15.log 2>&1
tail -5 $OUT/bench_cuda_1080p60_s15.log
python3 -c "
import json; d = json.load(open('$OUT/bench_cuda_1080p60_s15.json'))
print('gpu ms/frame', {k: round(v, 3) for k, v in d['gpu_ms_per_frame'].items()}); print('helpful', d.get('helpful_flags'))"
run dit_parts 130 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/dit_parts.py --sizes 288 512 --json $OUT/dit_parts_s15.json \
  > $OUT/dit_parts_s15.log 2>&1
grep -vE "Warning|warn" $OUT/dit_parts_s15.log | tail -14
nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks.sm --format=csv
echo "call B done in $((SECONDS - START)) s"
