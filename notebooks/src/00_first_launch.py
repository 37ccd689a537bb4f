# %% [markdown]
# # 00 · A first launch: workers, all-reduce, and where a step's time goes

# %% [markdown]
# **How do I launch and time DDP workers from a notebook, what does timing cost, and what does an
# all-reduce cost here?** `launch(fn, world_size=2)` runs the ranks; `StepTimer` splits each
# step into compute and the all-reduce's exposed part. Its default costs a 3 ms GPU step median +5%,
# unresolved (-6% to +41%) at world size 1 (recorded, one H200); the doctor, the same timer in an unchanged
# script, median +4.9%, resolved (+2.3% to +8.4%) of a 3.1 ms step (recorded, one H100). An all-reduce
# between 2 gloo ranks costs its latency up to 64 KiB, then its bytes (measured here).
# **Not answered here:** an all-reduce between GPUs; no multi-GPU record exists. On 2 GPUs,
# `python -m ddp_lessons allreduce --nproc 2 --record allreduce-<gpu>x2` records one.

# %% [markdown]
# **What you will learn**: to start DDP ranks from a cell and leave nothing behind, to split a step into
# compute and the all-reduce's exposed part, how far that split agrees with DDP's own clock and what
# timing costs, and to read what an all-reduce costs by size.
# **Builds on:** a PyTorch training loop. Next: `01_case1_broken.ipynb`. The course rebuilds two runs that
# were slower on several GPUs than on one:
#
# | notebooks | question |
# |---|---|
# | `01`-`03` | case 1 (plain DDP, 2 GPUs): is the work split, which fixes hold, what else costs time |
# | `04`-`06` | case 2 (Lightning, 3 GPUs): where the time goes, from which model size N GPUs win |
# | `07` | a run of your own, diagnosed and fixed in order |

# %% [markdown]
# **How this was measured.** Live cells start 2 ranks: gloo on this machine's CPU cores (a stand-in for
# GPUs), or NCCL with one GPU each where 2 are visible. The sweep keeps each
# size's best of 50 all-reduces after 10 untimed ones; each rank times its own calls, so a late peer's
# arrival lands in a call's time, but seldom in the best one. Step medians leave out steps 0 and 1, where
# DDP builds its buckets. Records name their machine (one H200 or one H100, torch 2.11+cu130; the course
# pins 2.13, CPU), versions and commit.

# %%
import torch
from ddp_lessons import Run, launch, place
from ddp_lessons.tool import allreduce, plots, records
from ddp_lessons.cases.intro import CLAIMS, Options, Sweep, check, readout, train, workers

# %% [markdown]
# ## Where the ranks run

# %%
# NBVAL_IGNORE_OUTPUT
info = records.machine_info()
{k: info[k] for k in ("cpu_count", "cpu_affinity", "cpu_model", "torch", "python", "gpus", "nccl")}

# %% [markdown]
# `place(2)` says where 2 ranks run: NCCL with one GPU each when 2 GPUs are visible, else gloo on the
# CPU. It counts GPUs without starting CUDA in this kernel (that would stop the fork below).

# %%
print("gloo available:", info["gloo"])
where = place(2)
print(where.describe())

# %% [markdown]
# ## A first launch
# `launch(fn, args, world_size=N)` starts N processes, initialises `torch.distributed` in each, runs
# `fn(*args)` and returns every rank's value in rank order. `workers.hello` all-reduces `rank + 1`. The
# workers fork from a clean Python that imports torch once per kernel, so only the first launch pays it.

# %%
out = launch(workers.hello, world_size=where.world_size)
for r in out:
    print(f"rank {r['rank']} of {r['world_size']} ({r['backend']}): sum = {r['sum']:g}, "
          f"RANK={r['env']['RANK']} MASTER_ADDR={r['env']['MASTER_ADDR']}, torch threads = {r['threads']}")


