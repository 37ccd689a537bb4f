# %% [markdown]
# # 02 · Case 1, the accepted answer: which fixes hold, one at a time
#
# **What you will learn**
# - how to test a proposed fix by switching one option and measuring what changed (and what did not);
# - what each batch-size choice does to steps per epoch, the global batch and the LR schedule;
# - why `find_unused_parameters=False` alone crashes this model, and the two ways to fix it.
#
# **Builds on:** `01_case1_broken.ipynb` (the posted loop as `case1.Options`, counting samples per rank).
# **Previous:** `01_case1_broken.ipynb`. **Next:** `03_case1_beyond.ipynb`.
#
# What changed since 01: nothing in the loop; only options. Live runs use the stand-in dataset and tiny
# model of 01 on two workers (placed below: gloo with one core each on a CPU, NCCL with a GPU each where
# two are visible); GPU figures are recorded runs, labelled with their hardware, made again live where
# this machine has a GPU.

# %%
import os
import matplotlib.pyplot as plt
import ipywidgets as widgets
from torch.utils.data.distributed import DistributedSampler
from ddp_lessons import launch, place, WorkerFailed
from ddp_lessons.tool import records, runtime, spread
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1 import by_run, per_rank, verdicts
from ddp_lessons.cases.case1.exercises import check
from ddp_lessons.cases.case1.readout import unused_from_error
from ddp_lessons.cases.case1.train import history_kept

data = case1.tiny_dataset()

# %%
where = place(2)  # the case's two ranks
solo = place(1)   # the recorded one-GPU runs, made again live where a GPU is visible
print(where.describe())

# %% [markdown]
# ## Every variant in one launch
# The posted setup, the answer's (with the unused heads dropped, for a reason shown below), its two
# batch-size choices, and one more fix for the heads (`static_graph`, below). `case1.train_many` runs them
# one after the other in the same two workers. Where a variant only tests step counts, it runs without
# loader processes or evaluation (`num_workers=0`, `evaluation="none"`): neither changes the counts.
# The two batch-size choices also run in 5 short interleaved rounds (6 steps each, order A B, B A, ...):
# their times are compared below.

# %%
quick = dict(num_workers=0, evaluation="none")
variants = {
    "posted": case1.Options.broken(),
    "answer, same batch": case1.Options.answer(drop_heads=True, evaluation="none"),
    "answer, batch halved": case1.Options.answer(drop_heads=True, batch="halved", **quick),
    "answer, batch kept, LR x2": case1.Options.answer(drop_heads=True, batch="scale_lr", **quick),
    "static_graph, heads kept": case1.Options.answer(static_graph=True, steps_limit=4, **quick),
}
pair = {"kept": variants["answer, batch kept, LR x2"].replace(steps_limit=6),
        "halved": variants["answer, batch halved"].replace(steps_limit=6)}
order = [f"{i} {n}" for i, row in enumerate(spread.interleave(list(pair), 5)) for n in row]
variants.update({name: pair[name.split()[1]] for name in order})
runs = dict(zip(variants, by_run(launch(case1.train_many, (list(variants.values()), None, 1),
                                        world_size=where.world_size, threads=1)), strict=True))
static = runs.pop("static_graph, heads kept")
rounds = {name: runs.pop(name) for name in order}

# %% [markdown]
# ## Claim 1: "init first, then the sampler"
# The answer's change (option `setup="answer"`, `plan.train_sampler`), in the post's own lines:
#
# ```diff
#      if args.local_rank != -1:
#          torch.cuda.set_device(args.local_rank)
#          device = torch.device("cuda", args.local_rank)
#          torch.distributed.init_process_group(backend="nccl")
# +        world_size = dist.get_world_size()
# +    else:
# +        device = torch.device("cuda", args.device)
# +        world_size = 1
#      ...
# -    word_size = dist.get_world_size()
# -    train_sampler = DistributedSampler(trainset, num_replicas=word_size, rank=args.local_rank)
# +    train_sampler = DistributedSampler(trainset) if world_size > 1 else None
# ```
# Under a launcher `init_process_group` already ran before the posted sampler (01 counted a disjoint
# split), so the answer's order should give each rank the same samples:

# %%
for name in ("posted", "answer, same batch"):
    print(f"{name:20s} samples per rank: {[row['samples'] for row in per_rank(runs[name])]}")
verdicts.same_split([row["samples"] for row in per_rank(runs["posted"])],
                    [row["samples"] for row in per_rank(runs["answer, same batch"])]).show();

