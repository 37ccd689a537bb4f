# %% [markdown]
# # 00 · A first launch: workers, all-reduce, and where a step's time goes
#
# **What you will learn**
# - how to start real multi-process DDP runs from a notebook with `ddp_lessons.launch`, and what it refuses;
# - what an all-reduce costs on this machine, as latency + bytes / bandwidth, in the units nccl-tests uses;
# - how to read a step's time on every rank: compute, all-reduce, and the part of the all-reduce the backward pass could not hide.
#
# **Builds on:** PyTorch basics (a model, a loss, `loss.backward()`, an optimizer). **Next:** `01_case1_broken.ipynb`.
#
# The course rebuilds two real questions whose DDP runs were slower on several GPUs than on one:
#
# | notebook | what it answers |
# |---|---|
# | `00_first_launch` | how to launch and time DDP workers; what an all-reduce costs here |
# | `01_case1_broken` | case 1 (2 GPUs, plain DDP, M3AE VQA): does the posted script split the work? where does its time go? |
# | `02_case1_answer` | which of the accepted answer's fixes hold, one at a time and together |
# | `03_case1_beyond` | what the answer missed: evaluation, unused heads, buckets and overlap, loaders, mixed precision; what could make 133 s against 105 s (a model); a setup that scales |
# | `04_case2_lightning` | case 2 (3 GPUs, Lightning): the posted test, through the helper and through Lightning's own launcher |
# | `05_case2_where_time_goes` | the wall time taken apart: start-up, validation, logging, data, NVML, compute, all-reduce |
# | `06_case2_breakeven` | "is my model too simple?": what one GPU can do with each lever, and from which width N GPUs beat the fastest one-GPU step |
# | `07_diagnose_your_own_run` | a run of your own (a small ResNet on CIFAR-shaped data): diagnosed, fixed in order, measured again; torch.profiler, HTA, `TORCH_DISTRIBUTED_DEBUG`, `NCCL_DEBUG`, core budget, `no_sync` |

# %% [markdown]
# ## Your run is slower on N GPUs than on one: what to measure first
# Most such cases are decided by a handful of measurements, taken in this order (each one can end the search).
# The course teaches each of them; `ddp_lessons.diagnose` carries most of them to your own run
# (`07_diagnose_your_own_run` walks a run through the list at its end):
#
# | # | measure | what it tells | taught in | on your run |
# |---|---|---|---|---|
# | 1 | scaling efficiency from steady-state steps: samples/s on N ranks / (N x samples/s on 1), warm-up steps left out | whether there is a problem at all, and how big | 01, 02, 07 | `compare(runs, baseline=...)` |
# | 2 | samples and steps per rank | whether the data is split at all (a sampler that gives every rank everything makes N ranks N times the work) | 01, 07 | the timer's step count per rank; `len(loader)` |
# | 3 | gradient bytes per step against the link's bandwidth, and the backward's bucket timeline | whether the all-reduce can hide behind the backward, and which bucket is left exposed | 00, 03, 06 | findings "exposed all-reduce", "the last bucket", "latency-bound"; `whatif` |
# | 4 | the transport: `nvidia-smi topo -m`, `NCCL_DEBUG=INFO`, an all-reduce benchmark | whether the bytes go GPU to GPU or through the host, and at what rate | 00, 03, 07 | `python -m ddp_lessons allreduce` |
# | 5 | per-rank imbalance and waits | whether one rank (more data, its own evaluation, a shared core) holds up the others | 01, 07 | finding "waiting for a slower rank"; relative speed per phase |
# | 6 | whether steps are host-bound | whether the GPU waits for Python: `loss.item()`, prints, data prepared on the training thread, kernel launches | 05, 06, 07 | findings "host-bound steps", "data-loading wait" |
# | 7 | per-launch and per-epoch costs: start-up, evaluation, loader restarts | what a short test overstates, and what a long run pays every epoch | 04, 05, 07 | findings "start-up (once per launch)", "work outside the steps"; `diagnose(run, epochs=N)` |

# %%
import torch
from ddp_lessons import launch, place
from ddp_lessons.tool import allreduce, plots, records
from ddp_lessons.course.timer_validation.check import validation_summary
from ddp_lessons.tool.timing import median_step, timed_steps
from ddp_lessons.cases.intro import verdicts, workers
from ddp_lessons.cases.intro.exercises import check

