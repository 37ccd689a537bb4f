# %% [markdown]
# # 07 · Diagnose your own run

# %% [markdown]
# **Your DDP run is barely faster on 2 ranks than on 1: where does the time go, and what do you fix first?**
# Rank the costs, fix the largest, measure again. A cost every rank repeats caps the speed-up: with the
# evaluation a share s of the 1-rank run, done whole on every rank, 2 ranks gain at most
# 1 / (s + (1 - s) / 2) (Amdahl). In the recorded one-H200 run s was 15%, a cap of 1.74x (modelled from
# the recorded share); below, 2 CPU ranks measure both (measured here). On a GPU ask first whether it is
# busy: that H200 was busy 6% of the traced steps (recorded); the host set the pace.

# %% [markdown]
# **What you will learn**: to time 1 against 2 ranks in the same rounds and rank the costs, by hand, with
# `diagnose`, and with no line changed (the doctor); which tool to believe when a GPU waits for its host; what
# no tool here sees. **Builds on** `00_first_launch` and both cases. Previous: `06_case2_breakeven.ipynb`.
# This is the last notebook.

# %% [markdown]
# **How this was measured.** The workload is neither case: a ResNet-18-like CNN on seeded synthetic CIFAR-shaped
# images, per-rank batch 32, quarter width on the CPU. Its habits: crop and flip in PIL in the
# main process, `loss.item()` and a print every step, every rank evaluating the whole test set, no
# `sampler.set_epoch`. Here 2 gloo ranks of one thread each share this machine's cores, every setup in 7
# interleaved rounds of one launch; times move with the machine's load. The GPU figures come from one recorded
# run (world size 1); no multi-GPU run is recorded yet.

# %%
import statistics
import sys
import tempfile

from ddp_lessons import Record, Run, compare, diagnose, doctor, launch, place
from ddp_lessons.cases import own
from ddp_lessons.cases.own.exercises import check

size = dict(width=16, train_size=256, test_size=1024, epochs=2)
broken, fixed = own.Options.broken(**size), own.Options.fixed(**size)
sharded = own.Options.preset("eval_sharded", **size)   # the first fix alone
print(broken)
print("the fixes:", fixed.diff(broken))
print(f"{own.parameter_count(own.SmallResNet(width=16)):,} parameters at width 16 (ResNet-18: about 11.2 million)")

# %% [markdown]
# One core per rank (`threads=1`), as one GPU per rank: the 1-rank run is the one-device baseline.

# %%
where = place(2)
print(where.describe())

# %% [markdown]
# ## 1 against 2 ranks, broken against fixed, in the same rounds
# One launch of 2 ranks runs five setups in 7 rounds, the order rotated and reversed: broken and fixed on 1
# rank (rank 0 alone, rank 1 waiting) and on 2, and on 2 the broken one with only its evaluation sharded.
# A run's time is its slowest rank's wall time, evaluation included.

# %%
# NBVAL_IGNORE_OUTPUT
setups = {"broken x1": (broken, 1), "broken x2": (broken, 2), "sharded x2": (sharded, 2),
          "fixed x1": (fixed, 1), "fixed x2": (fixed, 2)}
raw = launch(own.train.rounds, args=(setups, 7), world_size=2, threads=1, backend=where.backend, timeout=600)
here = own.readout.record(raw)   # setup -> one Run per round, read like a saved record
times = own.readout.times(here)
for name, seconds in times.items():
    print(f"{name:10s} run time per round: {', '.join(f'{t:.2f}' for t in seconds)} s")

# %%
own.plots.rounds(times, title="run time per round, 1 and 2 CPU ranks (measured here)")

# %% [markdown]
# ## What the second rank buys
# With every rank evaluating the whole test set, the second rank shares only the training: 2 ranks need at
# least `s + (1 - s) / 2` of the 1-rank run's time (Amdahl, the opening's cap). On this run's numbers:

# %%
# NBVAL_IGNORE_OUTPUT
one, two = here.rounds("broken x1"), here.rounds("broken x2")
s = statistics.median(own.readout.eval_share(run[0]) for run in one)
bound = own.readout.amdahl(s, ranks=2)
speedup = [t1 / t2 for t1, t2 in zip(times["broken x1"], times["broken x2"], strict=True)]
print(f"evaluation: {s:.0%} of the 1-rank run (median of {len(one)} rounds); bound: 1 / ({s:.2f} + {1 - s:.2f} / 2)"
      f" = {bound:.2f}x")
