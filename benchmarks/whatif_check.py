"""How far `ddp_lessons.whatif` is from measured runs, on gloo on this machine.

Two workloads of `intro.workers.train_mlp` (compute-heavy: a narrow MLP on a
large batch, half a megabyte of gradients; communication-heavy: a wide MLP on
a tiny batch, 25 MB of gradients), each timed by StepTimer (mode "full": every
bucket's ready time and size), in `--rounds` interleaved rounds. The link is
this machine's own all-reduce, swept once on 2 ranks and fitted. Per round:

- self-check: each 2-rank run replayed from its own buckets; predicted exposed
  all-reduce and step (median over steps) against what the timer measured
  (exposed less the part spent waiting for the slower rank, which the model
  leaves out; both kept);
- from one rank: the 1-rank run of the same round replayed for 2 ranks, its
  predicted step against the 2-rank run's measured step; once as a learner
  would run it (the launcher gives a lone rank every core) and once with the
  threads each of the 2 ranks gets (the cores divided), which is the
  assumption "compute per sample unchanged" made true on purpose.

Errors are predicted / measured - 1, per round, saved with every figure.

    python benchmarks/whatif_check.py --record whatif-check-cpu2 [--overwrite]
"""

import argparse
import statistics

from ddp_lessons.tool import allreduce, records
from ddp_lessons import launch, whatif
from ddp_lessons.cases.intro import workers
from ddp_lessons.tool.runtime import cpu_count, threads_per_rank
from ddp_lessons.tool.predict import from_fit

WORKLOADS = {"compute-heavy": {"width": 256, "depth": 3, "batch": 4096},
             "communication-heavy": {"width": 1024, "depth": 6, "batch": 16}}


def _median(steps, key, skip=2):
    return statistics.median(s[key] for s in steps[skip:])


def link_of_this_machine(iters=20):
    sizes = allreduce.default_sizes(4 * 1024, 64 * 2**20)
    rows = allreduce.summarize(launch(allreduce.sweep, (sizes, iters), world_size=2))
    fit = allreduce.fit_latency_bandwidth(rows)
    return from_fit(fit, 2, "gloo on this machine"), fit, rows


def one_round(link, name, shape, steps):
    two = launch(workers.train_mlp, kwargs=dict(shape, steps=steps), world_size=2)
    one = launch(workers.train_mlp, kwargs=dict(shape, steps=steps), world_size=1)
    one_divided = launch(workers.train_mlp, kwargs=dict(shape, steps=steps), world_size=1,
                         threads=threads_per_rank(cpu_count(), 2))
    # exposed = waiting for the slower rank (`wait`, which the model leaves out) + the wire's tail
    wire = [statistics.median(s["exposed"] - (s.get("wait") or 0.0) for s in r["steps"][2:]) for r in two]
    measured = {"exposed": max(wire), "exposed_with_wait": max(_median(r["steps"], "exposed") for r in two),
                "step": max(_median(r["steps"], "step_time") for r in two)}
    # the slower rank decides a synchronous step: predict each rank, keep the larger
    own = [whatif(list(two), link, 2, rank=k) for k in range(2)]
    pred = {"exposed": max(p.median("exposed") for p in own), "step": max(p.median("predicted") for p in own),
            "step_from_one_rank": whatif(list(one), link, 2).median("predicted"),
            "step_from_one_rank_cores_divided": whatif(list(one_divided), link, 2).median("predicted")}
    return {"workload": name, "grad_bytes": two[0]["grad_bytes"], "measured": measured, "predicted": pred,
            "one_rank_step": _median(one[0]["steps"], "step_time"),
            "one_rank_step_cores_divided": _median(one_divided[0]["steps"], "step_time"),
            "error": {"exposed": pred["exposed"] / measured["exposed"] - 1 if measured["exposed"] else None,
                      **{k: pred[k] / measured["step"] - 1 for k in pred if k.startswith("step")}}}


def summary(rounds):
    out = {}
    for name in WORKLOADS:
        rs = [r for r in rounds if r["workload"] == name]
        out[name] = {k: [min(e), statistics.median(e), max(e)] for k in rs[0]["error"]
                     if (e := [r["error"][k] for r in rs if r["error"][k] is not None])}
        out[name]["measured_exposed_ms"] = [r["measured"]["exposed"] * 1e3 for r in rs]
        out[name]["predicted_exposed_ms"] = [r["predicted"]["exposed"] * 1e3 for r in rs]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--record", metavar="NAME")
    p.add_argument("--overwrite", action="store_true", help="replace an existing record")
    args = p.parse_args()
    link, fit, rows = link_of_this_machine()
    print(link.source)
    rounds = [one_round(link, name, shape, args.steps) for _ in range(args.rounds) for name, shape in WORKLOADS.items()]
    for r in rounds:
        e = r["error"]
        print(f"{r['workload']:>20}: exposed measured {r['measured']['exposed'] * 1e3:7.2f} ms, predicted "
              f"{r['predicted']['exposed'] * 1e3:7.2f} ms; step error {e['step']:+.1%}, "
              f"from one rank {e['step_from_one_rank']:+.1%} (cores divided: "
              f"{e['step_from_one_rank_cores_divided']:+.1%})")
    summ = summary(rounds)
    for name, s in summ.items():
        print(name, {k: [round(x, 3) for x in v] for k, v in s.items()})
    if args.record:
        rec = records.make_record("whatif-check", {**vars(args), "workloads": WORKLOADS},
                                  {"link": vars(link), "fit": fit, "sweep": rows, "rounds": rounds,
                                   "summary": summ})
        print("saved", records.save(rec, args.record, runs_dir=records.RUNS_DIR, overwrite=args.overwrite))


if __name__ == "__main__":
    main()
