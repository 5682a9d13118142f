"""An agent for the clean-up tests: pins every process it manages to the
lowest CPU it may use (used by name, ``python:linux_pin_agent:PinAll``, by a
``hetsched linux agent`` started as a separate process)."""

from __future__ import annotations

from typing import Any

from hetsched.policy import Agent


class PinAll(Agent):
    name = "pin-all"
    period_ms = 20.0

    def sample(self, cx: Any) -> None:
        for p in cx.processes():
            if len(p["affinity"]) > 1:
                cx.set_affinity(p["task"], [min(p["affinity"])])
