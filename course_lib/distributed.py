"""Data-parallel training with ``torch.distributed``: one model copy per process, one shard of
each batch per process, gradients averaged by an all-reduce before every optimizer step.

    # prepare the data once (IMDB windows of chapter 7, from data/)
    python -m course_lib.distributed prepare --out rows.pt --reviews 2000
    # one process, the whole batch of 64 rows
    python -m course_lib.distributed train --rows rows.pt --mode single --global-batch 64 --out a.pt
    # the same 64 rows per step, split over 2 processes (32 each): DistributedDataParallel
    torchrun --standalone --nproc_per_node=2 -m course_lib.distributed train \\
        --rows rows.pt --mode ddp --global-batch 64 --out b.pt

The model is chapter 7's GPT (``course_lib.gpt``). Modes:

``single``  one process, no communication (plain ``python``)
``ddp``     N processes under ``torchrun``; ``DistributedDataParallel`` averages the gradients
``manual``  N processes under ``torchrun``; we average the gradients ourselves, one
            ``all_reduce`` per parameter after the backward pass (what DDP does for us, slower)

``--global-batch`` is the number of rows behind one optimizer step, over all processes and
micro-batches; ``--micro-batches M`` accumulates the gradients of M smaller batches in each
process before the step. Every configuration with the same global batch reads exactly the same
rows in each step (see ``shard_batches``), so their parameters must agree up to float rounding;
``--dtype float64`` makes that rounding small enough for a strict comparison.

Only rank 0 prints, evaluates and writes the checkpoint. The backend is ``nccl`` on CUDA GPUs
and ``gloo`` on the CPU, chosen from the device.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from . import gpt
from .checks import positive_int
from .stats import median_iqr

MODES = ("single", "ddp", "manual")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
LAUNCH_HINT = ("launch with: torchrun --standalone --nproc_per_node=N "
               "-m course_lib.distributed train ...")
ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


# --------------------------------------------------------------------------- processes
class LaunchError(RuntimeError):
    """The script was started in a way that cannot work (missing torchrun, too few GPUs...)."""


@dataclass(frozen=True)
class ProcessInfo:
    """Who this process is: ``rank`` among ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def process_info(env=None) -> ProcessInfo:
    """Read ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``, which ``torchrun`` sets for each process.

    Raises ``LaunchError`` (with the command to use) when they are missing or make no sense.
    """
    env = os.environ if env is None else env
    missing = [k for k in ENV_VARS if k not in env]
    if missing:
        raise LaunchError(f"the environment variables {', '.join(missing)} are not set, so this "
                          f"process was not started by torchrun; {LAUNCH_HINT}")
    try:
        rank, world, local = (int(env[k]) for k in ENV_VARS)
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        shown = ", ".join(f"{k}={env[k]!r}" for k in ENV_VARS)
        raise LaunchError(f"torchrun's variables must be integers, got {shown}") from None
    if world < 1 or not 0 <= rank < world or not 0 <= local < local_world:
        raise LaunchError(f"inconsistent launch: RANK={rank}, WORLD_SIZE={world}, "
                          f"LOCAL_RANK={local}, LOCAL_WORLD_SIZE={local_world}")
    return ProcessInfo(rank, world, local, local_world)


