#!/usr/bin/env bash
# Record case 1 on ONE GPU (world size 1, NCCL): the posted settings and the
# fixed ones, each with and without bf16 autocast, plus the cost of a
# per-step loss.item() and of a bf16 all-reduce. Writes data/runs/case1-h200-*.json
# (replacing earlier ones) and, when $OUT is set, copies them there too.
# Run from the repository root:  bash benchmarks/record_case1_gpu.sh
# About 2 to 4 minutes on an H200 (dataset ~5 s, each run ~20-40 s).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DATA=${DATA:-/tmp/vqa_rad_${IMAGE_SIZE:-224}}
STEPS=${STEPS:-30}
BATCH=${BATCH:-32}
PREFIX=${PREFIX:-case1-h200}
# For a dry run on a CPU only (never under the h200 names you keep):
# BACKEND=gloo MODEL=tiny IMAGE_SIZE=64 STEPS=6 BATCH=8 PREFIX=case1-cpu-dry
BACKEND=${BACKEND:-nccl}
MODEL=${MODEL:-m3ae}
IMAGE_SIZE=${IMAGE_SIZE:-224}

if [ "$BACKEND" = nccl ]; then
    "$PY" -c "import torch, numpy, PIL; assert torch.cuda.is_available(), 'no CUDA device visible'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
fi
# VQA-RAD's size (315 images, 3,515 questions) at M3AE's 224 px.
"$PY" -m ddp_lessons make-vqa-data --root "$DATA" --image-size "$IMAGE_SIZE"

common=(--nproc 1 --backend "$BACKEND" --model "$MODEL" --batch-size "$BATCH" --epochs 1
        --steps-limit "$STEPS" --data-root "$DATA" --set evaluation=none --timeout 300 --overwrite)
record() {
    local name=$1; shift
    echo "== $PREFIX-$name: $*"
    local t0=$SECONDS
    "$PY" -m ddp_lessons case1 "${common[@]}" --record "$PREFIX-$name" "$@"
    echo "   ($((SECONDS - t0)) s)"
}
record broken            --preset broken
record broken-bf16       --preset broken --amp
record fixed             --preset fixed
record fixed-bf16        --preset fixed  --amp
record fixed-bf16-item   --preset fixed  --amp --set loss_accum=item
record fixed-bf16-comm16 --preset fixed  --amp --set comm_dtype=bf16

if [ -n "${OUT:-}" ]; then
    cp data/runs/"$PREFIX"-*.json "$OUT"/
fi
echo "done: $(ls data/runs/"$PREFIX"-*.json | tr '\n' ' ')"
