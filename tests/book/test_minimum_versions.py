"""The supported versions are declared once and tested: every dependency in pyproject.toml has a
lower bound and nothing else, requirements-minimum.txt pins exactly those bounds (`make
test-minimum` installs it and runs the tests on it), and the tools it adds are pinned as in
requirements.txt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)$")


def pins(name: str) -> dict[str, Version]:
    """`package==version` lines of a requirements file, by canonical package name."""
    found = {}
    for number, raw in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        assert match, f"{name}:{number}: {raw!r} is not `package==version`"
        package = canonicalize_name(match[1])
        assert package not in found, f"{name}:{number}: {match[1]} is pinned twice"
        found[package] = Version(match[2])
    return found


def dependencies() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(d) for d in project["dependencies"]]


def lower_bounds() -> dict[str, Version]:
    return {canonicalize_name(r.name): Version(s.version)
            for r in dependencies() for s in r.specifier if s.operator == ">="}


def test_every_dependency_has_one_lower_bound_and_no_cap():
    for req in dependencies():
        specs = [(s.operator, s.version) for s in req.specifier]
        assert len(specs) == 1 and specs[0][0] == ">=", (
            f"pyproject.toml: {req} should be `{req.name}>=OLDEST` (the oldest version tested "
            "by `make test-minimum`); on Colab a pin or a cap would replace what is installed")
        assert not req.marker and not req.extras, f"pyproject.toml: {req}: no markers or extras"


def test_minimum_file_pins_exactly_the_lower_bounds():
    minimum = pins("requirements-minimum.txt")
    for name, bound in lower_bounds().items():
        assert name in minimum, f"requirements-minimum.txt does not pin {name} (>={bound})"
        assert minimum[name] == bound, (
            f"{name}: pyproject.toml says >={bound}, requirements-minimum.txt pins "
            f"{minimum[name]}; the bound must be the version that is tested")


def test_the_tools_are_pinned_as_in_requirements_txt():
    minimum, pinned, bounds = pins("requirements-minimum.txt"), pins("requirements.txt"), \
        lower_bounds()
    for name, version in minimum.items():
        if name in bounds:
            continue
        assert name in pinned, (
            f"requirements-minimum.txt pins {name}, which is neither a dependency in "
            "pyproject.toml nor pinned in requirements.txt")
        assert version == pinned[name], (
            f"{name}: requirements-minimum.txt pins {version}, requirements.txt {pinned[name]}")


def test_the_book_s_versions_satisfy_the_bounds():
    pinned = pins("requirements.txt")
    for req in dependencies():
        name = canonicalize_name(req.name)
        if name in pinned:
            assert req.specifier.contains(pinned[name], prereleases=True), (
                f"requirements.txt pins {name}=={pinned[name]}, outside pyproject.toml's {req}")


def test_torch_bound_is_the_one_version_tested():
    # Only torch 2.13.0 is installed anywhere the course is tested (see README.md).
    assert lower_bounds()["torch"] == pins("requirements.txt")["torch"] == Version("2.13.0")
