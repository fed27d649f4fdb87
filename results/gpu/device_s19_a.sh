# Session 19, call A (issue 16's 5 ms): the Wan 1.3B window's parts with the engine's new options (parts_s19.py:
# DiT bf16 vs fp8 rowwise linears, both compiled; Wan VAE vs TAEHV decode), then SDPA's backends at the DiT's
# attention shape (attn_s19.py). Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-585}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
nvidia-smi -L
run parts 420 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s19.py --json $OUT/parts_s19.json 2>&1 \
  | tee $OUT/parts_s19.log | grep -v "^  File" | tail -25
run attn 150 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/attn_s19.py --json $OUT/attn_s19.json 2>&1 \
  | tee $OUT/attn_s19.log | grep -v "^  File" | tail -12
echo "call A done in $((SECONDS - START)) s"
