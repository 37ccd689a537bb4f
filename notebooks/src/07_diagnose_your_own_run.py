# %% [markdown]
# # 07 · Diagnose your own run: a third workload, the standard tools, and the fixes in order
#
# **What you will learn**
# - to measure a DDP run of your own on 1 and 2 ranks in the same rounds, and to find where its time goes, ranked by cost;
# - to read the standard tools on it: a `torch.profiler` trace (Perfetto), Holistic Trace Analysis, `TORCH_DISTRIBUTED_DEBUG=DETAIL`, `NCCL_DEBUG=INFO` and `nvidia-smi topo -m`;
# - to budget cores across ranks, loader workers and threads, and to accumulate gradients with `no_sync`.
#
# **Builds on** both cases: `00_first_launch` (launching and timing), `03_case1_beyond` (distributed evaluation) and
# `06_case2_breakeven` (when more ranks can pay). Previous: `06_case2_breakeven.ipynb`. This is the last notebook.
#
# The workload is neither case: a ResNet-18-like CNN on CIFAR-shaped synthetic images (3 x 32 x 32, 10 classes),
# per-rank batch 32, with the habits a new user brings: random crop and flip in PIL in the main process,
# `loss.item()` and a print every step, every rank evaluating the whole test set, no `sampler.set_epoch`.
# The data are made in memory from a seed (no download). On the CPU it runs at quarter width (16 channels in the
# first stage) on a small data set so the notebook stays short; the recorded GPU run uses half width (32).

# %%
import os
import tempfile

from IPython.display import display

from ddp_lessons import compare, diagnose, launch, place
from ddp_lessons.tool import plots, records
from ddp_lessons.tool.timing import rank_account
from ddp_lessons.course import diagnosis_verdicts
from ddp_lessons.cases.own import accumulate, cores, gpu, procedure, readout, trace, train, unused, verdicts
from ddp_lessons.cases.own.exercises import check
from ddp_lessons.cases.own.model import SmallResNet, parameter_count
from ddp_lessons.cases.own.options import Options

size = dict(width=16, train_size=256, test_size=1024, epochs=2)
broken, fixed = Options.broken(**size), Options.fixed(**size)
print(broken)
print("the fixes:", fixed.diff(broken))
print(f"{parameter_count(SmallResNet(width=16)):,} parameters at width 16, "
      f"{parameter_count(SmallResNet(width=32)):,} at half width (ResNet-18: about 11.2 million)")

# %% [markdown]
# Where the ranks run. Every rank gets one core (`threads=1`), as each rank would get one GPU: the 1-rank run is
# the one-device baseline.

# %%
where = place(2)
print(where.describe())

# %% [markdown]
# ## 1 against 2 ranks, broken against fixed, in the same rounds
# One launch of 2 ranks runs four setups in 5 interleaved rounds (A B C D, D C B A, ...): each setup on 1 rank
# (rank 0 alone, rank 1 waiting) and on 2. A run's time is its slowest rank's wall time, and it includes the
# evaluation between epochs, which happens outside every training step.

# %%
# NBVAL_IGNORE_OUTPUT
setups = {"broken x1": (broken, 1), "broken x2": (broken, 2), "fixed x1": (fixed, 1), "fixed x2": (fixed, 2)}
raw = launch(train.rounds, args=(setups, 5), world_size=2, threads=1, backend=where.backend, timeout=300)
runs = readout.setups(raw)
times = {name: readout.times(rounds) for name, rounds in runs.items()}
for name, rounds in runs.items():
    r = rounds[0][0]
    print(f"{name:10s} run time per round {', '.join(f'{t:.2f}' for t in times[name])} s; "
          f"rank 0 round 1: train {r['train_s']:.2f} s, evaluation {r['eval_s']:.2f} s of {r['eval_samples']} samples")

# %%
plots.rounds(times, title="run time per round, 1 and 2 CPU ranks (measured here)")

# %% [markdown]
# ## The sample order without `set_epoch`
# `DistributedSampler` shuffles with its seed plus the epoch number it was given; without
# `sampler.set_epoch(epoch)` that number stays 0, so every epoch draws the same order. The fix is one line
# in the epoch loop:
# ```python
#  for epoch in range(epochs):
# +    sampler.set_epoch(epoch)
#      for batch in loader: ...
# ```

