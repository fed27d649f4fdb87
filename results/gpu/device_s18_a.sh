# Session 18, call A (issue 16): the Wan 1.3B rows of the leaderboard at key stride 4, each form of the engine built
# (and compiled) once per row (bb3522f). Session 17's call B measured the same and its files were lost before they
# were copied back. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan 570 $LB --key-stride 4 --engines wan2.1-1.3b --json $OUT/lb_s18.json 2>&1 \
  | tee $OUT/lb_wan_k4_s18.log | grep -vE "^\s+repeat|Warning|warn" | tail -12
echo "call A done in $((SECONDS - START)) s"