print(f"measured: speed-up {statistics.median(speedup):.2f}x (rounds {min(speedup):.2f} .. {max(speedup):.2f}) "
      f"against the bound {bound:.2f}x")

# %% [markdown]
# The speed-up cannot pass the bound (the evaluation does not shrink), and falls below it by what two ranks on
# shared cores lose besides. Counted: on 2 ranks each rank evaluates every test sample.

# %%
print("test samples evaluated per rank on 2 ranks:", [own.readout.eval_samples(rank) for rank in two[0]],
      "of", broken.test_size)

# %% [markdown]
# ## Where the time goes, ranked by cost
# Per rank on 2 ranks: the evaluation beyond the rank's share (`eval x (1 - 1/2)`), the wait for each batch, the
# per-step `loss.item()` and print, and the all-reduce the backward did not hide (on gloo it includes waiting
# for the slower rank). Round 2:

# %%
# NBVAL_IGNORE_OUTPUT
costs = own.readout.costs(two[1])
for cause in own.readout.CAUSES:
    print(f"{cause:22s}", "  ".join(f"rank {i} {c[cause] * 1e3:6.1f} ms" for i, c in enumerate(costs)))

# %% [markdown]
# Whether the evaluation outweighs everything else together could go the other way on a machine with slow
# Python (the loader's wait) or busy cores (the all-reduce's wait), so it is decided on every round:

# %%
own.CLAIMS.decide("evaluation_costs_most", [own.readout.cost_ratio(run) for run in two]).show();

# %% [markdown]
# ## The same run through `diagnose`
# `ddp_lessons.diagnose` reads the same ranks (each one's `StepTimer` result, the evaluation timed with
# `timer.outside("eval")`) and ranks what cost them time, each finding with what to change. Round 2 of the
# broken setup on 2 ranks:

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose(two[1])
found

# %%
own.plots.findings(found, title="diagnose: the broken setup on 2 CPU ranks, round 2")

# %%
# NBVAL_IGNORE_OUTPUT
print("diagnose's first finding:", found.findings[0].label if found.findings else "none")
cover = [own.readout.coverage(rank) for name in here.setups for run in here.rounds(name) for rank in run]
print(f"the timer's account explains {min(cover):.1%} .. {max(cover):.1%} of each rank's wall ({len(cover)} "
      "rank-runs)")

# %% [markdown]
# The account (steps plus named work between them) explains nearly all of each rank's time; the rest is time
# between the timer's marks, which grows while a rank waits for a core.

# %% [markdown]
# ## The first fix alone, measured again
# Only what ranks first, fixed: "sharded x2" evaluates each rank's shard, in the same rounds:
# ```python
# -    correct, seen = evaluate(model, DataLoader(testset))                    # every rank, every sample
# +    sampler = DistributedSampler(testset, shuffle=False)                   # this rank's shard
# +    counts = torch.tensor(evaluate(model, DataLoader(testset, sampler=sampler)))
# +    dist.all_reduce(counts)                                               # correct and seen, over the ranks
# ```
# Run time per round against broken, then the other fixes against it; `diagnose` again:

# %%
# NBVAL_IGNORE_OUTPUT
for a, b in (("broken x2", "sharded x2"), ("sharded x2", "fixed x2")):
    r = own.readout.paired(times, a, b)
    print(f"{b} / {a}: median {r['median']:.2f} ({r['lo']:.2f} .. {r['hi']:.2f}, {r['rounds']} rounds)")
after = diagnose(here.rounds("sharded x2")[1])   # what ranks first now
for f in after.findings[:3]:
    print(f"{f.label} [{f.status}]: {f.seconds:.2f} s, {f.window_share:.0%} of the window")

# %% [markdown]
# Sharding halves each rank's evaluation; what `diagnose` ranks first now is the next fix. With a test set
# four times the training set the evaluation can still lead (then: evaluate less often). A ratio whose rounds
# straddle 1: that change bought nothing measurable here.
#
# ## Fixed, and measured again
# The other fixes: `set_epoch`, no per-step log, budgeted loader workers. `compare`: speed-up over the same
# setup on 1 rank, and efficiency (speed-up / 2 ranks).

# %%
# NBVAL_IGNORE_OUTPUT
for setup in ("broken", "fixed"):
    print(compare({f"{setup} x{k}": here.rounds(f"{setup} x{k}") for k in (1, 2)}, baseline=f"{setup} x1"), "\n")

