# Session 17, call A (issue 15's GPU items on the final code): the core's GPU tests, among them `render --device cuda
# --canvas 1080p --fps 60` through the CLI (PyAV carried) and the graphed post stage with its compiled I420; then the
# 1920x1080, 60 fps bench (plain vs each flag vs all vs the flags that help). Carry: .gpu_home .whl/av
BUDGET=${BUDGET:-570}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/av/site_av.tar.xz
nvidia-smi -L
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_core 270 $PT --timeout 200 tests/gpu/test_core_cuda.py > $OUT/tests_gpu_core_s17.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|Error|assert" $OUT/tests_gpu_core_s17.log | tail -14
run bench 240 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 4 --repeats 3 \
  --program .gpu_home/bench_program.npz --json $OUT/bench_cuda_1080p60_s17.json > $OUT/bench_cuda_1080p60_s17.log 2>&1
tail -4 $OUT/bench_cuda_1080p60_s17.log
python3 -c "
import json; d = json.load(open('$OUT/bench_cuda_1080p60_s17.json'))
print('gpu ms/frame', {k: round(v, 3) for k, v in d['gpu_ms_per_frame'].items()}); print('helpful', d.get('helpful_flags'))"
run tests_rest 50 $PT --timeout 40 tests/gpu/test_renderer_cuda.py tests/gpu/test_encode_cuda.py \
  tests/gpu/test_validate_cuda.py tests/gpu/test_mouth_cuda.py > $OUT/tests_gpu_rest_s17.log 2>&1
tail -3 $OUT/tests_gpu_rest_s17.log
echo "call A done in $((SECONDS - START)) s"