# %% [markdown]
# ## What this machine has
# Everything measured live in this notebook ran on the machine below (your numbers will differ from the stored ones).

# %%
# NBVAL_IGNORE_OUTPUT
info = records.machine_info()
{k: info[k] for k in ("cpu_count", "cpu_affinity", "cpu_model", "torch", "python", "gpus", "nccl")}

# %% [markdown]
# ## Where this lesson's ranks run
# The lesson teaches with 2 ranks. `place(2)` says where they run on this machine: NCCL with one GPU
# per rank when at least 2 GPUs are visible, else gloo with both ranks on the CPU (a one-GPU machine
# too). It counts GPUs through NVML, without starting CUDA in this kernel (that would stop the fork
# below). Every launch below asks for `where.world_size` ranks, and `launch` places them by the same rule.

# %%
print("gloo available:", info["gloo"])
where = place(2)  # the ranks this lesson teaches with
print(where.describe())

# %% [markdown]
# ## A first launch
# `launch(fn, args, world_size=N)` starts N processes, initialises `torch.distributed` in each (as placed above),
# runs `fn(*args)` and returns every rank's return value, in rank order. `workers.hello` all-reduces `rank + 1`:
# with 2 ranks every rank ends up holding 1 + 2 = 3. The workers come from a *fork server*: a clean Python
# that `launch` starts once per kernel, which imports torch once and forks each worker from there. The first
# launch pays for that import (seconds); later launches start in a fraction of a second. (Spawn, the other
# safe choice, imports torch again in every worker of every launch: `start_method="spawn"`.)

# %%
out = launch(workers.hello, world_size=where.world_size)
for r in out:
    print(f"rank {r['rank']} of {r['world_size']} ({r['backend']}): sum = {r['sum']:g}, "
          f"RANK={r['env']['RANK']} MASTER_ADDR={r['env']['MASTER_ADDR']}, torch threads = {r['threads']}")


# %% [markdown]
# The workers set the same variables `torchrun` sets (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
# `MASTER_PORT`), so the same function runs unchanged under
# `torchrun --standalone --nproc_per_node 2 -m ddp_lessons hello`. The cores are divided among the
# workers (1 thread each on 2 cores): without that, ranks that share cores fight over them.
#
# ## The errors you will meet, and what to do
# A function defined in a notebook cell cannot reach the workers (the fork server, like spawn, sends it by
# name, and a notebook has no module to import it from). `launch` says so before it starts anything:

# %%
def my_worker():
    return 1

try:
    launch(my_worker, world_size=where.world_size)
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# Fork copies the kernel instead, so a cell's function works, as long as CUDA is untouched in the kernel
# (a forked child cannot re-initialise it). Nothing above touched it, on a GPU machine too: `place`,
# `launch` and `records.machine_info()` count GPUs through NVML. `launch` checks before forking:

# %%
print("CUDA initialised in this kernel:", torch.cuda.is_initialized())
print(launch(my_worker, world_size=where.world_size, start_method="fork"))

# %% [markdown]
# This machine may have no GPU to show the CUDA case on, so here it is as recorded on a machine with one
# (`python -m ddp_lessons error-demos`). A plain `torch.cuda.is_available()` is enough to make forked
# workers fail ("Cannot re-initialize CUDA in forked subprocess"); `launch` finds out by forking a
# no-op child and asking it, and refuses before starting the workers:

# %%
demo = records.load("errors-h200")
print("recorded on:", records.describe_machine(demo))
for case in ("fork_before_cuda", "fork_after_is_available", "fork_after_cuda"):
    print(f"{case:24s} -> {demo['results'][case][:110]}")

# %% [markdown]
# Asking for more NCCL ranks than there are GPUs is refused before any process starts. The cell asks
# for one rank more than this machine shows GPUs, so every machine refuses it (what the recorded
# one-GPU machine answered is in `demo["results"]["too_many_nccl_ranks"]`):

# %%
try:
    launch(workers.hello, world_size=where.gpus_visible + 1, backend="nccl")
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# A worker that raises: `launch` names the rank that failed **first** (on gloo the other rank fails a moment
# later, when its all-reduce loses its partner, and is reported as collateral; on NCCL it waits until
# `launch` stops it) and carries the worker's traceback.

