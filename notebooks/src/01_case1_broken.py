# %% [markdown]
# # 01 · Case 1, as posted: does the script split the work, and where does its time go?
#
# **What you will learn**
# - how to rebuild a posted DDP script as one training loop whose every questionable line is a named option;
# - how to check "both GPUs run the same job" by counting what each rank really processed;
# - where one step's time goes on every rank, and what rank 1 does while rank 0 evaluates.
#
# **Builds on:** `00_first_launch.ipynb` (`launch`, `StepTimer`, reading a step breakdown).
# **Previous:** `00_first_launch.ipynb`. **Next:** `02_case1_answer.ipynb`.
#
# **The question.** Two RTX 3090s, plain PyTorch DDP, fine-tuning an M3AE vision-language model on VQA-RAD,
# launched with `python -m torch.distributed.launch --nproc_per_node=2`. One epoch: 105 s on one GPU,
# 133 s on two. "It looks as if both GPUs run the same job instead of splitting it."
#
# **Stand-ins, said once.** Neither M3AE's checkpoint nor VQA-RAD can be fetched here. The dataset is a
# generated one with VQA-RAD's shape (JPEG images to decode and transform, question token ids, multi-hot
# answers, OPEN/CLOSED types; VQA-RAD itself has 315 images and 3,515 questions); its pictures are drawn
# shapes, not radiology, so accuracies mean little. The model has M3AE's structure (ViT image encoder,
# RoBERTa-style text encoder, co-attention fusion, VQA head, and the pre-training heads VQA never uses) at
# a tiny size for these CPUs and at about M3AE's size for the GPU recordings; no pre-trained weights.
# What they keep is what decides speed: work per sample, gradient bytes, unused parameters.
# Figures from GPUs are **recorded runs** on named hardware, loaded from `data/runs/` (made again live
# where this machine has a GPU); everything else is **measured live** on this machine when the notebook runs.

# %%
import matplotlib.pyplot as plt
import ipywidgets as widgets
from IPython.display import display
from ddp_lessons import diagnose, launch, place
from ddp_lessons.tool import plots, records
from ddp_lessons.tool.ddp import gradient_bytes
from ddp_lessons.tool.timing import timer_result
from ddp_lessons.course import replay
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1 import per_rank, verdicts
from ddp_lessons.cases.case1.exercises import check
from ddp_lessons.cases.case1.model import M3AEConfig, M3AETransformerSS, count_parameters
import inspect
import torch
from ddp_lessons.cases.case1.plan import _model, train_sampler
from ddp_lessons.cases.case1.train import _step, run_epoch

# %% [markdown]
# The case has two ranks. Where they run on this machine (NCCL with one GPU each when two are visible,
# else gloo on the CPU), and where the recorded one-GPU runs at the end are made again live (on a GPU, if any):

# %%
where = place(2)
solo = place(1)
print(where.describe())

# %% [markdown]
# ## The stand-in dataset and model
# `case1.tiny_dataset()` writes (once) the CPU-sized dataset under `data/vqa_tiny`: 64 images at 64 px, 400 questions.

# %%
data = case1.tiny_dataset()
print({k: data[k] for k in ("n_images", "image_size", "n_train", "n_test", "num_answers")})

# %% [markdown]
# The model at both sizes. The M3AE-size one is built on the `meta` device: shapes only, no memory.
# "unused_by_vqa" is the MLM, ITM and MIM heads, which a VQA step never touches.

# %%
with torch.device("meta"):
    big = M3AETransformerSS(M3AEConfig.m3ae())
tiny = M3AETransformerSS(M3AEConfig.tiny())
for name, m in (("tiny", tiny), ("m3ae", big)):
    c = count_parameters(m)
    print(f"{name}: {c['total']:,} parameters, {c['unused_by_vqa']:,} unused by VQA, "
          f"{gradient_bytes(m):,} bytes of fp32 gradients per all-reduce")

# %% [markdown]
# ## The posted script, one loop, every fix an option
# `case1.Options()` reproduces the post: the sampler built as posted, `find_unused_parameters=True`,
# the same per-process batch, `num_workers=4`, `total_loss += loss`, the schedule sized from
# `len(trainset.entries)`, evaluation on rank 0 only. The answer's version and the fixed one differ by fields:

# %%
for name, value in case1.Options.broken().diff(case1.Options.answer()).items():
    print(f"{name:24s} posted {value[0]!r:10}  answer {value[1]!r}")

# %% [markdown]
# The step every setup runs, the post's lines in order: the batch copied to the device, the forward pass,
# the loss added to the epoch's running sum, `zero_grad`, `loss.backward()` (where DDP all-reduces the
# gradients, bucket by bucket, through hooks it registered at wrapping), the optimizer and the schedule:

