"""Case 1's GPU comparisons, decided from a record of interleaved repeated
rounds (`data/runs/case1-h200-pairs.json`, kind "case1-pairs": every variant
run once per round, in `spread.interleave`'s order, on one GPU).

`round_medians` gives each round's median step of a variant, `pair` decides two variants on those
medians (worded for each use: `item_sync_costs`, `all_fixes_faster`, `autocast_faster`), `unsteady`,
`data_wait_share`, `loader_keeps_up` and `jitter_not_loader` read the steps' spread and the data wait.
Defined in notebook 02_case1_answer.
"""

from __future__ import annotations

from ....tool import verdict as V
from ....tool.spread import STEADY_IQR, summary


def machine_line(rec: dict) -> str:
    """The hardware and versions of a record, and what ran, in one line. Defined in notebook 02_case1_answer."""
    m, c = rec["machine"], rec["config"]
    v0 = next(iter(c.get("variants", {}).values()), {})
    args = c.get("args") or {"model": v0.get("model"), "batch": v0.get("batch_size"),
                             "steps": v0.get("steps_limit"), "skip": c.get("skip")}
    gpus = ", ".join(m.get("gpus") or []) or "no GPU"
    return (f"{gpus}, {m.get('cpu_affinity') or m['cpu_count']} CPU cores; torch {m['torch']}, NCCL {m.get('nccl')}; "
            f"world size {rec['config']['world_size']}, model {args['model']}, batch {args['batch']}, "
            f"{args['steps']} steps per run ({args['skip']} warm-up left out); recorded {rec['created'][:10]}")


def _runs(rec: dict, name: str) -> list[dict]:
    runs = [r for r in rec["results"]["runs"] if r["name"] == name]
    if not runs:
        names = sorted({r["name"] for r in rec["results"]["runs"]})
        raise KeyError(f"no runs named {name!r} in the record: use one of {names}")
    return runs


def round_medians(rec: dict, name: str) -> list[float | None]:
    """Per round (0, 1, ...), the variant's median step time (s); None where the run failed."""
    out = [None] * rec["results"]["rounds_done"]
    for r in _runs(rec, name):
        out[r["round"]] = summary(r["step_times"][r["skip"]:])["median"] if r["ok"] else None
    return out