# %%
own.CLAIMS.decide("fix_saves_time", times["broken x2"], times["fixed x2"]).show();

# %% [markdown]
# `set_epoch`: `DistributedSampler` shuffles with its seed plus the epoch it was told; without
# `sampler.set_epoch(epoch)` every epoch draws the same order. The first indices rank 0 drew in epochs 0 and 1:

# %%
for name in ("broken x1", "fixed x1"):
    first, second = here.run(name, 0)[0]["order"]
    print(f"{name}: epoch 0 {first[:4]}, epoch 1 {second[:4]}")

# %% [markdown]
# ## Zero lines changed: the doctor
# The doctor needs no line changed: it runs your command with its hooks in the processes it starts
# (`doctor([...])` from Python). Against 1 rank, pin the threads in both: `OMP_NUM_THREADS=4 python -m
# ddp_lessons doctor --steps 10 -- torchrun --standalone --nproc_per_node 1 train.py`, then the same with
# `--nproc_per_node 2`; unpinned, torchrun gives each of 2 ranks 1 thread, a lone rank every core's. The
# patient, a plain DDP script, evaluates the whole test set on every rank; rank 0 prints `loss.item()` each step.

# %%
with tempfile.TemporaryDirectory() as tmp:
    script = own.standalone.copy_to(tmp)
    checkup = doctor([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          script], steps=10, warmup=2, capture=True, runs_dir=tmp)
printed = [line for line in checkup.stdout.splitlines() if line.startswith("epoch")]
print(f"exit status {checkup.returncode}; {len(checkup.run)} ranks timed; the script printed {len(printed)} lines "
      "of its own (in checkup.stdout)")

# %%
# NBVAL_IGNORE_OUTPUT
checkup

# %%
own.CLAIMS.decide("doctor_ranks_evaluation_first", own.readout.first_finding(checkup.diagnosis)).show();

# %% [markdown]
# `checkup.diagnosis` is the `Diagnosis` above, `checkup.run` the `Run` it read. The evaluation's fix needs your
# code, so the doctor lists it apart; for a setting (bucket size, loader workers) `--confirm` runs the command
# again with it changed, in interleaved rounds, and says what it saved.

# %% [markdown]
# ## On a GPU: which tool to believe
# The same workload at half width on one H200 under DDP and NCCL (world size 1), recorded by
# `benchmarks/record_own_run_gpu.py` with a profiler trace of 3 steps of the broken setup. Where it was made:

# %%
gpu = Record.load(own.gpu.RUN)
print(own.gpu.provenance(gpu))
print("the course itself pins torch 2.13 (CPU); setups:", ", ".join(gpu.setups))
share, cap = own.gpu.evaluation_cap(gpu)
print(f"evaluation: {share:.0%} of the 1-GPU run; 2 such GPUs, each evaluating all: at most {cap:.2f}x (modelled)")

# %%
# NBVAL_IGNORE_OUTPUT
slow = Run.load(own.gpu.RUN, setup="broken")   # the round of median wall time
gpu_found = diagnose(slow)
gpu_found

# %%
busy, traced = own.readout.busy_share(slow)
step = slow[0].median_step()
print(f"diagnose's first finding: {gpu_found.findings[0].label} [{gpu_found.findings[0].status}]")
print(f"the profiler trace: the GPU busy {busy:.0%} of {traced} traced steps")
print(f"the CUDA events' phases: forward {step['forward'] * 1e3:.1f} ms, backward {step['backward'] * 1e3:.1f} ms "
      f"of a {step['step_time'] * 1e3:.1f} ms step")

# %% [markdown]
# Holistic Trace Analysis on the same trace splits the GPU's time into computation, communication and idle, and
# the idle time into `host_wait` (nothing queued: the host is behind) and `kernel_wait` (gaps between queued
# kernels):

# %%
# NBVAL_IGNORE_OUTPUT
hta = own.gpu.hta_summary(gpu.trace) if own.gpu.hta_available() else {}
for name in ("temporal", "idle", "overlap"):
    print(name, hta.get(name, "needs `pip install HolisticTraceAnalysis`"))

# %% [markdown]
# Both agree: the GPU waited for its host almost all the time. Believe the trace: the
# CUDA events that time each phase are recorded as the host queues the work, so in a host-bound step they
# measure how fast the host issues kernels (5 ms of "forward" for a half-width ResNet at batch 32), not GPU
# work. `diagnose` reads the trace and puts host-bound steps first; at world size 1 it finds no communication
# or waiting. The change: more work per launch (a larger batch, `torch.compile`, CUDA graphs), no host sync
# every step.

