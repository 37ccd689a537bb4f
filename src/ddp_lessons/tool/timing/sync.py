"""One time axis for every rank's marks, and the wait for a slower rank.

`CommonClock` takes a shared reference at a barrier of the timer's group, at the timer's creation and
again at `result()`. Each rank's marks are kept as seconds since its own reference ("local"); adding
`offset` puts them on the common axis, whose zero is the reference of the group's rank 0. On that axis,
per step, `wait` (`CommonClock.finish`, from `ready_time`) is how long after this rank's last gradient
bucket was ready the slowest rank's was: the part of this rank's exposed all-reduce spent waiting for a
slower rank. `exposed - wait` is communication after every rank was ready (the transfer, plus queueing
behind earlier buckets). `waits_across` works the waits out afterwards where no reference was common.
"""

from __future__ import annotations

import socket
import time

import torch
import torch.distributed as dist


def _grouped(group) -> bool:
    if not (dist.is_available() and dist.is_initialized()):
        return False
    if dist.get_rank(group) < 0:
        raise ValueError("this rank is not in the timer's process group: create the StepTimer "
                         "on the group's members only (or pass group= the group this rank trains in)")
    return dist.get_world_size(group) > 1


class CommonClock:
    """The timer's reference points (creation and result) and the offsets,
    over the ranks of `group` (None: every rank)."""

    def __init__(self, clock, device, enabled: bool = True, group=None, collective: bool = True):
        self.clock, self.device, self.group = clock, device, group
        # collective=False: no barrier, no gather (the doctor's ranks: waits are worked out afterwards)
        self.synced = enabled and collective and _grouped(group)
        self.host = socket.gethostname()
        self.t_ref, self.ref = self.point()
        self.method, self.offset = "one rank", 0.0
        if self.synced:
            seen = _gather([self.t_ref, self.host], self.group)
            # One host (every rank reports the same host name): perf_counter is the system-wide monotonic
            # clock, the same for every process, so the offsets are the exact differences of the ranks'
            # reference readings (error: the GPU-to-host tie where marks are CUDA events). Several hosts:
            # the clocks are unrelated; offset 0, i.e. the barrier's exit is taken as one instant.
            same = len({h for _, h in seen}) == 1
            self.method = "shared host clock" if same else "barrier"
            self.offset = self.t_ref - seen[0][0] if same else 0.0

    def point(self):
        """(host perf_counter, clock token) read right after a barrier (on a GPU: after a device
        synchronise, so the event it records runs at once and the event clock is tied to the host clock)."""
        if self.synced:
            dist.barrier(group=self.group)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # note: CPU-GPU sync point, at creation and result only
        t = time.perf_counter()
        return t, self.clock.mark()

    def finish(self, wall: float, t_end: float, readies: list) -> tuple[dict, list]:
        """Clock facts, and per step this rank's wait for the slowest rank's ready
        time (None where a step has no ready time or the run has one rank).

        What `wait` separates, and what not:
        - gloo (host clocks, mode "full"): a bucket is ready when DDP hands it to the hook, and done when
          gloo's callback runs: both host times. Exact up to the barrier exit skew (tens of microseconds
          on one host). Not separated: a slower peer's earlier buckets (only the last bucket is
          compared), gloo's threads slowing this rank's own compute on shared cores.
        - NCCL (CUDA events, mode "full"): ready and done are events on the compute stream; NCCL's kernel
          spins while it waits for a peer, so its duration includes the wait, and `wait` takes it out the
          same way. Error: the tie of the event clock to the host clock (one synchronise each at creation
          and at result; the drift between them is reported as `clock["drift"]`).
        - mode "light" (DDP's own timings): no per-bucket marks (see `ready_time`); coarser by DDP's own
          bookkeeping.
        - Waiting outside an all-reduce (in a barrier, in evaluation's collectives, at the next step's
          forward broadcast) is not in `wait`: it shows as the step or outside work where it happens."""
        drift = wall - (t_end - self.t_ref)  # event clock against host clock; 0 on the host clock
        # ref_host: the reference on the host's perf_counter, one clock for every process of a host
        info = {"method": self.method, "offset": self.offset, "drift": drift, "error": abs(drift),
                "ref_host": self.t_ref, "host": self.host}
        if not self.synced:
            return info, [None] * len(readies)
        mine = [None if r is None else r + self.offset for r in readies]
        seen = _gather([t_end - self.t_ref, mine], self.group)
        extra, waits = waits_from(seen, dist.get_rank(self.group), self.method == "barrier", abs(drift))
        info.update(extra)
        return info, waits


