# %% [markdown]
# # 03 · Case 1, beyond the answer: buckets, precision, evaluation, and what could make 133 s against 105 s
#
# **What you will learn**
# - what bucket size, mixed precision and a compression hook change in the all-reduce (calls, bytes, exposed time);
# - why a large gradient that becomes ready last is always exposed, whatever the bucket size;
# - how to model the post's 133 s against 105 s as a labelled model, with a sensitivity table over batch and link;
# - how to measure scaling efficiency, and a checklist for a DDP run that scales.
#
# **Builds on:** `02_case1_answer.ipynb` (which fixes hold) and `00_first_launch.ipynb` (the all-reduce cost model).
# **Previous:** `02_case1_answer.ipynb`. **Next:** `04_case2_lightning.ipynb`.
#
# Three kinds of numbers below, always labelled: **measured** live here (tiny stand-in model, two ranks as
# placed below), **recorded** (the M3AE-size stand-in on a named GPU, from `data/runs/`, made again live
# where this machine has a GPU), **modelled** (a formula with stated assumptions).

# %%
import glob
import tempfile
import ipywidgets as widgets
import torch
from ddp_lessons import diagnose, launch, place
from ddp_lessons.tool import allreduce, plots, records, runtime
from ddp_lessons.tool.ddp import gradient_bytes
from ddp_lessons.course import replay
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1 import buckets, by_run, gap, per_rank, verdicts
from ddp_lessons.cases.case1.data import VQAFeatureDataset
from ddp_lessons.cases.case1.exercises import check
from ddp_lessons.cases.case1.loop import to_device
from ddp_lessons.cases.case1.model import M3AEConfig, M3AETransformerSS, drop_unused_heads
from ddp_lessons.cases.case1.plan import core_budget

data = case1.tiny_dataset()

# %%
where = place(2)  # the case's two ranks
solo = place(1)   # the recorded one-GPU runs, made again live where a GPU is visible
print(where.describe())

# %% [markdown]
# ## One launch: the fixed setup, and its all-reduce variants (measured)
# `case1.Options.fixed()`: heads dropped, `find_unused_parameters=False`, batch kept with LR x world size,
# schedule sized in steps per rank, distributed evaluation, `model.train()` every epoch, one loader
# process per core, pinned memory (GPU only), persistent workers, loss kept on the device. Short runs
# (8 steps) sweep the bucket size and precision; one full epoch is the scaling measurement.

# %%
short = dict(steps_limit=8, evaluation="none", num_workers=0)
sweep = {f"bucket {mb} MB": case1.Options.fixed(bucket_cap_mb=mb, **short) for mb in (1, 4, 25)}
sweep["bf16 autocast"] = case1.Options.fixed(amp=True, **short)
sweep["bf16 autocast + bf16 all-reduce"] = case1.Options.fixed(amp=True, comm_dtype="bf16", **short)
sweep["fixed, full epoch"] = case1.Options.fixed()
runs = dict(zip(sweep, by_run(launch(case1.train_many, (list(sweep.values()), None, 1),
                                      world_size=where.world_size, threads=1)), strict=True))

# %%
for name, res in runs.items():
    row = per_rank(res)[0]
    print(f"{name:32s} all-reduce calls/step {row['allreduce_calls']}, bytes/step {row['allreduce_bytes']}")

# %% [markdown]
# Counted: autocast computes in bf16 but leaves parameters and gradients in fp32, so the bytes handed to
# the all-reduce stay; the compression hook (`hooks.compression_hook(torch.bfloat16)`, wrapped by the
# timer) sends bf16 instead:

# %%
bytes_of = {n: per_rank(runs[n])[0]["allreduce_bytes"] for n in runs}
verdicts.same_counts("bf16 autocast leaves the bytes all-reduced as in fp32", bytes_of["bucket 25 MB"],
                     bytes_of["bf16 autocast"], what="bytes per step").show()
