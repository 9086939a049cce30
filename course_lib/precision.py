"""Mixed precision: run the big matrix products in bfloat16 where that makes training faster.

    mp = precision.choose(device)              # bf16, fp16 or fp32 for this machine (see below)
    with mp.autocast():                        # matmuls in bf16, losses in fp32 (chapter 11)
        loss = model.loss(batch)
    mp.step(loss, optimizer, model.parameters(), clip_grad_norm=1.0)

The weights, the gradients and the optimizer state stay float32 ("mixed" precision): only the
operations that ``torch.autocast`` lists as safe (linear layers, matmuls) run in the low
precision, on low-precision copies of their inputs.

Which precision ``choose`` picks for ``"auto"``:

- on a **CPU** it measures. Whether bf16 pays on a CPU is a property of the machine that its
  flags do not predict: the same translator training step ran 0.70x as fast in bf16 as in
  float32 on an Intel Xeon without AMX, and 1.32-1.75x faster on an AMD EPYC with AVX-512
  BF16. So a probe (``measure_step_times``, a few seconds) times one Transformer training
  step (embedding, two blocks, vocabulary head, AdamW) in float32 and under bf16 autocast,
  alternating the two, and ``decide`` takes **bf16 only if its median step is at least
  ``BF16_MARGIN`` (1.15x) faster**, else **fp32**. The step is a small chapter model's
  (``PROBE_STEP``) unless the notebook passes its own sizes (``probe_step``): the speed-up
  grows with the step's size. The answer is cached per machine (CPU model, torch version,
  thread count) and step size in ``<cache>/precision_probe.json``, so the probe runs once per
  machine and size; ``<cache>`` is ``$COURSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/course_lib``,
  else ``~/.cache/course_lib`` (delete the file to measure again). Two exceptions: in the
  smoke profile (``choose(..., profile="smoke")``, which ``runtime.setup`` passes on) the
  probe never runs (a cached answer is used, else fp32), and a probe whose threads had to
  fight other processes for the cores (``machine_busy``) decides its own run but is not
  cached;
- on a **CUDA GPU**: bf16 where the GPU has it in hardware (compute capability 8.0 and newer,
  NVIDIA Ampere on), else **fp16** with a gradient scaler (float16 has a narrow exponent
  range: small gradients would round to zero without the scaler). Older GPUs (T4, V100) can
  only emulate bf16, without the hardware speed-up, so ``auto`` does not pick it there;
  asking for bf16 explicitly still runs there;
- on **Apple MPS** and anything else: **fp32** (autocast off).

``$COURSE_PRECISION`` (``auto``, ``fp32``, ``bf16``, ``fp16``) overrides the choice, as
``$COURSE_DEVICE`` does for the device. ``Precision.probe`` says how a choice was made, and
every results card records it.

A function that trains or evaluates takes a ``precision`` argument, read by one rule
(``as_precision``): **None is float32** (autocast off, no gradient scaler), ``"current"`` is
the precision ``runtime.setup`` chose (``current()``), and a ``Precision`` is itself.
``training.fit`` and ``training.evaluate`` default to None, ``lm.train`` to ``"current"``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .machine import cache_dir, cpu_model, quiet_stderr
from .stats import median_iqr

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CARD_NAMES = {"fp32": "float32", "bf16": "bf16 autocast", "fp16": "fp16 autocast"}

# bf16 must be this much faster than float32 (median step time) to be chosen on a CPU. Two
# reasons for a margin rather than "faster at all": a probe of a few seconds on a small shared
# machine is noisy (nine probes on the course's loaded 2-core machine ranged 0.14x-0.18x,
# about +-10 %), and bf16 is not free: 8 significant bits instead of 24 can cost quality
# (the appendix detects no cost in 100 steps; longer runs are not measured), a risk that
# only a clearly real speed-up pays for.
BF16_MARGIN = 1.15
PROBE_FILE = "precision_probe.json"
PROBE_SOURCES = ("measured", "cached", "skipped", "failed", "override", "not cpu")
# The training step the probe times unless a notebook names its own (``probe_step``): a small
# chapter model. bf16's speed-up depends on the step's size: on an Intel Xeon with AMX the same
# width-256, vocabulary-8000 step was 1.01x at 32 x 32 tokens and 1.49x at 96 x 32 tokens, so a
# notebook that trains a larger model passes its own sizes.
PROBE_STEP = {"batch": 8, "length": 32, "d_model": 128, "vocab": 2000, "layers": 2}

_CURRENT: Precision | None = None
# Measurements made by earlier runs of the course on other machines (the same translator
# training step, float32 time / bf16 autocast time). Quoted as such, never as this machine's.
OTHER_MACHINES = (
    {"cpu": "Intel Xeon, avx512_bf16 without AMX", "bf16_speedup": "0.70x"},
    {"cpu": "AMD EPYC with AVX-512 BF16", "bf16_speedup": "1.32x-1.75x"},
    {"cpu": "AMD EPYC (Zen 1), AVX2, no bf16 instructions", "bf16_speedup": "0.12x"},
)


# --------------------------------------------------------------------------- the CPU
# cpu_model (imported above from course_lib.machine) names it; these say what it can do.
def cpu_bf16_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str]:
    """The CPU's bfloat16 instruction-set flags (Linux): a subset of {avx512_bf16, amx_bf16}."""
    if platform.system() != "Linux":
        return set()
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[-1].split()) & {"avx512_bf16", "amx_bf16"}
    return set()