def choose_backend(device) -> str:
    """``nccl`` for CUDA tensors (GPU to GPU, NVLink and InfiniBand), ``gloo`` for CPU tensors."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def pick_device(info: ProcessInfo, name: str = "auto") -> torch.device:
    """The device of this process: GPU number ``local_rank``, or the CPU.

    ``auto`` takes the GPUs when this node has one for each of its processes, else the CPU
    (every process of a job must use the same kind of device). ``cuda`` insists on GPUs.
    """
    if name not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {name!r}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if name == "cpu" or (name == "auto" and gpus < info.local_world_size):
        return torch.device("cpu")
    if gpus < info.local_world_size:
        raise LaunchError(f"{info.local_world_size} processes on this node but {gpus} CUDA GPUs: "
                          "use --nproc_per_node <= the number of GPUs, or --device cpu")
    return torch.device("cuda", info.local_rank)


def init_process_group(info: ProcessInfo, device) -> str:
    """Join the job's process group (torchrun's rendezvous address comes by environment).

    Returns the backend used. A CUDA process first binds to its own GPU.
    """
    device = torch.device(device)
    backend = choose_backend(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size)
    return backend


def per_process_batch(global_batch: int, world_size: int, micro_batches: int = 1) -> int:
    """Rows in each micro-batch of each process: ``global_batch / (world_size * micro_batches)``.

    Raises ``ValueError`` unless it divides evenly: every process must see as many rows (and,
    with full windows, as many targets) as every other, or the average of the processes'
    mean losses is not the mean loss of the global batch.
    """
    for name, value in (("global_batch", global_batch), ("world_size", world_size),
                        ("micro_batches", micro_batches)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    parts = world_size * micro_batches
    if global_batch % parts:
        raise ValueError(
            f"the global batch of {global_batch} rows cannot be split evenly over {world_size} "
            f"process(es) x {micro_batches} micro-batch(es); use a multiple of {parts}"
        )
    return global_batch // parts


def print0(*args, **kwargs) -> None:
    """``print`` on rank 0 only (everywhere when no process group is running)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0:
        print(*args, **kwargs, flush=True)


# --------------------------------------------------------------------------- data
def full_windows(sequences, window: int, pad_id: int = 0) -> torch.Tensor:
    """Rows [N, window + 1] of next-token windows with no padding at all.

    ``text.next_token_windows`` pads the last window of each text; dropping those rows makes
    every row hold exactly ``window`` targets, so equal numbers of rows are equal numbers of
    targets, and a mean over shards of per-shard means is the mean over the whole batch.
    """
    from .text import next_token_windows

    rows = next_token_windows(sequences, window, pad_id)
    return rows[(rows != pad_id).all(dim=1)]


def prepare_rows(reviews: int | None = 2000, val_reviews: int = 200, vocab_words: int = 5000,
                 window: int = 32, seed: int = 0) -> dict:
    """IMDB training and validation rows as in chapter 7 (movie-disjoint split), full windows.

    ``reviews`` training reviews drawn at random (None: all of them). Returns a dict with
    ``train`` and ``val`` [N, window + 1], ``vocab_size``, ``pad_id`` and the sizes used,
    ready for ``save_rows``.
    """
    import numpy as np

    from . import data, text

    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=seed)
    rng = np.random.default_rng(seed)
    train = splits["train"]["review"].tolist()
    if reviews is not None and reviews < len(train):
        train = [train[i] for i in np.sort(rng.choice(len(train), reviews, replace=False))]
    val = splits["val"]["review"].tolist()[:val_reviews]
    train_tokens = [text.tokenize(r) for r in train]
    vocab = text.Vocab.build(train_tokens, max_size=vocab_words)
    train_ids = [vocab.encode(t, add_bos=True) for t in train_tokens]
    val_ids = [vocab.encode(r, add_bos=True) for r in val]
    return {"train": full_windows(train_ids, window, vocab.pad_id),
            "val": full_windows(val_ids, window, vocab.pad_id),
            "vocab_size": len(vocab), "pad_id": vocab.pad_id, "window": window,
            "reviews": len(train), "val_reviews": len(val)}


def save_rows(rows: dict, path) -> Path:
    """Write a ``prepare_rows`` dict (loadable with ``weights_only=True``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(rows, path)
    return path


def load_rows(path) -> dict:
    """Read what ``save_rows`` wrote; a missing file says how to make it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no rows file {path}; make it with: "
                                f"python -m course_lib.distributed prepare --out {path}")
    return torch.load(path, weights_only=True)