# %% [markdown]
# Both ranks hold 3: the all-reduce summed across processes. The workers see the variables `torchrun`
# sets, so the same function runs under `torchrun --standalone --nproc_per_node 2 -m ddp_lessons hello`;
# the cores are divided among them (1 thread each on 2 cores).
#
# ## The errors you will meet
# A function defined in a cell cannot reach the workers: they import it by name, and a notebook is no
# module. `launch` says so before it starts anything:

# %%
def my_worker():
    return 1

try:
    launch(my_worker, world_size=where.world_size)
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# Fork copies the kernel instead, so a cell's function works there, as long as this kernel never
# initialised CUDA:

# %%
print("CUDA initialised in this kernel:", torch.cuda.is_initialized())
print(launch(my_worker, world_size=where.world_size, start_method="fork"))

# %% [markdown]
# On a GPU machine a plain `torch.cuda.is_available()` is enough to make forked workers fail ("Cannot
# re-initialize CUDA in forked subprocess"). `launch` checks in a forked no-op child first and refuses.
# Recorded with `python -m ddp_lessons error-demos`:

# %%
demo = records.load("errors-h200")
print("recorded on:", records.describe_machine(demo))
seen = demo["results"]
for case in ("fork_before_cuda", "fork_after_is_available", "fork_after_cuda"):
    print(f"{case:24s} -> {seen[case][:110]}")

# %% [markdown]
# Asking for more NCCL ranks than there are GPUs is refused before any process starts (one more than
# this machine shows, so every machine refuses it):

# %%
try:
    launch(workers.hello, world_size=where.gpus_visible + 1, backend="nccl")
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# A worker that raises: `launch` names the rank that failed **first** and carries its traceback (on gloo
# the other rank fails a moment later, when its all-reduce loses its partner, and is reported as collateral).

# %%
try:
    launch(workers.fail_on, (1, "raise"), world_size=where.world_size)
except Exception as e:
    print(type(e).__name__, "| rank", e.rank, "|", e.summary)
    print("traceback ends with:", e.worker_traceback.strip().splitlines()[-1])

# %% [markdown]
# A collective that never completes (rank 1 skips the all-reduce rank 0 waits in) would hang for the
# backend's default, 30 minutes on gloo and 10 on NCCL. `launch` stops the run at its `timeout` and names
# the ranks that did not finish:

# %%
try:
    launch(workers.fail_on, (1, "skip"), world_size=where.world_size, timeout=6 if where.device == "cpu" else 20)
except Exception as e:
    print(type(e).__name__, "|", e.summary)

# %% [markdown]
# After each of these nothing is left behind (tests/tool/test_launch.py checks each case).
#
# ## What an all-reduce costs here
# `allreduce.sweep` times all-reduces of float32 tensors from 4 KiB to 16 MiB (256 MiB on GPUs) on every
# rank. As in nccl-tests, **algbw** = bytes / time and **busbw** = algbw · 2(n−1)/n, the rate each link
# sustains in a ring all-reduce on n ranks, comparable with a link's bandwidth.

# %%
opts = Sweep()
sizes = allreduce.default_sizes(opts.lo, opts.largest(where.device))
sweep = launch(allreduce.sweep, (sizes, opts.iters, opts.warmup), world_size=where.world_size)
rows = allreduce.summarize(sweep)
best = readout.best_of(rows)
fit = allreduce.fit_latency_bandwidth(best)
print(len(rows), "message sizes on", sweep[0]["world_size"], "ranks,", sweep[0]["backend"])

# %%
# NBVAL_IGNORE_OUTPUT
for row in best[::2]:
    print(f"{row['bytes']:>10,d} B  best {row['time'] * 1e6:7.0f} us  algbw {row['algbw'] / 1e9:5.2f} GB/s  "
          f"busbw {row['busbw'] / 1e9:5.2f} GB/s")
flat = readout.small_sizes(best)
print(f"up to 64 KiB: best {flat[0] * 1e3:.2f} to {flat[1] * 1e3:.2f} ms (the latency)")
print(f"fit: {fit['latency'] * 1e6:.0f} us + bytes / {fit['bandwidth'] / 1e9:.2f} GB/s; "
      f"it misses some size by up to {fit['max_rel_error']:.0%}")

