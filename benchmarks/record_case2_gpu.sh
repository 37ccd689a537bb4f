#!/usr/bin/env bash
# Case 2 on ONE GPU: the figures notebooks 04 to 06 show beside their live CPU runs.
# Run from the repository root:   bash benchmarks/record_case2_gpu.sh
# Writes data/runs/case2-h200-{posted,nvml,fixed,sweep}.json (replacing them).
# About 1 to 2 minutes, most of it Lightning's import, four times.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
run() { echo "+ $*"; "$PY" -m ddp_lessons case2 "$@" --overwrite; }

"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'"
# The posted test at the posted batch (256), NVML block in every step, on one GPU.
run --mode posted --accelerator gpu --epochs 5 --record case2-h200-posted
# The post's NVML block alone: init + utilisation query of every GPU + shutdown, per call.
run --mode nvml --repeats 100 --record case2-h200-nvml
# The fixed test in Lightning and in plain PyTorch, same model, data, batch: Lightning's per-step work.
run --mode fixed --accelerator gpu --epochs 5 --record case2-h200-fixed
# Plain-loop compute per step over widths (depth 3, batch 256): the predictor's GPU compute.
run --mode sweep --accelerator gpu --widths 64,256,1024,2048,4096,8192 --steps 60 --record case2-h200-sweep
ls -l data/runs/case2-h200-*.json
