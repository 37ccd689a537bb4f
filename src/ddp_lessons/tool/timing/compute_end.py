"""The end of a backward's compute, marked from inside autograd (mode "light": DDP's own C++ all-reduce).

At a forward of the DDP model that will all-reduce, `arm` puts a pre-hook on the grad_fn of the output's
tensors; the first to run queues an autograd final callback, which runs once every gradient is computed
and before DDP's own (`finalize_backward`, queued when its last bucket is ready): callbacks run in the
order queued. It makes one mark: on a GPU a CUDA event on the current stream, reached once every
backward kernel is done, before the stream waits for NCCL. So `exposed` (the backward's end minus it)
and `ready` come on every step, with no host-device sync and no Python comm hook.
"""

from __future__ import annotations

import torch


def tensors_of(out, limit: int = 8) -> list:
    """The first `limit` tensors that carry a grad_fn in a model's output (a tensor, a tuple or list,
    a dict or an object with `values()`, as Hugging Face's outputs are), depth first."""
    found: list = []
    todo = [out]
    while todo and len(found) < limit:
        x = todo.pop()
        if isinstance(x, torch.Tensor):
            if x.grad_fn is not None:
                found.append(x)
        elif isinstance(x, (list, tuple)):
            todo.extend(reversed(x))
        elif isinstance(x, dict) or hasattr(x, "values") and callable(x.values):
            try:
                todo.extend(reversed(list(x.values())))
            except TypeError:
                continue
    return found


def arm(mark_end, out) -> bool:
    """Have `mark_end()` called once the backward through `out` has computed every gradient (before
    DDP's all-reduce wait); False where `out` holds no tensor with a grad_fn."""
    nodes = {id(t.grad_fn): t.grad_fn for t in tensors_of(out)}
    if not nodes:
        return False
    state = {"queued": False}

    def pre(grad_outputs):
        if not state["queued"]:
            state["queued"] = True
            torch.autograd.Variable._execution_engine.queue_callback(mark_end)
    for node in nodes.values():
        node.register_prehook(pre)
    return True
