# %% [markdown]
# # 01 · Case 1 as posted: does the script split the work, and why 133 s?

# %% [markdown]
# **The question** ("PyTorch DDP双GPU训练耗时超单GPU，求解决方案", a Stack Exchange question by lycutter, in
# Chinese translation): two RTX 3090s, plain PyTorch DDP
# fine-tuning M3AE on VQA-RAD. An epoch took 105 s on one GPU, 133 s on two, "as if repeating the same task"
#
# **The answer.** The script splits the work: under a launcher the posted sampler gives each rank half
# the questions (174 of 348, measured here), so each two-GPU step took 2 x 133 / 105 = 2.5 one-GPU steps.
# Why is not measured: 03's model (not validated on two GPUs) gives about 131 s at per-rank batch 8 over
# an x4-class link without P2P (modelled). The link decides, then one GPU against two at equal batch and
# `OMP_NUM_THREADS` (commands at the end).

# %% [markdown]
# **What you will learn:** to rebuild a posted DDP script as one loop whose questionable lines are named
# options, to count what each rank really processed, and to see where a step's time goes and what rank 1
# does while rank 0 evaluates. **Builds on** `00_first_launch` (`launch`, `StepTimer`). **Next:** `02_case1_answer`.

# %% [markdown]
# **How this was measured.** Neither M3AE's checkpoint nor VQA-RAD can be fetched here. The dataset is
# generated with VQA-RAD's shape (JPEGs to decode, question tokens, multi-hot answers, OPEN/CLOSED types;
# VQA-RAD has 315 images and 3,515 questions). The model has M3AE's structure (ViT image encoder,
# RoBERTa-style text encoder, co-attention fusion, a VQA head, and, assumed, pre-training heads VQA never uses):
# tiny on these two CPU cores, M3AE-size in the GPU records. Live runs use gloo, one core per rank; GPU
# figures are records from `data/runs`, printed with their hardware and provenance.

# %%
import inspect
import re
import statistics
import subprocess
import sys
import torch
from ddp_lessons import Run, diagnose, launch, place
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1.exercises import check

# %% [markdown]
# Where the case's two ranks run here (NCCL with a GPU each where two are visible, else gloo on the CPU),
# and where the one-GPU records are made again live (on a GPU, if any):

# %%
where = place(2)
solo = place(1)
print(where.describe())

# %% [markdown]
# ## The stand-ins
# `case1.tiny_dataset()` writes (once) the CPU-sized dataset under `data/vqa_tiny`.

# %%
data = case1.tiny_dataset()
print({k: data[k] for k in ("n_images", "image_size", "n_train", "n_test", "num_answers")})

# %% [markdown]
# The model at both sizes; the M3AE-size one on the `meta` device (shapes, no memory). "Unused by VQA" is
# the MLM, ITM and MIM heads, which a VQA step never touches. They are an assumption of the stand-in (the
# asker's model is not posted): upstream M3AE builds them only when their losses are on, and its VQA-RAD
# fine-tuning config turns on the VQA loss alone. An upstream-style model leaves far less unused, such as
# RoBERTa's pooler, which its VQA forward never calls:

# %%
with torch.device("meta"):
    big = case1.model.M3AETransformerSS(case1.model.M3AEConfig.m3ae())
tiny = case1.model.M3AETransformerSS(case1.model.M3AEConfig.tiny())
for name, m in (("tiny", tiny), ("m3ae", big)):
    c = case1.model.count_parameters(m)
    print(f"{name}: {c['total']:,} parameters, {c['unused_by_vqa']:,} unused by VQA, "
          f"{case1.gradient_bytes(m):,} bytes of fp32 gradients per all-reduce")
print(f"upstream-style, unused: RoBERTa's pooler, {case1.model.text_pooler_bytes(big.config):,} bytes")

# %% [markdown]
# With the assumed heads the bytes of every step include theirs; upstream, the unused part would be about
# 0.2% of them, too little to change the all-reduce, though enough to crash `find_unused_parameters=False` (02).

# %% [markdown]
# ## The posted script: one loop, every fix an option
# `case1.Options()` reproduces the post. The accepted answer's version differs by these fields:

# %%
for name, value in case1.Options.broken().diff(case1.Options.answer()).items():
    print(f"{name:24s} posted {value[0]!r:10}  answer {value[1]!r}")

# %% [markdown]
# The step every setup runs, the post's lines in order; `loss.backward()` is where DDP all-reduces the
# gradients, bucket by bucket, through hooks it registered when it wrapped the model:

# %%
print(inspect.getsource(case1.train_step))

# %% [markdown]
# Where the plan builds the sampler and wraps the model. As posted, the sampler reads `LOCAL_RANK` and
# `dist.get_world_size()`, which raises if `init_process_group` never ran:

