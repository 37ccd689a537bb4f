"""Notebook 07's recorded GPU run read back (`Record.load(RUN)`): where it was made, its NCCL_DEBUG=INFO
lines sorted by what they say, and Holistic Trace Analysis on its trace.

The record is made by `benchmarks/record_own_run_gpu.py` into
`data/runs/own-run-h200x1/` (record.json, trace/rank-0.json.gz).
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import statistics

from ...tool import records
from .readout import amdahl, eval_share

RUN = "own-run-h200x1"
# What an NCCL INFO line is about, by the words in it (first match wins).
KINDS = (("transport to a peer", re.compile(r" via (P2P|SHM|NET)|P2P/IPC|P2P/CUMEM|NVLS")),
         ("network for bootstrap and proxies", re.compile(r"Bootstrap|NET/Socket|NET/IB|Using network|NET/Plugin")),
         ("communicator: ranks and devices", re.compile(r"ncclCommInit|nRanks|nranks|Init COMPLETE|cudaDev")),
         ("channels, rings and trees", re.compile(r"Channel|Ring|Tree|Trees|Pattern|CollNet")),
         ("version and environment", re.compile(r"NCCL version|NCCL_|cudaDriverVersion|Setting affinity|CPU")))


def provenance(rec) -> str:
    """Where a `Record` was made (`records.describe_machine`), with the note its commit carries.
    Defined in notebook 07_diagnose_your_own_run."""
    raw = rec.raw
    return records.describe_machine(raw) + (f" ({raw['commit_note']})" if raw.get("commit_note") else "")


def evaluation_cap(rec, setup: str = "broken", ranks: int = 2) -> tuple[float, float]:
    """The evaluation's share of the recorded 1-GPU run (median over its rounds of `setup`) and the speed-up
    `ranks` such GPUs could reach at most with every rank evaluating the whole test set (`readout.amdahl`, a
    model). Notebook 07's opening quotes both (tests/cases/own/test_own_answers.py).
    Defined in notebook 07_diagnose_your_own_run."""
    share = statistics.median(eval_share(run[0]) for run in rec.rounds(setup))
    return share, amdahl(share, ranks)


def results(rec, key: str) -> dict:
    """One of the record's tool outputs (`nccl_debug`, `nvidia_smi_topo`, `nvidia_smi_q`): its lines or text,
    and the reason where it is absent. Defined in notebook 07_diagnose_your_own_run."""
    return (rec.raw.get("results") or {}).get(key) or {"lines": [], "text": None, "reason": "not recorded"}


def topology(rec) -> str:
    """The matrix of the record's `nvidia-smi topo -m` (its legend and terminal colours left out), or why it is
    absent. Defined in notebook 07_diagnose_your_own_run."""
    topo = results(rec, "nvidia_smi_topo")
    if not topo.get("text"):
        return f"no topology: {topo.get('reason')}"
    rows = re.sub(r"\x1b\[[0-9;]*m", "", topo["text"]).split("Legend:")[0].strip().splitlines()
    return "\n".join(row.expandtabs(8).rstrip() for row in rows)


def sort_nccl(lines: list[str]) -> dict[str, list[str]]:
    """The lines grouped by what they are about (`KINDS`), the rest under 'other'.
    Defined in notebook 07_diagnose_your_own_run."""
    out = {k: [] for k, _ in KINDS} | {"other": []}
    for ln in lines:
        kind = next((k for k, rx in KINDS if rx.search(ln)), "other")
        out[kind].append(ln)
    return out


def hta_available() -> bool:
    """Defined in notebook 07_diagnose_your_own_run."""
    try:
        import hta  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _quiet():
    # HTA reports every file it parses on stdout and through logging: keep the cell's output to the result.
    logger = logging.getLogger("hta")
    level = logger.level
    logger.setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            yield
        finally:
            logger.setLevel(level)


def hta_summary(trace_dir) -> dict:
    """HTA's temporal breakdown, idle time breakdown, kernel-type breakdown and
    communication/computation overlap, each as a list of row dicts (or the error
    HTA raised for it: a trace without GPU kernels has nothing to break down).
    Defined in notebook 07_diagnose_your_own_run."""
    from hta.trace_analysis import TraceAnalysis
    out = {}
    with _quiet():
        analysis = TraceAnalysis(trace_dir=str(trace_dir))
        calls = {"temporal": lambda: analysis.get_temporal_breakdown(visualize=False),
                 "idle": lambda: analysis.get_idle_time_breakdown(visualize=False)[0],
                 "kernel_types": lambda: analysis.get_gpu_kernel_breakdown(visualize=False)[0],
                 "overlap": lambda: analysis.get_comm_comp_overlap(visualize=False)}
        for name, call in calls.items():
            try:
                out[name] = call().to_dict("records")
            except Exception as exc:  # noqa: BLE001 - one analysis failing leaves the others
                out[name] = f"{type(exc).__name__}: {exc}"
    return out
