# Session 20, call A (issue 16's 5 ms): where the Wan 1.3B (TAEHV, fp8) row's time goes and the post stage's two
# routes (parts_s20.py), and the GPU tests of the post stage (the in-betweens made at the presenter's size, graphed)
# and of the Wan engine's options. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
python3 results/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
T="env PYTHONPATH=$PWD:/tmp/site python3 -m pytest -p no:cacheprovider -rA -q"
run tests_enhance 100 $T tests/gpu/test_enhance_cuda.py 2>&1 | tee $OUT/tests_gpu_enhance_s20.log | tail -4
run parts 340 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s20.py --program .gpu_home/bench_program.npz \
  --json $OUT/parts_s20.json 2>&1 | tee $OUT/parts_s20.log | grep -vE "Warning|warn\(" | tail -75
run tests_wan 150 $T tests/gpu/test_generators_cuda.py -k "taehv or window_gives" 2>&1 \
  | tee $OUT/tests_gpu_wan_s20.log | grep -E "passed|failed|error|PASSED|FAILED" | tail -8
echo "call A done in $((SECONDS - START)) s"
