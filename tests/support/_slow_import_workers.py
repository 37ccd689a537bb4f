"""A worker module that takes seconds to import: a rank that is slow to start."""

import os
import time

time.sleep(float(os.environ.get("DDP_LESSONS_TEST_IMPORT_S", "3")))


def hello():
    return 1


def sleep_forever():
    while True:
        time.sleep(0.1)
