#!/usr/bin/env bash
# Case 2 on ONE GPU: the two single-shot figures notebooks 05 and 06 show, which
# compare nothing with anything. Every pair of setups (posted/fixed, Lightning/plain,
# NVML on/off) is recorded by benchmarks/record_gpu_pairs.py, as interleaved repeats.
# Run from the repository root:   bash benchmarks/record_case2_gpu.sh
# Writes data/runs/case2-h200-{nvml,sweep}.json (replacing them). About 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
run() { echo "+ $*"; "$PY" -m ddp_lessons case2 "$@" --overwrite; }

"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'"
# The post's NVML block alone: init + utilisation query of every GPU + shutdown, per call.
run --mode nvml --repeats 100 --record case2-h200-nvml
# Plain-loop compute per step over widths (depth 3, batch 256): the predictor's GPU compute.
run --mode sweep --accelerator gpu --widths 64,256,1024,2048,4096,8192 --steps 60 --record case2-h200-sweep
ls -l data/runs/case2-h200-{nvml,sweep}.json
