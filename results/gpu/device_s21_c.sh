# Next session, call C (issue 19): the GPU fine-tune round fixed before its data existed (resources/models/
# audio2motion/metrics.json, experiments_session10.rule_finetune_round): each member of the shipped ensemble
# (`train --members-of`, in data/members_s10) fine-tuned on data/a2m_s10 (the recipe with realistic channels, made on
# the CPU machine by the three `data` commands of finetune_round_cpu) for 3.3 min, lr 3e-4, batch 128, EMA 0.999,
# --keep-best --select kokoro, seeds 101 and 102, one after the other. The ensembles and their scores on the
# validation split are made on the CPU machine afterwards, by the rule. Carry: data/a2m_s10 data/members_s10
set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
START=$SECONDS
nvidia-smi -L
for i in 0 1; do
  echo "=== member $i"
  timeout -k 5 280 python3 -m studio.neural.training.train --data data/a2m_s10 --init data/members_s10/member$i.pt \
    --minutes 3.3 --lr 3e-4 --batch 128 --device cuda --keep-best --select kokoro --ema 0.999 --seed $((101 + i)) \
    --out $OUT/gpu_ft$i 2>&1 | tee $OUT/gpu_ft$i.log | grep -vE "^\s*step" | tail -6
done
echo "call C done in $((SECONDS - START)) s"
