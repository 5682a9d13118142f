"""A scheduler whose construction kills the process it runs in with SIGKILL,
as the out-of-memory killer would: for the sweep tests of dying workers
(used by name, ``python:sweep_killer:KillSelf``, in worker processes only)."""

from __future__ import annotations

import os
import signal

from hetsched.policy import Scheduler


class KillSelf(Scheduler):
    name = "kill-self"

    def __init__(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)
