"""pyproject.toml is the one list of dependencies: the Makefile's venv
installs the project's declared extras and pins no version of its own."""

from __future__ import annotations

import re
from pathlib import Path

from hetsched._toml import toml_module

ROOT = Path(__file__).resolve().parents[1]


def _recipe(makefile: str, target: str) -> str:
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert m, f"no {target} rule in the Makefile"
    return m[1]


def test_the_venv_installs_the_declared_extras_and_pins_nothing_itself() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = _recipe(makefile, "$(VENV)/.stamp")
    assert "==" not in recipe, "a version pinned in the Makefile, not in pyproject.toml"
    assert "pyproject.toml" in makefile and "REQUIREMENTS_PY" in recipe
    extras = re.search(r"^VENV_EXTRAS := (.*)$", makefile, flags=re.M)
    assert extras is not None
    project = toml_module().loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    assert set(extras[1].split()) == {"test", "parquet", "dask", "dev"} <= set(declared)


def test_every_pinned_development_package_is_a_declared_one() -> None:
    doc = toml_module().loads((ROOT / "pyproject.toml").read_text())
    project = doc["project"]
    extras = project["optional-dependencies"]

    def name(req: str) -> str:
        return re.split(r"[ ;<>=\[!~]", req)[0].lower()

    pins = extras["dev"]
    assert pins and all("==" in p for p in pins)
    declared = {name(r) for r in project["dependencies"]}
    declared |= {name(r) for e in ("test", "parquet", "dask") for r in extras[e]}
    declared |= {name(r) for r in doc["build-system"]["requires"]}
    assert {name(p) for p in pins} <= declared
    # Every declared package (but tomli, for Python 3.10 only) has its pin.
    assert declared - {"tomli"} <= {name(p) for p in pins}