# %%
verdicts.set_epoch_reshuffles(raw[0]["runs"]["broken x1"][0]["order"], raw[0]["runs"]["fixed x1"][0]["order"]).show();

# %% [markdown]
# ## Every rank evaluates the whole test set
# The broken setup calls its evaluation on every rank over the whole test set, so on 2 ranks the same work is
# done twice and the second rank saves none of it. Counted, and timed against the 1-rank run:

# %%
b2 = runs["broken x2"]
print("test samples evaluated per rank on 2 ranks:", [r["eval_samples"] for r in b2[0]], "of", broken.test_size)

# %%
# NBVAL_IGNORE_OUTPUT
per = [t / one for one, ranks in zip([rs[0]["eval_s"] for rs in runs["broken x1"]], b2, strict=True)
       for t in [r["eval_s"] for r in ranks]]
print(f"each rank's evaluation on 2 ranks / the 1-rank evaluation: {min(per):.2f} .. {max(per):.2f} "
      "(split in two it would be about 0.5)")

# %%
verdicts.evaluation_share_large([r["eval_share"] for ranks in b2 for r in ranks]).show();

# %% [markdown]
# ## What the second rank buys
# With the evaluation done twice, the second rank shares only the training, so the speed-up is capped
# (Amdahl: with half of a 1-rank run spent evaluating, 2 ranks can be at most 1 / (0.5 + 0.5 / 2) = 1.33x
# as fast); the check asks for less than 1.6x, a margin a busy machine keeps:

# %%
verdicts.speedup_below(times["broken x1"], times["broken x2"], 1.6).show();

# %% [markdown]
# ## Where the time goes, ranked by cost
# Per rank on 2 ranks: the evaluation beyond the rank's share (`eval x (1 - 1/2)`), the wait for each batch,
# the per-step `loss.item()` and print, and the all-reduce the backward pass did not hide (on gloo this includes
# waiting for the slower rank).

# %%
# NBVAL_IGNORE_OUTPUT
costs = [readout.costs(ranks, duplicated=True) for ranks in b2]
for cause, lo, hi in readout.ranked(costs[0]):
    print(f"{cause:24s} {lo * 1e3:8.1f} .. {hi * 1e3:8.1f} ms per run (min .. max over ranks, round 1)")

# %%
verdicts.largest_cost(costs, "duplicated evaluation").show();

# %% [markdown]
# ## The same run through `diagnose`
# `ddp_lessons.diagnose` reads the same run (every rank's `StepTimer` result, the evaluation timed with
# `timer.outside("eval")`) and ranks what cost it time by cause, each with what to change and how to check.
# One process ran every setup of the rounds in turn, so each run's timer counts start-up from where that
# run began (`StepTimer(run_start=time.perf_counter())` in `own.rounds`), not from the process's start, and
# a run on rank 0 alone is timed in a process group of its own (the DDP model's: `StepTimer`'s default).
# A process's first runs also pay first-time costs (its first DDP model and the first collectives of each
# process group); rank 0's start-up per setup and round:

# %%
# NBVAL_IGNORE_OUTPUT
for name in setups:
    print(f"{name:10s}", " ".join(f"{rank_account(r)['startup']:.3f}" for r in raw[0]["runs"][name]), "s per round")

# %% [markdown]
# The run read here is round 1's, after every setup has run once in this process:

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose([rank["runs"]["broken x2"][1] for rank in raw])
found

# %%
plots.findings(found, title="diagnose: the broken setup on 2 CPU ranks, round 2")

# %%
diagnosis_verdicts.ranks_first(found.causes, "outside_steps", "work outside the steps (the evaluation)").show();

# %% [markdown]
# How much of each rank's time the timer's account explains (steps and named work outside them, every
# setup, rank and round; the rest is `unattributed`: time between the timer's marks, which grows when the
# machine is busy, as a rank waits for a core there). A reading, not a verdict: on a loaded machine it
# drops (below 85% was seen here beside two busy processes), so it decides nothing by itself:

# %%
# NBVAL_IGNORE_OUTPUT
covered = verdicts.coverage([rank_account(rank["runs"][name][i]) for name in setups
                             for rank in raw for i in range(len(rank["runs"][name]))])
print(f"steps + outside work = {min(covered):.1%} .. {max(covered):.1%} of each rank's wall time ({len(covered)} rank-runs)")

