#!/usr/bin/env bash
# Session 18: issue 15's CPU items on one commit, one after another on a quiet 2-core machine (run from anywhere;
# writes beside this script). The import contracts and the import-circle test, `render` at the 720p canvas against
# real time with its lip sync, `live` and the studio window from the microphone at 720p25, screenshots on air.
set -u
D=$(cd "$(dirname "$0")" && pwd); cd "$D/../../.."
D=${OUT:-$D}  # where the files go (session 19 runs this script into its own folder)
source .venv/bin/activate
git rev-parse --short HEAD > "$D/commit.txt"
lint-imports > "$D/lint_imports.log" 2>&1; echo "lint-imports rc=$?" >> "$D/lint_imports.log"
python -m pytest -q -p no:cacheprovider tests/unit/test_import_contract.py -v >> "$D/lint_imports.log" 2>&1
python - <<'PY' > "$D/rundown.txt"
import json; d = json.load(open("resources/rundown.json"))
print("\n\n".join(seg["text"] for seg in d["segments"]))
PY
T=$(mktemp -d)
/usr/bin/time -v python main.py render --script "$D/rundown.txt" --canvas 720p --fps 25 --device cpu \
  --out "$T/r720.mp4" --timings "$T/r720.json" > "$D/render_720p.log" 2>&1
python -m studio.bench.lipsync "$T/r720.mp4" --phones "$T/r720.json" > "$D/lipsync_render_720p.log" 2>&1
ffprobe -v error -show_entries stream=codec_name,width,height,duration -of compact "$T/r720.mp4" >> "$D/render_720p.log"
for i in 1 2; do bash results/cpu/s14/live_720p.sh > "$D/live_720p_$i.log" 2>&1; done
python results/cpu/s12/mic_latency_probe.py --seconds 45 > "$D/mic_window_720p.log" 2>&1
python results/cpu/s14/screenshots.py "$D" > "$D/screenshots.log" 2>&1
echo closure done