# %% [markdown]
# Where the time hardly moves with the size, it is the latency; where it grows, the bytes. The medians
# sit above the best iterations by this machine's scheduler noise:

# %%
plots.bandwidth([("median of 50", rows, None), (f"best of 50: {where.describe()}", best, fit)])

# %% [markdown]
# A straight line misses where the bandwidth changes with size (by the share printed above): read your
# gradient's size off the table.
#
# The claim reads two ratios: 64 KiB against 4 KiB (16x the bytes; latency-bound under 4x) and the largest
# size against a quarter of it (4x the bytes; bandwidth-bound over 2x). The four sizes are timed again, one
# call each in 150 interleaved rounds, so a busy moment hits all four. A larger message timed much faster
# (under 0.57x) is noise and decides nothing; 4x the bytes costing over 4x the time is not: the bandwidth
# falls with size.

# %%
four = launch(workers.interleaved, (opts.compared(where.device), opts.rounds, opts.warmup),
              world_size=where.world_size)
r = readout.ratios(four)
print(f"each size's best of {opts.rounds} interleaved rounds")

# %%
# NBVAL_IGNORE_OUTPUT
small, large = r["sizes"][2:]
print(f"64 KiB / 4 KiB: {r['small']:.2f}x; {large >> 20} MiB / {small >> 20} MiB: {r['large']:.2f}x")
if r["large"] > 4:
    print(f"4x the bytes took {r['large']:.1f}x the time: the bandwidth falls with size here, which one latency "
          "and one bandwidth do not describe (why is not measured: caches, gloo's algorithm, TCP buffers)")

# %%
CLAIMS.decide("latency_then_bandwidth", *readout.misfit(r)).show();

# %% [markdown]
# The slider shows what the fitted line predicts for a size (nothing is re-run); the plain call under it
# is the checked output.

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
# Sweeps recorded on several GPUs would be listed here:

# %%
gpu_sweeps = [n for n in records.list_records("allreduce") if "x2" in n or "x4" in n or "x8" in n]
print("measured live above:" if where.backend == "nccl" else "this machine ran gloo;", where.describe())
print(gpu_sweeps or "no multi-GPU all-reduce record yet: python -m ddp_lessons allreduce --nproc 2 --record NAME")

# %% [markdown]
# ## Where a step's time goes
# `train.train` trains a small MLP with DDP and times every step on every rank with `StepTimer`: data wait,
# forward, backward, optimizer, and each gradient bucket's all-reduce (inside a DDP communication hook).
# Preset "breakdown" caps buckets at 1 MB, so 3.2 MB of gradients leave in several all-reduces a step.
# `Run` reads what the ranks returned.

# %%
step_opts = Options.preset("breakdown")
run = Run(launch(train.train, (step_opts,), world_size=where.world_size))
steps = run[0].steps()
print("gradient bytes per rank:", run[0]["grad_bytes"])
print("all-reduce calls per step (step 0, then after DDP rebuilt its buckets):",
      steps[0]["allreduce_calls"], "then", steps[5]["allreduce_calls"])
print("bytes all-reduced per step:", steps[5]["allreduce_bytes"])

# %%
plots.step_breakdown(run, title=f"small MLP, {where.world_size} {where.backend} ranks: time per step", skip=2)

# %% [markdown]
# The red part is the **exposed** all-reduce: from the last bucket becoming ready (backward compute done)
# to the last all-reduce finishing. The black line is the all-reduce's whole busy time; above the red bar
# it ran hidden behind the backward. One step on a time axis:

# %%
plots.timeline(run, step=10)

# %%
# NBVAL_IGNORE_OUTPUT
for rank in run:
    m = rank.median_step()
    print(f"rank {rank.rank}: step {m['step_time'] * 1e3:.1f} ms = forward {m['forward'] * 1e3:.1f} + backward "
          f"{m['backward'] * 1e3:.1f} (exposed all-reduce {m['exposed'] * 1e3:.1f}) + optimizer "
          f"{m['optimizer'] * 1e3:.1f}; all-reduce busy {m['allreduce'] * 1e3:.1f} ms")

