"""Loading scenarios and running them: the functions behind ``hetsched.load``,
``hetsched.loads`` and ``hetsched.run``.

Parsing and validation happen in the compiled core (the scenario schema lives
once, in Rust); this module reads files, normalises overrides, resolves
schedulers written in Python (``scheduler = "python:pkg.module:Class"``) and
wraps the JSON results in :class:`hetsched.Results`.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from . import _core
from .policy import Agent, Scheduler
from .results import ConversionInterrupted, Results

__all__ = [
    "PYTHON_POLICY_PREFIX",
    "Overrides",
    "load",
    "loads",
    "parse_override",
    "resolve_python_policy",
    "run",
]

#: ``scheduler`` values starting with this name a class written in Python.
PYTHON_POLICY_PREFIX = "python:"

#: ``[("path", "value"), ...]``, ``["path=value", ...]`` or ``{"path": value}``.
Overrides: TypeAlias = "Iterable[tuple[str, str] | str] | Mapping[str, object]"

_FORMATS = {".toml": "toml", ".json": "json"}


def parse_override(text: str) -> tuple[str, str]:
    """Split ``"workload.programs[0].threads=8"`` into ``(path, value)``.

    The value is a TOML literal or a bare string; it is passed on unchanged.
    Raises :class:`ValueError` if there is no ``=`` or the path is empty.
    """
    path, sep, value = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise ValueError(f"expected PATH=VALUE (e.g. duration_s=5), got {text!r}")
    return path, value.strip()


def load(path: str | Path, overrides: Overrides = ()) -> _core.Scenario:
    """Read, parse and validate a scenario file (``.toml`` or ``.json``).

    Raises :class:`hetsched.ScenarioError` if the file is missing or invalid;
    the message names the file and the offending field.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _core.ScenarioError(f"{p}: no such scenario file") from None
    except UnicodeDecodeError as e:
        raise _core.ScenarioError(f"{p}: not UTF-8 text ({e.reason})") from None
    fmt = _FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise _core.ScenarioError(
            f"{p}: unknown scenario file type {p.suffix!r}; expected .toml or .json"
        )
    return _core.parse_scenario(text, source=str(p), overrides=_overrides(overrides), fmt=fmt)


def loads(
    text: str, fmt: str = "toml", *, source: str = "<string>", overrides: Overrides = ()
) -> _core.Scenario:
    """Parse and validate scenario text (``fmt`` is ``"toml"`` or ``"json"``)."""
    return _core.parse_scenario(text, source=source, overrides=_overrides(overrides), fmt=fmt)


def run(
    scenario: _core.Scenario | str | Path | Mapping[str, Any],
    *,
    trace: bool = False,
    check: bool = False,
    scheduler: Scheduler | str | None = None,
    agents: Sequence[Agent] = (),
    progress: bool | Callable[[float, float], None] = False,
    overrides: Overrides = (),
) -> Results:
    """Simulate ``scenario`` and return its :class:`Results`.

    ``scenario`` is a parsed :class:`Scenario`, the path of a scenario file, or
    a dict of the scenario-file schema. ``overrides`` change fields before
    validation (``{"duration_s": 5}``). ``scheduler`` is a
    :class:`hetsched.Scheduler` instance that replaces the scenario's
    scheduler, or a scheduler name (``"cfs[min_granularity_ms=4]"``); when the
    scenario names ``python:pkg.module:Class`` that class is imported and
    instantiated here. ``agents`` are :class:`hetsched.Agent` instances added
    to the scenario's agents. ``trace`` records every event (memory grows with
    the run); ``check`` runs the invariant checker after each event.
    ``progress=True`` shows a progress bar on stderr for runs longer than a
    moment; a callable receives ``(sim_now_s, sim_end_s)``.

    Ctrl-C stops the run within a fraction of a second and raises
    :class:`KeyboardInterrupt` whose ``results`` attribute holds the
    :class:`Results` up to that moment, marked ``summary["partial"] = True``
    with ``summary["interrupted_at_s"]`` (``None`` if the interrupt came
    before the run started or after its last event, while its results were
    converted). So does a :class:`KeyboardInterrupt` raised inside a policy
    callback. Partial results leave out a table of more than 4096 rows (it
    would take longer to convert than Ctrl-C allows): ``summary["omitted"]``
    names it with its number of rows (``None`` where not counted), and a
    warning says so.
    """
    extra = _overrides(overrides)
    if isinstance(scheduler, str):
        extra.append(("scheduler", scheduler))
        scheduler = None
    parsed = _as_scenario(scenario, extra)
    if scheduler is None and parsed.scheduler.startswith(PYTHON_POLICY_PREFIX):
        scheduler = resolve_python_policy(parsed.scheduler)

    bar: _ProgressBar | None = None
    callback: Callable[[float, float], None] | None
    if callable(progress):
        callback = progress
    elif progress:
        callback = bar = _ProgressBar(parsed.name)
    else:
        callback = None
    try:
        raw = _core.run(
            parsed,
            trace=trace,
            check=check,
            scheduler=scheduler,
            agents=list(agents),
            progress=callback,
        )
    except KeyboardInterrupt as e:
        raw_partial = getattr(e, "partial_results", None)
        e.results = (  # type: ignore[attr-defined]
            Results(raw_partial) if isinstance(raw_partial, str | bytes) else None
        )
        raise
    finally:
        if bar is not None:
            bar.close()
    try:
        return Results(raw)
    except ConversionInterrupted as e:
        # Ctrl-C while a long results document was converted: the run is
        # complete, its small part is kept (marked partial).
        stopped = KeyboardInterrupt(
            "interrupted while the results were converted; the partial results "
            "(without the longest tables) are in the exception's `results`"
        )
        stopped.results = Results._from_document(e.document)  # type: ignore[attr-defined]
        raise stopped from None


