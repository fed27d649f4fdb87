# Session 18, call C (issue 16): the Wan 14B twin's row appended to results/gpu/lb_s18.json, at key stride 4, now that
# a run opens only the form its flags run and a row builds each form once (bb3522f; session 15 ran out of memory with
# two copies). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
cp results/gpu/lb_s18.json $OUT/lb_s18.json
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_14b 570 $LB --key-stride 4 --engines wan2.1-14b --json $OUT/lb_s18.json --append 2>&1 \
  | tee $OUT/lb_14b_s18.log | grep -vE "^\s+repeat|Warning|warn" | tail -8
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
echo "call C done in $((SECONDS - START)) s"
