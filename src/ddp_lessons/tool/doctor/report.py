"""What the doctor prints: the command's end, the diagnosis (each finding measured or suspected), the
fixes that need the user's code, what each knob tried saved and the causes ranked by what was measured,
what its own hooks cost, and where the record is."""

from __future__ import annotations

import shlex

from . import wire


def text(up) -> str:
    head = (f"doctor: {shlex.join(up.command)}: exit status {up.returncode}"
            f"{' (interrupted)' if up.interrupted else ''}, {up.seconds:.1f} s")
    if up.run is None:
        return "\n".join([head, "  no rank was timed: the command built no DistributedDataParallel model and "
                          "trained no model the doctor could see (or it ended before its first step); its own "
                          "output says why"])
    d = [r.doctor for r in up.run]
    lines = [head + f", {len(up.run)} rank(s) timed", _not_ddp(up, d), _ended(up, d), str(up.diagnosis)]
    code = [f for f in up.diagnosis.findings if f.needs_code]
    if code:
        lines.append("fixes that need your code:")
        lines += [f"  - {f.label}: {f.change}" for f in code]
    lines.append(own_cost(up.run, d))
    stopped = [x.get("reason") for x in d if x.get("reason") == wire.STOPPED]
    if stopped:
        lines.append(f"stopped the command after {up.settings['warmup']} + {up.settings['steps']} optimizer steps "
                     "(--steps): its output ends there")
    notes = sorted({n for x in d for n in x.get("notes") or []})
    lines += [f"note: {n}" for n in notes]
    lines += _confirmed(up)
    if up.record:
        lines.append(f"saved {up.record} (python -m ddp_lessons diagnose and whatif read it)")
    return "\n".join(x for x in lines if x)


def own_cost(run, d) -> str:
    """The rank half's own host time: its hooks' bodies (marks included) on the busiest rank, against its
    window. Where the host paces the steps (CPUs; a host-bound GPU) the step takes that much longer; where
    the GPU is behind the host, the host's time hides behind the queue and the step takes less."""
    window = max(((r.account or {}).get("wall", 0.0) - (r.account or {}).get("before_first_step", 0.0))
                 for r in run)
    cost = max(x.get("hook_s", 0.0) + (x.get("untimed_s") or 0.0) for x in d)
    calls = max(x.get("hook_calls", 0) for x in d)
    if not window:
        return ""
    hook = sum((s.hook_time or 0.0) for s in run[0].steps())
    gpu = run[0].on_gpu
    return (f"the doctor's own hooks: {calls} calls, about {cost * 1e3:.3g} ms of host time on the busiest rank "
            f"({cost / window:.1%} of its window"
            + (f"; its comm hook around DDP's all-reduce another {hook * 1e3:.3g} ms" if hook else "") + "): "
            + ("what a step takes longer where the host paces the GPU, less where the GPU is behind it; "
               if gpu else "what the steps take longer on these cores; ")
            + "benchmarks/doctor_cost.py measures it paired against the command alone")


def _not_ddp(up, d) -> str:
    """World size > 1 and no DDP model: what is communicated is not seen (FSDP, a custom all-reduce)."""
    plain = [x for x in d if x.get("model") == "plain"]
    if up.run.world_size > 1 and plain:
        return (f"  warning: {len(plain)} of {len(d)} rank(s) of a run of world size {up.run.world_size} trained a "
                "model without DistributedDataParallel (FSDP, a custom all-reduce, compiled autograd): its "
                "communication is not seen and counts as compute here")
    return ""


def _ended(up, d) -> str:
    reasons = [x.get("reason") for x in d]
    if any(r == wire.INTERRUPTED for r in reasons):
        return ("  interrupted: a rank got SIGINT (Ctrl-C) before its script's end: the diagnosis covers what ran "
                "until then; its last, unfinished optimizer step is left out of the per-step counts")
    if up.returncode == 0 or up.interrupted or len(reasons) < up.run.world_size or \
            not all(x in wire.REACHED_END for x in reasons):
        return ""
    return ("  every rank reached the end of its script before the command failed: the failure came at exit, "
            "after the training, and the diagnosis covers the whole run. One such failure: torch's gloo aborts a "
            "rank at exit (\"terminate called without an active exception\", pytorch/pytorch#190489) when its "
            "threads outlive the script. Nothing may hold the group when it is destroyed: `import "
            "torch.distributed.nn` before init_process_group (imported after it, by DDP, its default arguments "
            "hold the group) and `del` the DDP model before destroy_process_group, which then frees the group "
            "and ends its threads")


def _confirmed(up) -> list[str]:
    if not up.confirmed:
        return []
    from .confirm import chance_line
    s = up.settings
    out = [f"tried, {s.get('rounds')} interleaved rounds, as it is against one knob changed ({s.get('steps_why')}; "
           f"after {s['warmup']} of warm-up):"]
    for c in up.confirmed:
        why = f" (for {c['cause']})" if c["cause"] else ""
        applied = "" if c["applied"] is not False else "; the knob did not reach the run (the script sets it)"
        steady = f"; {c['per_step_line']}" if c.get("per_step_line") else ""
        out.append(f"  {c['knob']}{why}: {c['verdict']}{steady}{applied}")
    out.append("  " + chance_line(len(up.confirmed), s.get("rounds") or 0))
    if up.ranked:
        out.append("ranked by what was measured (share of the run from its first step):")
        out += [f"  {i}. {what}: {share:.0%} ({how})" for i, (what, share, how) in enumerate(up.ranked, 1)]
    return out
