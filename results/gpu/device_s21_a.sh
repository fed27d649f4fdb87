# Next session, call A: the GPU tests of the post stage (among them: the in-betweens are queued without the host
# waiting for the GPU) and parts_s20.py on the Wan 1.3B TAEHV fp8 row (what removing those waits saves; compare
# s20/parts_s20_b.json: keys route 4.09 ms a frame, RIFE fill 1.31). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-400}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
nvidia-smi -L
T="env PYTHONPATH=$PWD:/tmp/site python3 -m pytest -p no:cacheprovider -rA -q"
run tests_post 120 $T tests/gpu/test_enhance_cuda.py tests/gpu/test_core_cuda.py -k "flow_fill or warm or graph_set" \
  2>&1 | tee $OUT/tests_gpu_post_s21.log | grep -E "passed|failed|error|PASSED|FAILED" | tail -8
run parts 250 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s20.py --program .gpu_home/bench_program.npz \
  --no-profile --routes keys,keys_wait,after --json $OUT/parts_s21.json 2>&1 | tee $OUT/parts_s21.log | grep -E "^(keys|after|warm)" | tail -8
echo "call A done in $((SECONDS - START)) s"
