# Session 18, call B (issues 15 and 16): the GPU enhance tests (the post stage's SPAN form against fp32), SPAN's forms
# timed (parts_s16.py spanq), then the leaderboard's other rows appended to call A's file (results/gpu/lb_s18.json):
# the built-in engine, Wav2Lip, MuseTalk, LivePortrait, then Ditto. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
PT="python3 -m pytest -v -rA -p no:cacheprovider -o timeout_method=signal"
run tests_enhance 60 $PT --timeout 50 tests/gpu/test_enhance_cuda.py > $OUT/tests_gpu_enhance_s18.log 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed|assert" $OUT/tests_gpu_enhance_s18.log | tail -8
run spanq 40 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s16.py --parts spanq \
  --json $OUT/parts_spanq_s18.json 2>&1 | tee $OUT/parts_spanq_s18.log | grep -v "^  File"
cp results/gpu/lb_s18.json $OUT/lb_s18.json
LB="python3 main.py bench --leaderboard --device cuda --fps 60 --seconds 1 --program .gpu_home/bench_program.npz"
run lb_four 260 $LB --engines builtin,wav2lip,musetalk-1.5,liveportrait --json $OUT/lb_s18.json --append 2>&1 \
  | tee $OUT/lb_four_s18.log | grep -vE "^\s+repeat|Warning|warn" | tail -8
run lb_ditto 400 $LB --engines ditto --json $OUT/lb_s18.json --append 2>&1 \
  | tee $OUT/lb_ditto_s18.log | grep -vE "^\s+repeat|Warning|warn" | tail -5
echo "call B done in $((SECONDS - START)) s"