# %% [markdown]
# ## Measure every fix at the run length you care about
# On the H200 the fixed setup (15 persistent loader workers, the core budget before its cap of 8; no per-step
# log) against the broken one, 5 interleaved rounds of 2 epochs:

# %%
print(compare({name: gpu.rounds(name) for name in gpu.setups}, baseline="broken"))

# %%
for name in gpu.setups:
    run = own.readout.with_passes(gpu.run(name, 1))
    first, median = own.readout.first_and_median_stall(run[0])
    data = diagnose(run, epochs=200).finding("data_loading")
    print(f"{name}: first step's data wait {first * 1e3:.0f} ms, then {median * 1e3:.2f} ms a step; projected to "
          f"200 epochs (modelled): {data.seconds if data else 0:.0f} s of data wait")

# %% [markdown]
# Each fixed step is shorter, yet the 2-epoch run is not: the workers' start in the first step (about a third of
# a second) costs what they save over 128 steps, inside the spread of 5 rounds. Projected to 200 epochs
# (per-epoch costs times 100, start-up once) the fixed setup waits for data half as long. Measure a fix at the
# run length, and on the ranks, you will use.

# %% [markdown]
# ## What two GPUs would show, and how to record it
# At world size 1 the standard tools have nothing between GPUs to show. The recorded `NCCL_DEBUG=INFO` lines,
# by subject, and the topology:

# %%
lines = own.gpu.results(gpu, "nccl_debug")["lines"]
print({kind: len(group) for kind, group in own.gpu.sort_nccl(lines).items()})
print("lines naming a transport between GPUs ('via ...'):", sum(" via " in line for line in lines))
print(own.gpu.topology(gpu))

# %% [markdown]
# On 2 GPUs (not recorded here; published examples cited):
# - `NCCL_DEBUG=INFO` prints a line per channel and peer, such as `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`: the
#   GPUs reach each other directly (NVLink or PCIe peer-to-peer); `via SHM`: through host memory, no peer
#   access. NVIDIA/nccl issue 952 posts `P2P/IPC` inside a node, `NET/Socket` between nodes; issue 1190, two
#   RTX 2080 Ti `via direct shared memory` (older NCCL's words for SHM).
# - HTA's `get_comm_comp_overlap`: per rank, the share of communication that computation overlaps (near 100%:
#   hidden behind the backward).
# - HTA's temporal breakdown shows a straggler: the others' NCCL kernels run until it joins, so it has the
#   least communication time.

# %% [markdown]
# To record all three on a 2-GPU machine: `OMP_NUM_THREADS=4 NCCL_DEBUG=INFO torchrun --standalone
# --nproc_per_node 2 -m ddp_lessons own --preset broken --trace own-trace --record own-run-2gpu 2>&1 | tee
# own-2gpu.log`, then
# `grep " via " own-2gpu.log`, `TraceAnalysis(trace_dir="own-trace")` and `python -m ddp_lessons diagnose
# own-run-2gpu`.
#
# ## What the tool cannot see: check by hand
# | check | how |
# |---|---|
# | PCIe generation and width as negotiated (an x8 slot, Gen 3) | `nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current --format=csv`, under load |
# | clocks, and throttling for power or heat | `nvidia-smi -q -d PERFORMANCE` during the run |
# | peer access blocked by ACS or an IOMMU (NCCL falls back to SHM) | `nvidia-smi topo -p2p r`; the `via` lines above |
# | each rank's NUMA node and cores | topo's "CPU Affinity" column against `taskset -cp PID`, `numactl --show` |
# | what a few traced steps miss | an Nsight Systems timeline: `nsys profile -t cuda,nvtx,osrt python train.py` |

# %% [markdown]
# In the code:
#
# | check | how |
# |---|---|
# | BatchNorm: DDP broadcasts rank 0's buffers before every forward (`broadcast_buffers=True`, in torch 2.13 `forward_sync_buffers`) | broadcasts in a trace; `SyncBatchNorm` adds a collective in each BN layer's forward and backward |
# | `torch.compile` with DDP: DDPOptimizer splits the graph at bucket boundaries | `TORCH_LOGS=graph_breaks,ddp_graphs` |
# | Lightning's `self.log(..., sync_dist=True)` every step: an all-reduce per value | the trace's all-reduce count per step |
# | every rank making a CUDA context on GPU 0 (no `torch.cuda.set_device(local_rank)`) | `nvidia-smi` lists every rank's process on GPU 0 |
# | `nn.DataParallel` instead of DDP: one process, scatter and gather every step | `type(model)` |
# | `DistributedSampler(rank=LOCAL_RANK)` on several nodes: every node the same shards | use the global `RANK` |

