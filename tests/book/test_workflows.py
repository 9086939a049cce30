"""The GitHub Actions workflows in ``.github/workflows/``, checked offline.

- Each file is valid against GitHub's workflow schema, with ``check-jsonschema
  --builtin-schema vendor.github-workflows`` (the schema ships with check-jsonschema, which
  is pinned in requirements.txt; nothing is downloaded).
- A workflow only calls commands that also run locally: every ``run:`` step is one
  ``make TARGET`` (a target the Makefile has) or ``bash .ci/run``.
- CI runs on Python 3.11 (the Colab-like job on Colab's 3.12), and every job that installs
  requirements.txt gets torch's CPU wheel, not PyPI's CUDA build.
- CI runs once per commit: on a push to main, and on a pull request (not also on the push of
  its branch); a newer commit cancels the run still going. It keeps uv's download cache
  between runs, keyed on the requirements files and pyproject.toml.
- Every workflow's token may only read the repository, and every job has a time limit; the
  Pages workflow publishes ``_build/html``, and only its deploy job may write Pages.
- The README's CI badge and book link follow ``repository.url`` in ``_config.yml``.
- The issue forms and the issue chooser (``.github/ISSUE_TEMPLATE/``) match GitHub's schemas,
  and ``CITATION.cff`` is valid Citation File Format 1.2.0, naming the repository and the
  licences of ``LICENSE`` (the schemas ship with check-jsonschema too).
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

ROOT = Path(__file__).resolve().parents[2]
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


def test_there_are_the_four_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "pages.yml", "minimum-versions.yml",
                                           "colab-like.yml"}


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


def test_ci_runs_the_ci_script_on_python_311_once_per_commit():
    ci = load(ROOT / ".github" / "workflows" / "ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    # a pull request's commits run once, as pull_request, not again as the push of the branch
    assert ci["on"]["push"]["branches"] == ["main"], ci["on"]["push"]
    assert not (ci["on"]["pull_request"] or {}).get("branches"), "CI for every pull request"
    assert ci["concurrency"]["cancel-in-progress"] is True
    assert "github.event.pull_request.number" in ci["concurrency"]["group"]
    runs = [s["run"].strip() for _, _, s in steps(ci) if "run" in s]
    assert "bash .ci/run" in runs
    versions = [s["with"]["python-version"] for _, _, s in steps(ci)
                if s.get("uses", "").startswith("actions/setup-python@")]
    assert versions == ["3.11"], versions


def test_ci_keeps_uvs_cache_between_runs():
    """.ci/run installs with uv (``make test INSTALLER=uv``): uv's cache folder, named by
    UV_CACHE_DIR where the script runs, is what actions/cache keeps, under a key that changes
    with the pins and pyproject.toml."""
    ci = load(ROOT / ".github" / "workflows" / "ci.yml")
    assert "INSTALLER=uv" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (run,) = [s for _, _, s in steps(ci) if s.get("run", "").strip() == "bash .ci/run"]
    folder = {**ci.get("env", {}), **ci["jobs"]["ci"].get("env", {}), **run.get("env", {})}.get(
        "UV_CACHE_DIR")
    assert folder, "ci.yml: no UV_CACHE_DIR for `bash .ci/run`"
    caches = [s for _, _, s in steps(ci) if s.get("uses", "").startswith("actions/cache@")]
    (cache,) = [s for s in caches if s["with"]["path"].strip() == folder] or [None]
    assert cache, f"ci.yml: no actions/cache step for uv's cache {folder}"
    key = cache["with"]["key"]
    assert "hashFiles(" in key and "requirements*.txt" in key and "pyproject.toml" in key, key
    assert cache["with"].get("restore-keys"), "an older cache is better than none"
    position = {id(s): i for i, (_, _, s) in enumerate(steps(ci))}
    assert position[id(cache)] < position[id(run)]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_tokens_read_only_and_every_job_has_a_time_limit(path):
    workflow = load(path)
    assert workflow["permissions"] == {"contents": "read"}, (
        f"{path.name}: the workflow's permissions must be `contents: read`; give a job that "
        "needs more its own `permissions:`")
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}, job {name}"
        writes = {k for k, v in (job.get("permissions") or {}).items() if v == "write"}
        if path.name == "pages.yml" and name == "deploy":
            continue
        assert not writes, f"{path.name}, job {name} may write {sorted(writes)}"


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
    jobs = pages["jobs"]
    # only the job that deploys, and runs none of the repository's code, may write Pages
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert [s.get("uses", "").split("@")[0] for s in jobs["deploy"]["steps"]] == [
        "actions/deploy-pages"]
    assert jobs["build"]["permissions"] == {"contents": "read", "pages": "read"}
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


def test_colab_like_runs_weekly_on_colabs_python():
    """Colab's Python is 3.12; the job installs Colab's versions and the course as the Colab
    cell does (`make test-colab`)."""
    colab = load(ROOT / ".github" / "workflows" / "colab-like.yml")
    assert colab["on"]["schedule"] and "workflow_dispatch" in colab["on"]
    assert [s["run"] for _, _, s in steps(colab) if "run" in s] == ["make test-colab"]
    versions = [s["with"]["python-version"] for _, _, s in steps(colab)
                if s.get("uses", "").startswith("actions/setup-python@")]
    assert versions == ["3.12"], versions


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


def _schema_errors(schema: str, paths: list[Path]) -> list[str]:
    """check-jsonschema's messages for ``paths`` against its built-in ``schema``."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema,
         "--output-format", "json", *map(str, paths)],
        capture_output=True, text=True, timeout=300)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"check-jsonschema failed (exit {result.returncode}):\n"
                    f"{result.stdout}{result.stderr}")
    return [f"{Path(e['filename']).name}: {(e.get('best_deep_match') or e).get('path', '')}: "
            f"{(e.get('best_deep_match') or e).get('message', e)}"
            for e in report.get("errors", []) + report.get("parse_errors", [])]


def test_issue_templates_match_githubs_schemas():
    from tools.set_repository import pages_url

    folder = ROOT / ".github" / "ISSUE_TEMPLATE"
    forms = sorted(p for p in folder.glob("*.y*ml") if p.stem != "config")
    assert {p.stem for p in forms} >= {"bug_in_a_notebook", "error_in_the_text"}, forms
    config = folder / "config.yml"
    assert not _schema_errors("vendor.github-issue-forms", forms)
    assert not _schema_errors("vendor.github-issue-config", [config])
    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
    book = pages_url(url.split("github.com/", 1)[1])
    for link in yaml.safe_load(config.read_text(encoding="utf-8"))["contact_links"]:
        assert link["url"].startswith(book), (link, "follow the repository setting")


def test_citation_file_is_valid_cff_and_names_this_repository():
    from tools.set_repository import pages_url

    path = ROOT / "CITATION.cff"
    assert not _schema_errors("vendor.citation-file-format", [path])
    citation = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
    assert citation["repository-code"] == url
    assert citation["url"] == pages_url(url.split("github.com/", 1)[1])
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert citation["license"] == ["MIT", "CC-BY-4.0"]
    assert "MIT License" in licence and "Attribution 4.0 International" in licence