# %%
print(inspect.getsource(_step))

# %% [markdown]
# The epoch around it. `time.time()` before and after the loop is the post's clock; the evaluation runs
# after it, inside `timer.outside("evaluation")`, where the plan gives rank 0 the whole test set (as
# posted) or every rank its shard (the fix):

# %%
print(inspect.getsource(run_epoch))

# %% [markdown]
# Where the plan builds the sampler and wraps the model. As posted, the sampler reads `LOCAL_RANK` and
# `dist.get_world_size()` (which raises if `init_process_group` never ran); the model goes into
# `DistributedDataParallel` with the options' `find_unused_parameters`, `static_graph`, bucket size and
# `gradient_as_bucket_view` (`tool.ddp.wrap_ddp` is one line: `DDP(model, device_ids=..., **kwargs)`):

# %%
print(inspect.getsource(train_sampler))
print(inspect.getsource(_model))

# %% [markdown]
# ## Run without a launcher
# Run as `python DPT_MLM_ddp2.py` (no launcher), `LOCAL_RANK` is unset, so `device` is never assigned and
# the process group never initialised. `case1.run_without_launcher()` runs the post's first lines in a
# fresh Python and reports the exceptions they really raise: first as posted, then with `device` defined
# (the answer's `else:` branch) but the sampler still built as posted.

# %%
for attempt in case1.run_without_launcher():
    print(f"{attempt['step']}: {attempt['error']}: {attempt['message']}")

# %% [markdown]
# So without a launcher the script does not run at all; the post's 133 s came from a launcher run.
# ## Under a launcher: does the sampler split the data?
# The accepted answer says the sampler is created before initialisation and so does not split.
# In the posted code, `init_process_group` runs inside `if args.local_rank != -1:`, before the sampler,
# and a launcher sets `LOCAL_RANK`. Measure: one worker for one epoch, then two workers for two epochs,
# of the posted setup. Each worker gets one core (`threads=1`), as each process of the post got one GPU.
# The one-worker run uses the two-worker run's backend (`where.backend`), so both run on the same kind
# of device: on a one-GPU machine both on the CPU, not one on the GPU against two on the CPU.

# %%
posted = case1.Options.broken()
one = launch(case1.train, (posted, None, 1), world_size=1, backend=where.backend, threads=1)
two = launch(case1.train, (posted, None, 2), world_size=where.world_size, backend=where.backend, threads=1)

# %%
for label, res in (("1 worker ", one), ("2 workers", two)):
    for row in per_rank(res):
        print(f"{label} rank {row['rank']}: {row['samples'] // len(res[0]['epochs'])} samples "
              f"and {row['steps_per_epoch']} steps per epoch, batch {row['batch_size']}")
verdicts.split_disjoint([r["epochs"][0]["qids"] for r in two], data["n_train"]).show();

# %% [markdown]
# The same code under `torchrun`, the launcher the post's `torch.distributed.launch` became: the worker is
# unchanged, torchrun starts the two processes and sets `RANK`, `LOCAL_RANK` and `WORLD_SIZE`, and the
# ranks choose their backend by the rule of `place` (`python -m ddp_lessons case1` is the command-line
# entry point; 4 steps, no evaluation, to keep it short):

# %%
import re
import subprocess
import sys
cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(where.world_size),
       "-m", "ddp_lessons", "case1", "--preset", "broken", "--steps-limit", "4",
       "--set", "evaluation=none", "--set", "num_workers=0"]
out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
for line in out.splitlines():
    if m := re.match(r"(rank \d+: \d+ samples in \d+ steps)", line):
        print("torchrun", m.group(1))

# %% [markdown]
# Counted from the question ids: each of the two ranks sees a disjoint half, 174 of the 348 questions, in
# half the steps, under `torch.distributed.launch`'s successor as under `launch`. The posted
# `DistributedSampler(num_replicas=word_size, rank=args.local_rank)` splits the data: the launcher ran
# `init_process_group` before it, inside `if args.local_rank != -1:`.
#
# ## Two workers: is the epoch twice as fast?
# With the per-rank batch kept, each of 2 workers takes half the steps, so the epoch halves only if a step
# on each of them takes no longer than on 1 worker. One run of each is not a comparison:
# `case1.scaling.rounds` runs the posted setup for 8 steps on 1 worker and on 2, alternating, 5 rounds, and
# keeps each run's median step after the warm-up (on 2 workers, the slower rank's, since the epoch waits for it):

# %%
scaling_rounds = case1.scaling.rounds(posted, where.backend)
verdicts.two_workers_not_twice_as_fast(scaling_rounds).show();

