# Session 19, call B (issue 16's 5 ms): the leaderboard row of the Wan 1.3B engine with both of its options (TAEHV's
# decoder, fp8 DiT linears) and cuDNN attention, key stride 4. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan_taehv_fp8 575 $LB --key-stride 4 --engines ${ENGINES:-wan2.1-1.3b-taehv-fp8} --json $OUT/lb_s19.json 2>&1 \
  | tee $OUT/lb_wan_s19_b.log | grep -vE "^\s+repeat|Warning|warn" | tail -14
echo "call B done in $((SECONDS - START)) s"