def shard_batches(rows: torch.Tensor, batch_size: int, num_shards: int = 1, shard: int = 0,
                  seed: int = 0):
    """Endless batches [batch_size, L+1] of shard ``shard`` of ``num_shards``, pass after pass.

    ``DistributedSampler`` shuffles all row indices with the same seed in every process (a
    new order each pass, via ``set_epoch``) and gives shard s the positions s, s + S, s + 2S...
    of that order. Batch k of every shard together is therefore positions k·S·b .. (k+1)·S·b
    of the shuffled order, whatever S is: one process reading batches of S·b rows sees the
    same rows in step k as S processes reading b each.
    """
    dataset = TensorDataset(rows)
    sampler = DistributedSampler(dataset, num_replicas=num_shards, rank=shard, shuffle=True,
                                 seed=seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)
    if len(loader) == 0:
        raise ValueError(f"{len(rows)} rows are too few for {num_shards} shard(s) of batches "
                         f"of {batch_size}")
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for (batch,) in loader:
            yield batch
        epoch += 1


# --------------------------------------------------------------------------- training
@dataclass
class TrainConfig:
    """Everything a run depends on; same config (and rows), same parameters, whatever the mode."""

    mode: str = "single"
    steps: int = 20
    global_batch: int = 32
    micro_batches: int = 1
    lr: float = 3e-3
    weight_decay: float = 0.1
    warmup_steps: int = 5
    clip_grad_norm: float = 1.0
    d_model: int = 64
    num_heads: int = 2
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    dtype: str = "float32"
    seed: int = 0
    device: str = "auto"
    log_every: int = 10
    probe_steps: int = 0
    checkpoint_every: int = 0
    bucket_cap_mb: float = 25.0

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")
        positive_int("steps", self.steps)


def check_mode(mode: str, info: ProcessInfo) -> None:
    """``single`` means one process: refuse it when torchrun started several."""
    if mode == "single" and info.world_size != 1:
        raise LaunchError(f"mode 'single' runs in one process, not {info.world_size}; start it "
                          "with python -m course_lib.distributed, or use --mode ddp")