# %% [markdown]
# ## Claim 2: halve the batch, or keep it and scale the LR
# The two choices (option `batch`: "halved" or "scale_lr", read once in `plan.build`):
#
# ```diff
# -    train_loader = DataLoader(trainset, batch_size=config['batch_size'], ...)
# +    train_loader = DataLoader(trainset, batch_size=config['batch_size'] // world_size, ...)   # halved
#      # or keep the batch and scale the peak LR with the global batch:
# -    optimizer, scheduler = set_schedule(model, config, len(trainset.entries))
# +    config['learning_rate'] *= world_size                                                      # scale_lr
# +    optimizer, scheduler = set_schedule(model, config, len(trainset.entries))
# ```
# Steps per epoch, per-rank and global batch, peak LR, and how long the LR schedule was sized for:

# %%
for name, res in runs.items():
    r = res[0]
    print(f"{name:26s} batch {r['batch_size']}/rank, global {r['batch_size'] * r['world_size']:2d}, "
          f"{r['steps_per_epoch']:2d} steps/epoch, peak LR {r['lr_peak']:.0e}, "
          f"schedule sized for {r['schedule_steps']} steps, ran {len(r['lrs'])}")

# %% [markdown]
# Counted: halving keeps the one-GPU global batch (8) and so the one-GPU step count, 44 steps per rank on
# half-size batches; keeping the batch halves the steps (22 instead of 44) and doubles the global batch,
# hence the LR x2. A step count is not a time: an epoch with the batch halved is faster than with the batch
# kept only if a step on 4 samples costs less than half a step on 8. It does not when part of a step does
# not shrink with the batch (the all-reduce of the whole gradient, the optimizer step). Per round, steps
# per epoch x the median step of the slower rank, from the interleaved rounds:

# %%
# NBVAL_IGNORE_OUTPUT
full = {n: runs[v][0]["steps_per_epoch"] for n, v in (("kept", "answer, batch kept, LR x2"), ("halved", "answer, batch halved"))}
epoch = {n: [full[n] * max(r["step_time"] for r in per_rank(rounds[name])) for name in order if name.endswith(n)]
         for n in pair}
print({n: [round(t, 2) for t in v] for n, v in epoch.items()}, "s of steps per epoch, by round")

# %%
verdicts.epoch_longer_halved(epoch["kept"], epoch["halved"]).show();


# %% [markdown]
# The answer's reasoning ("keep the global batch") is about the optimisation, not the speed; which choice
# gives the shorter epoch depends on how much of a step does not shrink with the batch on the machine at
# hand. Neither choice touches the schedule: it is sized from `len(trainset.entries)` (44 steps at batch 8), so with 22 steps per epoch the
# LR never gets through its decay. The LR each run really followed:

