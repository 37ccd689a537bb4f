"""What the doctor prints: the command's end, the diagnosis (each finding measured or suspected), the
fixes that need the user's code, what each knob tried saved, what its own hooks cost, and where the
record is."""

from __future__ import annotations

import shlex

from .recorder import Recorder


def text(up) -> str:
    head = (f"doctor: {shlex.join(up.command)}: exit status {up.returncode}"
            f"{' (interrupted)' if up.interrupted else ''}, {up.seconds:.1f} s")
    if up.run is None:
        return "\n".join([head, "  no rank was timed: the command built no DistributedDataParallel model and "
                          "trained no model the doctor could see (or it ended before its first step); its own "
                          "output says why"])
    lines = [head + f", {len(up.run)} rank(s) timed", _failed_at_exit(up), str(up.diagnosis)]
    code = [f for f in up.diagnosis.findings if f.needs_code]
    if code:
        lines.append("fixes that need your code:")
        lines += [f"  - {f.label}: {f.change}" for f in code]
    d = [r.timer.get("doctor") or {} for r in up.run]
    window = max((r.account or {}).get("wall", 0.0) for r in up.run)
    cost = max(x.get("hook_s", 0.0) for x in d)
    calls = max(x.get("hook_calls", 0) for x in d)
    lines.append(f"the doctor's own hooks: {calls} calls, {cost * 1e3:.3g} ms of host time on the busiest rank "
                 f"({cost / window:.1%} of its window); on CPUs it times the all-reduce with a comm hook around "
                 "DDP's (benchmarks/doctor_cost.py records what it costs a step)" if window else "")
    stopped = [x.get("reason") for x in d if x.get("reason") == Recorder.STOPPED]
    if stopped:
        lines.append(f"stopped the command after {up.settings['warmup']} + {up.settings['steps']} optimizer steps "
                     "(--steps): its output ends there")
    notes = sorted({n for x in d for n in x.get("notes") or []})
    lines += [f"note: {n}" for n in notes]
    if up.confirmed:
        lines.append(f"tried, {up.settings.get('rounds')} interleaved rounds of {up.settings.get('confirm_steps')} "
                     f"optimizer steps after {up.settings['warmup']} of warm-up, as it is against one knob changed:")
        for c in up.confirmed:
            why = f" (for {c['cause'].replace('_', ' ')})" if c["cause"] else ""
            applied = "" if c["applied"] is not False else "; the knob did not reach the run (the script sets it)"
            lines.append(f"  {c['knob']}{why}: {c['verdict']}{applied}")
    if up.record:
        lines.append(f"saved {up.record} (python -m ddp_lessons diagnose and whatif read it)")
    return "\n".join(x for x in lines if x)


def _failed_at_exit(up) -> str:
    """A command that failed after every rank had reached its script's end: the training ran whole."""
    reasons = [(r.timer.get("doctor") or {}).get("reason") for r in up.run]
    if up.returncode == 0 or up.interrupted or len(reasons) < up.run.world_size or \
            not all(x in Recorder.REACHED_END for x in reasons):
        return ""
    return ("  every rank reached the end of its script before the command failed: the failure came at exit, "
            "after the training, and the diagnosis covers the whole run. One such failure: torch's gloo aborts a "
            "rank at exit (\"terminate called without an active exception\", pytorch/pytorch#190489) when its "
            "threads outlive the script. Nothing may hold the group when it is destroyed: `import "
            "torch.distributed.nn` before init_process_group (imported after it, by DDP, its default arguments "
            "hold the group) and `del` the DDP model before destroy_process_group, which then frees the group "
            "and ends its threads")
