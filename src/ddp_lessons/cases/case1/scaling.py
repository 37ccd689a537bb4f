"""1 worker against 2, and one batch choice against another, in interleaved rounds.

One run of each is not a comparison (a run that meets a busy moment of the machine decides it):
`rounds` launches short runs of the same options on 1 and on 2 workers, alternating (1, 2, 2, 1,
1, 2, ...), each worker on one core, and keeps per round each run's median step after the warm-up
(for 2 workers, the slower rank's: the epoch waits for it); `describe` prints it as a reading.
`batch_variants` and `epoch_by_round` do the same for two options in one `train_many` launch, and
`worker_variants`, `step_by_round` and `describe_pair` for two loader worker counts, nothing else changed.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

from ...tool.launcher import launch
from ...tool.runs import Rank
from ...tool.spread import chance_level, interleave
from .options import Options
from .readout import Result
from .train import train

SHORT = dict(steps_limit=8, evaluation="none", num_workers=0)  # 6 steps after the 2 warm-up steps


def rounds(options: Options, backend: str, n: int = 5, **short) -> dict:
    """`n` interleaved rounds of `options` (shortened by SHORT, or `short`) on 1 and 2 workers:
    {"1 worker": [median step s per round], "2 workers": [...], "batch": (per-rank batch on 1, on 2)}.
    Defined in notebook 01_case1_broken."""
    o = options.replace(**{**SHORT, **short})
    out, batch = {"1 worker": [], "2 workers": []}, {}
    for order in interleave(["1 worker", "2 workers"], n):
        for name in order:
            world = 1 if name == "1 worker" else 2
            res = launch(train, (o, None, 1), world_size=world, backend=backend, threads=1)
            out[name].append(max(Rank(r).median("step_time", 2) for r in res))
            batch[name] = Result.of(res[0]).batch_size
    return {**out, "batch": tuple(batch[name] for name in out)}


def efficiency(r: dict) -> list[float]:
    """Per round: 2-worker throughput over twice the 1-worker throughput (1.0: perfect scaling).
    Defined in notebook 03_case1_beyond."""
    b1, b2 = r["batch"]
    return [(2 * b2 / t2) / (2 * b1 / t1) for t1, t2 in _paired(r)]


def _paired(r: dict) -> list[tuple[float, float]]:
    """(1 worker's, 2 workers') median step per round of `rounds`."""
    return list(zip(r["1 worker"], r["2 workers"], strict=True))


def describe(r: dict) -> str:
    """The rounds as a reading: the step on 2 workers against 1, and the scaling efficiency (the
    epoch on 2 workers against 1 is 1 / (2 x efficiency) with the data split). Defined in notebook 01_case1_broken."""
    step = [t2 / t1 for t1, t2 in _paired(r)]
    eff = efficiency(r)
    return (f"measured here over {len(step)} rounds: a step on 2 workers {min(step):.2f} .. {max(step):.2f} x one "
            f"on 1 worker; scaling efficiency {min(eff):.0%} .. {max(eff):.0%}; the epoch on 2 workers "
            f"{1 / (2 * max(eff)):.2f} .. {1 / (2 * min(eff)):.2f} x the epoch on 1")


def interleaved(options: dict, n: int) -> dict:
    """{name: Options} (names without spaces) in `n` interleaved rounds (A B, B A, B A, A B, ...),
    named "<round> <name>", for one `train_many` launch."""
    return {f"{i} {name}": options[name] for i, order in enumerate(interleave(list(options), n)) for name in order}


def batch_variants(kept: Options, halved: Options, n: int = 7) -> dict:
    """The two batch choices in `n` interleaved rounds (A B, B A, B A, A B, ...), named
    "<round> kept" / "<round> halved", for one `train_many` launch. Defined in notebook 02_case1_answer."""
    return interleaved({"kept": kept, "halved": halved}, n)


def worker_variants(options: Options, counts=(4, 8), n: int = 5, steps_limit: int = 6) -> dict:
    """`options` with `num_workers` set to each of `counts` and nothing else changed, in `n` interleaved
    rounds of `steps_limit` steps without evaluation, named "<round> workers=<k>", for one `train_many`
    launch. Defined in notebook 02_case1_answer."""
    o = options.replace(steps_limit=steps_limit, evaluation="none")
    return interleaved({f"workers={k}": o.replace(num_workers=k) for k in counts}, n)


def step_by_round(runs: dict, skip: int = 2) -> dict:
    """{name: per round, the slower rank's median step (s) after `skip` warm-up steps} of runs named
    "<round> <name>" (`interleaved`'s names). Defined in notebook 02_case1_answer."""
    out = {}
    for name, ranks in runs.items():
        out.setdefault(name.split(" ", 1)[1], []).append(max(Rank(r).median("step_time", skip) for r in ranks))
    return out


def describe_pair(by_round: dict, a: str, b: str) -> str:
    """B against A over interleaved rounds as a reading: the per-round ratios of their steps and whether
    they fall on one side of 1 (with the sign test's chance level) or not ("not resolvable here").
    Defined in notebook 02_case1_answer."""
    r = [y / x for x, y in zip(by_round[a], by_round[b], strict=True)]
    if min(r) <= 1 <= max(r):
        tail = "not resolvable here: 1 lies inside the rounds' spread"
    else:
        side = "shorter" if max(r) < 1 else "longer"
        tail = f"{b} {side} in every round (a sign test puts {chance_level(len(r)):.1%} on that by chance)"
    return f"step with {b} / step with {a} per round {min(r):.2f} .. {max(r):.2f} over {len(r)} rounds: {tail}"


def epoch_by_round(runs: dict, steps: dict) -> tuple[list[float], list[float]]:
    """Per round, an epoch's steps x the median step of the slower rank, for the batch kept and halved:
    `runs` from `batch_variants`' names, `steps` the steps per epoch of each choice ({"kept": n, "halved": m}).
    Defined in notebook 02_case1_answer."""
    out: dict[str, list[float]] = {"kept": [], "halved": []}
    for name, ranks in runs.items():
        choice = name.split()[1]
        out[choice].append(steps[choice] * max(Rank(r).median("step_time", 2) for r in ranks))
    kept, halved = out.values()
    return kept, halved
