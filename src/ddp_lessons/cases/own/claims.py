"""Notebook 07's claims, in notebook order: only those whose outcome could go either way on a reader's
machine (`course.claims`). The notebook decides one with `CLAIMS.decide(key, *numbers)`, its numbers taken
by `readout` (`cost_ratio`, `times`, `first_finding` of the doctor's diagnosis). Every other check of 07
(the counts, the sample order, the gradients, the recorded GPU figures) is printed as a reading;
tests/cases/own holds their tests. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

from ...course.claims import Claim, Claims

CLAIMS = Claims(
    # Which cause to fix first. The evaluation is done twice by design, but on a machine where the PIL
    # augmentation in the main process is slow, or a rank waits long in its all-reduces beside busy
    # processes, the loader's wait or the exposed all-reduce can outweigh it.
    Claim("evaluation_costs_most",
          "the duplicated evaluation costs more than every other measured cause together",
          "repeats", side=">", limit=1.0, min_rounds=7,
          what="duplicated evaluation / the other causes, summed over the ranks, per round",
          holds="The evaluation done on every rank costs this run more than every other measured cause "
                "together, in every round: fix it first.",
          fails="The evaluation done on every rank costs this run less than the other measured causes "
                "together, in every round: on this machine something else comes first.",
          unresolved="This run cannot tell whether the evaluation done on every rank costs more than the other "
                     "measured causes together (the rounds disagree, or are too few): read the causes above.",
          figure="duplicated evaluation / the others {lo:.2f} .. {hi:.2f} ({n} rounds)"),
    # Whether the fixes pay at this run's length. They remove half of each rank's evaluation, but the
    # loader workers they add start once per run: on a machine with spare cores and a short run that
    # start can cost more than they save (the recorded H200 run shows it). Decided on the rounds'
    # quartiles, so one round disturbed by a busy neighbour does not decide it.
    Claim("fix_saves_time",
          "on 2 ranks the fixed setup's run takes less time than the broken one's",
          "separated", faster="b", names=("broken", "fixed"), min_rounds=7,
          holds="On 2 ranks of this machine the fixed setup's run is shorter than the broken one's: the middle "
                "halves of their rounds do not overlap.",
          fails="On 2 ranks of this machine the fixed setup's run is longer than the broken one's: at this run's "
                "length the fixes cost more than they save.",
          unresolved="On 2 ranks of this machine this run cannot tell which setup's run is shorter (the middle "
                     "halves of their rounds overlap, or the rounds are too few).",
          figure="fixed / broken per round {lo:.2f} .. {hi:.2f}, median {median:.2f} ({n} rounds)"),
    # The doctor on a plain script with the same habit. It ranks by seconds, so on a machine where the
    # script's start-up stalls its first steps, or its all-reduces wait on busy cores, another cause can
    # come first. Work outside the steps counts only where it is the evaluation (`readout.first_finding`:
    # the doctor names it "evaluation (forwards without gradients)"): a checkpoint or a loader's start
    # outside the steps is another cause.
    Claim("doctor_ranks_evaluation_first",
          "the doctor ranks the evaluation (work outside the steps) first",
          "exact", expected="outside_steps: evaluation", what="the doctor's first finding",
          holds="The doctor, with no line of the script changed, ranks the evaluation first, as the "
                "measurement by hand did.",
          fails="The doctor ranks another cause above the evaluation on this machine: read its findings "
                "above before choosing a fix.",
          figure="first finding: {value}"),
)