# Several hosts: what a barrier's exit may differ by between hosts on a network (not measured here).
BARRIER_SKEW_S = 2e-4


def waits_from(seen: list, rank: int, hosts: bool, drift: float) -> tuple[dict, list]:
    """Per step, this rank's wait for the slowest rank's ready time, from every rank's (span between the two
    barriers, ready times) in `seen`. `hosts`: the ranks are on several hosts, whose clocks tick at their
    own rates: the two barriers' exits are one instant on every host, so each clock's rate against rank 0's
    is the ratio of their spans (an offset alone drifts by the hosts' ppm, tens of ms an hour); what is left
    is the barriers' exit skew, the error, and a wait under it is not resolved (0, counted)."""
    info: dict = {}
    if hosts:
        spans = [s for s, _ in seen]
        rates = [spans[0] / s if s > 0 else 1.0 for s in spans]
        seen = [(s, [None if x is None else x * r for x in m]) for (s, m), r in zip(seen, rates, strict=True)]
        info.update(rates=rates, spread_between_barriers=max(spans) - min(spans), error=drift + BARRIER_SKEW_S)
    mine = seen[rank][1]
    waits, hidden = [], 0
    for k, own in enumerate(mine):
        others = [m[k] for _, m in seen if k < len(m) and m[k] is not None]
        w = None if own is None else max(others) - own
        if w is not None and hosts and 0 < w < info["error"]:
            w, hidden = 0.0, hidden + 1
        waits.append(w)
    if hidden:
        info["waits_under_error"] = hidden
    return info, waits


def _gather(obj, group=None) -> list:
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def ready_time(step) -> float | None:
    """When this rank's backward compute finished (seconds since the reference): its last bucket handed
    to the backend (mode "full"), else its compute end's mark (mode "light", `timing.compute_end`), else
    the backward phase's end minus the exposed part (DDP's own timings). `step`: a step of the result."""
    if step.get("buckets"):
        return step["t_start"] + max(b.get("sent", b["start"]) for b in step["buckets"])
    bwd = (step.get("phases") or {}).get("backward")
    # a step that sent nothing (a micro-step under no_sync) has no all-reduce to be ready for
    if bwd is None or "exposed" not in step or not step.get("allreduce_calls") or step.get("sync") is False:
        return None
    if step.get("computed") is not None:
        return step["t_start"] + step["computed"]
    return step["t_start"] + bwd[1] - step["exposed"]


def waits_across(clocks: list[dict], steps: list[list]) -> list[list[float | None]] | None:
    """Where the ranks' timers took no common reference (the doctor's: no collectives), each step's wait
    for the slowest rank from their ready times on the host's clock, which every process of one host
    shares: per rank (its timer's `clocks`, its `steps` as `runs.Step`s), a wait per step (None where a
    step has none). Steps that all-reduced are matched by their order. None where there is nothing to
    work out: one rank, ranks that have waits already, or clocks of several hosts. Writes nothing."""
    if len(steps) < 2 or any(s.wait is not None for ss in steps for s in ss):
        return None
    if any("ref_host" not in c for c in clocks) or len({c.get("host") for c in clocks}) != 1:
        return None
    readies = [[(i, s.ready + c["ref_host"]) for i, s in enumerate(ss) if s.ready is not None]
               for ss, c in zip(steps, clocks, strict=True)]
    out: list[list[float | None]] = [[None] * len(ss) for ss in steps]
    for j in range(min(len(x) for x in readies)):
        latest = max(x[j][1] for x in readies)
        for r, x in enumerate(readies):
            i, t = x[j]
            exposed = steps[r][i].exposed
            out[r][i] = min(max(0.0, latest - t), 0.0 if exposed is None else exposed)
    return out
