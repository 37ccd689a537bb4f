"""The course's own machinery: what the notebooks use and a practitioner's run does not.

contract (`Case`: what every case declares) ; claims (a lesson's claims as
data, decided by one skeleton) ; options (named options that refuse nonsense:
the base of each case's options) ; exercises (the self-checks that close every
notebook) ; toy (the small MLP notebook 00 and the tests train) ; replay (a
recorded GPU run, or the same run made live on this machine's GPUs) ;
timer_validation (records of the timer's cost read back).
It imports the tool (`ddp_lessons.tool`), never a case.
"""