# %%
print(inspect.getsource(case1.plan.train_sampler))
print(inspect.getsource(case1.plan.wrap_model))

# %% [markdown]
# ## Without a launcher, and where 105 s came from
# Run as `python DPT_MLM_ddp2.py`, `LOCAL_RANK` is unset. `case1.run_without_launcher()` runs the post's
# first lines in a fresh Python: as posted, then with the answer's `device` but the sampler as posted.

# %%
for attempt in case1.run_without_launcher():
    print(f"{attempt['step']}: {attempt['error']}: {attempt['message']}")

# %% [markdown]
# The posted script cannot run without a launcher, so its 105 s came from a launcher with
# `--nproc_per_node=1` (or from another script). Then the group has one rank, the sampler gives it every
# question, and, both GPUs being visible, `torch.cuda.device_count() > 1` still wraps the model in DDP
# with `find_unused_parameters=True`: the one-GPU baseline pays DDP's per-step graph walk and bucket
# copies but moves no byte between GPUs. Either epoch's clock is rank 0's `time.time()` around the loop.
#
# ## Under a launcher: does the sampler split the data?
# One worker for one epoch, then two workers for two epochs, of the posted setup, one core each:

# %%
posted = case1.Options.broken()
one = launch(case1.train, (posted, None, 1), world_size=1, backend=where.backend, threads=1)
two = launch(case1.train, (posted, None, 2), world_size=where.world_size, backend=where.backend, threads=1)

# %%
for label, res in (("1 worker ", one), ("2 workers", two)):
    print(label, "questions per rank in epoch 0:", case1.readout.split(res))
print(f"each two-GPU step / one-GPU step, from the post's figures: 2 x 133 / 105 = {2 * 133 / 105:.2f}")

# %% [markdown]
# Counted from the question ids: each rank sees a disjoint half, none is seen twice. The accepted answer's
# claim 1 ("the sampler does not split") does not hold for this script: `init_process_group` ran inside
# `if args.local_rank != -1:`, before the sampler. So the post's 133 s is half the steps, each 2.5 times as long.
#
# The line's real bug is `rank=args.local_rank`: harmless on one node, but on two nodes of two GPUs every
# node reads the same shards (`plan.shards_on_nodes`, counted):

# %%
for nodes in (1, 2):
    print(f"{nodes} node(s) x 2 GPUs, rank=LOCAL_RANK:", case1.plan.shards_on_nodes(348, nodes, 2))
print("2 nodes x 2 GPUs, rank from the group:", case1.plan.shards_on_nodes(348, 2, 2, posted=False))

# %% [markdown]
# The same code under `torchrun`, the successor of the post's launcher (4 steps, no evaluation):

# %%
cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(where.world_size),
       "-m", "ddp_lessons", "case1", "--preset", "broken", "--steps-limit", "4",
       "--set", "evaluation=none", "--set", "num_workers=0"]
# its exit status is not checked: rank 0 sometimes aborts at exit, after printing (a known teardown issue)
out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
print("\n".join("torchrun " + m.group(1) for m in re.finditer(r"(rank \d+: \d+ samples in \d+ steps)", out)))

# %% [markdown]
# ## Is a step on two workers slower?
# One run of each decides nothing: `case1.scaling.rounds` runs 8 steps on 1 worker and on 2, alternating,
# 5 rounds, and keeps each run's median step (on 2 workers, the slower rank's):

# %%
# NBVAL_IGNORE_OUTPUT
scaling_rounds = case1.scaling.rounds(posted, where.backend)
print(case1.scaling.describe(scaling_rounds))

# %% [markdown]
# Here a step on two workers is slower than on one; the epoch, of half the steps, is shorter only while
# that stays under 2x, which this machine's load decides. Two ranks and gloo's threads compete for two CPU
# cores, which two GPUs do not: the reading says nothing about the post's GPUs. Where each step's time
# goes, every rank, from `StepTimer`:

# %%
# NBVAL_IGNORE_OUTPUT
case1.plots.step_breakdown(two, title="posted setup, 2 workers (measured here)", skip=0)

# %% [markdown]
# What DDP hands the all-reduce every step, against the model's gradient bytes (counted):

# %%
for row in case1.per_rank(two):
    print(f"rank {row['rank']}: {row['allreduce_calls']} all-reduce calls, {row['allreduce_bytes']} bytes per "
          f"step; the model's gradient bytes {row['grad_bytes']}")

# %% [markdown]
# Every step reduces the whole gradient, the unused heads' zeros included: with `find_unused_parameters=True`
# DDP marks an unused parameter ready with a zero gradient and still sends its bucket.
#
# ## What rank 1 does while rank 0 evaluates
# Only rank 0 evaluates; rank 1 runs on into the next epoch, where its first all-reduce can only finish
# once rank 0 joins. Per rank: the evaluation, the first all-reduce of epoch 1 against the usual one, and
# the loader restart (4 workers, not persistent, start again every epoch):