# %% [markdown]
# The epoch times as the post's clock takes them, one run each (they vary from run to run and decide
# nothing; the rounds above do):

# %%
# NBVAL_IGNORE_OUTPUT
t1 = one[0]["epochs"][0]["time_posted"]
t2 = [r["epochs"][0]["time_posted"] for r in two]  # epoch 0: before any evaluation
print(f"epoch time, as the post measures it: 1 worker {t1:.2f} s; 2 workers {t2[0]:.2f} s (rank 0), {t2[1]:.2f} s (rank 1)")
fig, ax = plt.subplots(figsize=(5, 2.6))
ax.bar(["1 worker", "2 workers\nrank 0", "2 workers\nrank 1"], [t1, *t2], color=["#4c72b0", "#c44e52", "#dd8452"])
ax.set_ylabel("epoch 0 (s)")
ax.set_title("posted setup, measured here")
fig.tight_layout()

# %% [markdown]
# Two CPU cores shared by two ranks, each with 4 loader processes, do not make a two-GPU machine: the
# point here is not the ratio but *where the time goes*. Every step of every rank, from `StepTimer`:

# %%
# NBVAL_IGNORE_OUTPUT
plots.step_breakdown(two, title="posted setup, 2 workers (measured here)", skip=0)

# %% [markdown]
# What the all-reduce is handed every step, in the buckets DDP made, against the model's gradient bytes
# (the unused heads included):

# %%
for row in per_rank(two):
    print(f"rank {row['rank']}: all-reduce calls per step {row['allreduce_calls']}, "
          f"bytes per step {row['allreduce_bytes']}, gradient bytes of the model {row['grad_bytes']}, "
          f"equal: {row['allreduce_bytes'] == [row['grad_bytes']]}")

# %% [markdown]
# Every step hands DDP's all-reduce the whole gradient, the unused heads' zeros included: with
# `find_unused_parameters=True` DDP marks an unused parameter ready with a zero gradient and still
# reduces its bucket. That is a fact of the code, the same on any machine (`tests/cases/case1/test_case1_train.py` checks
# it); only its cost depends on the link.

# %% [markdown]
# ## What rank 1 does while rank 0 evaluates
# In the post only rank 0 evaluates, after its epoch; rank 1 goes straight on. Its next step runs until its
# first all-reduce, and an all-reduce completes only when every rank has handed in its gradients: the
# timer's all-reduce interval (from the moment DDP hands the bucket over to its completion) therefore
# includes waiting for a slower peer. Per rank, from the two-epoch run: the evaluation time of each
# epoch; the all-reduce of the first step after the epoch boundary against that rank's usual one; and,
# separately, the loader restart (the first batch's data wait; `num_workers=4` without persistent
# workers starts its 4 processes again every epoch) against the usual data wait.

# %%
# NBVAL_IGNORE_OUTPUT
edge = case1.readout.epoch_boundary(two)
for r, res in zip(edge, two, strict=True):
    print(f"rank {r['rank']}: evaluation {[round(e['eval_time'], 2) for e in res['epochs']]} s per epoch; "
          f"first all-reduce of epoch 1 {r['first_allreduce']:.3f} s (usual median "
          f"{sorted(r['usual_allreduce'])[len(r['usual_allreduce']) // 2]:.3f} s); "
          f"loader restart {r['first_data']:.3f} s (usual data wait {r['usual_data']:.3f} s)")

# %%
print("who evaluated:", [r["rank"] for r in two if r["epochs"][0]["eval"] is not None])
verdicts.eval_wait(edge).show();

# %% [markdown]
# Rank 0 waits for nobody: its own first all-reduce of epoch 1 is an ordinary one, since rank 1 is already
# there. Rank 1 entered epoch 1 while rank 0 evaluated; its first all-reduce can only complete once rank 0
# has finished evaluating, run its own first forward and backward, and handed in its gradients. The loader
# restart (`num_workers=4` without persistent workers starts 4 processes again every epoch) is on both
# ranks; the check takes the difference of the two restarts out of rank 1's excess. Sharing the evaluation
# over the ranks is 03's fix. The post's clock (`time.time()` around the loop, evaluation left out) hides
# the evaluation on rank 0 and charges whatever rank 1 waited for it to rank 1's next epoch.
#
# ## What `diagnose` reads from the same run
# `ddp_lessons.diagnose` reads the same per-rank results (each rank's `timer`) and lists what cost the run
# its time, by cause, largest first, with what to change. Its figures and its order vary from run to run
# (not compared here); the check after it asks whether it finds what this lesson measured: rank 0's
# evaluation as work outside the steps on that rank alone, and the all-reduce of every gradient (unused
# heads included) exposed after the backward pass:

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose(two)
found

