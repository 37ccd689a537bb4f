"""What a finding's advice depends on: the run's world size, where its ranks run, how many cores
each host has against the threads its ranks run (the core budget), the clock the phases were read
on, and the all-reduce's cost per call where it is known."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Host:
    """One host's ranks and cores: `threads` is torch's threads summed over its ranks."""
    name: str
    ranks: int
    threads: int
    cores: int
    gloo_threads: int = 0

    @property
    def spare(self) -> int:
        """Cores left once every rank has its threads (negative: more threads than cores)."""
        return self.cores - self.threads

    @property
    def shared(self) -> bool:
        """Ranks share cores: with several ranks, their threads take every core (or more), so a
        rank's communication threads, loader workers and peers take cycles from its compute."""
        return self.ranks > 1 and self.threads >= self.cores


@dataclass(frozen=True)
class Setting:
    world: int
    gpu: bool
    backend: str | None
    clock: str                      # "host" or "cuda events"
    hosts: list = field(default_factory=list)
    per_call: float | None = None   # seconds of fixed cost per all-reduce call, where known

    @property
    def shared(self) -> bool:
        return any(h.shared for h in self.hosts)

    @property
    def spare(self) -> int | None:
        """The fewest spare cores on any host (None where cores or threads are unknown)."""
        return min((h.spare for h in self.hosts), default=None)

    def spare_per_rank(self) -> int | None:
        """The fewest spare cores a rank has on any host (None where unknown; negative: over the cores)."""
        rows = [h.spare // max(1, h.ranks) if h.spare >= 0 else -1 for h in self.hosts]
        return min(rows) if rows else None

    def core_line(self) -> str:
        return "; ".join(f"{h.ranks} rank(s) x {h.threads // max(1, h.ranks)} thread(s) on {h.cores} cores of "
                         f"{h.name}" for h in self.hosts)


def setting_of(run, link=None) -> Setting:
    """The setting of a `Run`; `link`: an all-reduce fit (`allreduce.fit_latency_bandwidth`) whose
    latency is the cost per call."""
    hosts: dict[str, list] = {}
    for r in run:
        if r.host and r.threads and r.cores:
            hosts.setdefault(r.host, []).append(r)
    # a GPU rank keeps one core busy driving its device (its torch threads idle while the GPU computes)
    busy = (lambda r: 1) if run[0].on_gpu else (lambda r: int(r.threads))
    rows = [Host(name, len(rs), sum(busy(r) for r in rs), int(rs[0].cores),
                 sum(int(r.model.get("gloo_threads") or 0) for r in rs)) for name, rs in hosts.items()]
    first = run[0]
    clock = first.clock.get("kind") or ("cuda events" if first.on_gpu else "host")
    per_call = link.get("latency") if isinstance(link, dict) else None
    return Setting(run.world_size, first.on_gpu, first.backend, clock, rows, per_call)
