# Session 12, call B: RIFE's weights travel here (no room beside PyAV in call A): test_enhance_cuda, then the
# leaderboard in bf16 (precision auto), the Wan 1.3B rows (512 and native 1024) first, then the five lighter engines.
BUDGET=${BUDGET:-575}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
mkdir -p /tmp/s12 && cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
{ nvidia-smi -L; uptime; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } > $OUT/env_b_s12.log 2>&1
run tests_enhance 90 python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal --timeout 60 \
  tests/gpu/test_enhance_cuda.py 2>&1 | tee $OUT/tests_gpu_c_s12.log | grep -E "PASSED|FAILED|ERROR|passed|failed"
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan 330 $LB --engines wan2.1-1.3b --json $OUT/leaderboard_wan_s12.json 2>&1 | tee $OUT/leaderboard_wan_s12.log \
  | grep -vE "^\s+repeat" | tail -8
run lb_five 400 $LB --engines builtin,wav2lip,musetalk-1.5,liveportrait,ditto --json $OUT/leaderboard_s12.json 2>&1 \
  | tee $OUT/leaderboard_s12.log | grep -vE "^\s+repeat" | tail -14
cp $OUT/leaderboard*_s12.json /tmp/s12/ 2>/dev/null
echo "call B done in $((SECONDS - START)) s"