def cpu_supports_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """True if the CPU has bfloat16 *matrix* units (Intel AMX, flag ``amx_bf16``).

    Reported for the reader; ``choose`` no longer decides from it. Flags do not predict the
    speed: ``avx512_bf16`` alone made training slower on a Xeon and faster on an EPYC. The
    probe measures instead.
    """
    return "amx_bf16" in cpu_bf16_flags(cpuinfo)


# --------------------------------------------------------------------------- the decision
def decide(fp32_seconds, bf16_seconds, margin: float = BF16_MARGIN) -> tuple[str, float]:
    """``("bf16" or "fp32", bf16_speedup)`` from step times measured in each precision.

    ``bf16_speedup`` = median float32 step time / median bf16 step time, rounded to 3
    decimals (above 1: bf16 is faster). bf16 wins only when ``bf16_speedup >= margin``.
    A pure function: the probe's timings go in, the decision comes out.
    """
    medians = []
    for name, times in (("fp32", fp32_seconds), ("bf16", bf16_seconds)):
        times = [float(t) for t in times]
        if not times or not all(math.isfinite(t) and t > 0 for t in times):
            raise ValueError(f"{name} step times must be a non-empty list of positive seconds, "
                             f"got {times}")
        medians.append(median_iqr(times).median)
    speedup = round(medians[0] / medians[1], 3)
    return _pick(speedup, margin), speedup


def _pick(speedup: float | None, margin: float = BF16_MARGIN) -> str:
    """The rule itself: bf16 only for a measured speed-up of at least ``margin``."""
    return "bf16" if speedup is not None and speedup >= margin else "fp32"


# --------------------------------------------------------------------------- where the time goes
# Operator groups of a profile. Matrix products by their own (self) time; casts by the whole
# time of ``aten::_to_copy`` (every dtype conversion of ``.to()`` and of autocast goes
# through it), which includes the copy kernel it calls and nothing else.
OP_GROUPS = {
    "matrix products": (("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"), "self_ms"),
    "casts (aten::_to_copy)": (("aten::_to_copy",), "total_ms"),
}


def profile_ops(fn, warmup: int = 1):
    """Run ``fn()`` once under ``torch.profiler`` (after ``warmup`` untimed calls) and return
    one row per operator: ``calls``, ``self_ms`` (time inside the operator itself) and
    ``total_ms`` (with the operators it calls), sorted by ``self_ms``.

    The sum of ``self_ms`` over all rows is the profiled CPU time (``time_shares`` divides
    by it). Only operators are seen, not the kernel an operator picks (``onednn_trace``).
    """
    import pandas as pd
    from torch.profiler import ProfilerActivity, profile

    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    for _ in range(warmup):
        fn()
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    rows = [{"op": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1000,
             "total_ms": e.cpu_time_total / 1000} for e in prof.key_averages()]
    table = pd.DataFrame(rows, columns=["op", "calls", "self_ms", "total_ms"])
    return table.sort_values("self_ms", ascending=False).set_index("op")


