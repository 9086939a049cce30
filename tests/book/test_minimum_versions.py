"""The supported versions are declared once and tested: every dependency in pyproject.toml has a
lower bound and nothing else, requirements-minimum.txt pins exactly those bounds (`make
test-minimum` installs it and runs the tests on it), and the tools it adds are pinned as in
requirements.txt. Colab's versions (requirements-colab.txt, `make test-colab`) meet every
bound, so that the Colab cell's `pip install -e` keeps Colab's own PyTorch and libraries."""

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


# Dependencies of the course that Colab does not have: the Colab cell's pip installs them.
NOT_ON_COLAB = {"sacrebleu"}


def test_colab_versions_meet_every_bound():
    """A bound above Colab's version would make the Colab cell download and install another
    build of that library (for torch, 3 GB of CUDA wheels)."""
    colab = pins("requirements-colab.txt")
    for req in dependencies():
        name = canonicalize_name(req.name)
        if name in NOT_ON_COLAB:
            assert name not in colab, f"requirements-colab.txt pins {name}: not NOT_ON_COLAB"
            continue
        assert name in colab, (f"requirements-colab.txt does not pin {name}: pin Colab's "
                               "version, or add it to NOT_ON_COLAB here if Colab lacks it")
        assert req.specifier.contains(colab[name], prereleases=True), (
            f"pyproject.toml asks for {req}, Colab has {name}=={colab[name]}: the Colab cell "
            "would replace Colab's own; lower the bound (and requirements-minimum.txt)")


def test_colab_file_pins_dependencies_and_the_tools_as_in_requirements_txt():
    colab, pinned = pins("requirements-colab.txt"), pins("requirements.txt")
    bounds = lower_bounds()
    for name, version in colab.items():
        if name in bounds:
            continue
        assert name in pinned, (f"requirements-colab.txt pins {name}, which is neither a "
                                "dependency in pyproject.toml nor pinned in requirements.txt")
        assert version == pinned[name], (
            f"{name}: requirements-colab.txt pins {version}, requirements.txt {pinned[name]}")
    assert set(colab) - set(bounds) == set(pins("requirements-minimum.txt")) - set(bounds), (
        "requirements-colab.txt and requirements-minimum.txt should add the same tools")
