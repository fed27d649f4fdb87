BUDGET=560
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
python3 results/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
T="env PYTHONPATH=$PWD:/tmp/site python3 -m pytest -p no:cacheprovider -rA -q"
run tests_enhance 100 $T tests/gpu/test_enhance_cuda.py 2>&1 | tee $OUT/tests_gpu_enhance_s20.log | tail -4
run parts 420 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s20.py --program .gpu_home/bench_program.npz \
  --json $OUT/parts_s20.json 2>&1 | tee $OUT/parts_s20.log | grep -vE "Warning|warn\(" | tail -75