def time_shares(table, groups=None) -> dict[str, float]:
    """Share of the profiled time (sum of ``self_ms``) that each of ``groups`` takes
    (default ``OP_GROUPS``: matrix products, casts); the rest is everything else."""
    groups = OP_GROUPS if groups is None else groups
    missing = {"self_ms", "total_ms"} - set(getattr(table, "columns", ()))
    if missing:
        raise ValueError(f"table needs the columns of profile_ops; missing {sorted(missing)}")
    total = float(table["self_ms"].sum())
    if not total > 0:
        raise ValueError("the profile holds no time: did fn() run any PyTorch operator?")
    shares = {}
    for name, (ops, column) in groups.items():
        shares[name] = float(table.loc[table.index.isin(ops), column].sum()) / total
    shares["everything else"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def onednn_trace(snippets: dict[str, str], timeout: float = 300.0) -> dict[str, list[str]]:
    """Which oneDNN kernels run each snippet of code: ``{name: ["matmul brg_matmul:avx2"...]}``.

    The snippets run in order in one fresh Python (``import torch`` done) with
    ``ONEDNN_VERBOSE=1``, which makes oneDNN print a line for every primitive it executes,
    naming the primitive and its implementation (the instruction set is in the name). An
    empty list means the snippet ran no oneDNN kernel: PyTorch used another library or its
    own loops. Raises ``RuntimeError`` with Python's error output when a snippet fails.
    """
    import sys

    if not isinstance(snippets, dict) or not snippets:
        raise TypeError("snippets must be a non-empty dict {name: code}")
    marker = "### course_lib snippet "
    lines = ["import torch"]
    for i, code in enumerate(snippets.values()):
        if not isinstance(code, str):
            raise TypeError(f"snippet {i} must be a string of Python code")
        lines += [f"print({marker + str(i)!r}, flush=True)", code]
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1"}
    done = subprocess.run([sys.executable, "-c", "\n".join(lines)], env=env, text=True,
                          capture_output=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"the snippets failed (exit status {done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    names, found, current = list(snippets), {name: [] for name in snippets}, None
    for line in done.stdout.splitlines():
        if line.startswith(marker):
            current = names[int(line[len(marker):])]
        elif current is not None and ",exec," in line:
            fields = line.split(",")
            i = fields.index("exec")
            found[current].append(" ".join(fields[i + 2:i + 4]))  # primitive, implementation
    return found


# --------------------------------------------------------------------------- the probe
class _ProbeModel(torch.nn.Module):
    """A small GPT: embedding, Pre-Norm blocks of course_lib, a LayerNorm, a vocabulary head."""

    def __init__(self, vocab: int, d_model: int, layers: int):
        super().__init__()
        from .blocks import Block  # imported here: blocks needs nothing from precision

        self.embed = torch.nn.Embedding(vocab, d_model)
        self.blocks = torch.nn.ModuleList(
            Block(d_model, num_heads=4, d_ff=4 * d_model) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens, mask):  # [B, L] -> [B, L, vocab]
        x = self.embed(tokens)
        for block in self.blocks:
            x, _ = block(x, mask=mask, need_weights=False)
        return self.head(self.norm(x))


def _training_step(name: str, tokens, vocab: int, d_model: int, layers: int):
    """A function doing one forward + backward + AdamW step of a fresh model in ``name``."""
    from .masks import causal_mask

    model = _ProbeModel(vocab, d_model, layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mp = Precision(name, "cpu")
    mask = causal_mask(tokens.shape[1] - 1)

    def step():
        with mp.autocast():
            logits = model(tokens[:, :-1], mask)  # [B, L, vocab]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                                     tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        mp.step(loss, opt)

    return step


def measure_step_times(rounds: int = 7, budget_s: float = 2.0, batch: int = PROBE_STEP["batch"],
                       length: int = PROBE_STEP["length"], d_model: int = PROBE_STEP["d_model"],
                       vocab: int = PROBE_STEP["vocab"],
                       layers: int = PROBE_STEP["layers"]) -> tuple[list[float], list[float]]:
    """Seconds per training step in float32 and under bf16 autocast, on the CPU.

    One warm-up step each (the first call allocates and picks kernels), then up to ``rounds``
    rounds of one step in each precision, the order alternating from round to round so that a
    change of load on the machine hits both alike. Rounds stop early (after at least 3) once
    ``budget_s`` seconds are spent. The default sizes (``PROBE_STEP``) are those of a small
    chapter model (width 128, vocabulary 2000); the global random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tokens = torch.randint(0, vocab, (batch, length + 1))
        steps = {name: _training_step(name, tokens, vocab, d_model, layers)
                 for name in ("fp32", "bf16")}
        for step in steps.values():
            step()  # warm-up
        times = {"fp32": [], "bf16": []}
        start = time.perf_counter()
        for r in range(rounds):
            for name in (("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")):
                t0 = time.perf_counter()
                steps[name]()
                times[name].append(time.perf_counter() - t0)
            if r >= 2 and time.perf_counter() - start > budget_s:
                break
    return times["fp32"], times["bf16"]


@dataclass(frozen=True)
class Probe:
    """How the precision was chosen, as a results card records it.

    ``source``: ``measured`` (the probe ran now), ``cached`` (an earlier probe on this
    machine), ``skipped`` (smoke profile, nothing cached: fp32), ``failed`` (bf16 raised an
    error on this CPU: fp32, not cached), ``override`` (the precision
    was named, by the notebook or ``$COURSE_PRECISION``), ``not cpu`` (a GPU's own rule).
    ``bf16_speedup``: float32 step time / bf16 step time (None when nothing was measured).
    """

    source: str
    bf16_speedup: float | None = None
    cpu: str = ""
    threads: int = 0
    busy: bool = False  # measured while other processes held the cores: not cached
    step: str = ""  # the sizes timed, in words, when a notebook chose them (``probe_step``)

    def __post_init__(self):
        if self.source not in PROBE_SOURCES:
            raise ValueError(f"probe source must be one of {PROBE_SOURCES}, got {self.source!r}")

    @property
    def choice(self) -> str:
        """The precision the probe picks: bf16 if its speed-up reaches ``BF16_MARGIN``."""
        return _pick(self.bf16_speedup)

    def card(self) -> dict:
        card = {"bf16_speedup": self.bf16_speedup, "source": self.source}
        if self.step:
            card["step"] = self.step
        return card

    def __str__(self) -> str:
        if self.bf16_speedup is None:
            return _UNMEASURED.get(self.source, f"probe: {self.source}")
        source = "measured on a busy machine, not cached" if self.busy else self.source
        step = f" for a step of {self.step}" if self.step else ""
        return (f"probe: bf16 {self.bf16_speedup:.2f}x the speed of fp32{step} on {self.cpu}, "
                f"{self.threads} thread{'s' if self.threads != 1 else ''}; {source}")


_UNMEASURED = {"skipped": "probe skipped: smoke profile, nothing cached",
               "failed": "probe failed: bf16 raised an error here",
               "override": "named, not probed", "not cpu": "not a CPU: no probe"}


def probe_step(step: dict | None = None) -> dict:
    """The probe's step sizes: ``PROBE_STEP`` with ``step``'s entries in place of its own.

    ``step`` names any of ``batch``, ``length`` (tokens per sequence), ``d_model``, ``vocab``
    and ``layers``, each a positive int; anything else raises a ``ValueError`` that lists them.
    """
    sizes = dict(PROBE_STEP)
    if step is None:
        return sizes
    if not isinstance(step, dict):
        raise TypeError(f"probe_step must be a dict of sizes, e.g. {{'batch': 96}}, "
                        f"got {type(step).__name__}")
    for name, value in step.items():
        if name not in PROBE_STEP:
            raise ValueError(f"probe_step: unknown size {name!r}; use {', '.join(PROBE_STEP)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"probe_step: {name} must be a positive int, got {value!r}")
        sizes[name] = value
    if sizes["d_model"] % 4:
        raise ValueError(f"probe_step: d_model must be a multiple of 4 (the probe model has 4 "
                         f"heads), got {sizes['d_model']}")
    return sizes


def describe_step(step: dict | None = None) -> str:
    """``'batch 8 x 32 tokens, d_model 128, vocabulary 2000, 2 layers'``: a probe step, in words."""
    s = probe_step(step)
    return (f"batch {s['batch']} x {s['length']} tokens, d_model {s['d_model']}, "
            f"vocabulary {s['vocab']}, {s['layers']} layers")


def probe_key(cpu: str, threads: int, step: dict | None = None) -> str:
    """The cache key of one machine: CPU model, torch version, thread count; and the step's
    sizes when they are not the default ``PROBE_STEP`` (bf16 may pay at one size, not another)."""
    key = f"{cpu} | torch {torch.__version__} | {threads} threads"
    sizes = probe_step(step)
    return key if sizes == PROBE_STEP else f"{key} | {describe_step(sizes)}"


def probe_cache_path() -> Path:
    """``<cache>/precision_probe.json`` (see the module docstring for ``<cache>``)."""
    return cache_dir() / PROBE_FILE


def _read_cache(path: Path) -> dict:
    """The cache's entries; an unreadable, corrupt or foreign file counts as empty."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("probes") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def _cached_speedup(entry) -> float | None:
    value = entry.get("bf16_speedup") if isinstance(entry, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value > 0 else None


def _write_cache(path: Path, entries: dict) -> None:
    """Write atomically (two notebooks may probe at once); a read-only cache is not an error."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"probes": entries}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def machine_busy(threads: int) -> bool:
    """True if a probe on ``threads`` threads would fight other processes for the cores.

    Several threads on cores that are already busy wait for each other at every operation:
    on this course's 2-core machine, loaded by two other jobs, a 2-thread probe took 18 s and
    found bf16 0.96x the speed of float32, while 1-thread probes found 0.14x-0.17x in nine
    runs under the same load (time slicing slows both precisions alike). So only a probe on
    more than one thread counts as busy when the 1-minute load average plus its threads
    exceeds the cores; its timings decide this run only and are not cached.
    """
    if threads <= 1:
        return False
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        return False
    return load + threads > (os.cpu_count() or 1) + 0.5


def cpu_probe(refresh: bool = False, step: dict | None = None, profile: str = "full") -> Probe:
    """bf16's speed on this CPU: from the cache, else measured now (and cached).

    ``step``: the sizes of the training step to time (see ``probe_step``; default
    ``PROBE_STEP``). Each set of sizes has its own cache entry.

    ``refresh=True`` measures again. ``profile`` is the notebook's: in the smoke profile
    (``"smoke"``) nothing is measured: a cached answer is used, else ``Probe("skipped")``
    (fp32). A few seconds saved on every smoke run, and no timing taken under the test
    suite's load is cached for the full runs. Nor is one taken while the machine is busy
    (``machine_busy``): the next quiet run measures again.
    """
    cpu, threads, sizes = cpu_model(), torch.get_num_threads(), probe_step(step)
    key, path = probe_key(cpu, threads, sizes), probe_cache_path()
    named = "" if sizes == PROBE_STEP else describe_step(sizes)  # recorded only when chosen
    entries = _read_cache(path)
    cached = _cached_speedup(entries.get(key))
    if cached is not None and not refresh:
        return Probe("cached", cached, cpu, threads, step=named)
    if _is_smoke(profile):
        return Probe("skipped", None, cpu, threads, step=named)
    busy = machine_busy(threads)
    try:
        fp32, bf16 = measure_step_times(**sizes)
    except RuntimeError:  # an operation without a bf16 kernel on this CPU: stay in float32
        return Probe("failed", None, cpu, threads, step=named)
    _, speedup = decide(fp32, bf16)
    entries[key] = {"cpu": cpu, "torch": torch.__version__, "threads": threads,
                    "step": describe_step(sizes),
                    "bf16_speedup": speedup, "rounds": len(fp32),
                    "fp32_step_ms": round(1000 * median_iqr(fp32).median, 2),
                    "bf16_step_ms": round(1000 * median_iqr(bf16).median, 2),
                    "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if not busy:
        _write_cache(path, entries)
    return Probe("measured", speedup, cpu, threads, busy, step=named)


def _auto_not_cpu(device_type: str) -> str:
    if device_type == "cuda":  # bf16 only in hardware (Ampere on), not emulated
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    return "fp32"  # MPS and anything else: float32, the safe default


@dataclass
class Precision:
    """The numeric precision of training on one device type: ``fp32``, ``bf16`` or ``fp16``."""

    name: str
    device_type: str = "cpu"
    scaler: torch.amp.GradScaler | None = field(default=None, repr=False)
    probe: Probe | None = field(default=None, repr=False, compare=False)  # how it was chosen

    def __post_init__(self):
        _check_name(self.name, allow_auto=False)
        if self.name == "fp16" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(self.device_type)

    @property
    def enabled(self) -> bool:
        """False for fp32: autocast is then a no-op."""
        return self.name != "fp32"

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.name]

    @property
    def card_name(self) -> str:
        """What a results card records: ``float32``, ``bf16 autocast`` or ``fp16 autocast``."""
        return CARD_NAMES[self.name]

    def autocast(self):
        """Context manager: the forward pass (and the loss) under autocast, or nothing for fp32."""
        if not self.enabled:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def step(self, loss, optimizer, parameters=None, clip_grad_norm: float | None = None):
        """Backward, optional gradient clipping, optimizer step (with the scaler for fp16).

        Call it after ``optimizer.zero_grad()``, outside the ``autocast`` block.
        """
        if clip_grad_norm is not None and parameters is None:
            raise ValueError("clip_grad_norm needs the parameters: pass model.parameters()")
        if self.scaler is None:
            loss.backward()
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad_norm)
            optimizer.step()
            return
        self.scaler.scale(loss).backward()
        if clip_grad_norm is not None:
            self.scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            torch.nn.utils.clip_grad_norm_(parameters, clip_grad_norm)
        self.scaler.step(optimizer)  # skips the step if a gradient overflowed
        self.scaler.update()

    def __str__(self) -> str:
        return self.name


def _check_name(name, allow_auto: bool = True) -> str:
    if not isinstance(name, str):
        raise TypeError(f"precision must be a string such as 'bf16', got {type(name).__name__}")
    key = name.strip().lower()
    allowed = PRECISIONS if allow_auto else PRECISIONS[1:]
    if key not in allowed:
        raise ValueError(f"unknown precision {name!r}: use one of {', '.join(allowed)}")
    return key


def choose(device, name: str | None = None, probe_step: dict | None = None,
           profile: str = "full") -> Precision:
    """The precision to train with on ``device``: ``name``, else ``$COURSE_PRECISION``, else auto.

    ``auto`` on a CPU runs (or reads from the cache) the bf16 probe; see the module docstring.
    ``probe_step`` gives the sizes of the step it times (the notebook's own model and batch,
    see ``probe_step()``); the default is a small chapter model. ``profile``: the notebook's
    profile; ``"smoke"`` never runs the probe (``cpu_probe``).
    Asking for ``fp16`` or ``bf16`` on a device that cannot do it raises a ``ValueError``
    that says what to use instead.
    """
    if name is None:
        name = os.environ.get("COURSE_PRECISION", "auto")
    key = _check_name(name)
    device_type = torch.device(device).type
    if key != "auto":
        probe = Probe("override", cpu=cpu_model(), threads=torch.get_num_threads())
    elif device_type == "cpu":
        probe = cpu_probe(step=probe_step, profile=profile)
        key = probe.choice
    else:
        probe = Probe("not cpu", cpu=cpu_model(), threads=torch.get_num_threads())
        key = _auto_not_cpu(device_type)
    if device_type == "mps" and key != "fp32":
        raise ValueError(f"precision {key!r} is not supported on Apple MPS here; use 'fp32'")
    # An explicit bf16 may run emulated (T4, V100: no hardware speed-up); refuse only a GPU
    # that cannot run it at all.
    if (device_type == "cuda" and key == "bf16"
            and not torch.cuda.is_bf16_supported(including_emulation=True)):
        raise ValueError("this CUDA GPU has no bf16 support; use 'fp16' (with a gradient "
                         "scaler) or 'fp32'")
    return Precision(key, device_type, probe=probe)


def set_current(precision: Precision) -> Precision:
    """Remember the precision a notebook trains with (``runtime.setup`` calls this)."""
    global _CURRENT
    if not isinstance(precision, Precision):
        raise TypeError(f"expected a Precision, got {type(precision).__name__}")
    _CURRENT = precision
    return precision


def current() -> Precision:
    """The precision chosen by the last ``runtime.setup`` (float32 on the CPU before any)."""
    return _CURRENT if _CURRENT is not None else Precision("fp32", "cpu")


CURRENT = "current"  # as a ``precision`` argument: the one ``runtime.setup`` chose


def as_precision(precision=None, device="cpu") -> Precision:
    """The ``Precision`` a function's ``precision`` argument stands for, one rule everywhere:
    None is float32 on ``device`` (autocast off, no gradient scaler); ``"current"`` is the
    precision the last ``runtime.setup`` chose (``current()``); a ``Precision`` is itself."""
    if precision is None:
        return Precision("fp32", torch.device(device).type)
    if isinstance(precision, str):
        if precision == CURRENT:
            return current()
        raise ValueError(f"precision must be None (float32), {CURRENT!r} (runtime.setup's "
                         f"choice) or a Precision such as Precision('bf16', 'cpu'), got "
                         f"{precision!r}")
    return precision


def _is_smoke(profile) -> bool:
    return str(profile).strip().lower() == "smoke"


def speedup_summary(times, baseline: str = "fp32", other: str = "bf16") -> dict:
    """Milliseconds and speed-up of ``other`` over ``baseline`` from a
    ``cost.time_interleaved`` table (both names timed in the same rounds).

    Returns ``{baseline}_ms`` and ``{other}_ms`` (medians), their ``_q25``/``_q75``
    (the middle half of the rounds, from ``stats.median_iqr``), ``speedup`` (median
    baseline / median other: above 1, ``other`` is faster), ``speedup_q25``/``speedup_q75``
    (of the per-round ratios: how much one round's comparison varies) and ``rounds``.
    """
    missing = {"name", "round", "seconds"} - set(getattr(times, "columns", ()))
    if missing:
        raise ValueError(f"times needs the columns of cost.time_interleaved; missing "
                         f"{sorted(missing)}")
    per_round = times.pivot_table(index="round", columns="name", values="seconds")
    absent = [n for n in (baseline, other) if n not in per_round.columns]
    if absent:
        raise ValueError(f"no times named {absent}; the table has {sorted(per_round.columns)}")
    per_round = per_round[[baseline, other]].dropna()
    if per_round.empty:
        raise ValueError(f"{baseline!r} and {other!r} were never timed in the same round")
    out = {}
    for name in (baseline, other):
        q = median_iqr(1000 * per_round[name])
        out[f"{name}_ms"], out[f"{name}_q25"], out[f"{name}_q75"] = q.median, q.q25, q.q75
    ratio = median_iqr(per_round[baseline] / per_round[other])
    out["speedup"] = out[f"{baseline}_ms"] / out[f"{other}_ms"]
    out["speedup_q25"], out["speedup_q75"] = ratio.q25, ratio.q75
    out["rounds"] = len(per_round)
    return out