# %% [markdown]
# ## Fixed, and measured again
# The fixes, as options
# (`fixed.diff(broken)` above): `evaluation="distributed"` (each rank its shard, two counts summed),
# `set_epoch=True`, `step_log="none"`, `num_workers="budget"` (loader workers within the core budget, below).
# Measured again, with the repeats of the rounds above, side by side (`ddp_lessons.compare`, samples per
# second of wall time against the broken setup on 1 rank):

# %%
# NBVAL_IGNORE_OUTPUT
per_run = {name: [[rank["runs"][name][i] for rank in raw if len(rank["runs"][name]) > i]
                  for i in range(len(raw[0]["runs"][name]))] for name in setups}
compare(per_run, baseline="broken x1")

# %%
verdicts.fix_is_faster(times["broken x2"], times["fixed x2"], 2).show();

# %% [markdown]
# The fixed and broken setups on 2 ranks are compared on their rounds' quartiles (the dots of the first plot).
# Whether 2 fixed ranks beat 1 rank depends on this machine (two cores shared with everything else it
# runs); the recorded GPU run below gives the one-GPU figures.
#
# ## A profiler trace of a few steps
# `torch.profiler` with a schedule: 1 step skipped, 1 warm-up step thrown away, 3 steps recorded, CPU activity
# only here (CPU and CUDA on a GPU), shapes not recorded. The trace opens in https://ui.perfetto.dev or
# `chrome://tracing`; one gzipped file per rank, in the folder layout Holistic Trace Analysis reads.

# %%
with tempfile.TemporaryDirectory() as tmp:
    prof = launch(trace.profile_steps, args=(broken, tmp), world_size=1, threads=1, backend="gloo")[0]
    print(sorted(os.listdir(tmp)), f"{len(prof['top'])} operators kept")

# %%
# NBVAL_IGNORE_OUTPUT
for row in prof["top"][:8]:
    print(f"{row['name'][:40]:40s} calls {row['calls']:5d}  self CPU {row['self_cpu_us'] / 1e3:8.1f} ms")

# %% [markdown]
# ## The recorded GPU run: broken against fixed on one H200
# The same workload at half width on one GPU under DDP and NCCL (world size 1), recorded by
# `benchmarks/record_own_run_gpu.py` into `data/runs/own-run-h200x1/`, timed by `StepTimer` with its defaults
# (mode "light": DDP's own all-reduce, read through DDP's timings on every 10th step and the flight recorder):

# %%
rec = gpu.load()
print(records.describe_machine(rec) if rec else "not recorded yet: run benchmarks/record_own_run_gpu.py on a GPU machine")
print("recorded at commit", rec["commit"] if rec else None)

# %% [markdown]
# At world size 1 distributed evaluation and `set_epoch` change nothing (one rank's shard is the whole set);
# what differs is the per-step `loss.item()` and print, and 15 persistent loader workers with 1 torch thread
# (the budget of 16 cores) in place of loading in the main process with 16 threads. Its rounds:

# %%
# NBVAL_IGNORE_OUTPUT
gpu_raw = rec["results"]["rounds"]["runs"] if rec else {}   # setup -> this rank's result per round
gpu_times = {k: readout.times(v) for k, v in readout.setups(rec["results"]["rounds"]).items()} if rec else {}
for k, v in gpu_raw.items():
    print(f"{k}: {v[0]['threads']} torch threads, {v[0]['workers']} loader workers; run time per round "
          + ", ".join(f"{t:.2f}" for t in gpu_times[k]) + " s")

# %%
if rec:
    display(plots.rounds(gpu_times, title="the recorded run on one H200: run time per round"))

# %%
if rec:
    verdicts.fix_is_faster(gpu_times["broken"], gpu_times["fixed"], 1, "the recorded H200").show();

# %% [markdown]
# ## Measure every fix: one made for N ranks can cost 1
# A fix is a trade. Loader workers take the batch preparation off the training thread, so every step
# waits less; but starting them costs time once (15 processes forked, each building its first batches), inside the
# first step. `diagnose` on one round of each setup; the same runs projected to 200 epochs
# (`diagnose(run, epochs=200)`), where start-up and the workers' first start are paid once and
# everything else 100 times:

