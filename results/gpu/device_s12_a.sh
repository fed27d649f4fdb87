# Session 12, call A: tests/gpu (no RIFE weights here: test_enhance_cuda runs in call B), the NV12 bench, the
# 1080p60 ablation bench, render at 1080p60, then the compile and generator tests with the time left.
BUDGET=${BUDGET:-575}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/av/site_av.tar.xz .whl/dif/site_dif.tar.xz
{
  nvidia-smi; nproc; uptime; free -g | head -2
  python3 -c "import sys, torch, numpy, transformers, onnxruntime; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_capability(), 'numpy', numpy.__version__, 'transformers', transformers.__version__, 'ort', onnxruntime.__version__, onnxruntime.get_available_providers())"
  python3 -c "import av, pocketsphinx, silero_vad, websockets, diffusers; print('av', av.__version__, 'diffusers', diffusers.__version__)"
  python3 -c "import tensorrt" 2>&1 | tail -1
  python3 main.py compile --list --device cuda
  python3 main.py compile --model builtin --backend tensorrt --device cuda; echo "tensorrt rc=$?"
} > $OUT/env_s12.log 2>&1
tail -3 $OUT/env_s12.log
run tests_fast 200 python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal --timeout 120 tests/gpu/test_renderer_cuda.py \
  tests/gpu/test_mouth_cuda.py tests/gpu/test_validate_cuda.py tests/gpu/test_encode_cuda.py \
  tests/gpu/test_core_cuda.py 2>&1 | tee $OUT/tests_gpu_a_s12.log | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|==="
run nv12 60 python3 -m studio.encode.check nv12 --device cuda --heights 720 1080 --json $OUT/nv12_s12.json > /dev/null
run bench 300 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 6 --repeats 3 \
  --program .gpu_home/bench_program.npz --json $OUT/bench_cuda_1080p60_s12.json 2>&1 | tee $OUT/bench_cuda_1080p60_s12.log | tail -4
{
  run render 120 python3 main.py render --audio .gpu_home/beckett.wav --device cuda --canvas 1080p --fps 60 \
    --out /tmp/beckett_1080p60.mp4
  python3 -c "from studio.encode import probe_mp4; print(probe_mp4('/tmp/beckett_1080p60.mp4'))"
  ls -la /tmp/beckett_1080p60.mp4
} >> $OUT/env_s12.log 2>&1
grep -E "^=== render|^wrote|stage seconds" $OUT/env_s12.log
run tests_heavy 400 python3 -m pytest -v -s -rA -p no:cacheprovider -o timeout_method=signal --timeout 150 tests/gpu/test_generators_cuda.py \
  tests/gpu/test_compile_cuda.py 2>&1 | tee $OUT/tests_gpu_b_s12.log | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|==="
nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks.sm --format=csv
echo "call A done in $((SECONDS - START)) s"
