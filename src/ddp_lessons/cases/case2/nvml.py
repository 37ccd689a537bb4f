"""The post's NVML block (init, one utilisation query per GPU, shutdown) and
what it costs per call, in two states of the process:
- nothing holds NVML open (`cost_fresh`: a new Python process): every
  `nvmlInit` starts NVML and every `nvmlShutdown` stops it again;
- NVML already held open (`cost(held=True)`): init and shutdown only count
  a reference. torch leaves NVML held whenever it counts GPUs through NVML
  (`torch.cuda.device_count` where NVML answers, and the launcher's
  `place`), so a process that placed ranks or trains on a GPU is in this state.
Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def utilisation() -> list[int]:
    """The post's per-step block: NVML init, one query per GPU, shutdown."""
    import pynvml
    pynvml.nvmlInit()
    try:
        return [pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(i)).gpu
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def error() -> str | None:
    """None where NVML works; else the exception NVML raises, as `Type: message`.
    Defined in notebook 05_case2_where_time_goes."""
    try:
        utilisation()
    except Exception as exc:  # noqa: BLE001 - the point is to show what it raises
        return f"{type(exc).__name__}: {exc}"
    return None


def cost(repeats: int = 50, held: bool = False) -> dict:
    """Seconds per call of the post's NVML block (init, query every GPU,
    shutdown) in this process, median over `repeats`; or the error where NVML
    is missing. `held`: with one reference to NVML kept open around the calls
    (what torch leaves behind once it has counted GPUs through NVML)."""
    err = error()
    if err is not None:
        return {"error": err, "per_call": None}
    import pynvml
    if held:
        pynvml.nvmlInit()
    try:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            utilisation()
            times.append(time.perf_counter() - t0)
    finally:
        if held:
            pynvml.nvmlShutdown()
    return {"error": None, "per_call": statistics.median(times), "calls": times}


def cost_fresh(repeats: int = 50) -> dict:
    """`cost` in a new Python process, which has not touched NVML (nor
    imported torch): the block where nothing holds NVML open. Needed because
    this process may hold it already (see the module's docstring)."""
    # this file run as a script: neither ddp_lessons nor torch is imported there
    out = subprocess.run([sys.executable, __file__, str(int(repeats))], capture_output=True, text=True,
                         timeout=300, check=False)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the NVML measurement in a new process failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def costs(repeats: int = 50) -> dict:
    """The block's cost where nothing holds NVML open (`per_call`, `times`: a
    new process) and where it is held (`held`: this process, one reference kept)."""
    fresh = cost_fresh(repeats)
    if fresh["error"] is not None:
        return fresh
    return dict(fresh, process="new", held=cost(repeats, held=True))


if __name__ == "__main__":  # cost_fresh's new process
    print(json.dumps(cost(int(sys.argv[1]))))
