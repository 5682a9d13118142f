"""Python policies reconfigure dynamic processors: ``cx.reconfigure`` fuses and
splits through the engine's mechanisms, ``on_reconfigured`` hears back, and a
bad request is refused with a message that names the policy and the rule."""

from __future__ import annotations

from typing import Any

import pytest

import hetsched
from hetsched._core import Context
from hetsched.examples_policies import RoundRobin


def scenario(work_ms: float = 100.0) -> dict[str, Any]:
    """Two CPUs, one high-class sequential program; fusing both CPUs doubles
    its speed (level 2, speedup 2)."""
    return {
        "name": "py-fuse",
        "duration_s": 1.0,
        "machine": {
            "tick_hz": 1000,
            "types": {"base": {"capacity": 1024, "pstates": [{"mhz": 2000, "volt": 1.0}]}},
            "clusters": [{"type": "base", "cores": 2}],
        },
        "workload": {
            "programs": [{"name": "seq", "kind": "sequential", "class": "high", "work_ms": work_ms}]
        },
        "dynamic": {
            "mechanism": "proxy-logical",
            "fusion": [{"level": 2, "speedup": {"high": 2.0}}],
        },
    }


class Fuser(RoundRobin):
    """Round robin that fuses CPUs 0 and 1 when the first task starts on CPU 0
    and splits them again ``split_after_ms`` later."""

    name = "fuser"

    def __init__(self, split_after_ms: float, mechanism: str | None = None) -> None:
        super().__init__()
        self.split_after_ns = int(split_after_ms * 1e6)
        self.mechanism = mechanism
        self.done: list[dict[str, Any]] = []
        self.asked = False
        self.levels: list[int] = []

    def select_cpu(self, cx: Context, task: int, prev_cpu: int | None, flags: str) -> int:
        return 0

    def running(self, cx: Context, task: int, cpu: int) -> None:
        super().running(cx, task, cpu)
        if not self.asked:
            self.asked = True
            self.levels = cx.fusion_levels()
            cx.reconfigure("fuse", [0, 1], self.mechanism)

    def on_reconfigured(self, cx: Context, info: dict[str, Any]) -> None:
        self.done.append(info)
        if info["op"] == "fuse":
            cx.arm_timer(cx.now_ns + self.split_after_ns, 1)

    def on_timer(self, cx: Context, token: int) -> None:
        cx.reconfigure("split", [0])


def test_fuse_and_split_from_python() -> None:
    pol = Fuser(split_after_ms=30.0)
    res = hetsched.run(scenario(), scheduler=pol)
    assert pol.levels == [2]
    assert [d["op"] for d in pol.done] == ["fuse", "split"]
    assert pol.done[0]["cpus"] == [0, 1] and pol.done[1]["cpus"] == [0]
    assert pol.done[0]["mechanism"] == "proxy-logical" and pol.done[0]["start_ns"] == 0
    rec = res.reconfigs
    assert list(rec["op"]) == ["fuse", "split"]
    # Fused for 30 ms at twice the speed: 60 ms of the 100 ms of work, the
    # remaining 40 ms natively — about 70 ms in all (plus the proxy costs).
    done = float(res.programs["completion_s"].iloc[0])
    assert 0.070 < done < 0.0702


def test_mechanism_named_by_the_policy_is_used() -> None:
    pol = Fuser(split_after_ms=30.0, mechanism="proxy-apic")
    res = hetsched.run(scenario(), scheduler=pol)
    # The split goes back the way the fuse came (the object's mechanism).
    assert list(res.reconfigs["mechanism"]) == ["proxy-apic", "proxy-apic"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("merge", [0, 1]), 'unknown operation "merge"; allowed: offline, online, fuse, split'),
        (("split", [0, 1]), "name exactly one cpu"),
        (("fuse", []), "cpus is empty"),
        (("fuse", [0, 7]), "cpu 7 does not exist"),
        (("fuse", [0, 1], "warp"), 'unknown reconfiguration mechanism "warp"'),
    ],
)
def test_bad_requests_name_what_was_allowed(args: tuple[Any, ...], message: str) -> None:
    class Bad(Fuser):
        def running(self, cx: Context, task: int, cpu: int) -> None:
            cx.reconfigure(*args)

    with pytest.raises(
        hetsched.PolicyError, match=r"Python callback running\(\) raised PolicyError"
    ) as e:
        hetsched.run(scenario(), scheduler=Bad(split_after_ms=1.0))
    assert message in str(e.value)


def test_engine_refuses_an_invalid_reconfiguration_with_the_rule() -> None:
    class Twice(Fuser):
        def on_reconfigured(self, cx: Context, info: dict[str, Any]) -> None:
            cx.reconfigure("offline", [1])  # cpu 1 is proxied by the fused object

    with pytest.raises(hetsched.PolicyError, match="cpu 1"):
        hetsched.run(scenario(), scheduler=Twice(split_after_ms=1.0))


def test_without_a_dynamic_section_the_request_is_refused() -> None:
    s = scenario()
    del s["dynamic"]
    with pytest.raises(hetsched.PolicyError, match="dynamic"):
        hetsched.run(s, scheduler=Fuser(split_after_ms=1.0))