def lm_loss(model, rows: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of rows [B, L+1]: ``GPT.loss``, through ``model(...)``.

    The call has to go through the wrapper (``DistributedDataParallel.forward``), not through
    ``model.module.loss``: DDP's forward is where it prepares the gradient all-reduce.
    """
    logits = model(rows[:, :-1])  # [B, L, V]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))


def allreduce_gradients(model: torch.nn.Module, world_size: int) -> None:
    """Average every gradient over the processes: sum by all-reduce, divide by the count.

    One blocking ``all_reduce`` per parameter, after the whole backward pass: correct, and
    what ``DistributedDataParallel`` improves on (buckets, overlap with the backward pass).
    """
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size


def _probe(model, batch, cfg: TrainConfig, world_size: int, repeats: int) -> dict:
    """Seconds of a forward + backward pass with and without the gradient communication,
    and of one all-reduce of a buffer as large as all gradients: ``repeats`` rounds, the
    three interleaved in every round, each one started together by a barrier.

    Returns ``{"local": [...], "synced": [...], "allreduce": [...], "gradient_mb": x}``,
    one time per round; ``comm_summary`` turns it into medians and shares.
    """
    def fwd_bwd(sync: bool):
        if cfg.mode == "ddp":
            with contextlib.nullcontext() if sync else model.no_sync():
                lm_loss(model, batch).backward()
        else:
            lm_loss(model, batch).backward()
            if sync:
                allreduce_gradients(model, world_size)
        model.zero_grad(set_to_none=True)

    n = sum(p.numel() for p in model.parameters())
    dtype = next(model.parameters()).dtype
    buffer = torch.zeros(n, device=batch.device, dtype=dtype)
    parts = {"local": lambda: fwd_bwd(False), "synced": lambda: fwd_bwd(True),
             "allreduce": lambda: dist.all_reduce(buffer)}
    for fn in parts.values():
        fn()  # once untimed
    times = {name: [] for name in parts}
    for _ in range(repeats):
        for name, fn in parts.items():
            dist.barrier()  # every process starts the part at the same moment
            start = time.perf_counter()
            fn()
            if batch.device.type == "cuda":
                torch.cuda.synchronize(batch.device)
            times[name].append(time.perf_counter() - start)
    return {**times, "gradient_mb": n * buffer.element_size() / 1e6}


def step_summary(step_seconds, skip: int | None = None) -> dict:
    """Median milliseconds per step and the middle half of the steps (``q25``, ``q75``).

    The first ``skip`` steps are left out (default: a tenth of the steps, at least one, when
    there are more than two): they carry one-off costs (allocation, kernel choice). A median
    is not moved by the few slow steps that a shared machine throws in, which a mean
    (steps / total time) is. Pass several runs' steps together to pool repeats.
    """
    seconds = [float(t) for t in step_seconds]
    if not seconds or not all(t > 0 for t in seconds):
        raise ValueError(f"step_seconds must be a non-empty list of positive seconds, "
                         f"got {seconds[:5]}...")
    if skip is None:
        skip = max(1, len(seconds) // 10) if len(seconds) > 2 else 0
    if not isinstance(skip, int) or not 0 <= skip < len(seconds):
        raise ValueError(f"skip must be an int in [0, {len(seconds)}), got {skip!r}")
    q1, q2, q3 = median_iqr(seconds[skip:], method="statistics")
    return {"median_ms": 1000 * q2, "q25_ms": 1000 * q1, "q75_ms": 1000 * q3,
            "steps": len(seconds) - skip}


def comm_summary(probes) -> dict:
    """What the communication costs, from one or more ``_probe`` results (pooled).

    ``exposed_ms`` = median synced pass - median local pass: the communication that the
    backward pass did not hide, plus waiting for the other process. ``exposed_share`` is
    that over the median synced pass, which contains it, so it lies in [0, 1).
    ``allreduce_share``: one all-reduce of all gradients, alone, over the synced pass.
    Medians and quartiles in milliseconds for each part.
    """
    probes = [probes] if isinstance(probes, dict) else list(probes)
    if not probes:
        raise ValueError("no probe results: train with probe_steps > 0 and world_size > 1")
    out = {}
    for name in ("local", "synced", "allreduce"):
        values = [t for p in probes for t in p.get(name, [])]
        if not values:
            raise ValueError(f"the probe results hold no {name!r} times")
        q1, q2, q3 = median_iqr(values, method="statistics")
        out[f"{name}_ms"] = 1000 * q2
        out[f"{name}_q25_ms"], out[f"{name}_q75_ms"] = 1000 * q1, 1000 * q3
    out["exposed_ms"] = max(0.0, out["synced_ms"] - out["local_ms"])
    out["exposed_share"] = out["exposed_ms"] / out["synced_ms"]
    out["allreduce_share"] = out["allreduce_ms"] / out["synced_ms"]
    out["rounds"] = sum(len(p["synced"]) for p in probes)
    out["gradient_mb"] = probes[0].get("gradient_mb")
    return out


def train(rows: torch.Tensor, vocab_size: int, cfg: TrainConfig, val_rows=None,
          info: ProcessInfo | None = None, pad_id: int = 0, checkpoint_to=None):
    """Train a GPT on ``rows`` [N, L+1]; returns ``(model, stats)`` (the bare model, unwrapped).

    ``cfg.mode == "single"`` runs in this process alone. ``ddp`` and ``manual`` need a process
    group (``init_process_group``) and ``info``. ``stats`` holds the loss of every step (the
    mean over the whole global batch), the seconds of every step, the validation loss (rank 0)
    and, with ``cfg.probe_steps``, the communication probe. With ``cfg.checkpoint_every`` and
    a path ``checkpoint_to``, rank 0 saves the weights every that many steps
    (``checkpoint_path``), outside the timed part of the step.
    """
    info = info or ProcessInfo()
    check_mode(cfg.mode, info)
    if cfg.mode != "single" and not dist.is_initialized():
        raise LaunchError(f"mode {cfg.mode!r} needs a process group; {LAUNCH_HINT}")
    world, micro = info.world_size, cfg.micro_batches
    b = per_process_batch(cfg.global_batch, world, micro)
    device = pick_device(info, cfg.device)

    torch.manual_seed(cfg.seed)  # the same initial weights in every process
    config = gpt.GPTConfig(vocab_size=vocab_size, max_len=rows.shape[1] - 1,
                           d_model=cfg.d_model, num_heads=cfg.num_heads,
                           num_layers=cfg.num_layers, d_ff=cfg.d_ff, dropout=cfg.dropout,
                           pad_id=pad_id)
    bare = gpt.GPT(config).to(device=device, dtype=DTYPES[cfg.dtype])
    model = bare
    if cfg.mode == "ddp":  # broadcasts rank 0's weights, then hooks into backward
        model = DistributedDataParallel(
            bare, device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=cfg.bucket_cap_mb)
    torch.manual_seed(cfg.seed + 1 + info.rank)  # dropout masks: different in each process
    optimizer = gpt.configure_optimizer(bare, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, gpt.warmup_cosine(min(cfg.warmup_steps, cfg.steps - 1), cfg.steps))
    # process r, micro-batch m reads shard r*M + m of world*M shards (see shard_batches)
    shards = [shard_batches(rows, b, world * micro, info.rank * micro + m, seed=cfg.seed)
              for m in range(micro)]

    losses = torch.zeros(cfg.steps, dtype=torch.float64)
    step_seconds, comm_seconds, last_log = [], [], 0
    model.train()
    for step in range(cfg.steps):
        start = time.perf_counter()
        for m, batches in enumerate(shards):
            batch = next(batches).to(device)
            # DDP: only the last micro-batch's backward all-reduces (the others accumulate)
            last = m == micro - 1
            quiet = model.no_sync() if cfg.mode == "ddp" and not last else contextlib.nullcontext()
            with quiet:
                loss = lm_loss(model, batch) / micro
                loss.backward()
            losses[step] += loss.item()
        if cfg.mode == "manual":
            t = time.perf_counter()
            allreduce_gradients(bare, world)
            comm_seconds.append(time.perf_counter() - t)
        torch.nn.utils.clip_grad_norm_(bare.parameters(), cfg.clip_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        step_seconds.append(time.perf_counter() - start)
        every = cfg.checkpoint_every
        if every and checkpoint_to is not None and info.is_main and (step + 1) % every == 0:
            save_run(bare, cfg, {"step": step + 1}, checkpoint_path(checkpoint_to, step + 1))
        if cfg.log_every and ((step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps):
            shown = losses[step:step + 1].to(device)  # nccl reduces GPU tensors only
            if world > 1:  # a scalar all-reduce, only on logging steps
                dist.all_reduce(shown)
                shown /= world
            since = step_seconds[-(step + 1 - last_log):]  # the steps since the last line
            last_log = step + 1
            median = median_iqr(since, method="statistics").median
            print0(f"step {step + 1:>4}/{cfg.steps}  loss {shown.item():.4f}  "
                   f"(median {1000 * median:.0f} ms/step over {len(since)})")

    if world > 1:  # every process's losses -> the loss of the global batch, step by step
        losses = losses.to(device)
        dist.all_reduce(losses)
        losses = (losses / world).cpu()
    timing = step_summary(step_seconds)  # median: not moved by a few slow steps
    stats = {"mode": cfg.mode, "world_size": world, "micro_batches": micro,
             "per_process_batch": b, "global_batch": cfg.global_batch,
             "backend": dist.get_backend() if dist.is_initialized() else None,
             "device": str(device), "dtype": cfg.dtype, "threads": torch.get_num_threads(),
             "params": sum(p.numel() for p in bare.parameters()),
             "loss": losses.tolist(), "step_seconds": step_seconds,
             "step_median_ms": timing["median_ms"],
             "steps_per_second": 1000 / timing["median_ms"],  # of the median step
             "comm_seconds": comm_seconds}
    if cfg.probe_steps and world > 1:
        stats["probe"] = _probe(model, next(shards[0]).to(device), cfg, world, cfg.probe_steps)
    if info.is_main and val_rows is not None and len(val_rows):  # evaluation: rank 0 only
        total, count = gpt.token_nll(bare, val_rows, device=device)
        stats["val_loss"] = total / count
    return bare, stats


def checkpoint_path(out, step: int) -> Path:
    """The checkpoint of ``step``, next to the final one: ``run.pt`` -> ``run.step0010.pt``."""
    out = Path(out)
    return out.with_name(f"{out.stem}.step{step:04d}{out.suffix}")


def save_run(model: torch.nn.Module, cfg: TrainConfig, stats: dict, path) -> Path:
    """Checkpoint (rank 0 only): weights, configs and stats, written under a temporary name
    and renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"state_dict": model.state_dict(), "gpt_config": model.config.to_dict(),
                "train_config": asdict(cfg), "stats": stats}, tmp)
    os.replace(tmp, path)
    return path