def pair(rec: dict, a: str, b: str, claim: str, faster: str = "b") -> V.Verdict:
    """`claim` (B faster than A, or A than B with `faster="a"`) by the per-round ratios B / A of
    `round_medians` (the sign test of `verdict.paired`); unworded: the verdicts below word it."""
    ma, mb = round_medians(rec, a), round_medians(rec, b)
    done = [(x, y) for x, y in zip(ma, mb, strict=True) if x is not None and y is not None]
    med = {n: sorted(v)[len(v) // 2] for n, v in ((a, [x for x, _ in done]), (b, [y for _, y in done]))}
    return V.paired(claim, ma, mb, faster=faster, names=(a, b),
                    numbers={"rounds": str(len(done)),
                             "medians over rounds": f"{a} {med[a] * 1e3:.0f} ms, {b} {med[b] * 1e3:.0f} ms"})


def ratios(rec: dict, a: str, b: str) -> list[float]:
    """Per round, B's median step over A's (rounds where both ran). Defined in notebook 03_case1_beyond."""
    return [y / x for x, y in zip(round_medians(rec, a), round_medians(rec, b), strict=True)
            if x is not None and y is not None]


def _figure(rec: dict, a: str, b: str) -> str:
    r = ratios(rec, a, b)
    return f"{b} / {a} per round {min(r):.2f} .. {max(r):.2f} ({len(r)} rounds)" if r else "no rounds"


ON = "On the recorded H200 (one GPU, world size 1)"


def item_sync_costs(rec: dict) -> V.Verdict:
    """02: `total_loss += loss.item()` every step makes the fixed bf16 step slower than keeping the
    sum on the device (`fixed-bf16` against `fixed-bf16-item`). Defined in notebook 02_case1_answer."""
    v = pair(rec, "fixed-bf16", "fixed-bf16-item", "loss.item() every step makes the bf16 step slower", faster="a")
    return V.worded(v, holds=f"{ON}, loss.item() every step made the fixed bf16 step slower in every round.",
                    fails=f"{ON}, loss.item() every step made the fixed bf16 step no slower in any round: "
                          "the host had nothing to overlap with the GPU.",
                    unresolved=f"{ON}, loss.item() every step made the fixed bf16 step slower in some rounds and "
                               "faster in others: its cost is inside the steps' jitter.",
                    figure=_figure(rec, "fixed-bf16", "fixed-bf16-item"))


def all_fixes_faster(rec: dict) -> V.Verdict:
    """02: every fix together makes the fp32 step faster than the posted setup (`broken` against
    `fixed`). Defined in notebook 02_case1_answer."""
    v = pair(rec, "broken", "fixed", "every fix together makes the fp32 step faster on the recorded GPU")
    return V.worded(v, holds=f"{ON}, the fixed setup's fp32 step was faster than the posted one in every round.",
                    fails=f"{ON}, the fixed setup's fp32 step was slower than the posted one in every round.",
                    unresolved=f"{ON}, the fixed setup's fp32 step was faster than the posted one in some rounds "
                               "only.",
                    figure=_figure(rec, "broken", "fixed"))


def autocast_faster(rec: dict) -> V.Verdict:
    """03: bf16 autocast makes the fixed setup's step faster than fp32 (`fixed` against `fixed-bf16`).
    Defined in notebook 03_case1_beyond."""
    v = pair(rec, "fixed", "fixed-bf16", "bf16 autocast makes the step faster than fp32")
    return V.worded(v, holds=f"{ON}, bf16 autocast made the fixed setup's step faster than fp32 in every round.",
                    fails=f"{ON}, bf16 autocast made the fixed setup's step slower than fp32 in every round.",
                    unresolved=f"{ON}, bf16 autocast made the fixed setup's step faster in some rounds only.",
                    figure=_figure(rec, "fixed", "fixed-bf16"))


def unsteady(rec: dict, names=None, limit: float = STEADY_IQR) -> list[tuple[str, int, float]]:
    """(variant, round, IQR / median) of every run (of `names`, default all)
    whose steps after the warm-up are not steady (IQR above `limit`, by default 5% of their median).
    Defined in notebook 02_case1_answer."""
    out = []
    for r in rec["results"]["runs"]:
        if names is not None and r["name"] not in names:
            continue
        rel = summary(r["step_times"][r["skip"]:])["iqr_rel"]
        if rel > limit:
            out.append((r["name"], r["round"], rel))
    return out


def data_wait_share(rec: dict, name: str) -> list[float]:
    """Per round, the variant's median data wait over its median step. Defined in notebook 03_case1_beyond."""
    return [r["parts"]["data"] / summary(r["step_times"][r["skip"]:])["median"] for r in _runs(rec, name)]


def loader_keeps_up(rec: dict, name: str, limit: float = 0.1) -> V.Verdict:
    """In every round the loader's wait is below `limit` of the step. Defined in notebook 03_case1_beyond."""
    share = data_wait_share(rec, name)
    v = V.repeats(f"on the recorded GPU the loader keeps up with the {name} setup "
                  f"(data wait under {limit:.0%} of the step)", share, side="<",
                  limit=limit, what="data wait / step per round")
    return V.worded(v, holds=f"{ON}, the loader kept up with the {name} setup in every round: the step waited "
                             f"for data less than {limit:.0%} of its time.",
                    fails=f"{ON}, the loader held back the {name} setup in every round: the step waited for "
                          f"data {limit:.0%} of its time or more.",
                    unresolved=f"{ON}, the loader kept up with the {name} setup in some rounds only.",
                    figure=f"data wait / step {min(share, default=0):.1%} .. {max(share, default=0):.1%}")


def iqr_rels(rec: dict, name: str) -> list[float]:
    """Per round, the variant's steps' IQR / median after warm-up. Defined in notebook 03_case1_beyond."""
    return [summary(r["step_times"][r["skip"]:])["iqr_rel"] for r in _runs(rec, name) if r["ok"]]


def stays_unsteady(rec: dict, names, claim: str, limit: float = STEADY_IQR) -> V.Verdict:
    """Every run of `names` has its steps' IQR above `limit` of the median (unworded: `jitter_not_loader`)."""
    rels = [x for n in names for x in iqr_rels(rec, n)]
    return V.repeats(claim, rels, side=">", limit=limit, what="IQR / median per run")


def jitter_not_loader(rec: dict, fewer, leanest: str, wait_limit: float = 0.01) -> V.Verdict:
    """03: the loader's competition for the cores is not what makes the bf16 steps unsteady: with
    fewer loader workers (`fewer`) every run stays unsteady, while the loader still keeps up with the
    leanest (`leanest`). Defined in notebook 03_case1_beyond."""
    still = stays_unsteady(rec, fewer, "with fewer loader workers the bf16 steps stay unsteady in every run")
    keeps = loader_keeps_up(rec, leanest, limit=wait_limit)
    v = V.all_of("the loader workers are not what makes the bf16 steps unsteady", still, keeps)
    rels = [x for n in fewer for x in iqr_rels(rec, n)]
    on = "On the recorded H200 (one GPU)"
    return V.worded(v, holds=f"{on}, the bf16 steps stayed unsteady with fewer loader workers ({', '.join(fewer)}) "
                             "while the data kept arriving in time: the workers competing for cores are not "
                             "what makes them jitter.",
                    fails=f"{on}, fewer loader workers changed the bf16 steps' jitter, or left the loader behind: "
                          "the workers may be part of it.",
                    unresolved=f"{on}, some bf16 runs with fewer loader workers were steady and others not: the "
                               "record cannot tell whether the workers cause the jitter.",
                    figure=f"IQR / median {min(rels, default=0):.0%} .. {max(rels, default=0):.0%} "
                           f"({len(rels)} runs); data wait under {wait_limit:.0%}")