# %%
try:
    launch(workers.fail_on, (1, "raise"), world_size=where.world_size)
except Exception as e:
    print(type(e).__name__, "| rank", e.rank, "|", e.summary)
    print("traceback ends with:", e.worker_traceback.strip().splitlines()[-1])

# %% [markdown]
# A collective that never completes (rank 1 skips the all-reduce rank 0 waits in) would hang for the
# backend's default (30 minutes on gloo, 10 on NCCL); `launch` stops the run at its `timeout` and names the ranks that did not finish
# (6 s here; 20 s for NCCL ranks, whose start-up alone can take seconds):

# %%
try:
    launch(workers.fail_on, (1, "skip"), world_size=where.world_size, timeout=6 if where.device == "cpu" else 20)
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# After each of these, no worker process, port or temporary file is left, and the next launch works
# (tests/tool/test_launch.py checks each case, and interrupting the kernel too).
#
# ## What an all-reduce costs here
# `allreduce.sweep` times all-reduces of float32 tensors from 4 KiB to 16 MiB on every rank (to
# 256 MiB on GPUs, whose links need larger messages before the bytes, not the latency, decide).
# As in nccl-tests: **algbw** = bytes / time, and **busbw** = algbw · 2(n−1)/n, the rate each link
# must sustain in a ring all-reduce (comparable with a link's bandwidth whatever the number of ranks n).

# %%
sizes = allreduce.default_sizes(4 * 1024, (16 if where.device == "cpu" else 256) * 2**20)
sweep = launch(allreduce.sweep, (sizes, 30, 3), world_size=where.world_size)
rows = allreduce.summarize(sweep)
fit = allreduce.fit_latency_bandwidth(rows)
print(len(rows), "message sizes on", sweep[0]["world_size"], "ranks,", sweep[0]["backend"])

# %%
# NBVAL_IGNORE_OUTPUT
for r in rows[::2]:
    print(f"{r['bytes']:>10,d} B  {r['time'] * 1e6:9.0f} us  algbw {r['algbw'] / 1e9:5.2f} GB/s  busbw {r['busbw'] / 1e9:5.2f} GB/s")
print(f"fit: {fit['latency'] * 1e6:.0f} us + bytes / {fit['bandwidth'] / 1e9:.2f} GB/s")

# %%
plots.bandwidth([(f"live: {where.describe()}", rows, fit)])

# %% [markdown]
# Two claims the model makes, decided on this run. On two shared cores the medians of the small sizes
# jump between runs (a rank that loses its core can wait for the scheduler to give it back), so both read each size's
# best of 30 iterations. If small messages cost about the latency, 16 times the bytes of a 4 KiB message
# cost well under 4 times its time; if large ones cost their bytes, the largest message costs over twice
# one of a quarter its size (16 MiB against 4 MiB on CPUs, 256 against 64 MiB on GPUs; pure bandwidth gives 4,
# pure latency 1).

# %%
best = {r["bytes"]: r["best"] for r in rows}
verdicts.latency_then_bandwidth(best).show();

# %% [markdown]
# Move the slider to see what the fitted model predicts for a message size (it uses the numbers
# measured above; nothing is re-run). The plain call next to it is the checked output.

# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

def predicted(log2_bytes=20):
    n = 2 ** log2_bytes
    bound = "latency" if fit["latency"] > n / fit["bandwidth"] else "bandwidth"
    return f"{n:,d} B: predicted {allreduce.predict_time(n, fit) * 1e6:,.0f} us ({bound}-bound)"

widgets.interact(lambda log2_bytes: print(predicted(log2_bytes)),
                 log2_bytes=widgets.IntSlider(value=20, min=10, max=30, description="log2 bytes"));

# %%
print(predicted(10).split("(")[-1], predicted(26).split("(")[-1])

# %% [markdown]
# With two GPUs or more the sweep above ran on NCCL, live. Recorded as a run:
# `python -m ddp_lessons allreduce --nproc 2 --record NAME`. Recordings on several GPUs appear here once they exist:

# %%
if where.backend == "nccl":
    print("measured live above:", where.describe())
