"""Mixed precision: run the big matrix products in bfloat16 where the hardware does them fast.

    mp = precision.choose(device)              # bf16 where supported, else fp16/fp32 (see below)
    with mp.autocast():                        # matmuls in bf16; softmax, losses, norms in fp32
        loss = model.loss(batch)
    mp.step(loss, optimizer, model.parameters(), clip_grad_norm=1.0)

The weights, the gradients and the optimizer state stay float32 ("mixed" precision): only the
operations that ``torch.autocast`` lists as safe (linear layers, matmuls) run in the low
precision, on low-precision copies of their inputs.

Which precision ``choose`` picks for ``"auto"``:

- **bf16** on a CPU with bfloat16 matrix units (Intel AMX: ``amx_bf16`` in
  ``/proc/cpuinfo``), and on a CUDA GPU that supports bf16;
- **fp16** with a gradient scaler on a CUDA GPU without bf16 (float16 has a narrow exponent
  range: small gradients would round to zero without the scaler);
- **fp32** (autocast off) everywhere else, Apple MPS included.

``$COURSE_PRECISION`` (``auto``, ``fp32``, ``bf16``, ``fp16``) overrides the choice, as
``$COURSE_DEVICE`` does for the device.
"""

from __future__ import annotations

import contextlib
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CARD_NAMES = {"fp32": "float32", "bf16": "bf16 autocast", "fp16": "fp16 autocast"}

_CURRENT: Precision | None = None


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

    That is what makes bf16 training faster on a CPU. ``avx512_bf16`` alone (a dot-product
    instruction) is not enough: on the course's CI machine (Xeon with AVX-512 BF16, no AMX
    exposed) bf16 matrix products measured 1.3-1.6x *slower* than float32, because that
    instruction retires no more multiply-adds per cycle than float32 FMAs and autocast adds
    the conversions (the appendix notebook on precision measures it). So ``auto`` stays in
    float32 there; ``COURSE_PRECISION=bf16`` still forces bf16.
    """
    return "amx_bf16" in cpu_bf16_flags(cpuinfo)


def _auto(device_type: str) -> str:
    if device_type == "cpu":
        return "bf16" if cpu_supports_bf16() else "fp32"
    if device_type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"  # MPS and anything else: float32, the safe default


@dataclass
class Precision:
    """The numeric precision of training on one device type: ``fp32``, ``bf16`` or ``fp16``."""

    name: str
    device_type: str = "cpu"
    scaler: torch.amp.GradScaler | None = field(default=None, repr=False)

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


def choose(device, name: str | None = None) -> Precision:
    """The precision to train with on ``device``: ``name``, else ``$COURSE_PRECISION``, else auto.

    Asking for ``fp16`` or ``bf16`` on a device that cannot do it raises a ``ValueError``
    that says what to use instead.
    """
    if name is None:
        name = os.environ.get("COURSE_PRECISION", "auto")
    key = _check_name(name)
    device_type = torch.device(device).type
    if key == "auto":
        key = _auto(device_type)
    if device_type == "mps" and key != "fp32":
        raise ValueError(f"precision {key!r} is not supported on Apple MPS here; use 'fp32'")
    if device_type == "cuda" and key == "bf16" and not torch.cuda.is_bf16_supported():
        raise ValueError("this CUDA GPU has no bf16 support; use 'fp16' (with a gradient "
                         "scaler) or 'fp32'")
    return Precision(key, device_type)


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
