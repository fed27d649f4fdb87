# Session 20, call B (issue 16's 5 ms): the leaderboard row of the Wan 1.3B engine with TAEHV's decoder and fp8 DiT
# linears at key stride 4, after 61e547b (SPAN on the keyframes, the
# in-betweens made at 1080) and the post stage's graphs captured by the core's warm-up. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-590}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
python3 results/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
T="env PYTHONPATH=$PWD:/tmp/site python3 -m pytest -p no:cacheprovider -rA -q"
run tests_post 90 $T tests/gpu/test_enhance_cuda.py tests/gpu/test_core_cuda.py -k "flow_fill or warm or graph_set" \
  2>&1 | tee $OUT/tests_gpu_post_s20.log | grep -E "passed|failed|error|PASSED|FAILED" | tail -8
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan_taehv_fp8 580 $LB --key-stride 4 --engines ${ENGINES:-wan2.1-1.3b-taehv-fp8} --json $OUT/lb_s20.json 2>&1 \
  | tee $OUT/lb_wan_s20_b.log | grep -vE "^\s+repeat|Warning|warn" | tail -14
run parts 220 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s20.py --program .gpu_home/bench_program.npz \
  --no-profile --json $OUT/parts_s20_b.json 2>&1 | tee $OUT/parts_s20_b.log | grep -E "^(keys|after|warm)" | tail -8
echo "call B done in $((SECONDS - START)) s"
