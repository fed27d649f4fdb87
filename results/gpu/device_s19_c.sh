# Session 19, call C: the GPU tests this session's changes touch: the core (the canvas's cast before its permuted
# copy, faf3490), the post stage's SPAN form, the Wan engine with cuDNN attention, TAEHV and fp8 linears.
# Carry: .gpu_home .whl/dif. (Run with BUDGET=240 after failed machine starts left 380 s of device time: the core's
# tests, 200 s in session 17, did not fit.)
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
T="env PYTHONPATH=$PWD:/tmp/site python3 -m pytest -p no:cacheprovider -rA -q"
run tests_wan 150 $T tests/gpu/test_generators_cuda.py -k "taehv or window_gives or one_forward" 2>&1 \
  | tee $OUT/tests_gpu_wan_s19.log | grep -E "passed|failed|error|PASSED|FAILED" | tail -8
run tests_enhance 90 $T tests/gpu/test_enhance_cuda.py 2>&1 | tee $OUT/tests_gpu_enhance_s19.log | tail -3
run tests_core 260 $T tests/gpu/test_core_cuda.py 2>&1 | tee $OUT/tests_gpu_core_s19.log | tail -3
echo "call C done in $((SECONDS - START)) s"
