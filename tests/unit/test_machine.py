"""course_lib.machine: the CPU's name, the per-machine cache folder, a quiet stderr."""

import os

from course_lib import cost, machine, precision, results, runtime


def test_one_cpu_model_for_timings_cards_and_the_probe():
    assert cost.cpu_model is machine.cpu_model
    assert precision.cpu_model is machine.cpu_model
    assert results.cpu_model is machine.cpu_model


def test_cpu_model_collapses_spaces_and_falls_back_to_the_architecture(tmp_path, monkeypatch):
    monkeypatch.setattr(machine.platform, "system", lambda: "Linux")
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example  CPU   9000 \n")
    assert machine.cpu_model(info) == "Example CPU 9000"
    monkeypatch.setattr(machine.platform, "processor", lambda: "")
    monkeypatch.setattr(machine.platform, "machine", lambda: "aarch64")
    assert machine.cpu_model(tmp_path / "missing") == "aarch64"


def test_cache_dir_is_runtimes(monkeypatch, tmp_path):
    assert runtime.cache_dir is machine.cache_dir
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "probe-cache"))
    assert machine.cache_dir() == tmp_path / "probe-cache"
    assert precision.probe_cache_path() == tmp_path / "probe-cache" / precision.PROBE_FILE


def test_quiet_stderr_restores_the_stream():
    before = os.fstat(2)
    with machine.quiet_stderr():
        os.write(2, b"not shown\n")
    after = os.fstat(2)
    assert (before.st_ino, before.st_dev) == (after.st_ino, after.st_dev)