# %% [markdown]
# ## An unused parameter, named
# A model with a head `forward` never calls, under DDP with `find_unused_parameters=False`, on 2 gloo ranks. At
# the default debug level the error gives parameter indices; `TORCH_DISTRIBUTED_DEBUG=INFO` names them, and
# DETAIL adds checks on every collective (extra work: not for timing runs). The INFO message:

# %%
errors = launch(own.unused.unused_parameter_errors, world_size=2, threads=1, backend="gloo")[0]
names = own.unused.unused_names(own.SmallResNet(width=8, with_unused_branch=True))
print(errors["INFO"])
for level, message in errors.items():
    print(f"{level:6s} names {sum(n in (message or '') for n in names)} of the {len(names)} unused parameters")

# %% [markdown]
# INFO already names the parameters DDP waited for: reach for it before DETAIL.
#
# ## Cores, and accumulation with `no_sync`
# Every rank's threads and loader workers share the machine's cores; a rank's share is cores // ranks. On a GPU
# one thread queues kernels and up to 8 loader workers take the rest: the pin-memory thread, NCCL's proxy and
# the driver need cores too.

# %%
for cores, ranks, dev in [(2, 2, "cpu"), (16, 1, "cuda"), (64, 4, "cuda")]:
    b = own.cores.budget(cores, ranks, dev)
    print(f"{cores:3d} cores, {ranks} {dev} rank(s): {b['workers']:2d} workers + {b['threads']} thread(s) per rank")
load = own.cores.load(cores=2, ranks=2, workers=4, threads=2)
print(f"the copied num_workers=4 beside 2 threads, 2 ranks: {load['busy']} busy on {load['cores']} cores")

# %% [markdown]
# Accumulating k micro-batches per optimizer step: inside `ddp.no_sync()` the backward keeps gradients local,
# and the last micro-batch all-reduces their sum. On 2 ranks, micro-batch 8, k = 4 (an MLP: BatchNorm's
# statistics are per micro-batch, so a BatchNorm model's accumulated gradient is not the large batch's):

# %%
acc = launch(own.accumulate.accumulate, kwargs={"use_no_sync": True}, world_size=2, threads=1, backend="gloo")[0]
plain = launch(own.accumulate.accumulate, kwargs={"use_no_sync": False}, world_size=2, threads=1, backend="gloo")[0]
print(f"{acc['samples']} samples per step; all-reduces: {acc['allreduce_calls']} with no_sync, "
      f"{plain['allreduce_calls']} without")
same = acc["max_abs_diff"] <= 1e-5 * acc["max_abs_grad"]   # float rounding aside
print("the accumulated gradients", "equal" if same else "differ from", "the large batch's (to 1e-5 of the largest)")

# %% [markdown]
# ## Summary
# - Time 1 and 2 ranks in the same rounds, threads pinned alike, with the work between steps: an evaluation
#   every rank does in full caps the speed-up (Amdahl).
# - Fix the largest cost alone, then measure and diagnose again, at the run length and ranks you will use.
# - On a GPU, believe a profiler trace over event timings when the GPU waits for its host (busy 6% here).
# - Each tool answers one question: the profiler and HTA how busy the GPU was; `diagnose` and the doctor what
#   cost the time; `TORCH_DISTRIBUTED_DEBUG=INFO` which parameters DDP waited for; `NCCL_DEBUG=INFO` and
#   `nvidia-smi topo -m` the bytes' path.

# %% [markdown]
# ## Exercises
# 1. A machine has 16 cores and 4 GPUs, one rank each. How many loader workers per rank does the core budget
#    allow? `check("07.1", answer)`
# 2. `no_sync` accumulation with a micro-batch of 8 per rank, 4 micro-batches per optimizer step, 8 ranks: how
#    many samples does one optimizer step see? `check("07.2", answer)`
# 3. On 2 ranks an epoch takes 6 s of training and 4 s of evaluation, every rank evaluating the whole test set.
#    With the evaluation split between the ranks, how long is the epoch? `check("07.3", answer)`

# %%
check("07.1", ...)
check("07.2", ...)
check("07.3", ...)