# %% [markdown]
# The same timer without changing a line of your script:
# `python -m ddp_lessons doctor -- torchrun --standalone --nproc_per_node 2 train.py` runs it as it is and
# prints where its steps went (docs/tool.md: what it patches, what it cannot see).
#
# ## Where the timer puts a known delay
# Preset "delayed" adds 50 ms after each bucket's all-reduce (part of what is sent, not of the timing).
# Against the same run without it, the delay should land in the exposed all-reduce and the step's wall
# time, not in the compute:

# %%
base = Run(launch(train.train, (Options.preset("check"),), world_size=where.world_size))
slow = Run(launch(train.train, (Options.preset("delayed"),), world_size=where.world_size))
calls = slow[0].median_step()["allreduce_calls"]
print(f"injected: 50 ms x {calls:.0f} all-reduce call(s) per step")

# %%
# NBVAL_IGNORE_OUTPUT
moved = readout.moved(base, slow)
print("measured, rank 0, median step moved by: " + ", ".join(f"{k} {v * 1e3:+.1f} ms" for k, v in moved.items()))

# %% [markdown]
# A reading: DDP waits for the hook's future, so the step must move (tests/tool/test_timing.py checks
# where the timer books it): a slow link's time appears in the exposed part.
#
# ## The timer against DDP's own clock
# DDP keeps timings of its own (`_get_ddp_logging_data`, private but present in torch 2.x); preset "check"
# returns both for every step. The timer's exposed part starts once its hook has handed the last bucket to
# gloo; the hook's own Python is kept apart (`hook_time`). Do they agree within 25% of DDP's figure plus 50 µs?

# %%
# NBVAL_IGNORE_OUTPUT
c = readout.clocks(base)
print(f"exposed all-reduce, medians of {c['steps']} steps: timer {c['timer'] * 1e3:.2f} ms, DDP {c['ddp'] * 1e3:.2f} "
      f"ms; the timer's hook, kept apart, {c['hook'] * 1e3:.2f} ms a step")
rest = f", the other {c['steps'] - c['agree']} by a median {c['apart'] * 1e3:.2f} ms" if c["agree"] < c["steps"] else ""
print(f"agree in {c['agree']} of {c['steps']} steps{rest}; timer - DDP {c['difference'] * 1e3:+.2f} ms a step (median)")
print(f"DDP's compute end falls {c['head'] * 1e3:+.2f} ms after the timer's hand-over, its end "
      f"{c['tail'] * 1e3:+.2f} ms after the timer's (medians)")

# %% [markdown]
# A reading: the clocks mark different moments, and the last line measures how far apart. DDP's compute
# end comes after the rest of the autograd pass (overlap, to DDP); its end, after the training thread
# waiting in DDP's `finalize_backward` wakes once gloo's thread is done. On shared cores each hand-over
# can wait for a core. Neither clock is the reference: the exposed all-reduce here is known to within that
# difference.

# %% [markdown]
# ## What the timer costs
# On a GPU the default `StepTimer` (mode "light") leaves DDP's C++ all-reduce alone: a CUDA event at each
# mark and at the backward's compute end, NCCL's flight recorder at the end. `benchmarks/timer_validation.py
# --cost-rounds 21` timed case 2's 3 ms step under DDP on one H200 in 21 interleaved rounds, each mode
# against DDP alone, when "light" still read DDP's timings every 10th step (`light_ddp`: every step):

# %%
cost = records.load("timer-cost-h200x1")
print("recorded on:", records.describe_machine(cost))
costs = readout.cost_rounds(cost)
for mode in ("light", "light_marks", "light_ddp", "profiler"):
    print(f"{mode:12s} {readout.cost_spread(costs[mode])}")

# %% [markdown]
# The rounds do not resolve the default's cost: they reach both sides of zero, and `light_marks`, a subset
# of `light`, costs more in median. It was measured at world size 1 only, where NCCL runs a one-rank
# kernel. What the record does decide is the timer against `torch.profiler`:

# %%
won, rounds = readout.costlier(costs, "light", than="profiler")
print(f"torch.profiler cost more than the light timer in {won} of {rounds} paired rounds")

