"""What the timer knows of the run around its steps, through torch's own hooks: the optimizer steps
(torch's global optimizer step hook), the DDP model's forwards and whether each one will all-reduce
(a forward pre-hook), the loader it reads, and the model's configuration, read once at `result()`.

Several timers may live in one process (rounds of a lesson): the optimizer hook reports to the newest
timer that has not returned its result (`ACTIVE`).
"""

from __future__ import annotations

import torch

ACTIVE: list = []     # live timers, newest last
_HOOK: list = []      # the one global optimizer hook handle, registered at the first timer

# The timer's own per-step keys: a phase of that name would overwrite one of them, so it is refused.
RESERVED = frozenset({"step", "t_start", "step_time", "data", "phases", "buckets", "allreduce", "allreduce_calls",
                      "allreduce_bytes", "allreduce_span", "exposed", "wait", "backward_compute", "data_stall",
                      "bucket_durations", "sync", "forwards", "optimizer_steps", "ready", "host", "wait_for",
                      "computed", "lag", "collectives", "collective_calls", "collective_spans", "hook_time",
                      "ddp_exposed"})


def is_ddp(model) -> bool:
    from torch.nn.parallel import DistributedDataParallel
    return isinstance(model, DistributedDataParallel)


def watch(timer) -> None:
    """Have torch's optimizers report their steps to `timer` (until `unwatch`)."""
    if not _HOOK:
        from torch.optim.optimizer import register_optimizer_step_post_hook
        _HOOK.append(register_optimizer_step_post_hook(_optimizer_stepped))
    ACTIVE.append(timer)


def unwatch(timer) -> None:
    if timer in ACTIVE:
        ACTIVE.remove(timer)


def _optimizer_stepped(optimizer, args, kwargs) -> None:
    if ACTIVE:
        ACTIVE[-1]._optimizer_stepped()


def watch_forwards(timer, ddp_model, compute_end: bool = False) -> list:
    """A forward pre-hook on the DDP model: each forward with gradients is a micro-step, and DDP's
    `require_backward_grad_sync` then says whether its backward will all-reduce (False inside
    `no_sync()`, or where a script sets it, as nanoGPT does). `compute_end`: also, after such a forward,
    have the backward's compute end marked (`timing.compute_end`). Returns the hooks' handles."""
    def pre(module, args):
        if torch.is_grad_enabled():
            timer._forwarded(bool(module.require_backward_grad_sync))
    handles = [ddp_model.register_forward_pre_hook(pre)]
    if compute_end:
        def post(module, args, out):
            if torch.is_grad_enabled() and module.require_backward_grad_sync:
                timer.arm_compute_end(out)
        handles.append(ddp_model.register_forward_hook(post))
    return handles


def loader_info(iterable) -> dict | None:
    """A DataLoader's settings that decide how batches are prepared; None for other iterables."""
    if not hasattr(iterable, "num_workers"):
        return None
    sampler = getattr(iterable, "sampler", None)
    return {"num_workers": int(iterable.num_workers), "persistent_workers": bool(getattr(iterable, "persistent_workers",
                                                                                        False)),
            "pin_memory": bool(getattr(iterable, "pin_memory", False)),
            "batch_size": getattr(iterable, "batch_size", None),
            # a DistributedSampler (or one like it: it knows its replicas) gives each rank its shard
            "sampler": type(sampler).__name__ if sampler is not None else None,
            "sharded": sampler is not None and hasattr(sampler, "num_replicas")}


def model_info(model, ddp: bool) -> dict:
    """The model's kind and, for DDP, the settings that decide what it sends and when, with its
    own logging data's counts (read once: a few microseconds)."""
    if model is None:
        return {"kind": None}
    params = [p for p in model.parameters() if p.requires_grad]
    out = {"kind": "ddp" if ddp else "plain", "parameters": len(params),
           "grad_bytes": sum(p.numel() * p.element_size() for p in params)}
    if not ddp:
        return out
    out.update(find_unused_parameters=bool(model.find_unused_parameters),
               bucket_cap_bytes=int(model.bucket_bytes_cap), static_graph=bool(model.static_graph),
               gradient_as_bucket_view=bool(model.gradient_as_bucket_view),
               broadcast_buffers=bool(model.broadcast_buffers),
               buffers=sum(b.numel() * b.element_size() for b in model.module.buffers()))
    try:  # private, but stable since torch 1.9: DDP's own logging data
        data = model._get_ddp_logging_data()
    except Exception:  # noqa: BLE001 - a torch without it: the settings above only
        return out
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
    out.update(unused_parameter_bytes=data.get("unused_parameter_size"),
               gloo_threads=data.get("gloo_num_threads"),
               bucket_sizes=[int(x) for x in str(sizes).replace(" ", "").split(",") if x])
    return out


def bucket_tensors(bucket) -> list[int]:
    """Bytes of each tensor in a DDP bucket, in the bucket's order (from its parameters)."""
    return [p.numel() * p.element_size() for p in bucket.parameters()]


def buckets_on_cpu(model) -> list[list[int]] | None:
    """Bytes of each tensor of each of DDP's buckets, read from its reducer once (private; it copies
    the gradients' shapes as zeros, so only on CPUs); None where it cannot be read."""
    try:
        if next(model.parameters()).device.type != "cpu":
            return None
        return [bucket_tensors(b) for b in model.reducer._get_zeros_like_grad_buckets()]
    except Exception:  # noqa: BLE001 - a torch without it, or a model without parameters
        return None
