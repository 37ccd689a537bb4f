"""The links a what-if replays an all-reduce through: a small table of common
ones, each with where its figure comes from, or one fitted on your own machine.

A ring all-reduce of B bytes on n ranks moves 2(n-1)/n x B through every
rank's link and takes 2(n-1) latency-bound steps, so a link is two numbers:
the bus bandwidth a ring reaches (nccl-tests' busbw) and the latency of one
step. (The README, "What-if", introduces it; notebook 03 uses it for case 1's gap (`cases.case1.gap`).)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import allreduce

EFFICIENCY = 0.8  # the share of a link's nominal one-way rate a ring all-reduce's busbw reaches: an estimate


@dataclass(frozen=True)
class Link:
    """A link for the replay: `bus_bandwidth` in B/s (what a ring reaches), `step_latency`
    in s (one of the ring's 2(n-1) steps), and where the figures come from."""
    name: str
    bus_bandwidth: float
    step_latency: float
    source: str
    max_ranks: int | None = None  # a bridge joins two cards: no ring of more ranks over it

    def check(self, world_size: int) -> None:
        """Refuse more ranks than the link joins."""
        if self.max_ranks is not None and world_size > self.max_ranks:
            raise ValueError(f"link {self.name} joins at most {self.max_ranks} ranks, not {world_size}")

    def allreduce_time(self, nbytes: float, world_size: int) -> float:
        """One ring all-reduce of `nbytes` on `world_size` ranks, by the course's one cost
        model (`allreduce.estimate`): 0 on one rank (nothing moves)."""
        self.check(world_size)
        if world_size < 2:
            return 0.0
        return allreduce.estimate(nbytes, self.bus_bandwidth, 2 * (world_size - 1) * self.step_latency, world_size)


def _nominal(name: str, one_way_gb_s: float, latency_us: float, source: str, max_ranks=None) -> Link:
    return Link(name, EFFICIENCY * one_way_gb_s * 1e9, latency_us * 1e-6,
                f"{source}; busbw = {EFFICIENCY:g} x that (an estimate), step latency {latency_us:g} us (an estimate)",
                max_ranks)


_PCIE = "PCIe {gen}: {rate} GT/s per lane, 128b/130b encoding, x{lanes}: {gb:.1f} GB/s each way (PCI-SIG)"
LINKS = {link.name: link for link in (
    _nominal("pcie3-x16", 15.75, 10, _PCIE.format(gen="3.0", rate=8, lanes=16, gb=15.75)),
    _nominal("pcie4-x16", 31.5, 10, _PCIE.format(gen="4.0", rate=16, lanes=16, gb=31.5)),
    _nominal("pcie5-x16", 63.0, 10, _PCIE.format(gen="5.0", rate=32, lanes=16, gb=63.0)),
    # two cards on a consumer board often share the CPU's 16 lanes as x8/x8
    _nominal("pcie4-x8", 15.75, 10, _PCIE.format(gen="4.0", rate=16, lanes=8, gb=15.75) + " (two cards at x8/x8)"),
    _nominal("pcie4-x4", 7.9, 10, _PCIE.format(gen="4.0", rate=16, lanes=4, gb=7.9) + " (a chipset slot)"),
    # Without peer-to-peer NCCL stages through host memory (SHM transport): each card's own link carries
    # its bytes once each way (PCIe is full duplex), but the staging copies, the proxy thread and a
    # shared uplink cost bandwidth; half the one-way rate is an estimate (nccl-tests' busbw on the
    # machine decides: `all_reduce_perf -b 1M -e 1G -f 2 -g 2`).
    _nominal("pcie4-x16-no-p2p", 31.5 / 2, 20, _PCIE.format(gen="4.0", rate=16, lanes=16, gb=31.5)
             + ", halved: without peer-to-peer NCCL stages every byte through host memory (copies, a "
             "proxy thread, a shared uplink): an estimate; nccl-tests' busbw on the machine decides"),
    _nominal("3090-nvlink-bridge", 56.25, 5, "RTX 3090 NVLink bridge (it joins 2 cards): 112.5 GB/s both "
             "ways together, 56.25 GB/s each way (NVIDIA GeForce RTX 3090 specifications)", max_ranks=2),
    _nominal("nvlink3-a100", 300.0, 3, "NVLink 3 on A100 SXM: 600 GB/s both ways together, 300 GB/s each "
             "way (NVIDIA A100 datasheet)"),
    _nominal("nvlink4-h100", 450.0, 3, "NVLink 4 on H100/H200 SXM: 900 GB/s both ways together, 450 GB/s "
             "each way (NVIDIA H100 datasheet)"),
)}


def from_fit(fit: dict, world_size: int, name: str = "fitted") -> Link:
    """A link from `allreduce.fit_latency_bandwidth` of a sweep on `world_size` ranks (its
    latency is one whole call, its bandwidth an algbw): measured, not estimated."""
    if world_size < 2:
        raise ValueError("a fit from a 1-rank sweep says nothing about a link: sweep on 2 or more ranks")
    steps = 2 * (world_size - 1)
    return Link(name, fit["bandwidth"] * steps / world_size, fit["latency"] / steps,
                f"fitted on {world_size} ranks: latency {fit['latency'] * 1e6:.1f} us a call, "
                f"algbw {fit['bandwidth'] / 1e9:.2f} GB/s (measured)")


def resolve(link) -> Link:
    """A Link, a row name of LINKS, or a fit (a dict with 'latency', 'bandwidth' and 'world_size')."""
    if isinstance(link, Link):
        return link
    if isinstance(link, str):
        if link not in LINKS:
            raise ValueError(f"link {link!r}: use one of {', '.join(LINKS)}, or a Link, or a fit")
        return LINKS[link]
    if isinstance(link, dict) and {"latency", "bandwidth", "world_size"} <= link.keys():
        return from_fit(link, link["world_size"])
    raise ValueError(f"link {link!r}: use a name of the link table ({', '.join(LINKS)}), a Link, or an "
                     "all-reduce fit with its world_size")
