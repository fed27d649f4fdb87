# Session 16, call A: the parts of the last milliseconds (results/gpu/parts_s16.py), each part in its own process
# so a hang or a crash costs only that part. Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-560}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
cp .whl/dif/rife4.pt .gpu_home/cache/enhance/rife4.pt
nvidia-smi -L
P="env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s16.py"
for part in post builtin span rife; do
  run $part 110 $P --parts $part --json $OUT/parts_${part}_s16.json 2>&1 | tee $OUT/parts_${part}_s16.log | grep -v "^  File"
done
run wan 260 $P --parts wan --json $OUT/parts_wan_s16.json 2>&1 | tee $OUT/parts_wan_s16.log | grep -v "^  File"
echo "call A done in $((SECONDS - START)) s"
