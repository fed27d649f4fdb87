# Session 18, call D (issue 16's 5 ms): the Wan VAE decode's forms at 288 (parts_s18.py), then the window split into
# DiT and VAE with the DiT eager and compiled (parts_s16.py --parts wan; session 16's figures were lost).
# Carry: .gpu_home .whl/dif
BUDGET=${BUDGET:-560}
source results/gpu/device_s12_common.sh .gpu_home/site_common.tar.xz .whl/dif/site_dif.tar.xz
nvidia-smi -L
run vae 220 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s18.py --json $OUT/parts_vae_s18.json 2>&1 \
  | tee $OUT/parts_vae_s18.log | grep -v "^  File" | tail -20
run wan 320 env PYTHONPATH=$PWD:/tmp/site python3 results/gpu/parts_s16.py --parts wan --repeats 2 \
  --json $OUT/parts_wan_s18.json 2>&1 | tee $OUT/parts_wan_s18.log | grep -v "^  File" | tail -12
echo "call D done in $((SECONDS - START)) s"