gpu_sweeps = [n for n in records.list_records("allreduce") if "h200x" in n]
for name in gpu_sweeps:
    rec = records.load(name)
    print(name, "|", records.describe_machine(rec))
print(len(gpu_sweeps) > 0 or "no multi-GPU all-reduce recording yet")

# %% [markdown]
# ## Where a step's time goes
# `workers.train_mlp` trains a small MLP with DDP and times every step on every rank with `timing.StepTimer`:
# data wait, forward, backward, optimizer, and each gradient bucket's all-reduce, timed inside a DDP
# communication hook. With 1 MB buckets the 3.2 MB of gradients go out in several all-reduces per step.

# %%
steps = launch(workers.train_mlp, (20, 512, 4, 64, 1.0), world_size=where.world_size)
s = timed_steps(steps[0])[5]
print("gradient bytes per rank:", steps[0]["grad_bytes"])
print("all-reduce calls per step (step 0, then after DDP rebuilt its buckets):",
      timed_steps(steps[0])[0]["allreduce_calls"], "then", s["allreduce_calls"])
print("bytes all-reduced per step:", s["allreduce_bytes"])

# %%
plots.step_breakdown(steps, title=f"small MLP, {where.world_size} {where.backend} ranks: time per step", skip=2)

# %% [markdown]
# The red part is **exposed** communication: the time between the last bucket becoming ready (backward
# compute done) and the last all-reduce finishing. The black line is the whole all-reduce busy time; what
# lies above the red bar ran while backward was still computing, hidden. The timeline shows one step:

# %%
plots.timeline(steps, step=10)

# %%
# NBVAL_IGNORE_OUTPUT
for r in steps:
    m = median_step(r)
    print(f"rank {r['rank']}: step {m['step_time'] * 1e3:.1f} ms = forward {m['forward'] * 1e3:.1f} + backward {m['backward'] * 1e3:.1f} "
          f"(of which exposed all-reduce {m['exposed'] * 1e3:.1f}) + optimizer {m['optimizer'] * 1e3:.1f}; all-reduce busy {m['allreduce'] * 1e3:.1f} ms")

# %% [markdown]
# ## Can the timer be trusted?
# Two cross-checks. First, make every bucket's all-reduce 50 ms slower (a known delay, `hooks.delayed`,
# added to what is sent): the delay sits inside the hook's interval, so the timer's all-reduce moving by
# 50 ms per call alone proves little. What the check asks is that it moves by that much **and** that the
# step's wall time, read from the host clock at the step's ends and not from the hook, moves by the same
# amount: the delay is found where it was put and the step really lost it. Both are read as intervals
# (Q1 of one run's steps minus Q3 of the other's, and the reverse), so the steps' spread is inside; the delay
# is large beside that spread (a few ms here, more on a loaded machine), so the check can decide.
# Second, DDP keeps timings of its own (`_get_ddp_logging_data`, private but present in torch 2.x): its
# exposed time must agree with ours on the run **without** the delay, where agreeing cannot come from
# both clocks seeing the same 50 ms.

# %%
mlp = dict(steps=12, width=256, depth=2, batch=16, bucket_cap_mb=25.0)
slow = launch(workers.train_mlp, kwargs=dict(mlp, comm_delay_s=0.05), world_size=where.world_size)
base = launch(workers.train_mlp, kwargs=dict(mlp, ddp_logging=True), world_size=where.world_size)
calls = round(median_step(slow[0])["allreduce_calls"])
verdicts.delay_found(timed_steps(base[0], skip=2), timed_steps(slow[0], skip=2), 0.05, calls).show();

# %% [markdown]
# ## The timer against DDP's own clock
# The undelayed run's exposed all-reduce is a few milliseconds: two clocks that agree there agree on
# something neither of them was told.

# %%
ours = [s["exposed"] for s in timed_steps(base[0], skip=2)]
theirs = [d["exposed"] for d in base[0]["ddp_logging"][2:]]
verdicts.agrees_with_ddp_worded(ours, theirs).show();

