"""The GitHub Actions workflows in ``.github/workflows/``, checked offline.

- Each file is valid against GitHub's workflow schema, with ``check-jsonschema
  --builtin-schema vendor.github-workflows`` (the schema ships with check-jsonschema, which
  is pinned in requirements.txt; nothing is downloaded).
- A workflow only calls commands that also run locally: every ``run:`` step is one
  ``make TARGET`` (a target the Makefile has) or ``bash .ci/run``.
- CI runs on Python 3.11, and every job that installs requirements.txt gets torch's CPU
  wheel, not PyPI's CUDA build.
- The Pages workflow publishes ``_build/html`` with the permissions Pages needs.
- The README's CI badge and book link follow ``repository.url`` in ``_config.yml``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ALLOWED_RUN = re.compile(r"(make( [A-Za-z0-9_.=/-]+)+|bash \.ci/run)")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    # YAML 1.1 (PyYAML) reads the key `on` as the boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def steps(workflow: dict):
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([A-Za-z0-9_. -]+):(?!=)", text, re.M)
            for t in line.split()}


@pytest.fixture(scope="module")
def schema_errors(tmp_path_factory) -> dict[str, list[str]]:
    """check-jsonschema's errors for every workflow and for a broken one (no runs-on), from
    one run of it (each start costs seconds): {file name: [messages]}."""
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.fail("check-jsonschema is not installed in this environment; it is pinned in "
                    "requirements.txt (`pip install -r requirements.txt`, or `make install`)")
    broken = tmp_path_factory.mktemp("workflows") / "broken.yml"
    broken.write_text("name: x\non: push\njobs:\n  j:\n    steps:\n      - run: make test\n")
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         "--output-format", "json", *map(str, WORKFLOWS), str(broken)],
        capture_output=True, text=True, timeout=300)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"check-jsonschema failed (exit {result.returncode}):\n"
                    f"{result.stdout}{result.stderr}")
    errors: dict[str, list[str]] = {}
    for error in report["errors"] + report["parse_errors"]:
        best = error.get("best_deep_match") or error
        errors.setdefault(Path(error["filename"]).name, []).append(
            f"{best.get('path', '')}: {best.get('message', error)}")
    return errors


def test_there_are_the_three_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "pages.yml", "minimum-versions.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_githubs_schema(path, schema_errors):
    assert path.name not in schema_errors, "\n".join([path.name, *schema_errors[path.name]])


def test_the_schema_check_rejects_a_broken_workflow(schema_errors):
    assert any("runs-on" in e for e in schema_errors.get("broken.yml", [])), schema_errors


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_run_steps_only_call_make_or_the_ci_script(path):
    targets = make_targets()
    for job, _, step in steps(load(path)):
        if "run" not in step:
            continue
        command = step["run"].strip()
        assert ALLOWED_RUN.fullmatch(command), (
            f"{path.name}, job {job}: `run: {command}` is not `make TARGET` or `bash .ci/run`;"
            " put the commands in the Makefile or .ci/run so that they also run locally")
        if command.startswith("make "):
            for target in (w for w in command.split()[1:] if "=" not in w):
                assert target in targets, (
                    f"{path.name}, job {job}: `{command}` but the Makefile has no target {target}")


def test_ci_runs_the_ci_script_on_python_311_on_every_push_and_pull_request():
    ci = load(ROOT / ".github" / "workflows" / "ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    runs = [s["run"].strip() for _, _, s in steps(ci) if "run" in s]
    assert "bash .ci/run" in runs
    versions = [s["with"]["python-version"] for _, _, s in steps(ci)
                if s.get("uses", "").startswith("actions/setup-python@")]
    assert versions == ["3.11"], versions


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_python_versions_are_strings(path):
    """`python-version: 3.10` unquoted is the float 3.1."""
    for job, _, step in steps(load(path)):
        if step.get("uses", "").startswith("actions/setup-python@"):
            version = step["with"]["python-version"]
            assert isinstance(version, str), f"{path.name}, job {job}: quote {version!r}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_jobs_that_install_get_the_cpu_wheel_of_torch(path):
    workflow = load(path)
    for job, spec, step in steps(workflow):
        if "run" in step:
            env = {**workflow.get("env", {}), **spec.get("env", {}), **step.get("env", {})}
            assert env.get("PIP_INDEX_URL") == CPU_INDEX, (
                f"{path.name}, job {job}: PIP_INDEX_URL must be {CPU_INDEX} (see ci.yml)")
            assert env.get("PIP_EXTRA_INDEX_URL") == "https://pypi.org/simple", (path.name, job)


def test_pages_builds_the_book_and_deploys_it():
    pages = load(ROOT / ".github" / "workflows" / "pages.yml")
    assert "workflow_dispatch" in pages["on"]
    assert pages["on"]["push"]["branches"] == ["main"]
    assert pages["permissions"]["pages"] == "write"
    assert pages["permissions"]["id-token"] == "write"
    assert pages["concurrency"]["cancel-in-progress"] is False
    uses = {s["uses"].split("@")[0]: s for _, _, s in steps(pages) if "uses" in s}
    assert {"actions/configure-pages", "actions/upload-pages-artifact",
            "actions/deploy-pages"} <= set(uses)
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == "_build/html"
    assert [s["run"] for _, _, s in steps(pages) if "run" in s] == ["make book"]
    assert pages["jobs"]["deploy"]["environment"]["name"] == "github-pages"


def test_minimum_versions_run_weekly():
    minimum = load(ROOT / ".github" / "workflows" / "minimum-versions.yml")
    assert minimum["on"]["schedule"] and "workflow_dispatch" in minimum["on"]
    assert [s["run"] for _, _, s in steps(minimum) if "run" in s] == ["make test-minimum"]


def test_readme_badge_and_book_link_follow_the_repository_setting():
    from tools.set_repository import pages_url

    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
    top = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6])
    runs = f"{url}/actions/workflows/ci.yml"
    assert f"[![CI]({runs}/badge.svg)]({runs})" in top, "README: no CI badge at the top"
    assert pages_url(url.split("github.com/", 1)[1]) in top, "README: no book link at the top"


def test_set_repository_rewrites_the_badge_and_the_book_link(tmp_path):
    from tools.set_repository import pages_url, replace_links

    assert pages_url("Me/fork") == "https://me.github.io/fork/"
    assert pages_url("me/me.github.io") == "https://me.github.io/"
    readme = tmp_path / "README.md"
    readme.write_text(
        "[![CI](https://github.com/a/b/actions/workflows/ci.yml/badge.svg)]"
        "(https://github.com/a/b/actions/workflows/ci.yml)\n"
        "Read the book: <https://a.github.io/b/>\n", encoding="utf-8")
    assert replace_links(readme, "a/b", "Me/fork", check=True)
    assert "github.com/a/b" in readme.read_text(encoding="utf-8"), "--check changed the file"
    assert replace_links(readme, "a/b", "Me/fork")
    text = readme.read_text(encoding="utf-8")
    assert "https://github.com/Me/fork/actions/workflows/ci.yml/badge.svg" in text
    assert "<https://me.github.io/fork/>" in text and "a.github.io" not in text
    assert not replace_links(readme, "a/b", "Me/fork")
