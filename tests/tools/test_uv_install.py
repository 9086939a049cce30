"""tools/uv_install.py: pip's settings reach uv, or the script stops before installing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import uv_install as ui  # noqa: E402

# `pip config list` on the CI machine (config file and PIP_* variables), abridged
LISTED = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_parse_takes_the_environment_over_install_over_global():
    listed = ("global.index-url='https://a.example/simple'\n"
              "install.index-url='https://b.example/simple'\n"
              ":env:.index-url='https://c.example/simple'\n"
              "global.find-links='/g'\ninstall.find-links='/i'\n"
              "global.constraint='/c.txt'\n")
    assert ui.parse_pip_config(listed) == {"index-url": "https://c.example/simple",
                                           "find-links": "/i", "constraint": "/c.txt"}
    assert ui.parse_pip_config("") == {}


def test_the_ci_machines_settings_become_uv_arguments():
    args, env = ui.uv_arguments(ui.parse_pip_config(LISTED))
    assert args == ["--index-strategy", "unsafe-best-match",
                    "--constraint", "/etc/xdg/pip/constraints.txt",
                    "--extra-index-url", "file:///opt/pypi/simple",
                    "--extra-index-url", "file:///opt/pypi-more/simple",
                    "--find-links", "/opt/wheels"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
                   "UV_HTTP_TIMEOUT": "180"}


def test_the_github_workflows_indexes_keep_their_roles():
    # .github/workflows/ci.yml: torch's CPU index first, PyPI as the extra one
    listed = (":env:.index-url='https://download.pytorch.org/whl/cpu'\n"
              ":env:.extra-index-url='https://pypi.org/simple'\n")
    args, env = ui.uv_arguments(ui.parse_pip_config(listed))
    assert args == ["--index-strategy", "unsafe-best-match", "--extra-index-url",
                    "https://pypi.org/simple", "--index-url",
                    "https://download.pytorch.org/whl/cpu"]
    assert env == {}


@pytest.mark.parametrize("setting", ["trusted-host", "no-index", "proxy", "pre"])
def test_a_setting_without_translation_stops_the_script(setting):
    with pytest.raises(ui.UnsupportedSetting, match=setting):
        ui.uv_arguments({setting: "x"})


def test_main_stops_before_installing_on_an_unsupported_setting(tmp_path, monkeypatch,
                                                               capsys):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="global.no-index='1'\n")

    monkeypatch.setattr(ui.subprocess, "run", fake_run)
    status = ui.main([str(venv), "--tool-dir", str(tmp_path / "uv"), "-r", "x.txt"])
    assert status == ui.UNSUPPORTED
    assert len(calls) == 1 and calls[0][1:] == ["-m", "pip", "config", "list"]
    assert "no-index" in capsys.readouterr().err


def test_main_refuses_an_environment_that_does_not_exist(tmp_path):
    with pytest.raises(SystemExit):
        ui.main([str(tmp_path / "nothing"), "--tool-dir", str(tmp_path / "uv")])