# %%
# NBVAL_IGNORE_OUTPUT
if rec:
    for k in ("broken", "fixed"):
        run = [readout.timer_with_passes(gpu_raw[k][1])]
        steps = run[0]["steps"]
        print(f"{k}: first step's data stall {steps[0]['data_stall'] * 1e3:.0f} ms, then median "
              f"{sorted(s['data_stall'] for s in steps[1:])[len(steps) // 2] * 1e3:.2f} ms a step")
        long = diagnose(run, epochs=200)
        data = next((f.seconds for f in long.findings if f.cause == "data_loading"), 0.0)
        print(f"   projected to 200 epochs: data-loading wait {data:.1f} s of {long.ranks[0]['wall']:.0f} s")
        display(plots.findings(diagnose(run), title=f"{k}, one H200, the recorded 2 epochs"))
        display(plots.findings(long, title=f"{k}, projected to 200 epochs"))

# %% [markdown]
# At the recorded 2 epochs the workers' start in the first step (about a third of a second) costs about
# as much as the per-step loading it saves over the run's 128 steps, so the fixed run is not clearly
# shorter. The projection is a model (this round's per-epoch costs times 100, start-up and the workers'
# first start once; no warm-up, no change in clocks or caches assumed): at 200 epochs the start is a
# one-off and the fixed setup's data-loading wait is about half the broken one's. The lesson for your run:
# measure every fix at the run length you care about (and with the same number of ranks), and keep the
# workers persistent (`persistent_workers=True`): without it the start is paid again at every epoch.

# %% [markdown]
# ## Holistic Trace Analysis
# HTA reads the trace folder and splits each rank's GPU time into computation, communication, memory copies and
# idle time. At world size 1 there is one rank: HTA's views across ranks (stragglers, the same kernel's
# duration on every rank) have nothing to compare, and DDP's all-reduce at world size 1 has no other rank to
# send to, so its communication/computation overlap has nothing to measure.

# %%
# NBVAL_IGNORE_OUTPUT
hta = gpu.hta_summary(gpu.folder() / "trace") if rec and gpu.hta_available() else {}
for name, rows in hta.items():
    print(name, rows if isinstance(rows, str) else rows[:6])
print("" if hta else "needs the record and `pip install holistictraceanalysis`")

# %%
if hta and not isinstance(hta["temporal"], str):
    verdicts.mostly_idle(hta["temporal"][0]["idle_time_pctg"]).show();

# %% [markdown]
# HTA's idle breakdown
# (printed above) splits idle time into `host_wait` (the GPU waits for the host to queue work: a host-bound
# step; the traced run is the broken setup, whose host also makes every batch in PIL and waits for
# `loss.item()` each step) and `kernel_wait` (gaps
# between queued kernels). In the trace (Perfetto: the CUDA stream row against the Python thread) you can see
# what the host is doing during each gap.

# %% [markdown]
# ## NCCL's own words, and the topology
# `NCCL_DEBUG=INFO` (set before the process group exists) makes NCCL say which network it bootstraps on, which
# devices the communicator holds and, between GPUs, which transport each channel uses: `via P2P/IPC` (direct GPU
# to GPU over NVLink or PCIe), `via SHM` (through host shared memory: no peer access), `NET/Socket` or `NET/IB`
# (through a network: another machine, or no better path). The recorded lines, by subject:

# %%
# NBVAL_IGNORE_OUTPUT
lines = rec["results"]["nccl_debug"]["lines"] if rec else []
for kind, group in gpu.sort_nccl(lines).items():
    print(f"-- {kind} ({len(group)} lines)", *group[:4], sep="\n")

# %%
print("lines naming a transport between GPUs ('via ...'):", sum(" via " in ln for ln in lines))

# %% [markdown]
# At world size 1 the communicator has one rank, so no channel connects two GPUs (no line names one): the question "P2P or
# through the host?" that case 1's PCIe assumption hangs on needs 2 GPUs. `nvidia-smi topo -m` answers it for
# the hardware: `NV#` (NVLink), `PIX`/`PXB` (PCIe switches), `PHB`/`NODE`/`SYS` (through the host bridge or
# between sockets: the slower paths).

# %%
# NBVAL_IGNORE_OUTPUT
topo = rec["results"]["nvidia_smi_topo"] if rec else {"text": None, "reason": "not recorded"}
print(topo["text"] or topo["reason"])