def resolve_python_policy(spec: str) -> Any:
    """Import and instantiate ``python:package.module:Class`` (optionally
    ``python:package.module:Class[slice_ms=4, name=x]``, whose parameters become
    keyword arguments). Raises :class:`hetsched.PolicyError` if that fails."""
    m = re.fullmatch(r"python:\s*([\w.]+)\s*:\s*(\w+)\s*(?:\[(.*)\])?\s*", spec, flags=re.DOTALL)
    if m is None:
        raise _core.PolicyError(
            f"scheduler {spec!r}: expected python:package.module:ClassName[param=value, ...]"
        )
    module_name, class_name, params = m.groups()
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise _core.PolicyError(f"scheduler {spec!r}: cannot import {module_name}: {e}") from e
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise _core.PolicyError(f"scheduler {spec!r}: {module_name} has no class {class_name}")
    kwargs = _policy_params(spec, params or "")
    try:
        return cls(**kwargs)
    except Exception as e:
        raise _core.PolicyError(f"scheduler {spec!r}: {class_name}(...) raised {e!r}") from e


def _as_scenario(
    scenario: _core.Scenario | str | Path | Mapping[str, Any], overrides: list[tuple[str, str]]
) -> _core.Scenario:
    if isinstance(scenario, str | Path):
        return load(scenario, overrides)
    if isinstance(scenario, Mapping):
        _check_finite(scenario, "")
        return loads(json.dumps(scenario), fmt="json", source="<dict>", overrides=overrides)
    if overrides:
        return loads(scenario.to_json(), fmt="json", source=scenario.name, overrides=overrides)
    return scenario


def _check_finite(value: object, path: str) -> None:
    """Refuse a non-finite float anywhere in a scenario dict, naming its field.

    ``json.dumps`` would write ``NaN``, which is no JSON; the core's parser would
    then report a line and column of text the caller never wrote.
    """
    if isinstance(value, float) and not math.isfinite(value):
        shown = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        raise _core.ScenarioError(
            f"{path or 'value'}: {shown} is not allowed; numbers must be finite"
        )
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_finite(v, f"{path}[{i}]")


def _overrides(overrides: Overrides) -> list[tuple[str, str]]:
    if isinstance(overrides, Mapping):
        return [(str(k), _literal(v)) for k, v in overrides.items()]
    out: list[tuple[str, str]] = []
    for item in overrides:
        if isinstance(item, str):
            out.append(parse_override(item))
        else:
            path, value = item
            out.append((str(path), value if isinstance(value, str) else _literal(value)))
    return out


def _literal(value: object) -> str:
    """A Python value as the TOML literal the core's override parser reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        # nan and ±inf pass as TOML's `nan`/`inf`/`-inf`; the core refuses them
        # with the field's path.
        return repr(value)
    # Lists and inline tables of numbers and strings: JSON arrays are TOML arrays.
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal_nested(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_toml_key(str(k))} = {_literal_nested(v)}" for k, v in value.items())
        return "{ " + ", ".join(items) + " }"
    raise TypeError(f"cannot express {type(value).__name__} {value!r} as a scenario value")


def _literal_nested(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else _literal(value)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _policy_params(spec: str, params: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in params.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip().isidentifier():
            raise _core.PolicyError(
                f"scheduler {spec!r}: bad parameter {part!r}; expected name=value"
            )
        kwargs[key.strip()] = _param_value(value.strip())
    return kwargs


def _param_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text.strip("\"'")


class _ProgressBar:
    """A tqdm bar in simulated seconds that appears only once a run has taken
    longer than ``delay_s`` of wall time, so short runs print nothing."""

    def __init__(self, label: str, delay_s: float = 0.5) -> None:
        self.label = label
        self.delay_s = delay_s
        self.started = time.monotonic()
        self.bar: Any = None

    def __call__(self, now_s: float, end_s: float) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.delay_s:
                return
            from tqdm import tqdm

            self.bar = tqdm(
                total=end_s,
                desc=self.label,
                unit="sim-s",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total:.2f} sim-s "
                "[{elapsed}<{remaining}]",
                leave=False,
            )
        self.bar.n = min(now_s, end_s)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