# %%
# NBVAL_IGNORE_OUTPUT
edge = case1.readout.epoch_boundary(two)
for r in edge:
    print(f"rank {r['rank']}: evaluation {r['eval_time']:.2f} s; first all-reduce of epoch 1 "
          f"{r['first_allreduce']:.3f} s (usual median {statistics.median(r['usual_allreduce']):.3f} s); "
          f"loader restart {r['first_data']:.3f} s (usual {r['usual_data']:.3f} s)")

# %%
case1.CLAIMS.decide("rank1_waits_out_evaluation", *case1.readout.evaluation_wait(edge)).show();

# %% [markdown]
# The post's log is rank 0's: `time.time()` around its loop, evaluation after it. Rank 0 is the late rank,
# so its next epoch's first all-reduce finishes at once; rank 1's wait lands on rank 1's clock, which
# nobody logs. The evaluation does not explain the logged 133 s. Distributing it is 03's fix.
#
# ## What `diagnose` reads from the same run
# `ddp_lessons.diagnose` lists what cost the run its time, by cause, largest first, with what to change.
# Its figures and order vary from run to run:

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose(two)
found

# %% [markdown]
# It books rank 0's evaluation as work outside the steps and charges rank 1's wait to it, not to a slow
# rank. Its bucket advice reads the last bucket's tensors and the cores: that bucket holds several (the
# heads' zeros among them, in reversed parameter order, as `find_unused_parameters=True` keeps it), but
# here the ranks share two cores, so splitting it would not overlap and it advises fewer bytes; on GPUs,
# with a core free per rank, the same bucket gets a `bucket_cap_mb` below its size. Of the loader it says
# the posted 4 workers per rank already take the two cores' cycles: fewer, not the answer's 8.

# %% [markdown]
# ## The same script on a GPU (recorded)
# A recorded run of the same code at M3AE size (224 px, batch 32, one GPU, 30 steps), made again live
# where this machine has a GPU. At world size 1 the bytes are what two GPUs would exchange; none moved.

# %%
# NBVAL_IGNORE_OUTPUT
gpu = {name: case1.recorded(name, solo) for name in ("case1-h200-broken", "case1-h200-broken-bf16")}
for name, rec in gpu.items():
    step = Run(rec["results"]["ranks"])[0].median_step(3)
    print(f"{name}: {case1.readout.record_line(rec)}")
    print(f"  step {step['step_time'] * 1e3:.0f} ms (data wait {step['data'] * 1e3:.1f} ms), "
          f"{step['allreduce_bytes'] / 1e9:.2f} GB handed to the all-reduce per step")

# %%
# NBVAL_IGNORE_OUTPUT
case1.plots.step_breakdown([Run(rec["results"]["ranks"])[0] for rec in gpu.values()], skip=2,
                           labels=list(gpu), title="one H200" + (" (live)" if solo.backend == "nccl" else " (recorded)"))

# %% [markdown]
# ## What would decide the 133 s
# On the asker's machine, the link first: `nvidia-smi --query-gpu=pcie.link.width.current,pcie.link.gen.current --format=csv`,
# `nvidia-smi topo -m`, `NCCL_DEBUG=INFO` (`via P2P/IPC` or `via SHM`); at batch 8, 03's model reaches 131 s
# only over an x4-class link without P2P. Then the steady step on one and two GPUs at the same per-rank
# batch (`config['batch_size']`), with the same `OMP_NUM_THREADS`: torchrun sets it to 1 only for several
# processes, so unset, the one-GPU run gets every core's threads. Without changing the script:
# `OMP_NUM_THREADS=1 python -m ddp_lessons doctor --steps 30 -- torchrun --standalone --nproc_per_node 2 DPT_MLM_ddp2.py`,
# then with `--nproc_per_node 1`. The course's stand-in on two GPUs:
# `python -m ddp_lessons case1 --nproc 2 --model m3ae --batch-size 8 --steps-limit 30 --record case1-2gpu-broken`.

# %% [markdown]
# ## Summary
# - Under a launcher the posted sampler splits the data (counted); `rank=LOCAL_RANK` would not on several nodes.
# - So 133 s means a two-GPU step 2.5 times the one-GPU step; why is not measured here (03's model
#   points at the link).
# - Every step all-reduces the whole gradient, the assumed unused heads included (counted).
# - Rank 1 waits out rank 0's evaluation inside its next epoch, off the logged clock.
#
# Next, `02_case1_answer` tests the accepted answer's fixes one at a time.
#
# ## Exercises
# 1. With 2 workers, how many training samples does each rank process per epoch on this notebook's dataset?
# 2. How many bytes does one step all-reduce for the M3AE-size model *with* its pre-training heads (fp32)?

# %%
check("01.1", ...);

# %%
check("01.2", ...);
