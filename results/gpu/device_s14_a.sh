# Session 14, call A (issues 18 and 17 first, then 15): the GPU vs CPU NV12 conversion, TorchInductor and CUDA-graph
# engines of the built-in engine and two heavy engines through `main.py compile`, the fast GPU tests, then the
# 1080p60 ablation bench with the time left. Carry: .gpu_home .whl/av .whl/dif/site_dif.tar.xz
BUDGET=${BUDGET:-575}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/av/site_av.tar.xz .whl/dif/site_dif.tar.xz
mkdir -p /tmp/s14
{
  nvidia-smi; nproc; uptime; free -g | head -2
  python3 -c "import sys, torch, numpy, transformers, onnxruntime; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_capability(), 'numpy', numpy.__version__, 'transformers', transformers.__version__, 'ort', onnxruntime.__version__, onnxruntime.get_available_providers())"
  python3 -c "import av, pocketsphinx, silero_vad, websockets, diffusers; print('av', av.__version__, 'diffusers', diffusers.__version__)"
  python3 main.py compile --list --device cuda
  python3 main.py doctor 2>&1 | tail -25
} > $OUT/env_s14.log 2>&1
grep -E "^torch|^av|NVIDIA H" $OUT/env_s14.log | head -3
run nv12 60 python3 -m studio.encode.check nv12 --device cuda --heights 720 1080 --json $OUT/nv12_s14.json
{
  for spec in "builtin cuda_graphs fp32" "builtin inductor fp32" "wav2lip cuda_graphs bf16" "liveportrait cuda_graphs bf16" \
              "wav2lip inductor bf16" "liveportrait inductor bf16"; do
    set -- $spec
    run "compile_$1_$2" 100 python3 main.py compile --model $1 --backend $2 --precision $3 --batch 8 --device cuda \
      --repeats 20 --json /tmp/s14/compile_$1_$2.json
  done
  ls -laR /tmp/engines
} > $OUT/compile_s14.log 2>&1
grep -E "^===|speed|PSNR|rror" $OUT/compile_s14.log | tail -30
python3 - <<'PY'
import glob, json, os
out = {}
for f in sorted(glob.glob("/tmp/s14/compile_*.json")):
    out[os.path.basename(f)[len("compile_"):-5]] = json.load(open(f))
json.dump(out, open(os.environ["OUT"] + "/compile_s14.json", "w"), indent=1)
print("compile reports:", list(out))
PY
run tests_fast 150 python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal --timeout 100 tests/gpu/test_renderer_cuda.py \
  tests/gpu/test_mouth_cuda.py tests/gpu/test_validate_cuda.py tests/gpu/test_encode_cuda.py \
  tests/gpu/test_core_cuda.py > $OUT/tests_gpu_a_s14.log 2>&1
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" $OUT/tests_gpu_a_s14.log | tail -30
run bench 300 python3 main.py bench --device cuda --canvas 1080p --fps 60 --seconds 6 --repeats 3 \
  --program .gpu_home/bench_program.npz --json $OUT/bench_cuda_1080p60_s14.json > $OUT/bench_cuda_1080p60_s14.log 2>&1
tail -16 $OUT/bench_cuda_1080p60_s14.log
nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks.sm --format=csv
echo "call A done in $((SECONDS - START)) s"
