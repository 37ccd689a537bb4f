#!/usr/bin/env bash
# Record the foundation's GPU runs (one GPU): the NCCL code path of the timer,
# its overhead, and the launcher's refusals as met on a GPU machine.
# Run from the repository root: bash benchmarks/record_foundation_gpu.sh
set -euo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py -m ddp_lessons info
$py -m ddp_lessons error-demos --record errors-h200 --overwrite
$py -m ddp_lessons train-mlp --nproc 1 --backend nccl --steps 40 --width 4096 --depth 4 --batch 256 \
    --record train-mlp-h200x1 --overwrite
# A short step (about 2.5 ms, where a fixed per-step cost shows most) and a longer one.
$py benchmarks/timing_overhead.py --nproc 1 --backend nccl --steps 200 --width 4096 --batch 256 --rounds 5 \
    --record overhead-h200x1-small
$py benchmarks/timing_overhead.py --nproc 1 --backend nccl --steps 50 --width 4096 --depth 4 --batch 4096 --rounds 5 \
    --record overhead-h200x1-large
