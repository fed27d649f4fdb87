# Session 12: sourced by device_s12_{a,b,c}.sh on the device machine (repo root). Unpacks the carried packages into
# /tmp/site (python3 there is 3.12 with torch 2.11; PyAV, pocketsphinx 5.0.4, silero-vad, websockets, diffusers travel
# as .tar.xz made on the CPU machine from their wheels) and sets the environment.
set -o pipefail
export PYTHONUNBUFFERED=1 NEWSSTUDIO_HOME=$PWD/.gpu_home NEWSSTUDIO_ENGINES=/tmp/engines HF_HUB_OFFLINE=1 \
       TRANSFORMERS_OFFLINE=1 PYTHONPATH=/tmp/site
mkdir -p /tmp/site /tmp/engines
for t in "$@"; do
  [ -f "$t" ] && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp', filter='data')" "$t" \
    || echo "missing bundle $t"
done
START=$SECONDS
left() { echo $(( BUDGET - (SECONDS - START) )); }
# run NAME MAXSECONDS CMD...: runs CMD under timeout min(MAXSECONDS, time left - 5), logs the time taken
run() {
  local name=$1 max=$2; shift 2
  local l=$(( $(left) - 5 )); [ $l -lt $max ] && max=$l
  if [ $max -lt 15 ]; then echo "=== SKIP $name: only $(left) s left"; return 0; fi
  echo "=== $name (limit $max s, $(left) s left): $*"
  local t0=$SECONDS
  timeout -k 5 $max "$@"; local rc=$?
  echo "=== $name rc=$rc in $((SECONDS - t0)) s"
}
# RIFE's weights where they travel as fp16 (make_device_bundles.sh, since session 20): back into the cache
[ -f .whl/dif/rife4_fp16.pt ] && mkdir -p .gpu_home/cache/enhance && \
  python3 results/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
