"""What a DDP communication hook sends, apart from how it is timed.

Gradient compression (`compression_hook`) and an injected delay (`delayed`) are hooks of their own
here. `timing.StepTimer` wraps whichever hook it is given and only measures, so switching timing off
never changes what is sent:

    hook = delayed(compression_hook("bf16"), 0.05)   # bf16 all-reduce, +50 ms per bucket
    timer = StepTimer(ddp_model, hook=hook)          # registers it, timed
    timer = StepTimer(ddp_model, hook=hook, enabled=False)  # registers it, untimed
"""

from __future__ import annotations

import os
import queue
import threading
import time

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

# A hook is a plain function `hook(state, bucket) -> Future`, registered with
# `ddp_model.register_comm_hook(state, hook)`. DDP inspects it: the second parameter must be called `bucket`,
# the function needs a `__name__` (a functools.partial fails), and annotations, if any, must be the real
# classes (this file has none). Every hook here takes torch's state, the process group (None: the default
# group); a wrapper's state is its inner hook's state, as for torch's `fp16_compress_wrapper`.
# DDP's own all-reduce as a Python hook: divide by the world size, then sum.
allreduce_hook = default_hooks.allreduce_hook

COMPRESSION_DTYPES = {None: None, "none": None, "fp32": None, torch.float32: None,
                      "fp16": torch.float16, torch.float16: torch.float16,
                      "bf16": torch.bfloat16, torch.bfloat16: torch.bfloat16}
_WRAPPERS = {torch.float16: ("fp16", default_hooks.fp16_compress_wrapper),
             torch.bfloat16: ("bf16", default_hooks.bf16_compress_wrapper)}


def compression_hook(dtype):
    """A hook that all-reduces the gradients cast to `dtype` ("fp16"/"bf16" or
    the torch dtype): half the bytes of float32 on the wire, cast back after.
    None, "none", "fp32": returns None, i.e. no hook (DDP's own all-reduce).

    Torch's compress wrappers around its `allreduce_hook`. The wrapper swaps
    the bucket's buffer for the cast copy (`bucket.set_buffer`), so a hook
    that wraps this one finds the bytes sent in `bucket.buffer()`. Under a
    name of its own, so that DDP's bf16 check (CUDA with NCCL only) lets it
    run on CPUs too: gloo all-reduces bf16.
    """
    try:
        dtype = COMPRESSION_DTYPES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"no compression hook for {dtype!r}: use None, 'fp16' or 'bf16'") from None
    if dtype is None:
        return None
    name, wrapper = _WRAPPERS[dtype]
    inner = wrapper(allreduce_hook)

    def compressed_allreduce_hook(state, bucket):
        return inner(state, bucket)
    compressed_allreduce_hook.__name__ = compressed_allreduce_hook.__qualname__ = f"allreduce_hook_in_{name}"
    return compressed_allreduce_hook


def delayed(hook, seconds: float):
    """`hook` (None: `allreduce_hook`), then `seconds` more once its all-reduce
    has completed: a known extra cost per bucket, to cross-check a timer.
    `seconds == 0` returns `hook` unchanged.

    On CPUs the wait runs on a thread of its own, one bucket after another, so
    it never lands on the thread running the backward pass (a future that is
    already complete runs a `then` callback right there, and DDP would count
    the wait as backward compute). On GPUs a `then` callback sleeps instead,
    which keeps the CUDA future's stream ordering; an NCCL future completes
    when the all-reduce is queued, so there the host waits. (GPU path not
    exercised by the CPU tests.)
    """
    if not seconds:
        return hook
    inner = hook if hook is not None else allreduce_hook

    def delayed_hook(state, bucket):
        fut = inner(state, bucket)
        if bucket.buffer().is_cuda:
            def wait(f):
                time.sleep(seconds)
                return f.value()
            return fut.then(wait)
        out, delays = torch.futures.Future(), _delay_queue()
        fut.add_done_callback(lambda f: delays.put((f, out, seconds)))
        return out
    return delayed_hook


_delays = None  # (pid, queue) of this process's delay thread; started on first use


def _delay_queue():
    global _delays
    if _delays is None or _delays[0] != os.getpid():  # a forked child has no thread
        q = queue.SimpleQueue()
        threading.Thread(target=_complete_after_delay, args=(q,), daemon=True,
                         name="ddp-lessons-comm-delay").start()
        _delays = (os.getpid(), q)
    return _delays[1]


def _complete_after_delay(q):
    while True:
        fut, out, seconds = q.get()
        time.sleep(seconds)
        try:
            out.set_result(fut.value())
        except Exception as exc:  # noqa: BLE001 - the hook's own failure, handed to DDP
            out.set_exception(exc)
