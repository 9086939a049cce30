"""One-off: rename the weights of a GPT checkpoint saved before the blocks refactor.

    python tools/convert_gpt_checkpoint.py data/pretrained/gpt_imdb.pt            # in place
    python tools/convert_gpt_checkpoint.py old.pt --out new.pt

Only for files that ``course_lib.gpt.save`` wrote before issue 39's refactor of
``course_lib.blocks`` (commit 5026ebc and earlier). The old ``gpt.GPT`` kept each block's
LayerNorms inside its sub-layers and its positions inside a ``LearnedPositionalEmbedding``;
today's has the names of chapter 7's on-page model, so the file's state dict is renamed:

    position.embedding.weight       -> position.weight
    blocks.<i>.attn_sub.norm.<p>    -> blocks.<i>.norm1.<p>
    blocks.<i>.ffn_sub.norm.<p>     -> blocks.<i>.norm2.<p>

Everything else (``token_embedding``, ``blocks.<i>.attn.*``, ``blocks.<i>.ffn.net.0/3.*``,
``final_norm``, ``head``, the config and every extra entry of the file) stays as it is. Before
writing, the script checks the conversion: ``course_lib`` as it was at ``--old-rev`` (read
from git) with the old weights, and today's ``course_lib`` with the renamed ones, give the
same logits bit for bit, on random rows, through ``forward`` and through ``forward_cached``.

The new file's bytes, hence its sha256, differ from the old one's: the script prints the new
sum and size for ``course_lib.data.SHA256``, ``data/SHA256SUMS`` and the card's
``weights_sha256`` / ``weights_bytes`` (``book/results/pretrain/gpt_imdb.json``). Nothing
imports this script; delete it once the shipped checkpoint is converted.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_lib import gpt  # noqa: E402

OLD_REV = "5026ebc05021b2bbbc6695e3d89a83415c028113"  # the last commit with the old names
RENAMES = (("position.embedding.", "position."),
           (".attn_sub.norm.", ".norm1."),
           (".ffn_sub.norm.", ".norm2."))


def convert_state_dict(state: dict) -> dict:
    """The old names -> today's (see the module docstring); values untouched."""
    out = {}
    for key, value in state.items():
        for old, new in RENAMES:
            key = key.replace(old, new)
        out[key] = value
    return out


def old_gpt_module(rev: str, workdir: Path):
    """``course_lib.gpt`` as it was at ``rev``, imported as ``course_lib_<rev>.gpt``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "course_lib"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(workdir, filter="data")
    package = f"course_lib_{rev[:7]}"
    (workdir / "course_lib").rename(workdir / package)
    sys.path.insert(0, str(workdir))
    return importlib.import_module(f"{package}.gpt")


@torch.no_grad()
def check_same_logits(old_gpt, saved: dict, converted: dict, rows: int = 4) -> None:
    """Old code + old weights == today's code + renamed weights, bit for bit."""
    config = saved["config"]
    old = old_gpt.GPT(old_gpt.GPTConfig(**config))
    old.load_state_dict(saved["state_dict"])
    new = gpt.GPT(gpt.GPTConfig(**config))
    new.load_state_dict(converted)  # strict: every name matches, none left over
    old.eval(), new.eval()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config["vocab_size"], (rows, config["max_len"]),
                           generator=generator)
    a, b = old(tokens), new(tokens)
    if not torch.equal(a, b):
        raise SystemExit(f"the logits differ by up to {(a - b).abs().max().item():.3g}: "
                         "not converted")
    half = config["max_len"] // 2  # the cached path: a prompt, then one token at a time
    cached = []
    for model in (old, new):
        logits, cache = model.forward_cached(tokens[:, :half])
        steps = [logits]
        for t in range(half, config["max_len"]):
            logits, cache = model.forward_cached(tokens[:, t:t + 1], cache)
            steps.append(logits)
        cached.append(torch.cat(steps, 1))
    if not torch.equal(*cached):
        raise SystemExit("the cached logits differ: not converted")
    print(f"same logits, bit for bit, on {rows} random rows of {config['max_len']} tokens "
          f"(forward and forward_cached); largest |logit| {a.abs().max().item():.3g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a file written by gpt.save before the "
                        "refactor")
    parser.add_argument("--out", type=Path, help="where to write (default: over the input)")
    parser.add_argument("--old-rev", default=OLD_REV, help="a git revision with the old names")
    args = parser.parse_args(argv)
    out = args.out or args.checkpoint

    saved = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    state = saved["state_dict"]
    if not any(old in key for key in state for old, _ in RENAMES):
        gpt.GPT(gpt.GPTConfig(**saved["config"])).load_state_dict(state)  # today's names?
        print(f"{args.checkpoint}: already has today's names; nothing to do")
        return
    converted = convert_state_dict(state)
    with tempfile.TemporaryDirectory() as workdir:
        check_same_logits(old_gpt_module(args.old_rev, Path(workdir)), saved, converted)

    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")  # then renamed, as gpt.save does
    torch.save({**saved, "state_dict": converted}, tmp)
    os.replace(tmp, out)
    gpt.load(out)  # today's loader reads it
    renamed = sorted(k for k in state if k not in converted)
    print(f"renamed {len(renamed)} of {len(state)} tensors, e.g. {renamed[0]} -> "
          f"{convert_state_dict({renamed[0]: None}).popitem()[0]}")
    sha = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out}: {out.stat().st_size} bytes, sha256 {sha}")
    print("put the new sha256 (and size) in course_lib.data.SHA256, data/SHA256SUMS and the "
          "card's weights_sha256 / weights_bytes")


if __name__ == "__main__":
    main()
