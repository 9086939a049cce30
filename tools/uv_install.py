"""Install into a virtual environment with uv, configured the way pip is configured.

    python tools/uv_install.py VENV --tool-dir DIR -r requirements.txt -e .

Everything after the options goes to ``uv pip install`` as it would go to ``pip install``.
`make ... INSTALLER=uv` (what .ci/run uses) calls this; the Makefile installs with pip
when it fails. On the 2-core CI machine pip took 193 s to install requirements.txt into a
fresh environment, without a download cache, and uv 58 s (15 s of it installing, the rest
compiling the bytecode), with the same packages at the same versions.

uv does not read pip's configuration, so this script reads it (``pip config list`` of the
environment's own pip, which includes the PIP_* environment variables) and passes each
setting on: index-url, extra-index-url, find-links, constraint, cert and timeout. pip pools
the candidates of all its indexes (.github/workflows/ci.yml relies on that for torch's CPU
build), so uv runs with ``--index-strategy unsafe-best-match``, which does the same. A pip
setting it does not know how to pass on stops it (exit status 3) before anything is
installed. uv itself is installed with pip, at the pinned version, into its own environment
in ``--tool-dir``.
"""

from __future__ import annotations

import argparse
import ast
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

UV_VERSION = "0.13.9"
UNSUPPORTED = 3  # exit status: a pip setting uv would not get
# pip settings that change nothing about what gets installed
IGNORED = {"disable-pip-version-check", "progress-bar", "no-color", "quiet", "verbose",
           "root-user-action", "no-warn-script-location", "no-input", "retries", "cache-dir",
           "no-cache-dir", "yes"}
PRECEDENCE = (":env:", "install", "global")  # pip: environment over config files, then
# the [install] section over [global]


class UnsupportedSetting(ValueError):
    """A pip setting that this script cannot pass on to uv."""


def parse_pip_config(text: str) -> dict[str, str]:
    """``pip config list`` output -> {option: value}, one value per option, by pip's
    precedence (PIP_* environment variables, then [install], then [global])."""
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        section, _, option = key.rpartition(".")
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass  # pip prints repr(value); anything else is kept as it is
        found[section, option] = str(value)
    options = {option for _, option in found}
    config = {}
    for option in sorted(options):
        for section in PRECEDENCE:
            if (section, option) in found:
                config[option] = found[section, option]
                break
    return config


def uv_arguments(config: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """pip's settings -> (arguments of ``uv pip install``, environment variables for uv).

    Raises UnsupportedSetting for a setting that would change what gets installed and that
    this function does not translate."""
    args = ["--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    for option, value in config.items():
        if option in IGNORED:
            continue
        if option == "index-url":
            args += ["--index-url", value]
        elif option == "extra-index-url":
            for url in value.split():
                args += ["--extra-index-url", url]
        elif option == "find-links":
            for place in value.split():
                args += ["--find-links", place]
        elif option == "constraint":
            for path in value.split():
                args += ["--constraint", path]
        elif option == "cert":
            env["SSL_CERT_FILE"] = value
        elif option in ("timeout", "default-timeout"):
            env["UV_HTTP_TIMEOUT"] = str(int(float(value)))
        else:
            raise UnsupportedSetting(
                f"pip setting {option}={value!r} has no translation for uv here; install "
                f"with pip (make INSTALLER=pip), or add it to tools/uv_install.py")
    return args, env


def ensure_uv(tool_dir: Path) -> Path:
    """The uv executable in ``tool_dir``, installed there with pip first if needed."""
    uv = tool_dir / "bin" / "uv"
    if uv.exists():
        return uv
    subprocess.run([sys.executable, "-m", "venv", str(tool_dir)], check=True)
    subprocess.run([str(tool_dir / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", f"uv=={UV_VERSION}"], check=True)
    return uv


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="the virtual environment to install into")
    parser.add_argument("--tool-dir", type=Path, required=True,
                        help="where uv's own environment is (created if missing)")
    opts, rest = parser.parse_known_args(argv)
    python = opts.venv / "bin" / "python"
    if not python.exists():
        parser.error(f"{python} does not exist: create the environment first")
    listed = subprocess.run([str(python), "-m", "pip", "config", "list"], check=True,
                            capture_output=True, text=True).stdout
    try:
        args, env = uv_arguments(parse_pip_config(listed))
    except UnsupportedSetting as err:
        print(f"uv_install: {err}", file=sys.stderr)
        return UNSUPPORTED
    uv = ensure_uv(opts.tool_dir)
    # --compile-bytecode: the .pyc files pip writes too (without them every first import
    # compiles, and warnings raised at compile time show up in the tests)
    command = [str(uv), "pip", "install", "--python", str(python), "--compile-bytecode",
               *args, *rest]
    print("uv_install:", shlex.join(command), flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, **env})
    print(f"uv_install: {time.perf_counter() - start:.0f} s, exit status {done.returncode}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