# %%
# NBVAL_IGNORE_OUTPUT
def lr_plot(names):
    fig, ax = plt.subplots(figsize=(6, 2.8))
    for name in names:
        ax.plot(runs[name][0]["lrs"], ".-", label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig

widgets.interact(lambda run: lr_plot([run]), run=list(runs));

# %%
fig = lr_plot(list(runs))
print("last LR / peak LR per run:", {n: round(r[0]["lrs"][-1] / r[0]["lr_peak"], 2) for n, r in runs.items()})

# %% [markdown]
# ## Claim 3: print on rank 0 only
# What it changes is what is printed (option `log_ranks`, the plan's `Log`); the posted script logs on both ranks.
#
# ```diff
# -    print(f"Start running basic DDP example on rank {args.local_rank}.")
# +    if dist.get_rank() == 0:
# +        print(f"Start running basic DDP example on rank {args.local_rank}.")
# ```

# %%
for name in ("posted", "answer, same batch"):
    print(f"{name:20s} log lines per rank: {[len(r['log']) for r in runs[name]]}")
verdicts.only_rank0_logs([len(r["log"]) for r in runs["answer, same batch"]]).show();

# %% [markdown]
# ## Claim 4a: `find_unused_parameters=False`
# ```diff
#      model = nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank],
# -                                                output_device=args.local_rank, find_unused_parameters=True)
# +                                                output_device=args.local_rank, find_unused_parameters=False)
# ```
# What `find_unused_parameters=True` costs every step (PyTorch's DDP design notes; the traversal and the
# bitmap are not measured here, the buckets' order is counted below): after each forward pass DDP walks the autograd graph from the
# outputs to find the parameters it will not reach; it all-reduces a bitmap of the used parameters, one
# small extra collective per step; and it never rebuilds its buckets in the order gradients become ready,
# so they stay in the order of `model.parameters()` reversed. The answer as written keeps the MLM, ITM and
# MIM heads. DDP then expects a gradient for every parameter and fails at the second step. The real error, first line:

# %%
error = None
try:
    launch(case1.train, (case1.Options.answer(steps_limit=3, num_workers=0, evaluation="none"), None, 1),
           world_size=where.world_size, threads=1)
except WorkerFailed as err:
    error = err.summary.split(" raised ", 1)[1].split(". ")[0]
    print(error)
verdicts.unused_heads_crash(error).show();

# %% [markdown]
# Which parameters? The error's last line says to set `TORCH_DISTRIBUTED_DEBUG`. Its first level, `INFO`,
# already names every parameter that got no gradient (beside some logging when DDP is built); `DETAIL`
# adds consistency checks around every collective, which cost time: reach for it when `INFO` is not
# enough. The same run with `INFO` in the workers' environment, the names it printed grouped by module:

# %%
os.environ["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
unused = []
try:
    # spawned workers read this process's environment (the default forkserver was started before it)
    launch(case1.train, (case1.Options.answer(steps_limit=3, num_workers=0, evaluation="none"), None, 1),
           world_size=where.world_size, threads=1, start_method="spawn")
except WorkerFailed as err:
    unused = unused_from_error(str(err.worker_traceback))
finally:
    del os.environ["TORCH_DISTRIBUTED_DEBUG"]
print(f"{len(unused)} parameters without a gradient, by module:",
      {m: sum(n.startswith(m + ".") for n in unused) for m in sorted({n.split(".")[0] for n in unused})})

# %% [markdown]
# Two fixes: drop the heads before wrapping (`drop_heads=True`, used above), or tell DDP the graph is
# the same every step (`static_graph=True`), which finds the unused parameters once, in the first step,
# and then skips the per-step traversal and bitmap:
#
# ```diff
# +    for head in UNUSED_BY_VQA:                  # drop_heads=True (model.drop_unused_heads): MLM, ITM, MIM
# +        setattr(model, head, None)
#      model = nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank],
# -                                                output_device=args.local_rank, find_unused_parameters=True)
# +                                                output_device=args.local_rank)        # or: static_graph=True
# ```
# Both run (the `static_graph` variant was in the launch above). Counted below, from each run's DDP
# logging data: the bytes all-reduced per step, whether DDP rebuilt its buckets in ready order, and the
# unused bytes it found:

# %%
for name, res in (("posted (find_unused=True)", runs["posted"]), ("static_graph=True, heads kept", static),
                  ("heads dropped", runs["answer, same batch"])):
    row, d = per_rank(res)[0], res[0]["ddp"]
    print(f"{name:30s} steps {row['steps']:2d}, bytes all-reduced per step {row['allreduce_bytes']}, "
          f"buckets rebuilt {bool(d['has_rebuilt_buckets'])}, unused bytes found {d['unused_parameter_size']}")

# %% [markdown]
# Only dropping the heads shrinks what is all-reduced: `static_graph` keeps the heads' zero gradients in
# the buckets, as the posted setup does. These are facts of the code, the same on any machine.

# %% [markdown]
# ## Claim 4b: `num_workers=8`
# ```diff
# -    train_loader = DataLoader(trainset, ..., num_workers=4, sampler=train_sampler, ...)
# +    train_loader = DataLoader(trainset, ..., num_workers=8, sampler=train_sampler, ...)
# ```
# Loader processes per rank: 4 posted, 8 in the answer. Whether 8 fit is a count: a rank's loader workers
# plus its intra-op threads against its share of the cores (`plan.core_budget` divides them):

# %%
cores = runtime.cpu_count()
count = verdicts.core_overbooked(8, runs["answer, same batch"][0]["threads"], cores, where.world_size,
                                 "num_workers=8", f"this machine ({where.world_size} ranks)")
print(f"{count.sentence} ({count.figure})")   # a count on this machine, not a measurement: no verdict

# %% [markdown]
# Loader processes beyond a rank's share take turns on cores the training needs; whether that shows in
# the step time is a measurement, one run each here (below; they decide nothing):

# %%
# NBVAL_IGNORE_OUTPUT
for name in ("posted", "answer, same batch"):
    rows = per_rank(runs[name])
    print(f"{name:20s} num_workers {runs[name][0]['num_workers']}: data wait "
          f"{[round(r['data'] * 1e3, 1) for r in rows]} ms, step {[round(r['step_time'] * 1e3) for r in rows]} ms")

# %% [markdown]
# ## Claim 4c: `total_loss += loss.item()`
# ```diff
# -            total_loss += loss            # keeps every step's autograd history (the post)
# +            total_loss += loss.item()     # the answer: a host copy, a CPU-GPU sync every step
# +            total_loss += loss.detach()   # the fix: stays on the device, no history, read once per epoch
# ```
# The post's `total_loss += loss` adds a tensor that carries its autograd history, so the running sum keeps
# every step's graph reachable until the epoch ends (the PyTorch FAQ's "don't accumulate history across
# your training loop"). Counted in this process, no DDP: the autograd nodes the running sum keeps after
# each of 3 steps of the tiny model, for each way of summing (`loop.graph_nodes`):

# %%
for accum in ("tensor", "item", "detach"):
    print(f"loss_accum={accum!r:9s} autograd nodes kept after steps 1, 2, 3: {history_kept(accum)}")

# %% [markdown]
# The post's sum grows by one step's graph per step; both fixes keep none. `.item()` pays for that with a
# copy to the host every step: on a CPU the loss already lives in host memory and every op has finished
# when it returns, so it waits for nothing; on a GPU the host waits for the GPU every step. `.detach()`
# keeps the sum on the device and reads it once per epoch. The GPU comparison comes from a record of
# interleaved repeated rounds on one GPU (every variant once per round; machine and versions on the line below):

# %%
pairs = records.load("case1-h200-pairs")
print(verdicts.machine_line(pairs))
verdicts.item_sync_costs(pairs).show();

# %% [markdown]
# A single pair of runs could not decide this: the record's bf16 runs are not steady (steps' IQR above 5%
# of the median, listed below), so a per-step sync would have to cost more than that spread to show in
# every round:

# %%
for name, rnd, rel in verdicts.unsteady(pairs, ("fixed-bf16", "fixed-bf16-item")):
    print(f"not steady: {name:18s} round {rnd}: IQR {rel:.1%} of the median step")

# %% [markdown]
# Whether a sync per step costs depends on whether the host has work to overlap with the GPU (short steps,
# data prepared in the training process): at a step of this size it is a small share. The answer's last
# change, timing on rank 0 only, changes which rank prints a time; 03 times the epoch properly (device
# synchronised, between barriers).
#
# ## Distributed evaluation equals single-process evaluation
# Not in the answer, but needed by 03: each rank scores its own shard (no padding repeats) and the counts
# are summed. To mean something the comparison needs a model that gets some answers right and some wrong:
# the untrained stand-in gets none right, and 0 = 0 whatever the shards do. So the model here always
# gives the training split's most frequent answer (`evaluate.always_answer_most_frequent`, deterministic),
# on the first 51 test questions (an odd number, so that a sampler that pads has to pad). One launched
# process over all 51, then the two ranks with the shard sampler, then with `DistributedSampler`
# (which pads each rank to the same length by repeating questions). The change, for the test loader:
#
# ```diff
# -    test_loader = DataLoader(testset, batch_size=config['batch_size'], num_workers=4, shuffle=False, ...)
# +    test_loader = DataLoader(testset, batch_size=config['batch_size'], num_workers=4,
# +                             sampler=ShardSampler(len(testset), rank, world_size), ...)
#      ...
# +    dist.all_reduce(counts)   # [open n, open right, closed n, closed right], summed over the ranks
# ```

# %%
o = case1.Options.fixed(num_workers=0)
fx = dict(limit=51, fixture=True)
single = launch(case1.evaluate_worker, (o, None, False), fx, world_size=1, backend=where.backend, threads=1)[0]
shards = launch(case1.evaluate_worker, (o, None, True), fx, world_size=where.world_size, threads=1)
padded = launch(case1.evaluate_worker, (o, None, True), dict(fx, sampler="padded"), world_size=where.world_size, threads=1)
print("single:", single["counts"], "| shards:", shards[0]["counts"], "| padded:", padded[0]["counts"])

# %%
verdicts.distributed_count_equal(single["counts"], shards[0]["counts"], "sharded evaluation counts what one process counts").show();

# %% [markdown]
# `DistributedSampler` instead pads 51 questions to 2 x 26 by repeating one, so the padded counts above
# hold one question twice. For training it pads the same way; `DistributedSampler(drop_last=True)` drops
# the tail instead, so no sample is seen twice in an epoch. Per rank, on 51 items:

# %%
for drop in (False, True):
    print(f"drop_last={drop!s:5s} samples per rank: {[len(DistributedSampler(range(51), 2, r, drop_last=drop)) for r in range(2)]}")
print("padded evaluation counts the same as one process:", padded[0]["counts"] == single["counts"])

# %% [markdown]
# ## All of the answer: each fix alone, then one after the other
# Every row is the posted setup plus the fixes it names (`ablation.variants`), 4 steps each, in one
# launch. Fix 4a changes two options at once, `find_unused_parameters=False` and `drop_heads=True`
# (alone, the first crashes: Claim 4a), so its half, the heads dropped with `find_unused_parameters=True`,
# is a row of its own. The exact columns first: what each fix changed in the work itself.

# %%
from ddp_lessons.cases.case1 import ablation
abl = ablation.variants(steps_limit=4)
abl_runs = dict(zip(abl, by_run(launch(case1.train_many, (list(abl.values()), None, 1),
                                        world_size=where.world_size, threads=1)), strict=True))
abl_rows = ablation.table(abl_runs)
for r in abl_rows:
    print(f"{r['variant']:46s} steps {r['steps']}, samples {r['samples']:3d}, "
          f"all-reduced {r['allreduce_bytes']:>9,d} B/step, peak LR {r['peak_lr']:.0e}")

# %%
verdicts.bytes_change_only_with(abl_rows, "4a").show();

# %% [markdown]
# And the median step time, measured here (2 workers as placed above; the dashed line is the posted setup):

# %%
# NBVAL_IGNORE_OUTPUT
for r in abl_rows:
    print(f"{r['variant']:46s} step {r['step_time'] * 1e3:6.1f} ms ({r['vs_posted']:.2f}x posted), data wait {r['data'] * 1e3:5.1f} ms")
ablation.plot(abl_rows)

# %% [markdown]
# One run each: these times decide nothing (rerun the cell and compare). What the fixes change for certain
# is counted: the LR (2), what is logged (3), and, for the heads dropped (4a), the bytes all-reduced.
#
# ## Every fix together, on the recorded GPU
# The record of interleaved rounds compares the posted setup with every fix together (fp32, one GPU).
# "Every fix" is more than the answer: the heads dropped, the core budget for the loader, pinned
# memory and persistent workers, the loss kept on the device (03 lists them). The bytes each hands to the
# all-reduce are counted at world size 1, where the collective moves nothing between GPUs:

# %%
print(verdicts.machine_line(pairs))
gb = {r["name"]: r["allreduce_bytes"] / 1e9 for r in pairs["results"]["runs"]}
print(f"bytes handed to the all-reduce per step (world size 1: nothing crosses between GPUs): "
      f"broken {gb['broken']:.2f} GB, fixed {gb['fixed']:.2f} GB")
for name, rnd, rel in verdicts.unsteady(pairs, ("broken", "fixed")):
    print(f"not steady: {name:18s} round {rnd}: IQR {rel:.1%} of the median step")
verdicts.all_fixes_faster(pairs).show();

# %% [markdown]
# ## Summary
# | answer's claim | measured here |
# |---|---|
# | 1. sampler does not split | false under a launcher (counted); the reordering gives the same samples |
# | 2. halve batch / scale LR | halving keeps the step count, keeping the batch halves it (counted); which epoch is shorter is a per-machine measurement (Claim 2's rounds); the schedule stays mis-sized |
# | 3. print on rank 0 | only rank 0 logs (counted) |
# | 4a. `find_unused_parameters=False` | fails with the heads present (`TORCH_DISTRIBUTED_DEBUG=INFO` names them); drop them or use `static_graph`; dropping the heads is the one fix that shrinks the all-reduce (counted) |
# | 4b. `num_workers=8` | a count against the cores per rank (Claim 4b) |
# | 4c. `.item()` | ends the autograd history the post's sum keeps (counted), at the price of a host sync per step; `.detach()` ends it without the sync |
#
# Next, `03_case1_beyond.ipynb`: what the answer missed, and the setup that scales.
#
# ## Exercises
# 1. With the batch halved on 2 ranks, how many steps per epoch does each rank take on this dataset?
# 2. Which of the answer's changes, applied alone, makes the run fail? (a string, e.g. `"num_workers=8"`)

# %%
check("02.1", ...);

# %%
check("02.2", ...);
