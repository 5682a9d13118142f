"""Hand-made stand-ins for core objects, for tests that monkeypatch ``hetsched._core``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StubScenario:
    """Quacks like ``hetsched._core.Scenario``."""

    data: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.data.get("name", "stub"))

    @property
    def seed(self) -> int:
        return int(self.data.get("seed", 1))

    @property
    def duration_s(self) -> float:
        return float(self.data.get("duration_s", 1.0))

    @property
    def scheduler(self) -> str:
        return str(self.data.get("scheduler", "cfs"))

    def to_json(self) -> str:
        return json.dumps(self.data)

    def to_toml(self) -> str:
        raise NotImplementedError


class Recorder:
    """A callable that records its calls and returns (or raises) a preset value."""

    def __init__(self, result: Any = None, raises: BaseException | None = None) -> None:
        self.result = result
        self.raises = raises
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.raises is not None:
            raise self.raises
        return self.result

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.calls[-1][1]

    @property
    def args(self) -> tuple[Any, ...]:
        return self.calls[-1][0]