# %% [markdown]
# Where the microseconds go, from the record's per-call costs:

# %%
micro = readout.per_call(cost)
floor = 5 * micro["ring_mark_us"] + micro["ddp_logging_read_us"] + micro["set_runtime_stats_us"] / 10
print(", ".join(f"{k} {micro[k]:.1f} us" for k in ("ring_mark_us", "new_event_mark_us", "ddp_logging_read_us",
                                                   "set_runtime_stats_us")))
print(f"5 marks + one read + a tenth of DDP's bookkeeping = {floor:.0f} us a step, "
      f"{floor / micro['step_us']:.1%} of the {micro['step_us'] / 1e3:.2f} ms step")

# %% [markdown]
# Today's "light" marks the compute end too and reads no DDP timings on a GPU.
# `benchmarks/doctor_cost.py --cuda` timed the doctor, which runs it in an unchanged script, against the
# command alone, 7 paired rounds per step size:

# %%
dc = records.load("doctor-cost-h100x1")
print("recorded on:", records.describe_machine(dc))
for row in readout.doctor_cost(dc):
    print(f"{row['step_ms']:.1f} ms step, {row['arm']:16s} {readout.cost_spread(row, digits=1)}; "
          f"its own report {row['self']:.1%}")

# %% [markdown]
# On the 3.1 ms step the doctor without its profiled steps costs a resolved few percent, its own report
# inside the rounds' spread; its 5 profiled steps (`--profile-steps 0` drops them) cost most in a 2 s run.
# On the 8.8 ms step 7 rounds do not resolve its cost.

# %% [markdown]
# `whatif` replays each bucket's ready time and size, which only mode "full" records: its Python hook
# costs more. Recorded on one H200, 5 rounds (a GPU machine with 2 GPUs runs it again live, on both):

# %%
full = readout.full_mode_cost(where)
print("recorded on:", records.describe_machine(full["record"]))
print(f"mode full against DDP alone: median {full['median']:+.0%}, rounds {full['rounds'][0]:+.0%} .. "
      f"{full['rounds'][-1]:+.0%} on a {full['step_ms']:.1f} ms step")

# %% [markdown]
# In the recorded rounds mode "full" cost more in each of 5, which only suggests it (chance level 6%): time
# a few steps in mode "full" for `whatif`, and leave "light" on otherwise.
#
# The flight recorder's durations against the profiler's kernel times agree within 10% only at 256 MB,
# so the timer takes a step's all-reduce time from them only there:

# %%
print(readout.fr_kernels(cost))

# %% [markdown]
# ## Your run is slower on N GPUs: what to measure first
# Each row can end the search; `diagnose` carries most of them to your run:
#
# | # | measure | on your run |
# |---|---|---|
# | 1 | scaling efficiency: samples/s on N / (N × samples/s on 1) | `compare(runs, baseline=...)`, column "efficiency" |
# | 2 | steps per rank: is the data split? | the timer's steps per rank; `len(loader)` |
# | 3 | gradient bytes against the link, bucket timeline | finding "exposed all-reduce"; `whatif` |
# | 4 | the transport: `nvidia-smi topo -m`, `NCCL_DEBUG=INFO` | `python -m ddp_lessons allreduce` |
# | 5 | per-rank imbalance and waits | finding "waiting for a slower rank" |
# | 6 | host-bound steps: `.item()`, prints, data on the training thread | finding "host-bound steps" |
# | 7 | start-up, evaluation, loader restarts | `diagnose(run, epochs=N)` |

# %% [markdown]
# ## Summary
# - `launch` runs DDP workers from a notebook, refuses what cannot work, names the rank that failed first.
# - An all-reduce costs its latency for small messages and its bytes for large ones; busbw = algbw ·
#   2(n−1)/n is the per-link rate; read your size off the sweep, not a fitted line.
# - A step splits into compute and exposed all-reduce; what the default timer costs a 3 ms GPU step is
#   unresolved at world size 1 (the spread above); the doctor's few percent is resolved on one H100.
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