verdicts.same_counts("a bf16 all-reduce halves them", [b // 2 for b in bytes_of["bucket 25 MB"]],
                     bytes_of["bf16 autocast + bf16 all-reduce"], what="bytes per step").show();

# %% [markdown]
# On the recorded GPU (the M3AE-size stand-in, every fix, one GPU: world size 1, so the bf16 all-reduce's
# saving is in the bytes handed over, not in bytes moved between GPUs), from interleaved repeated rounds:

# %%
pairs = records.load("case1-h200-pairs")
print(verdicts.machine_line(pairs))
verdicts.pair(pairs, "fixed", "fixed-bf16", "bf16 autocast makes the step faster than fp32").show()
verdicts.pair(pairs, "fixed-bf16", "fixed-bf16-comm16", "a bf16 all-reduce makes the bf16 step faster").show()
for name, rnd, rel in verdicts.unsteady(pairs, ("fixed", "fixed-bf16", "fixed-bf16-comm16")):
    print(f"not steady: {name:18s} round {rnd}: IQR {rel:.1%} of the median step")

# %% [markdown]
# Each verdict counts rounds in its deciding numbers (the rule needs 3). Where a verdict is
# not resolvable the rounds disagree, and the runs listed as not steady (steps' IQR above 5% of the median)
# say why one run could not decide it; at world size 1 a bf16 all-reduce can only save the cast's and the
# collective's launch work, not link time.
#
# Why would the bf16 runs be unsteady where fp32 ones are not? A first suspect is the core budget: the
# fixed setup gives the rank 15 loader workers beside its own thread on 16 cores. A second record runs the
# fixed bf16 setup with 8, 4 and 2 loader workers, interleaved with the budget's 15 and with fp32:

# %%
jit = records.load("case1-h200-bf16-jitter")
print(verdicts.machine_line(jit))
fewer = ["fixed-bf16-nw8", "fixed-bf16-nw4", "fixed-bf16-nw2"]
for name in ["fixed", "fixed-bf16"] + fewer:
    rels, waits = verdicts.iqr_rels(jit, name), verdicts.data_wait_share(jit, name)
    print(f"{name:15s} IQR / median per round " + " ".join(f"{x:5.1%}" for x in rels)
          + ";  data wait / step " + " ".join(f"{x:.2%}" for x in waits))

# %%
verdicts.stays_unsteady(jit, fewer, "with 8, 4 or 2 loader workers the bf16 steps are still unsteady in every run").show()
verdicts.loader_keeps_up(jit, "fixed-bf16-nw2", limit=0.01).show()

# %% [markdown]
# Where both verdicts hold, fewer workers leave the bf16 steps as unsteady as before while the data keeps
# arriving in time: the workers competing for the rank's core are not what makes them jitter. What does
# was not found in these records, so the bf16 comparisons above stay decided by rounds, not by single runs.
#
# ## Buckets: which bytes can overlap the backward pass (counted)
# A bucket's all-reduce can start as soon as its last gradient is ready, so buckets can overlap the rest of
# the backward pass. Which gradients are ready when is a fact of the model: the order of one backward pass
# on one batch (`buckets.ready_order`, in this process), and the buckets DDP builds from that order
# (`buckets.assign`, filled up to the cap). The prediction against the calls DDP made above:

# %%
trainset = VQAFeatureDataset(data["root"], "train")
probe = drop_unused_heads(M3AETransformerSS(M3AEConfig.tiny(num_answers=trainset.num_answers,
                                                            image_size=trainset.image_size)))
batch = trainset.collote([trainset[i] for i in range(4)])
to_device(batch, torch.device("cpu"))
order = buckets.ready_order(probe, batch)
print("last three gradients to become ready:", [(n, f"{b:,} B") for n, b in order[-3:]])
measured = {mb: per_rank(runs[f"bucket {mb} MB"])[0]["allreduce_calls"][0] for mb in (1, 4, 25)}
verdicts.calls_match(order, measured).show();

# %%
verdicts.late_tensor_exposed(order).show();


# %% [markdown]
# So on this model bucket size cannot show overlap: the word embedding is used first in the forward
# pass, so its gradient is ready last, and the bucket that holds it starts its all-reduce only after the
# backward pass has ended. Smaller buckets only split off the small gradients that come before it. A large
# tensor that becomes ready last is always exposed; what helps is fewer bytes for it (a compression hook,
# a frozen or tied embedding), not another bucket size. The timer's timeline of one step (measured here):

# %%
# NBVAL_IGNORE_OUTPUT
def bucket_table(name):
    return {k: round(v * 1e3, 1) for k, v in per_rank(runs[name])[0].items()
            if k in ("step_time", "backward", "allreduce", "exposed")}

widgets.interact(bucket_table, name=list(runs));

# %%
print({n: per_rank(runs[n])[0]["allreduce_calls"] for n in runs if n.startswith("bucket")})

# %%
# NBVAL_IGNORE_OUTPUT
plots.timeline(runs["bucket 1 MB"], step=-1, title="bucket 1 MB, last step (measured here)")

# %% [markdown]
# ## Evaluation, distributed (measured)
# Both ranks evaluate their shard and sum the counts, so both end with the whole test set's result (01's
# verdict showed whether the other rank waits while rank 0 evaluates alone):

# %%
ev = [r["epochs"][0]["eval"] for r in runs["fixed, full epoch"]]
verdicts.same_counts("every rank evaluated and counted the whole test set (its shard, summed)",
                     [data["n_test"]] * len(ev), [e["n"] if e else None for e in ev], what="questions counted per rank").show();


# %% [markdown]
# ## `sampler.set_epoch` (measured)
# The post calls it; here is what leaving it out does. `DistributedSampler` shuffles with a seed plus the
# epoch number, so without `set_epoch` every epoch visits the samples in the same order:

# %%
def orders(flag):
    res = launch(case1.train, (case1.Options.fixed(set_epoch=flag, steps_limit=3, evaluation="none", num_workers=0), None, 2),
                 world_size=where.world_size, threads=1)
    return [e["qids"] for e in res[0]["epochs"]]

with_set, without = orders(True), orders(False)
verdicts.order_repeats(without, with_set).show();

# %% [markdown]
# ## Scaling efficiency (measured)
# Throughput on N workers over N x throughput on 1, steady-state steps only, in 5 interleaved rounds of
# the fixed setup (8 steps each, as 01 measured the posted one). The one worker runs with the two
# workers' backend, so on the same kind of device.

# %%
fixed_rounds = case1.scaling.rounds(case1.Options.fixed(), where.backend)

# %%
# NBVAL_IGNORE_OUTPUT
print("scaling efficiency per round:", ", ".join(f"{e:.0%}" for e in case1.scaling.efficiency(fixed_rounds)))
verdicts.scaling_below(fixed_rounds, limit=1.0).show();

# %% [markdown]
# A reading, not a compared verdict: in the training steps alone (no evaluation, no loader workers) the
# fixed setup comes close to perfect scaling on this machine when it is quiet, and some rounds reach it,
# so whether it stays below is not resolvable here (the verdict above, as it came out in this run); beside
# other work the two workers lose more than the one, as each rank needs a core of its own. The outcome
# depends on the machine's load, not on the code: `scripts/verdict_stability.py` records it over repeated
# runs (`data/runs/verdict-stability-cpu2.json`). Compare 01: the posted setup's steps on 2 workers were
# slower than on 1 in every round.
# What they share here is counted, not measured: 2 ranks on 2 cores, each with its intra-op thread, gloo's
# all-reduce threads and the notebook's process on the same cores (gloo is a CPU library: its all-reduce
# runs in each rank's own threads). On GPUs the sharing moves, it does not vanish: NCCL's collectives are kernels on the
# same SMs as the compute and use the same memory bandwidth, so an all-reduce overlapping the backward pass
# runs concurrently on another stream and slows the compute it overlaps; overlap hides time, it is not free.

# %% [markdown]
# What remains in the fixed run, read by `ddp_lessons.diagnose` (its figures and order vary from run to run
# and are not compared), and a check that its account holds the evaluation on both ranks now, as the
# distributed evaluation above does it. Split in two, each rank's share of the evaluation is small; whether
# diagnose still lists it depends on that share against its 3% threshold, which this short run sits near
# (the table above shows where it fell this time). The run's start-up is its own here: `train_many` gives
# each run its own start, so the runs made before it in the same process do not count.

# %%
# NBVAL_IGNORE_OUTPUT
remains = diagnose(runs["fixed, full epoch"])
remains

# %%
verdicts.diagnosis_shares_evaluation(remains.ranks).show();

# %% [markdown]
# ## The post's gap: 105 s on one RTX 3090, 133 s on two (modelled)
# Gradient bytes per step of the M3AE-size stand-in (fp32), counted:

# %%
with torch.device("meta"):
    with_heads = gradient_bytes(M3AETransformerSS(M3AEConfig.m3ae()))
    no_heads = gradient_bytes(M3AETransformerSS(M3AEConfig.m3ae(), with_pretrain_heads=False))
print(f"with heads {with_heads / 1e9:.3f} GB, without {no_heads / 1e9:.3f} GB per step")

# %% [markdown]
# **A labelled model, not a measurement.** Assumptions (`case1.gap` states each): the post's batch size is
# unknown, so every batch from 8 to 32 is a row; one GPU's step T1 = 105 s / steps per epoch (data loading
# included); each of two GPUs keeps the per-rank batch and T1; the all-reduce of the gradients (heads
# included, as posted) costs `allreduce.estimate` = latency (50 us) + bytes x 2(n-1)/n / busbw, with
# busbw the effective rate of the PCIe link (GeForce cards have no P2P, so NCCL copies through host memory;
# the width of the slot the second card sits in decides the rate); exposed time lies between none overlapped
# and as much as the backward pass can hide (its share of the step from the recorded GPU rounds below).
# For comparison, this machine's gloo curve (measured):

# %%
sizes = allreduce.default_sizes(256 * 1024, 32 * 2**20)
rows = allreduce.summarize(launch(allreduce.sweep, (sizes, 6), world_size=where.world_size, threads=1))
fit = allreduce.fit_latency_bandwidth(rows)

# %%
# NBVAL_IGNORE_OUTPUT
here = "this CPU's gloo" if where.backend == "gloo" else "these GPUs' NCCL"
print(f"{here} (measured, fit): {allreduce.predict_time(no_heads, fit) * 1e3:.0f} ms for the M3AE-size bytes without heads")
plots.bandwidth([(f"{where.describe()} (measured here)", rows, fit)])

# %% [markdown]
# The backward pass's share of the step, from the recorded GPU rounds (the posted setup, fp32, batch 32):

# %%
broken = [r for r in pairs["results"]["runs"] if r["name"] == "broken"]
share = sorted(r["parts"]["backward"] / r["summary"]["median"] for r in broken)[len(broken) // 2]
print(f"backward / step, median over {len(broken)} rounds: {share:.2f}")

# %% [markdown]
# The sensitivity table (modelled; seconds per two-GPU epoch, and which reading each row supports):

# %%
n_train = pairs["config"]["data"]["n_train"]
model_rows = gap.table(n_train, with_heads, share)
for r in model_rows:
    print(f"batch {r['batch']:2d}, {r['link']:28s} T1 {r['t1']:.2f} s, all-reduce {r['comm'] * 1e3:4.0f} ms: "
          f"2-GPU epoch {r['epoch2_best']:4.0f} .. {r['epoch2_none']:4.0f} s -> {gap.explains(r)}")

# %%
verdicts.comm_can_explain(model_rows).show()
verdicts.comm_explains_everywhere(model_rows).show();

# %% [markdown]
# Read the table, not one row: the all-reduce alone reaches 133 s only in the rows the first verdict names
# (a small batch on a narrow link, nothing overlapped); with a full-width slot, or a batch of 32, it does not,
# and the second verdict says the conclusion depends on the link. The post does not say which slot its
# second card sits in: on that unknown the explanation turns.
#
# **Is the loader the suspect?** On the recorded GPU, with 4 loader workers and the stand-in's JPEGs:

# %%
verdicts.loader_keeps_up(pairs, "broken").show();

# %% [markdown]
# That is for the stand-in's images, whose decode cost need not be VQA-RAD's. Measured here, the
# cost per image of what a loader worker does (open, decode, RGB, tensor), for stand-in JPEGs at the
# recorded 224 px and drawn at 512 px. VQA-RAD's own files are not here: their sizes and decode cost are
# not known to this notebook, so the loader stays a candidate the model above does not cover.

# %%
# NBVAL_IGNORE_OUTPUT
with tempfile.TemporaryDirectory() as tmp:
    for px in (224, 512):
        made = case1.make_vqa_dataset(f"{tmp}/{px}", n_images=12, n_qa=24, image_size=px)
        paths = sorted(glob.glob(f"{tmp}/{px}/images/*"))
        t = gap.decode_seconds(paths)
        print(f"stand-in {px} px: {made['image_bytes'] / len(paths) / 1e3:.1f} kB per JPEG, "
              f"{t * 1e3:.2f} ms per image on one core here; 2 GPUs at batch 32 and "
              f"{model_rows[-1]['t1']:.2f} s per step need {64 / model_rows[-1]['t1']:.0f} images/s, "
              f"{64 / model_rows[-1]['t1'] * t:.2f} cores of decoding (modelled)")

# %% [markdown]
# ## Two GPUs (live where two are visible, else a separate recording)
# Where this machine has two GPUs, the recorded one-GPU runs `case1-h200-broken` and `-fixed` are made again
# on two, live (M3AE size, NCCL, one GPU per rank). Elsewhere the multi-GPU recording is a later issue:
# when `data/runs/case1-h200x2-*.json` exist they show here.

# %%
# NBVAL_IGNORE_OUTPUT
if where.backend == "nccl":
    for name in ("case1-h200-broken", "case1-h200-fixed"):
        rec = replay.stored_or_live(name, case1.rerun, where)
        print(f"{name} on {where.describe()}, live: {[round(r['step_time'] * 1e3) for r in rec['results']['per_rank']]} "
              f"ms per step, data wait {[round(r['data'] * 1e3) for r in rec['results']['per_rank']]} ms")
found = sorted(glob.glob(str(records.RUNS_DIR / "case1-h200x2-*.json")))
for path in found:
    rec = records.load(path)
    print(path.rsplit("/", 1)[-1], "|", records.describe_machine(rec), "|",
          [round(r["step_time"] * 1e3) for r in rec["results"]["per_rank"]], "ms per step")
print(f"{len(found)} two-GPU record(s) found")

# %% [markdown]
# ## The core budget
# Loader workers and intra-op threads are both processes or threads on the same cores. `parts.core_budget`
# gives a rank its share, cores // ranks, and splits it between them. On this machine and on the recorded
# GPU machine (16 cores, one GPU); the recorded rounds ran with the budget (15 loader workers, 1 thread),
# an earlier single run with 16 workers beside 16 intra-op threads:

# %%
m = pairs["machine"]
for label, cores, ranks, dev in ((f"this machine ({runtime.cpu_count()} cores)", runtime.cpu_count(), where.world_size, where.device),
                                 (f"recorded GPU machine ({m['cpu_count']} cores), 1 rank", m["cpu_count"], 1, "cuda"),
                                 (f"recorded GPU machine ({m['cpu_count']} cores), 2 ranks", m["cpu_count"], 2, "cuda")):
    w, t = core_budget(cores, ranks, dev)
    print(f"{label}: {w} loader workers + {t} intra-op threads per rank")
verdicts.core_overbooked(16, 16, m["cpu_count"], 1, "16 loader workers beside 16 intra-op threads double-book the recorded GPU machine").show()
verdicts.core_overbooked(4, 1, runtime.cpu_count(), where.world_size, f"the posted num_workers=4 double-books this machine ({where.world_size} ranks)").show();

# %% [markdown]
# torchrun sets `OMP_NUM_THREADS=1` only when it starts more than one process per node and leaves each
# rank to choose its loader workers: two ranks that each take "all the cores" for loading double-book them
# the same way. The budget is a division, done once per rank before the loader starts.
#
# ## Checklist for a DDP run that scales
# 1. Launch with a launcher; init before the sampler; `DistributedSampler` + `set_epoch` every epoch.
# 2. Count samples and steps per rank once; size the LR schedule from steps per rank.
# 3. Every parameter used: drop unused heads (or `static_graph=True`), then `find_unused_parameters=False`.
# 4. Evaluate on every rank's shard and all-reduce the counts, or make the others wait on purpose.
# 5. No per-step host sync the loop does not need: keep the running loss on the device (02: what it costs on
#    the recorded GPU was not resolvable); time with CUDA events or after a sync.
# 6. The core budget: per rank, loader workers + intra-op threads <= cores // ranks on the node (above);
#    pinned memory; persistent workers.
# 7. Know your bytes and their order: gradient bytes / link bandwidth vs backward time, and which large
#    gradient is ready last (it is exposed whatever the bucket size). bf16 autocast does not shrink the bytes.
#
# ## Summary
# - Bucket size changes the number of all-reduces, not the bytes; here the word embedding's gradient is
#   most of the bytes and ready last, so no bucket size overlaps it (counted); autocast does not shrink
#   the bytes, a compression hook halves them (counted).
# - Distributed evaluation gives every rank the whole test set's result (counted); 01's verdict shows the wait
#   of evaluating on rank 0 alone.
# - On the recorded GPU, the verdicts on interleaved rounds say which precision and all-reduce choices are
#   faster; where the rounds disagree, they say so.
# - The post's gap, modelled: communication alone explains 133 s only on some links and batch sizes (the
#   table); the conclusion depends on the PCIe slot, which the post does not give.
#
# ## Exercises
# 1. How many bytes per step does dropping the three heads save in the M3AE-size model (fp32)?
# 2. Modelled all-reduce time (ms) of the M3AE-size model without heads, 2 ranks, busbw 10 GB/s, no latency?

# %%
check("03.1", ...);

# %%
check("03.2", ...);
