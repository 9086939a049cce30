"""tools/test_gpu.py (make test-gpu): passes and says so without a GPU; with one, runs the
device unit tests, then every notebook at smoke size on CUDA, and stops at the first failure."""

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "test_gpu.py"


@pytest.fixture
def tool():
    spec = importlib.util.spec_from_file_location("test_gpu_tool_module", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_says_so_and_passes(tool, monkeypatch, capsys):
    monkeypatch.setattr(tool, "cuda_state", lambda: (False, "no CUDA GPU is present"))
    monkeypatch.setattr(tool, "run", lambda cmd, env: pytest.fail("nothing may run"))
    assert tool.main([]) == 0
    assert "nothing to test here" in capsys.readouterr().out


def _fake_gpu(tool, monkeypatch, codes):
    calls = []

    def run(cmd, env):
        calls.append((cmd, env["COURSE_DEVICE"]))
        return codes[len(calls) - 1]

    monkeypatch.setattr(tool, "cuda_state", lambda: (True, "a fake GPU"))
    monkeypatch.setattr(tool, "run", run)
    return calls


def test_with_a_gpu_units_then_notebooks_on_cuda(tool, monkeypatch):
    calls = _fake_gpu(tool, monkeypatch, [0, 0])
    assert tool.main([]) == 0
    (units, dev1), (notebooks, dev2) = calls
    assert dev1 == dev2 == "cuda"
    assert "pytest" in units and all(t in units for t in tool.GPU_UNIT_TESTS)
    assert "tools/run_notebooks.py" in notebooks and "smoke" in notebooks
    assert "--keep-going" not in notebooks  # the first failing notebook stops the run


def test_the_device_unit_tests_it_names_exist(tool):
    root = TOOL.parents[1]
    assert tool.GPU_UNIT_TESTS and all((root / t).is_file() for t in tool.GPU_UNIT_TESTS)


def test_a_failing_unit_test_stops_before_the_notebooks(tool, monkeypatch):
    calls = _fake_gpu(tool, monkeypatch, [1, 0])
    assert tool.main([]) == 1
    assert len(calls) == 1


def test_a_failing_notebook_fails_the_run(tool, monkeypatch):
    calls = _fake_gpu(tool, monkeypatch, [3])
    assert tool.main(["--notebooks-only"]) == 3 and len(calls) == 1
    calls = _fake_gpu(tool, monkeypatch, [0, 3])
    assert tool.main([]) == 3 and len(calls) == 2


def test_the_unit_test_files_exist(tool):
    root = TOOL.parent.parent
    assert all((root / t).is_file() for t in tool.GPU_UNIT_TESTS)