# %%
verdicts.diagnosis_agrees(found).show();

# %% [markdown]
# How `diagnose` books the evaluation: under "work outside the steps: evaluation" it lists rank 0's
# evaluation seconds and, beside them, "the others' waits for it": the seconds rank 1 spent blocked while
# rank 0 evaluated. Those are charged to the evaluation that caused them, each second once, and not to
# "ranks waiting for a slower rank". That entry, where listed, holds only the other waits: each step's wait
# for the last rank to finish its backward pass, summed over the run. Which rank it calls the slowest comes
# from those sums over every step of this run, not from one step; on two ranks sharing two cores it can be
# either from one run to the next. Start-up (from process start to the first step) counts in each rank's
# wall time and does not grow with the run, so its share falls as a run gets longer. Explore every rank and run:

# %%
# NBVAL_IGNORE_OUTPUT
runs = {"1 worker, 1 epoch": one, "2 workers, 2 epochs": two}

def show(run="2 workers, 2 epochs", rank=0):
    row = per_rank(runs[run])[min(rank, len(runs[run]) - 1)]
    return {k: (round(v * 1e3, 1) if isinstance(v, float) else v) for k, v in row.items()
            if k in ("rank", "samples", "steps", "step_time", "data", "forward", "backward", "exposed", "optimizer")}

widgets.interact(show, run=list(runs), rank=widgets.IntSlider(0, 0, 1));

# %%
{k: v for k, v in show("2 workers, 2 epochs", 1).items() if k in ("rank", "samples", "steps")}

# %% [markdown]
# ## The same script on a GPU (recorded, or live on this machine's GPU)
# The GPU figures below are a recorded run of the same code (`python -m ddp_lessons case1 --nproc 1
# --model m3ae --batch-size 32 --steps-limit 30 ...`, the record's config): the M3AE-size model at 224 px, batch 32, one GPU (world size 1, NCCL), 30 steps. Where this machine has a
# GPU, `replay.stored_or_live` makes the same run again on it (`solo`). The line above each names
# the hardware it ran on, and whether it was recorded or measured live. At world size 1 the bytes
# are what DDP hands to the collective each step; with one rank the collective moves nothing between
# GPUs: they say what two GPUs would have to exchange, not what was sent. These are single runs:
# 02 and 03 compare the GPU setups from repeated, interleaved rounds.

# %%
# NBVAL_IGNORE_OUTPUT
gpu = {}
for name in ("case1-h200-broken", "case1-h200-broken-bf16"):
    try:
        rec = replay.stored_or_live(name, case1.rerun, solo)
    except records.RecordError as exc:
        print(f"{name}: not recorded yet ({exc})")
        continue
    gpu[name] = rec
    row = rec["results"]["per_rank"][0]
    print(f"{name}: {records.describe_machine(rec)}")
    print(f"  one run: step {row['step_time'] * 1e3:.1f} ms (data wait {row['data'] * 1e3:.1f} ms); "
          f"{row['allreduce_bytes'][0] / 1e9:.2f} GB handed to the all-reduce per step, "
          f"world size {rec['results']['ranks'][0]['world_size']}")

# %%
# NBVAL_IGNORE_OUTPUT
if gpu:
    display(plots.step_breakdown([timer_result(rec["results"]["ranks"][0]) for rec in gpu.values()], skip=2,
                                 labels=[f"{name}, rank 0" for name in gpu],
                                 title="one H200" + (" (live)" if solo.backend == "nccl" else " (recorded)")))

# %% [markdown]
# ## Summary
# - Under a launcher the posted sampler **does** split the data: each rank processes a disjoint half
#   (counted above). Without a launcher the script fails before training (`device` unbound).
# - With the per-rank batch kept, the split halves the epoch only if a step on 2 workers is as fast as on
#   1; the interleaved rounds decide that for this machine, in their section's verdict.
# - Each rank all-reduces the whole gradient every step, unused heads included (counted, the same on any machine).
# - Only rank 0 evaluates; rank 1 runs on into the next epoch, where its first all-reduce cannot complete
#   before rank 0 has finished evaluating. `diagnose` charges that wait to the evaluation, not to a slow rank.
#
# Next, `02_case1_answer.ipynb` tests the accepted answer's fixes one at a time.
#
# ## Exercises
# 1. With 2 workers, how many training samples does each rank process per epoch on this notebook's dataset?
# 2. How many bytes does one step all-reduce for the M3AE-size model *with* its pre-training heads (fp32)?

# %%
check("01.1", ...);

# %%
check("01.2", ...);
