"""The end of a backward's compute, marked from inside autograd (mode "light": DDP's own C++ all-reduce).

A pre-hook, registered once on the gradient accumulator of the model's last parameter (the first gradient
a backward computes) and armed by a flag each step, queues an autograd final callback that runs before
DDP's own (`finalize_backward`): callbacks run in the order queued. It makes one mark, on a GPU a CUDA
event reached once every backward kernel is done, before the stream waits for NCCL; so `exposed` and
`ready` come on every step, with no host-device sync and no Python comm hook. A backward that left that
parameter unused switches the marker to a pre-hook on each step's output's grad_fn for the rest of the run.
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


class EndMarker:
    """`mark_end()` once per armed backward, from a pre-hook registered once (see the module's docstring)."""

    def __init__(self, model, mark_end):
        self.mark_end, self.armed, self.per_step, self.handle = mark_end, False, False, None
        params = [p for p in model.parameters() if p.requires_grad] if model is not None else []
        try:
            acc = params[-1].view_as(params[-1]).grad_fn.next_functions[0][0]
            self.handle = acc.register_prehook(self._pre)
            self._node = acc   # kept: a parameter holds its accumulator weakly
        except (IndexError, AttributeError, RuntimeError):
            self.per_step = True

    def _pre(self, grad_outputs):
        if self.armed:
            self.armed = False
            torch.autograd.Variable._execution_engine.queue_callback(self.mark_end)

    def arm(self, out) -> bool:
        """The next backward (through `out`) marks its compute's end."""
        if self.per_step:
            return arm(self.mark_end, out)
        if self.armed:   # the last armed backward never reached the hook: each step's own, from now on
            self.armed, self.per_step = False, True
            self.remove()
            return arm(self.mark_end, out)
        self.armed = True
        return True

    def disarm(self) -> None:
        self.armed = False

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = self._node = None