def load_run(path) -> dict:
    """What ``save_run`` wrote."""
    return torch.load(path, map_location="cpu", weights_only=True)


def max_param_diff(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys and shapes."""
    if a.keys() != b.keys():
        raise ValueError(f"different parameters: {sorted(set(a) ^ set(b))[:5]}")
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


# --------------------------------------------------------------------------- on paper
BYTES_PER_PARAM = {
    # (weights, gradients, optimizer state) in bytes per parameter, training with Adam(W)
    "fp32": (4, 4, 8),    # float32 weights and gradients; Adam's m and v in float32
    "mixed": (2, 2, 12),  # bf16/fp16 weights and gradients; float32 master weights + m + v
}
STRATEGIES = ("ddp", "zero1", "zero2", "fsdp")


def training_memory_bytes(n_params: int, world_size: int = 1, strategy: str = "ddp",
                          precision: str = "fp32") -> dict:
    """Bytes per device for weights, gradients and Adam state (activations not included).

    ``ddp`` keeps all three whole on every device; ZeRO stage 1 (``zero1``) shards the
    optimizer state over the ``world_size`` devices, stage 2 (``zero2``) also the gradients,
    and ``fsdp`` (ZeRO stage 3) also the weights. FSDP gathers one layer's full weights at a
    time for its forward and backward, a transient cost not counted here.
    """
    if precision not in BYTES_PER_PARAM:
        raise ValueError(f"precision must be one of {tuple(BYTES_PER_PARAM)}, got {precision!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(world_size, int) or world_size < 1 or n_params < 0:
        raise ValueError(f"need n_params >= 0 and world_size >= 1, got {n_params}, {world_size}")
    w, g, o = BYTES_PER_PARAM[precision]
    level = STRATEGIES.index(strategy)  # how many of (optimizer, grads, weights) are sharded
    shard = [1 / world_size if level >= k else 1.0 for k in (3, 2, 1)]  # weights, grads, opt
    out = {"weights": n_params * w * shard[0], "gradients": n_params * g * shard[1],
           "optimizer": n_params * o * shard[2]}
    out["total"] = sum(out.values())
    return out


def ring_allreduce_bytes(n_params: int, world_size: int, bytes_per_value: int = 4) -> float:
    """Bytes each process sends in one ring all-reduce of ``n_params`` values: 2 (N-1)/N x size."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return 2 * (world_size - 1) / world_size * n_params * bytes_per_value


def torchrun_command(script_args, nproc_per_node: int, nnodes: int = 1,
                     rdzv_endpoint: str | None = None, rdzv_id: str = "course-job",
                     python: str | None = None) -> list[str]:
    """The command that starts ``course_lib.distributed`` on ``nnodes`` x ``nproc_per_node``.

    One node: ``--standalone`` (torchrun finds a free port itself). Several nodes: the same
    command on every node, all pointing at one ``host:port`` rendezvous. ``python`` runs
    torchrun as ``python -m torch.distributed.run`` (the same program) with that interpreter.
    """
    if not isinstance(nproc_per_node, int) or nproc_per_node < 1 or nnodes < 1:
        raise ValueError(f"need nproc_per_node >= 1 and nnodes >= 1, got {nproc_per_node}, "
                         f"{nnodes}")
    cmd = [python, "-m", "torch.distributed.run"] if python else ["torchrun"]
    if nnodes == 1 and rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ValueError("several nodes need rdzv_endpoint='host:port' of one of them")
        cmd += [f"--nnodes={nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={rdzv_endpoint}",
                f"--rdzv_id={rdzv_id}"]
    cmd.append(f"--nproc_per_node={nproc_per_node}")
    return [*cmd, "-m", "course_lib.distributed", *map(str, script_args)]


# --------------------------------------------------------------------------- diagram
def draw_ddp_step(world_size: int = 2):
    """One data-parallel step, drawn in the visual language of ``course_lib.diagrams``:
    shards in, forward and backward in every process, all-reduce, the same optimizer step.

    Returns the matplotlib Figure (no ``plt.show()``); the drawing is
    ``course_lib.diagrams.ddp_step``, imported here only when called (no matplotlib in the
    training processes).
    """
    from .diagrams import ddp_step

    return ddp_step(world_size)


# --------------------------------------------------------------------------- entry point
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.distributed",
        description="Data-parallel GPT training with torch.distributed (see the module doc).")
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="IMDB windows from data/ into a rows file")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument("--reviews", type=int, default=2000, help="training reviews (0 = all)")
    prep.add_argument("--val-reviews", type=int, default=200)
    prep.add_argument("--vocab-words", type=int, default=5000)
    prep.add_argument("--window", type=int, default=32)
    prep.add_argument("--seed", type=int, default=0)
    run = sub.add_parser("train", help="train (mode ddp/manual: under torchrun)")
    run.add_argument("--rows", type=Path, required=True, help="a file written by `prepare`")
    run.add_argument("--out", type=Path, help="checkpoint written by rank 0")
    run.add_argument("--threads", type=int, default=1, help="PyTorch CPU threads per process")
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if name == "mode":
            run.add_argument(flag, choices=MODES, default=value)
        elif name == "device":
            run.add_argument(flag, choices=("auto", "cpu", "cuda"), default=value)
        elif name == "dtype":
            run.add_argument(flag, choices=tuple(DTYPES), default=value)
        else:
            run.add_argument(flag, type=type(value), default=value)
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "prepare":
        rows = prepare_rows(reviews=args.reviews or None, val_reviews=args.val_reviews,
                            vocab_words=args.vocab_words, window=args.window, seed=args.seed)
        save_rows(rows, args.out)
        print(f"{len(rows['train']):,} training and {len(rows['val']):,} validation rows of "
              f"{args.window + 1} ids (vocabulary {rows['vocab_size']:,}) -> {args.out}")
        return 0

    torch.set_num_threads(args.threads)
    options = {k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__}
    info = ProcessInfo()
    try:
        cfg = TrainConfig(**options)
        if cfg.mode != "single" or "WORLD_SIZE" in os.environ:
            info = process_info()
        check_mode(cfg.mode, info)
        # check the batch before anything slow happens, in every process alike
        per_process_batch(cfg.global_batch, info.world_size, cfg.micro_batches)
        data = load_rows(args.rows)
        if cfg.mode != "single":
            init_process_group(info, pick_device(info, cfg.device))
    except (LaunchError, ValueError, FileNotFoundError) as error:
        if info.is_main:
            print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    try:
        print0(f"{cfg.mode}: {info.world_size} process(es) x {cfg.micro_batches} micro-batch(es) "
               f"x {cfg.global_batch // (info.world_size * cfg.micro_batches)} rows = "
               f"{cfg.global_batch} rows per step; backend "
               f"{dist.get_backend() if dist.is_initialized() else 'none'}; "
               f"{args.threads} thread(s) per process")
        model, stats = train(data["train"], data["vocab_size"], cfg, val_rows=data.get("val"),
                             info=info, pad_id=data.get("pad_id", 0), checkpoint_to=args.out)
        if info.is_main:  # checkpointing: rank 0 only (every process holds the same weights)
            if "val_loss" in stats:
                print0(f"validation loss {stats['val_loss']:.4f}")
            if args.out is not None:
                save_run(model, cfg, stats, args.out)
                print0(f"saved {args.out}")
        if dist.is_initialized():
            dist.barrier()  # nobody leaves before rank 0 has written
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
