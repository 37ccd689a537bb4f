"""The course's cases, one subpackage each.

A case imports the tool and the course's machinery, never another case:

intro (notebook 00: a first launch, all-reduce and timer) ; case1 (01-03: a
plain-PyTorch DDP script on 2 GPUs slower than one) ; case2 (04-06: a
Lightning test on 3 GPUs where one GPU always wins) ; own (07: a learner's
own run, and the standard tools on it).
"""
