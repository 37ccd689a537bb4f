#!/usr/bin/env bash
# The doctor on a GPU machine: whether it names a slower rank from its GPU path (2 ranks: NCCL on 2 GPUs,
# else gloo on one), and what it costs a step, paired against the command alone (the workload's own
# clock) at steps of 1 to 5 ms, with its own account of that cost beside. Run from the repository root:
#   DDP_LESSONS_COMMIT=$(git rev-parse HEAD) MACHINE=h100x1 bash benchmarks/record_doctor_gpu.sh
# OUT (a folder) receives the logs and the records as well.
set -uo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
out=${OUT:-/tmp/doctor-gpu}
mkdir -p "$out"
machine=${MACHINE:?name the machine, e.g. MACHINE=h100x1}
nvidia-smi -L
$py -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(), torch.cuda.device_count())'
$py benchmarks/doctor_straggler.py --record "doctor-straggler-$machine" 2>&1 | tee "$out/straggler.log"
$py benchmarks/doctor_parts.py --cuda --out "$out/parts.json"
$py benchmarks/doctor_cost.py --cuda --rounds "${ROUNDS:-40}" --budget-s "${BUDGET_S:-470}" --config 256x8x256 \
    --log "$out/cost-rounds.jsonl" --parts "$out/parts.json" --record "doctor-cost-$machine" 2>&1 | tee "$out/cost.log"
cp data/runs/doctor-straggler-"$machine".json data/runs/doctor-cost-"$machine".json "$out/" 2>/dev/null
