"""The post's NVML block (init, one utilisation query per GPU, shutdown) and
what it costs per call. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import statistics
import time


def nvml_utilisation() -> list[int]:
    """The post's per-step block: NVML init, one query per GPU, shutdown."""
    import pynvml
    pynvml.nvmlInit()
    try:
        return [pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(i)).gpu
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def nvml_error() -> str | None:
    """None where NVML works; else the exception NVML raises, as `Type: message`."""
    try:
        nvml_utilisation()
    except Exception as exc:  # noqa: BLE001 - the point is to show what it raises
        return f"{type(exc).__name__}: {exc}"
    return None


def nvml_cost(repeats: int = 50) -> dict:
    """Seconds per call of the post's NVML block (init, query every GPU,
    shutdown), median over `repeats`; or the error where NVML is missing."""
    err = nvml_error()
    if err is not None:
        return {"error": err, "per_call": None}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        nvml_utilisation()
        times.append(time.perf_counter() - t0)
    return {"error": None, "per_call": statistics.median(times), "times": times}
