"""Case 1's GPU comparisons, decided from a record of interleaved repeated
rounds (`data/runs/case1-h200-pairs.json`, kind "case1-pairs": every variant
run once per round, in `spread.interleave`'s order, on one GPU).

`round_medians` gives each round's median step of a variant, `pair` decides two variants on those
medians, `unsteady` / `stays_unsteady` and `data_wait_share` / `loader_keeps_up` read the steps'
spread and the data wait. Every line names the record's machine (`machine_line`).
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
    `round_medians` (the sign test of `verdict.paired`). Defined in notebook 02_case1_answer."""
    ma, mb = round_medians(rec, a), round_medians(rec, b)
    done = [(x, y) for x, y in zip(ma, mb, strict=True) if x is not None and y is not None]
    med = {n: sorted(v)[len(v) // 2] for n, v in ((a, [x for x, _ in done]), (b, [y for _, y in done]))}
    return V.paired(claim, ma, mb, faster=faster, names=(a, b),
                    numbers={"rounds": str(len(done)),
                             "medians over rounds": f"{a} {med[a] * 1e3:.0f} ms, {b} {med[b] * 1e3:.0f} ms"})


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
    return V.repeats(f"on the recorded GPU the loader keeps up with the {name} setup "
                     f"(data wait under {limit:.0%} of the step)", data_wait_share(rec, name), side="<",
                     limit=limit, what="data wait / step per round")


def iqr_rels(rec: dict, name: str) -> list[float]:
    """Per round, the variant's steps' IQR / median after warm-up. Defined in notebook 03_case1_beyond."""
    return [summary(r["step_times"][r["skip"]:])["iqr_rel"] for r in _runs(rec, name) if r["ok"]]


def stays_unsteady(rec: dict, names, claim: str, limit: float = STEADY_IQR) -> V.Verdict:
    """Every run of `names` has its steps' IQR above `limit` of the median (e.g. in
    `data/runs/case1-h200-bf16-jitter.json`: bf16 with fewer loader workers). Defined in notebook 03_case1_beyond."""
    rels = [x for n in names for x in iqr_rels(rec, n)]
    return V.repeats(claim, rels, side=">", limit=limit, what="IQR / median per run")
