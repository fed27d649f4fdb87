# Session 15, call A (issue 16): the leaderboard in bf16 (precision auto on CUDA), the five lighter engines, then the
# Wan 1.3B rows (512 -> 288 pyramidal, and native 1024). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-560}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
{ nvidia-smi -L; uptime; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; } \
  > $OUT/env_s15_a.log 2>&1
cat $OUT/env_s15_a.log
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_five 260 $LB --engines builtin,wav2lip,musetalk-1.5,liveportrait,ditto --json $OUT/leaderboard_five_s15.json 2>&1 \
  | tee $OUT/leaderboard_five_s15.log | grep -vE "^\s+repeat" | tail -14
run lb_wan 330 $LB --engines wan2.1-1.3b --json $OUT/leaderboard_wan_s15.json 2>&1 | tee $OUT/leaderboard_wan_s15.log \
  | grep -vE "^\s+repeat" | tail -8
nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks.sm --format=csv
echo "call A done in $((SECONDS - START)) s"
