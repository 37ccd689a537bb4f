"""Notebook 00's claims, in notebook order: only those whose outcome could go either way on a reader's
machine (`course.claims`). The notebook decides each with `CLAIMS.decide(key, *numbers)`, its numbers
taken by `readout` (`readout.misfit(readout.ratios(rows))`). Every other check of 00 is a printed reading
(the timer against DDP's own clock, a known delay, the recorded cost of timing) or a test in tests/tool
and tests/cases/intro. Defined in notebook 00_first_launch.
"""

from __future__ import annotations

from ...course.claims import Claim, Claims

CLAIMS = Claims(
    # 00: the all-reduce's two regimes, on each size's best of 150 interleaved rounds (`workers.interleaved`,
    # read by `readout.ratios` and `readout.misfit`). It fails where a
    # slow network makes small messages cost their bytes (64 KiB over 4 KiB near 16x) or where the
    # largest size is still latency-bound (a fast link, too small a sweep: near 1x). A larger message
    # much faster than a smaller one (under 1 / 1.75 = 0.57x, readout.NOISE) straddles the limit: that
    # sweep decides nothing. 4x the bytes costing over 4x the time is bandwidth-bound too (a bandwidth that
    # falls with size): the notebook prints it as a reading.
    Claim("latency_then_bandwidth",
          "small all-reduces cost their latency and large ones their bytes",
          "interval", side="<", limit=1.0,
          what="worse ratio against its bound (regime .. model)",
          holds="On this machine a 64 KiB all-reduce costs under 4x a 4 KiB one (latency-bound) and the largest "
                "one over 2x a quarter of it (bandwidth-bound).",
          fails="On this machine the all-reduce does not show both regimes of latency + bytes / bandwidth: small "
                "messages already cost their bytes, or the largest ones do not grow with theirs.",
          unresolved="This sweep timed a larger message much faster than a smaller one, beyond this machine's "
                     "noise: run it again.",
          figure="worse ratio / its bound {lo:.2f} .. {hi:.2f} (under 1: inside)"),
)
