"""Notebook 00: a first launch, a first all-reduce, a first timed DDP model.

workers (a first all-reduce, a failing rank, a small timed DDP model) ;
sockets (which sockets a rank listens on) ; verdicts (00's conclusions
decided by the numbers) ; replay (the recorded timer-overhead runs made again
on this machine's GPUs) ; exercises ; cli (the foundation's commands).
"""