# %% [markdown]
# ## What the timer costs on a 3 ms GPU step
# A timer that slows the run it measures measures another run. On a GPU the default `StepTimer` (mode
# "light") leaves DDP's C++ all-reduce alone: it records a CUDA event at each mark (3 a step with
# `finish_step`, 2 more for the forward phase), reads DDP's own timings on every 10th step and NCCL's
# flight recorder once at the end. `benchmarks/timer_validation.py --cost-rounds 21` ran case 2's step
# under DDP on one H200 in 21 interleaved rounds: DDP alone (`builtin`), the default timer (`light`), its
# marks alone (`light_marks`), marks and the recorder (`light_fr`), DDP's timings read every step
# (`light_ddp`), and `torch.profiler` recording CPU and CUDA activity (`profiler`). Per round, each against `builtin`:

# %%
cost = records.load("timer-cost-h200x1")
print("recorded on:", records.describe_machine(cost), "| commit", cost["commit"])
rounds_ = [{m: v.get("s_per_step") for m, v in r.items()} for r in cost["results"]["runs"]["cost"]["ranks"][0]["rounds"]]
for mode in ("light", "light_marks", "light_fr", "light_ddp", "profiler"):
    over = sorted(r[mode] / r["builtin"] - 1 for r in rounds_)
    print(f"{mode:12s} median {over[len(over) // 2]:+.1%}, rounds {over[0]:+.1%} .. {over[-1]:+.1%}")

# %% [markdown]
# Where the microseconds go, from the record's per-call costs: a CUDA event mark from the timer's ring, a
# new CUDA event (what a naive timer does), one read of DDP's logging data, DDP's own bookkeeping on a sampled
# step (`set_runtime_stats_and_log`):

# %%
micro = cost["results"]["runs"]["cost"]["micro"]
step_us = sorted(r["builtin"] for r in rounds_)[len(rounds_) // 2] * 1e6
floor = 5 * micro["ring_mark_us"] + micro["ddp_logging_read_us"] + micro["set_runtime_stats_us"] / 10
print(", ".join(f"{k} {micro[k]:.1f} us" for k in ("ring_mark_us", "new_event_mark_us", "ddp_logging_read_us",
                                                   "set_runtime_stats_us")))
print(f"5 marks + one read + a tenth of DDP's bookkeeping = {floor:.0f} us a step, {floor / step_us:.1%} of "
      f"the {step_us / 1e3:.2f} ms step")

# %% [markdown]
# The per-call costs add up to under 2% of the step, yet the paired medians sit between +3% and +7% for
# modes that differ by one read, and single rounds reach +40%: on this machine the rounds resolve about
# +-5%, not 1%. What the record does decide is the comparison a practitioner faces, the timer against the
# profiler:

# %%
verdicts.cheaper_than_profiler(rounds_).show();

# %% [markdown]
# The flight recorder's durations against the profiler's kernel times (averaging all-reduces of 4, 32 and
# 256 MB, for which NCCL runs a kernel even at world size 1): they agree within 10% only at 256 MB, so the
# timer takes a step's all-reduce time from them only at that size (`light.TRUSTED_BYTES`) and otherwise
# keeps them as `bucket_durations`, flagged, beside DDP's own timings:

# %%
fr = next(r for r in validation_summary(cost) if r["check"] == "fr_kernels")
print({k: fr[k] for k in ("ratio_median", "within_10pct")})

# %% [markdown]
# ## Summary
# - `launch` runs real DDP workers from a notebook, refuses what cannot work before starting, names the
#   rank that failed first, and leaves nothing behind.
# - An all-reduce costs about latency + bytes / bandwidth; busbw = algbw · 2(n−1)/n is the per-link rate.
# - A step's time splits into compute and the all-reduce's exposed part; what overlaps backward is hidden.
#
# ## Exercises
# Replace each `...` with your answer and run the cell.
#
# **00.1** An all-reduce on 4 ranks reached algbw = 12 GB/s. What busbw is that, in GB/s?

# %%
check("00.1", ...)

# %% [markdown]
# **00.2** With a latency of 50 µs and an algbw of 4 GB/s, how long (in µs) does the all-reduce of
# case 2's gradients take (134,657 float32 parameters = 538,628 bytes)? Is it latency- or bandwidth-bound?

# %%
check("00.2", ...)

# %% [markdown]
# **00.3** `launch(workers.fail_on, (2, "raise"), world_size=4)`: which rank does the error name? Try it.

# %%
check("00.3", ...)
