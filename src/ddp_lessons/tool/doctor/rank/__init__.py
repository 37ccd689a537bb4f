"""The doctor's rank half: what it puts in each process it starts, installed once torch is imported
(`doctor.bootstrap`). inject (what is patched, in those processes only) ; loader (the DataLoader's knobs,
batches and start) ; collectives (those the script calls itself) ; recorder (torch's hooks into a
StepTimer's steps, and the rank's file) ; launchers (how a rank ends: forked, spawned, interrupted) ;
profile (the GPU's busy share of a few steps). It talks to the doctor's process through `doctor.wire` only.
"""
