# Session 12, call C (time left): the leaderboard engines call B did not finish, the Wan 14B-shaped row, then compile
# engines (TorchInductor, CUDA graphs) of the built-in engine and two heavy engines through `main.py compile`.
BUDGET=${BUDGET:-400}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
mkdir -p /tmp/s12 && cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
missing=$(python3 - <<'PY'
import json
five = ["builtin", "wav2lip", "musetalk-1.5", "liveportrait", "ditto"]
try:
    rows = json.load(open("/tmp/s12/leaderboard_s12.json"))["rows"]
    done = {r["engine"] for r in rows if r.get("status") == "measured"}
except (OSError, ValueError, KeyError):
    done = set()
print(",".join(e for e in five if e not in done))
PY
)
echo "leaderboard engines still to measure: ${missing:-none}"
[ -n "$missing" ] && run lb_rest 240 $LB --engines $missing --json $OUT/leaderboard_rest_s12.json 2>&1 \
  | tee $OUT/leaderboard_rest_s12.log | grep -vE "^\s+repeat" | tail -8
run lb_14b 200 $LB --engines wan2.1-14b --json $OUT/leaderboard_14b_s12.json 2>&1 | tee $OUT/leaderboard_14b_s12.log \
  | grep -vE "^\s+repeat" | tail -6
{
  for spec in "builtin inductor fp32" "builtin cuda_graphs fp32" "wav2lip inductor bf16" "wav2lip cuda_graphs bf16" \
              "liveportrait inductor bf16" "liveportrait cuda_graphs bf16" "musetalk-1.5 cuda_graphs bf16" \
              "musetalk-1.5 inductor bf16"; do
    set -- $spec
    run "compile_$1_$2" 150 python3 main.py compile --model $1 --backend $2 --precision $3 --batch 8 --device cuda \
      --repeats 20 --json /tmp/s12/compile_$1_$2.json
  done
  ls -la /tmp/engines
} 2>&1 | tee $OUT/compile_s12.log | grep -E "^===|speed|PSNR|error" | tail -30
python3 - <<'PY'
import glob, json, os
out = {}
for f in sorted(glob.glob("/tmp/s12/compile_*.json")):
    out[os.path.basename(f)[len("compile_"):-5]] = json.load(open(f))
json.dump(out, open(os.environ["OUT"] + "/compile_s12.json", "w"), indent=1)
print("compile reports:", list(out))
PY
echo "call C done in $((SECONDS - START)) s"