# %% [markdown]
# ## An unused parameter, named
# A model with a head `forward` never calls, under DDP with `find_unused_parameters=False`, on 2 gloo ranks.
# At the default debug level the error gives parameter indices; `TORCH_DISTRIBUTED_DEBUG=INFO` adds their
# names, and so does DETAIL, which also checks every collective across ranks (extra work in every collective:
# not for timing runs). `find_unused_parameters=True` would let this model train, at a price every step: DDP
# walks the autograd graph from the outputs to find the unused parameters, all-reduces a bitmap of the used
# ones, and does not rebuild its buckets in ready order (not measured here).

# %%
errors = launch(unused.unused_parameter_errors, world_size=2, threads=1, backend="gloo")[0]
names = unused.unused_names(SmallResNet(width=8, with_unused_branch=True))
print(errors["INFO"])

# %%
verdicts.debug_levels(errors, names).show();

# %% [markdown]
# ## Core budgeting
# Every rank's threads and loader workers share the machine's cores. The budget: a rank's share is
# cores // ranks; on a GPU one thread queues kernels and the rest of the share loads data; on a CPU the threads
# keep most of it.

# %%
for cores_, ranks, dev in [(2, 1, "cpu"), (2, 2, "cpu"), (16, 1, "cuda"), (64, 4, "cuda"), (128, 8, "cuda")]:
    b = cores.budget(cores_, ranks, dev)
    print(f"{cores_:4d} cores, {ranks} {dev} rank(s): {b['workers']:2d} workers + {b['threads']} thread(s) per rank")

# %% [markdown]
# A common copied setting, `num_workers=4` beside 2 threads on each of 2 ranks of a 2-core machine:

# %%
load = cores.load(cores=2, ranks=2, workers=4, threads=2)
print(f"{load['ranks']} ranks x ({load['threads']} threads + {load['workers']} workers) = {load['busy']} busy on "
      f"{load['cores']} cores: they take turns")

# %% [markdown]
# ## Gradient accumulation with `no_sync`
# k micro-batches per optimizer step; inside `ddp.no_sync()` backward keeps gradients local, the last
# micro-batch all-reduces their sum. On 2 ranks, micro-batch 8, k = 4 (an MLP: BatchNorm's statistics are
# per micro-batch, so a BatchNorm model's accumulated gradient is not the large batch's):

# %%
acc = launch(accumulate.accumulate, kwargs={"use_no_sync": True}, world_size=2, threads=1, backend="gloo")[0]
plain = launch(accumulate.accumulate, kwargs={"use_no_sync": False}, world_size=2, threads=1, backend="gloo")[0]
print(f"{acc['samples']} samples per step; all-reduces: {acc['allreduce_calls']} with no_sync, {plain['allreduce_calls']} without")

# %%
verdicts.same_gradients(acc["max_abs_diff"], acc["max_abs_grad"]).show();

# %% [markdown]
# ## The procedure, on this run
# Notebook 00's seven measurements, in order, read off the broken setup's run on 2 CPU ranks here (round 2)
# against 1 rank:

# %%
# NBVAL_IGNORE_OUTPUT
for line in procedure.walk(raw, times, found, "broken x1", "broken x2"):
    print(line)

# %% [markdown]
# ## Summary
# - Measure 1 and 2 ranks in the same rounds, and time what happens between the steps: here the evaluation
#   between epochs, which step timings alone never see.
# - Rank the avoidable costs and fix the largest first (here the duplicated evaluation, in the section on
#   ranking), then measure again, at the run length you care about.
# - The standard tools each answer one question: the profiler where a step's time goes; HTA how busy the GPU
#   was and, on several ranks, who waited for whom; DETAIL which parameters DDP waited for; NCCL_DEBUG and
#   `nvidia-smi topo -m` which path the bytes take.
#
# ## Exercises
# 1. A machine has 16 cores and 4 GPUs, one rank each. How many loader workers per rank does the core budget allow? `check("07.1", answer)`
# 2. `no_sync` accumulation with a micro-batch of 8 per rank, 4 micro-batches per optimizer step, 8 ranks: how many samples does one optimizer step see? `check("07.2", answer)`
# 3. On 2 ranks an epoch takes 6 s of training and 4 s of evaluation, every rank evaluating the whole test set. With the evaluation split between the ranks, how long is the epoch? `check("07.3", answer)`

# %%
check("07.1", ...)
check("07.2", ...)
check("07.3", ...)
