# Next session, call B (issue 16's last item): the leaderboard row of the Wan 1.3B engine with TAEHV and fp8 DiT
# linears, with its all-but-one runs (each flag's share on the sub-5 ms row). Alone in its call: the row needs the
# 288-px and the 512-px forms' compiles. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-590}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
nvidia-smi -L
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_wan_taehv_fp8_shares 585 $LB --key-stride 4 --engines wan2.1-1.3b-taehv-fp8 --json $OUT/lb_s21.json 2>&1 \
  | tee $OUT/lb_wan_s21_b.log | grep -vE "^\s+repeat|Warning|warn" | tail -14
echo "call B done in $((SECONDS - START)) s"
