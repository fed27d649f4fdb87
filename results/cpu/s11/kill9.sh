#!/bin/bash
cd /work/main
eval "$(installers/pulse-null-sink.sh 2>/dev/null)"
A=/work/main/.venv/lib/python3.11/site-packages/moonshine_voice/assets
D=/tmp/r/k9; rm -rf $D; mkdir -p $D
(sleep 3; paplay --device=studio $A/beckett.wav) &
.venv/bin/python main.py live --seconds 60 --input pulse --out $D/live.mp4 > $D/live1.log 2>&1 &
P=$!; sleep 12; kill -9 $P; wait $P 2>/dev/null; echo "live killed: exit $?"
ls -la $D
echo "--- next start"
timeout 60 .venv/bin/python main.py live --seconds 3 --input pulse --out $D/live2.mp4 > $D/live2.log 2>&1; echo "exit $?"
cat $D/live2.log | grep -v "^W:" | head; ls -la $D
for f in $D/*.mp4; do echo $f; ffprobe -v error -show_entries format=duration -of csv=p=0 "$f"; done
echo "=== render"
.venv/bin/python main.py render --audio /tmp/r/long31.wav --out $D/render.mp4 > $D/render1.log 2>&1 &
P=$!; sleep 25; kill -9 $P; wait $P 2>/dev/null; echo "render killed"
ls -la $D | grep render
timeout 120 .venv/bin/python main.py render --text "Short test." --out $D/render2.mp4 > $D/render2.log 2>&1; echo "exit $?"
grep -v "^render: \|^anchor\|^speech" $D/render2.log | head -5; ls -la $D | grep render
for f in $D/render*.mp4; do echo $f; ffprobe -v error -show_entries format=duration -of csv=p=0 "$f"; done
