"""Pretrain, then fine-tune: a classifier on a pretrained backbone, LoRA, label budgets, masked LM.

    clf = SequenceClassifier(gpt_model, num_classes=2, pad_id=bpe.pad_id)  # pool="last"
    logits = clf(tokens)                       # [B, L] right-padded -> [B, 2]
    loss = clf.loss(tokens, labels)            # cross-entropy; labels [B] in 0..num_classes-1
    n = add_lora(clf, r=8, alpha=16, target_names=("q_proj", "v_proj"), trainable=("head",))
    index = label_budget_sample(labels, n=200, seed=0)  # balanced; the 50-draw is inside it
    inputs, labels = mask_tokens(ids, mask_id=V, vocab_size=V, generator=g, special_ids=(0,))

The backbone is any module with ``features(tokens, keep) -> [B, L, d]``: ``gpt.GPT`` (chapter
7's shipped model, ``data.load_pretrained_gpt()``) or the same model built with
``GPTConfig(causal=False)``, a bidirectional encoder pretrained as a masked language model
(BERT's objective, Devlin et al. 2019): 15 % of the tokens are chosen; of those, 80 % become
``<mask>``, 10 % a random token, 10 % stay as they are; the loss is the cross-entropy at the
chosen positions only (``mlm_loss``).

The BPE has no ``<mask>`` piece. The encoder's mask id is ``len(bpe)``, one row past the
tokenizer's ids (its embedding has ``len(bpe) + 1`` rows); the tokenizer's own ids do not
change, and no text can encode to it.

LoRA (Hu et al. 2022) freezes a pretrained ``nn.Linear`` W and learns a low-rank update:
W x + (alpha / r) B A x, A [r, in], B [out, r], B starting at zero (``LoRALinear``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .checks import positive_int

IGNORE = -100  # F.cross_entropy's ignore_index: the label of a position that is not scored
POOLS = ("last", "mean", "first")


# --------------------------------------------------------------------------- the classifier
class SequenceClassifier(nn.Module):
    """A backbone's hidden states, pooled to one vector per text, then a linear head.

    tokens [B, L] -> backbone.features -> [B, L, d] -> pool -> [B, d] -> head -> logits [B, C]

    Rows are right-padded with ``pad_id``: a row's text ends at its last id that is not
    ``pad_id`` (so a ``<bos>`` that shares the pad id, as the course's BPE's does, still counts).
    ``pool``: ``"last"`` reads that last real position (in a causal GPT the only one that has
    read the whole text), ``"mean"`` averages the real positions, ``"first"`` reads position 0
    (an encoder's ``<bos>``, BERT's ``[CLS]``; a causal model has seen nothing else there).
    """

    def __init__(self, backbone: nn.Module, num_classes: int, pad_id: int, pool: str = "last",
                 d_model: int | None = None):
        super().__init__()
        d_model = _check_classifier(backbone, num_classes, pad_id, pool, d_model)
        self.backbone, self.pool = backbone, pool
        self.num_classes, self.pad_id = num_classes, pad_id
        self.head = nn.Linear(d_model, num_classes)
        nn.init.zeros_(self.head.weight)  # the untrained classifier says 1/C to every class:
        nn.init.zeros_(self.head.bias)  # its loss starts at ln C, not above it

    def forward(self, tokens):
        keep = real_positions(tokens, self.pad_id)  # [B, L]: True up to each text's end
        h = self.backbone.features(tokens, keep=keep)  # [B, L, d]
        return self.head(pool_hidden(h, keep, self.pool))  # [B, C]

    def loss(self, tokens, labels):
        """Mean cross-entropy of the logits of ``tokens`` [B, L] against ``labels`` [B]."""
        _check_labels(labels, self.num_classes, len(tokens))
        return F.cross_entropy(self(tokens), labels)


def real_positions(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """bool [B, L]: True at every position up to each row's last id that is not ``pad_id``.

    Right padding only: everything after the last real id is padding, everything before it
    text (a ``pad_id`` inside the text, such as a ``<bos>`` sharing it, stays text).
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be a LongTensor [B, L] of right-padded rows, got {got}")
    positions = torch.arange(tokens.shape[1], device=tokens.device)  # [L]
    last = torch.where(tokens != pad_id, positions, -1).amax(dim=1)  # [B], -1: all padding
    empty = (last < 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"row(s) {empty[:5]} of the batch hold only pad_id={pad_id}: a classifier needs at "
            "least one real token in each row. Drop empty texts before batching (or encode them "
            "with add_bos=True, and pad with an id other than the <bos>).")
    return positions <= last[:, None]  # [B, L]


def pool_hidden(h: torch.Tensor, keep: torch.Tensor, pool: str = "last") -> torch.Tensor:
    """Hidden states h [B, L, d] -> one vector per row [B, d], reading only ``keep`` [B, L]."""
    if pool == "last":
        last = keep.sum(dim=1) - 1  # [B]: index of each row's last real position
        return h[torch.arange(len(h), device=h.device), last]  # [B, d]
    if pool == "mean":
        w = keep.unsqueeze(-1).to(h.dtype)  # [B, L, 1]
        return (h * w).sum(dim=1) / w.sum(dim=1)  # [B, d]
    if pool == "first":
        return h[:, 0]  # [B, d]
    raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")


def _check_classifier(backbone, num_classes, pad_id, pool, d_model) -> int:
    if not callable(getattr(backbone, "features", None)):
        raise TypeError(f"the backbone ({type(backbone).__name__}) needs a method "
                        "features(tokens, keep) -> hidden states [B, L, d], as gpt.GPT has")
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2 (IMDB sentiment: 2), got "
                         f"{num_classes!r}")
    config = getattr(backbone, "config", None)
    if pad_id is None or not isinstance(pad_id, int) or isinstance(pad_id, bool):
        raise ValueError(f"pad_id must be the int id that pads the rows (the tokenizer's "
                         f"pad_id, e.g. BPETokenizer.pad_id), got {pad_id!r}: the classifier "
                         "finds where each text ends by it")
    vocab = getattr(config, "vocab_size", None)
    if vocab is not None and not 0 <= pad_id < vocab:
        raise ValueError(f"pad_id={pad_id} is outside the backbone's {vocab} ids")
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    if pool == "first" and getattr(config, "causal", False):
        raise ValueError("pool='first' on a causal model reads position 0, which has seen only "
                         "the first token: the same vector for every text. Use 'last' or 'mean' "
                         "(or an encoder, GPTConfig(causal=False))")
    d_model = getattr(config, "d_model", None) if d_model is None else d_model
    if not isinstance(d_model, int) or d_model < 1:
        raise ValueError("pass d_model, the width of the backbone's hidden states (a gpt.GPT's "
                         f"is read from its config), got {d_model!r}")
    return d_model


def _check_labels(labels, num_classes: int, batch: int) -> None:
    if not isinstance(labels, torch.Tensor) or labels.shape != (batch,) or \
            labels.is_floating_point():
        got = (f"{labels.dtype} {tuple(labels.shape)}" if isinstance(labels, torch.Tensor)
               else type(labels).__name__)
        raise ValueError(f"labels must be a LongTensor [{batch}] of class ids, got {got}")
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < num_classes:
        bad = int(labels.max()) if int(labels.max()) >= num_classes else int(labels.min())
        raise ValueError(f"label {bad} is not a class of this classifier (num_classes="
                         f"{num_classes}: ids 0..{num_classes - 1}); map the labels to 0.."
                         f"{num_classes - 1}, e.g. (df.sentiment == 'positive').astype(int)")


# --------------------------------------------------------------------------- LoRA
class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update: y = base(x) + (alpha/r) B A x.

    A [r, in] starts as peft's default (Kaiming-uniform, a = sqrt(5)), B [out, r] at zero, so
    before training the layer is exactly its base. ``merge()`` folds B A into one nn.Linear.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        _check_lora(base, r, alpha, dropout)
        self.base = base.requires_grad_(False)  # the pretrained W and bias: frozen
        self.A = nn.Parameter(torch.empty(r, base.in_features, device=base.weight.device,
                                          dtype=base.weight.dtype))  # [r, in]
        self.B = nn.Parameter(torch.zeros(base.out_features, r, device=base.weight.device,
                                          dtype=base.weight.dtype))  # [out, r]
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.scale = alpha / r
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):  # [..., in] -> [..., out]
        update = self.dropout(x) @ self.A.T @ self.B.T  # [..., in] -> [..., r] -> [..., out]
        return self.base(x) + update * self.scale

    @torch.no_grad()
    def merge(self) -> nn.Linear:
        """One plain nn.Linear with weight W + scale B A: the same outputs, no extra work."""
        merged = nn.Linear(self.base.in_features, self.base.out_features,
                           bias=self.base.bias is not None, device=self.base.weight.device,
                           dtype=self.base.weight.dtype)
        merged.weight.copy_(self.base.weight + self.scale * self.B @ self.A)  # [out, in]
        if self.base.bias is not None:
            merged.bias.copy_(self.base.bias)
        return merged

    def extra_repr(self) -> str:
        return f"r={self.A.shape[0]}, scale={self.scale:g}"


def add_lora(model: nn.Module, r: int, alpha: float, target_names: Iterable[str],
             dropout: float = 0.0, trainable: Iterable[str] = ()) -> int:
    """Wrap every ``nn.Linear`` named in ``target_names`` in a ``LoRALinear``; freeze the rest.

    A target matches every module whose full name is it or ends with ``.name`` (``"q_proj"``
    matches ``backbone.blocks.0.attn.q_proj``, as peft's ``target_modules`` do). ``trainable``
    names modules from the top (``"head"`` is the classifier's head, not ``backbone.head``):
    their parameters stay trainable. Returns the number of trainable parameters.
    """
    targets, train = _names(target_names, "target_names"), _names(trainable, "trainable")
    found = [(name, m) for name, m in model.named_modules() if _is_target(name, targets)]
    _check_targets(model, targets, found)
    names = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_modules()}
    unknown = [k for k in train if not any(n == k or n.startswith(k + ".") for n in names)]
    if unknown:
        top = [n for n, _ in model.named_children()]
        raise ValueError(f"trainable names {unknown} are not in the model; its top-level "
                         f"modules are {top}")
    for p in model.parameters():
        p.requires_grad_(False)
    for name, module in found:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoRALinear(module, r, alpha, dropout))  # A, B: trainable
    for name, p in model.named_parameters():
        if any(name == k or name.startswith(k + ".") for k in train):
            p.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _names(names, what: str) -> tuple[str, ...]:
    if isinstance(names, str):
        return (names,)
    names = tuple(names)
    if not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"{what} must be module names (strings), got {names!r}")
    return names


def _is_target(name: str, targets: Sequence[str]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _check_lora(base, r, alpha, dropout) -> None:
    if not isinstance(base, nn.Linear):
        raise TypeError(f"LoRA wraps an nn.Linear, got {type(base).__name__}")
    if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= min(base.in_features,
                                                                           base.out_features):
        raise ValueError(f"r must be an int in 1..{min(base.in_features, base.out_features)} "
                         f"(the smaller side of the {base.out_features} x {base.in_features} "
                         f"weight), got {r!r}")
    if not isinstance(alpha, (int, float)) or alpha <= 0:
        raise ValueError(f"alpha must be a positive number (the update is scaled by alpha / r),"
                         f" got {alpha!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


def _check_targets(model, targets, found) -> None:
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    missing = [t for t in targets if not any(_is_target(n, (t,)) for n, _ in found)]
    if missing:
        short = sorted({n.rpartition(".")[2] for n in linears})
        raise ValueError(f"no module of the model is named {missing}; its nn.Linear layers are "
                         f"called {short}")
    wrong = [n for n, m in found if not isinstance(m, nn.Linear)]
    if wrong:
        raise TypeError(f"LoRA wraps nn.Linear layers only; {wrong[:3]} are not (LoRA added "
                        "twice? a target name that matches a whole block?)")


# --------------------------------------------------------------------------- label budgets
def label_budget_sample(labels, n: int, seed: int, balanced: bool = True) -> np.ndarray:
    """Indices (sorted) of ``n`` training examples, the same for the same ``seed``.

    Nested: for one seed, the draw of n examples holds every draw of fewer, so a curve over
    label budgets (50, 200, 1000, ...) adds examples instead of drawing new ones. With
    ``balanced`` each class gets n // C examples and ``n % C`` classes one more; which
    classes get the extra one is drawn with the seed, once, so the draws stay nested.
    """
    labels = _as_labels(labels)
    classes, which = np.unique(labels, return_inverse=True)  # which[i]: class index of i
    _check_budget(n, len(labels), len(classes), balanced)
    rng = np.random.default_rng(seed)
    if not balanced:
        return np.sort(rng.permutation(len(labels))[:n])
    extra_order = rng.permutation(len(classes))  # classes that get the remainder, in order
    per_class = np.full(len(classes), n // len(classes))
    per_class[extra_order[: n % len(classes)]] += 1
    chosen = []
    for c, name in enumerate(classes.tolist()):
        order = rng.permutation(np.flatnonzero(which == c))  # drawn whatever n is: nested
        if per_class[c] > len(order):
            raise ValueError(f"class {name!r} has {len(order)} examples; a balanced draw of {n} "
                             f"needs {per_class[c]} of it. Use a smaller n, or balanced=False")
        chosen.append(order[: per_class[c]])
    return np.sort(np.concatenate(chosen))


def _as_labels(labels) -> np.ndarray:
    if isinstance(labels, torch.Tensor):
        labels = labels.cpu().numpy()
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"labels must be one label per example (1-D, not empty), got shape "
                         f"{labels.shape}")
    return labels


def _check_budget(n, size, num_classes, balanced) -> None:
    positive_int("n", n)
    if n > size:
        raise ValueError(f"n={n} is more than the {size} examples there are")
    if balanced and n < num_classes:
        raise ValueError(f"a balanced draw needs at least one example of each of the "
                         f"{num_classes} classes: n={n} < {num_classes}; use balanced=False")


# --------------------------------------------------------------------------- masked LM
def mask_tokens(ids: torch.Tensor, mask_id: int, vocab_size: int, generator: torch.Generator,
                p: float = 0.15, special_ids: Iterable[int] = (), pad_id: int | None = None):
    """BERT's corruption: returns ``(inputs, labels)``, both shaped like ``ids``.

    Each position is chosen with probability ``p`` (never a pad or a special id). Of the
    chosen, 80 % become ``mask_id``, 10 % a random id in 0..vocab_size-1, 10 % stay as they
    are. ``labels`` holds the original id at the chosen positions and -100 elsewhere.
    """
    _check_masking(ids, mask_id, vocab_size, generator, p)
    never = torch.tensor([*special_ids, *([] if pad_id is None else [pad_id])], dtype=ids.dtype,
                         device=ids.device)
    u = torch.rand(ids.shape, generator=generator, device=generator.device).to(ids.device)
    how = torch.rand(ids.shape, generator=generator, device=generator.device).to(ids.device)
    chosen = (u < p) & ~torch.isin(ids, never)  # positions to predict
    labels = torch.where(chosen, ids, IGNORE)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator,
                               device=generator.device).to(ids.device)
    inputs = torch.where(chosen & (how < 0.8), mask_id, ids)  # 80 %: <mask>
    inputs = torch.where(chosen & (how >= 0.8) & (how < 0.9), random_ids, inputs)  # 10 %
    return inputs, labels  # the last 10 % of the chosen keep their own id


def mlm_loss(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy at the masked positions (labels != -100) of ``model(inputs)``."""
    logits = model(inputs)  # [B, L, V]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                           ignore_index=IGNORE)


def mlm_pairs(mask_id: int, vocab_size: int, seed: int, p: float = 0.15,
              special_ids: Iterable[int] = (), pad_id: int | None = None):
    """``lm.train``'s ``pairs``: rows [B, W + 1] -> (inputs, labels) [B, W], freshly masked.

    ``lm.train``'s loss ignores -100 (cross-entropy's default), so it trains a masked LM.
    """
    generator = torch.Generator().manual_seed(seed)
    special_ids = tuple(special_ids)

    def pairs(batch):
        return mask_tokens(batch[:, :-1], mask_id, vocab_size, generator, p=p,
                           special_ids=special_ids, pad_id=pad_id)

    return pairs


@torch.no_grad()
def masked_token_nll(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
                     batch_size: int = 128, device="cpu") -> tuple[float, int]:
    """Summed NLL (nats) of the masked tokens of ``inputs`` [N, L] and their number.

    Masked-token perplexity = exp(sum / count). Mask the rows once, with a fixed generator,
    so every checkpoint and every model is scored on the same masked positions.
    """
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(inputs), batch_size):
        x = inputs[start:start + batch_size].to(device)
        y = labels[start:start + batch_size].to(device)
        logits = model(x).float()  # [b, L, V]
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                       ignore_index=IGNORE, reduction="sum"))
        count += int((y != IGNORE).sum())
    return total, count


def _check_masking(ids, mask_id, vocab_size, generator, p) -> None:
    if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dtype == torch.bool:
        got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise TypeError(f"ids must be a tensor of integer token ids, got {got}")
    if not isinstance(generator, torch.Generator):
        raise TypeError("pass a torch.Generator (e.g. torch.Generator().manual_seed(0)), so "
                        f"the masks can be drawn again; got {type(generator).__name__}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p (the share of positions to predict) must be in (0, 1), got {p}")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int (the tokenizer's len), got "
                         f"{vocab_size!r}")
    if not isinstance(mask_id, int) or mask_id < 0:
        raise ValueError(f"mask_id must be an int id, got {mask_id!r}")
    if ids.numel() and bool((ids == mask_id).any()):
        raise ValueError(f"ids already hold mask_id={mask_id}: mask the original ids, once")


# --------------------------------------------------------------------------- texts to rows
def tail_rows(sequences: Sequence[Sequence[int]], length: int, bos_id: int,
              pad_id: int) -> torch.Tensor:
    """LongTensor [N, length]: each text's ``<bos>``, then its last ``length - 1`` ids, padded.

    ``sequences`` are token ids without a ``<bos>`` (``bpe.encode_batch(texts)``). A review
    longer than the window keeps its end, where reviews tend to give their verdict; a shorter
    one is right-padded with ``pad_id``.
    """
    if not isinstance(length, int) or isinstance(length, bool) or length < 2:
        raise ValueError(f"length must be an int >= 2 (<bos> and at least one id), got {length!r}")
    rows = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    for i, ids in enumerate(sequences):
        kept = [bos_id] + list(ids)[-(length - 1):] if len(ids) else None
        if kept is None:
            raise ValueError(f"text {i} has no tokens: drop empty texts first")
        rows[i, : len(kept)] = torch.tensor(kept)
    return rows


# --------------------------------------------------------------------------- training
def trainable_parameters(model: nn.Module) -> int:
    """How many parameters an optimizer would update (``requires_grad``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def predict_logits(model: nn.Module, rows: torch.Tensor, batch_size: int = 256,
                   device="cpu") -> torch.Tensor:
    """The classifier's logits [N, C] for ``rows`` [N, L], in batches, in eval mode (on CPU)."""
    was_training = model.training
    model.eval()
    out = [model(rows[i:i + batch_size].to(device)).float().cpu()
           for i in range(0, len(rows), batch_size)]
    model.train(was_training)
    return torch.cat(out)


@torch.no_grad()
def frozen_features(backbone: nn.Module, rows: torch.Tensor, pad_id: int, pool: str,
                    batch_size: int = 256, device="cpu", desc: str | None = None) -> np.ndarray:
    """The pooled hidden states [N, d] of a frozen backbone: what a linear probe reads."""
    from .runtime import progress

    backbone.eval()
    out = []
    for i in progress(range(0, len(rows), batch_size), desc=desc, disable=desc is None):
        batch = rows[i:i + batch_size].to(device)
        keep = real_positions(batch, pad_id)
        out.append(pool_hidden(backbone.features(batch, keep=keep), keep, pool).float().cpu())
    return torch.cat(out).numpy()


def fit_classifier(model: nn.Module, rows: torch.Tensor, labels: torch.Tensor,
                   val_rows: torch.Tensor, val_labels: torch.Tensor, lr: float, *,
                   batch_size: int = 32, round_examples: int = 512, max_rounds: int = 20,
                   patience: int = 3, weight_decay: float = 0.01, seed: int = 0,
                   device="cpu", desc: str | None = None) -> dict:
    """Train the trainable parameters of a classifier with AdamW until validation stops improving.

    Training goes in rounds of whole epochs, at least ``round_examples`` examples each (50
    labels: 11 epochs a round; 5,000: one), so a small budget is not judged after every few
    steps. After each round the validation loss is measured; training stops after
    ``patience`` rounds without a new best, or at ``max_rounds``, and the weights of the best
    round are put back. Returns the best round, whether it was the cap (``at_cap``), the
    validation loss and accuracy there, the steps, the examples seen and the seconds.
    """
    import time

    from tqdm.auto import tqdm

    _check_fit(rows, labels, val_rows, val_labels, lr, batch_size, max_rounds, patience)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    g = torch.Generator().manual_seed(seed)
    n = len(rows)
    epochs_per_round = max(1, math.ceil(round_examples / n))
    best = dict(val_loss=math.inf, round=0, state=None)
    steps = seen = 0
    start = time.perf_counter()
    history = []
    bar = tqdm(total=max_rounds, desc=desc, disable=desc is None, leave=False, unit="round")
    for r in range(1, max_rounds + 1):
        model.train()
        for _ in range(epochs_per_round):
            order = torch.randperm(n, generator=g)
            for i in range(0, n, batch_size):
                idx = order[i:i + batch_size]
                loss = model.loss(rows[idx].to(device), labels[idx].to(device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                steps, seen = steps + 1, seen + len(idx)
        logits = predict_logits(model, val_rows, device=device)
        val_loss = float(F.cross_entropy(logits, val_labels))
        val_acc = float((logits.argmax(-1) == val_labels).float().mean())
        history.append(dict(round=r, val_loss=val_loss, val_acc=val_acc))
        bar.update(1)
        bar.set_postfix(val_acc=f"{val_acc:.3f}")
        if val_loss < best["val_loss"]:
            best = dict(val_loss=val_loss, val_acc=val_acc, round=r,
                        state={k: v.detach().clone() for k, v in model.state_dict().items()})
        elif r - best["round"] >= patience:
            break
    bar.close()
    if best["state"] is None:
        raise ValueError(f"the validation loss was never finite ({history[-1]['val_loss']}) in "
                         f"{len(history)} round(s): lr={lr} is probably too high")
    model.load_state_dict(best["state"])
    return dict(best_round=best["round"], rounds=len(history), at_cap=best["round"] == max_rounds,
                epochs_per_round=epochs_per_round, val_loss=best["val_loss"],
                val_acc=best["val_acc"], steps=steps, examples_seen=seen,
                seconds=time.perf_counter() - start,
                trained_params=sum(p.numel() for p in params), history=history)


def _check_fit(rows, labels, val_rows, val_labels, lr, batch_size, max_rounds, patience) -> None:
    for name, x, y in (("rows", rows, labels), ("val_rows", val_rows, val_labels)):
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError(f"{name} must be a LongTensor [N, L] (finetune.tail_rows), got "
                             f"{type(x).__name__}")
        if not isinstance(y, torch.Tensor) or y.shape != (len(x),) or y.is_floating_point():
            raise ValueError(f"{name} has {len(x)} rows but its labels are not a LongTensor "
                             f"[{len(x)}]")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    for name, v in (("batch_size", batch_size), ("max_rounds", max_rounds),
                    ("patience", patience)):
        positive_int(name, v)


# --------------------------------------------------------------------------- zero-shot
@torch.no_grad()
def zero_shot_margin(model: nn.Module, rows: torch.Tensor, pad_id: int,
                     endings: tuple[Sequence[int], Sequence[int]], batch_size: int = 128,
                     device="cpu") -> np.ndarray:
    """log p(endings[0] | text) - log p(endings[1] | text) under a causal LM, per row: [N] nats.

    Each row (``<bos>`` + text, right-padded) is cut to leave room for the longer ending
    within the model's context, the ending is appended after its last real token, and the
    log-probabilities of the ending's ids are summed. No labels are used: a positive margin
    means the model prefers the first ending.
    """
    if getattr(model.config, "causal", True) is False:
        raise ValueError("zero_shot_margin scores continuations with a causal LM; an encoder "
                         "(causal=False) does not predict the next token")
    room = model.config.max_len - max(len(e) for e in endings)
    if min(len(e) for e in endings) < 1 or room < 2:
        raise ValueError(f"each ending needs 1 to {model.config.max_len - 2} ids (the model's "
                         f"max_len={model.config.max_len}, less <bos> and one id of text), got "
                         f"lengths {[len(e) for e in endings]}")
    was_training = model.training
    model.eval()  # no dropout: the same margin on every call
    scores = []
    for ending in endings:
        ending = torch.tensor(list(ending), dtype=torch.long)
        out = []
        for i in range(0, len(rows), batch_size):
            batch = rows[i:i + batch_size]
            keep = real_positions(batch, pad_id)
            lengths = keep.sum(1).clamp(max=room)  # [B]
            width = int(lengths.max()) + len(ending)
            x = torch.full((len(batch), width), pad_id, dtype=torch.long)
            for j, n in enumerate(lengths.tolist()):
                end = int(keep[j].sum())  # the text's length; over `room`: <bos> + its tail
                x[j, :n] = torch.cat([batch[j, :1], batch[j, end - n + 1:end]])
                x[j, n:n + len(ending)] = ending
            logp = torch.log_softmax(model(x.to(device)).float(), dim=-1).cpu()  # [B, W, V]
            total = torch.zeros(len(batch))
            for k in range(len(ending)):
                pos = lengths - 1 + k  # the position that predicts the k-th id of the ending
                total += logp[torch.arange(len(batch)), pos, ending[k]]
            out.append(total)
        scores.append(torch.cat(out))
    model.train(was_training)
    return (scores[0] - scores[1]).numpy()


# --------------------------------------------------------------------------- the experiment
HOW = ("full", "lora", "random")


def adapt(backbone: nn.Module, how: str, pad_id: int, pool: str = "last", r: int = 8,
          alpha: float = 16.0, seed: int = 0) -> SequenceClassifier:
    """A sentiment classifier on a copy of ``backbone``, adapted one of three ways.

    ``"full"``: every weight trains. ``"lora"``: the backbone is frozen and LoRA adapters
    (rank ``r``) on each attention's query and value maps train, with the head.
    ``"random"``: the same architecture, re-initialised from ``seed``: what the labels alone
    can teach it. (The fourth way, a linear probe on frozen features, needs no network:
    ``frozen_features`` and a logistic regression.)
    """
    import copy

    if how not in HOW:
        raise ValueError(f"how must be one of {HOW}, got {how!r}")
    torch.manual_seed(seed)  # the head's initial weights (and, for "random", the backbone's)
    if how == "random":  # the architecture only: fresh weights from the seed
        body = type(backbone)(backbone.config)
    else:  # a copy: the caller's backbone never changes
        body = copy.deepcopy(backbone).requires_grad_(True)  # whatever the caller froze
    clf = SequenceClassifier(body, num_classes=2, pad_id=pad_id, pool=pool)
    if how == "lora":
        add_lora(clf, r=r, alpha=alpha, target_names=("q_proj", "v_proj"), trainable=("head",))
    return clf


# The chapter's sizes (chapter 12 and scripts/finetune_search.py read the same ones).
SIZES = {
    "full": dict(length=64, train_reviews=None, val_reviews=300, test_reviews=1500,
                 budgets=(50, 200, 1000), probe_budgets=(50, 200, 1000, 5000, None),
                 draws=(1, 2, 3),
                 fit=dict(batch_size=32, round_examples=64, max_rounds=20, patience=2)),
    "smoke": dict(length=24, train_reviews=300, val_reviews=16, test_reviews=24,
                  budgets=(8, 16), probe_budgets=(8, 16, None), draws=(1, 2),
                  fit=dict(batch_size=8, round_examples=16, max_rounds=2, patience=1)),
}

# The ways of adapting a pretrained model that train a network, by name.
ARMS = {
    "GPT, full": dict(backbone="gpt", how="full", pool="last"),
    "GPT, LoRA": dict(backbone="gpt", how="lora", pool="last"),
    "encoder, full": dict(backbone="encoder", how="full", pool="mean"),
    "GPT, random init": dict(backbone="gpt", how="random", pool="last"),
}


def sentiment_task(sizes: dict, seed: int = 0) -> dict:
    """Chapter 12's data: the shipped GPT and encoder, labelled rows for train, validation, test.

    The splits are the pretraining's own (``text.imdb_lm_splits`` with the seed saved in the
    GPT's file): the label pool is the reviews both models read while pretraining (their text,
    never their labels); validation is a draw from the held-out movies; test is a draw from
    the official test split, which no pretraining read (checked here by text and by id).
    Each row is ``<bos>`` and the last ``length - 1`` BPE ids of a review (``tail_rows``).
    """
    from . import data, text

    gpt_model, saved = data.load_pretrained_gpt()
    encoder, enc_saved = data.load_pretrained_encoder()
    if enc_saved["tokenizer"] != saved["tokenizer"]:
        raise ValueError("the encoder's tokenizer is not the GPT's: re-run "
                         "scripts/pretrain_encoder.py so both read the same ids")
    bpe = text.BPETokenizer.from_json(saved["tokenizer"])
    splits = text.imdb_lm_splits(data.load_imdb("train"), data.load_imdb("test"),
                                 val_fraction=0.1, seed=saved["split_seed"])
    pretrained_on = splits["train"]
    rng = np.random.default_rng(seed)

    def draw(df, n):
        return df if n is None or n >= len(df) else \
            df.iloc[np.sort(rng.choice(len(df), n, replace=False))]

    parts = {"train": draw(splits["train"], sizes["train_reviews"]),
             "val": draw(splits["val"], sizes["val_reviews"]),
             "test": draw(splits["test"], sizes["test_reviews"])}
    test_keys = set(zip(parts["test"]["split"], parts["test"]["id"]))
    assert not test_keys & set(zip(pretrained_on["split"], pretrained_on["id"])), \
        "a test review was in the pretraining data"
    assert not set(parts["test"]["review"]) & set(pretrained_on["review"])
    out = dict(bpe=bpe, gpt=gpt_model, encoder=encoder, pad_id=bpe.pad_id, parts=parts,
               pretrained_reviews=len(pretrained_on))
    for name, df in parts.items():
        out[f"{name}_texts"] = list(df["review"])
        out[f"{name}_rows"] = tail_rows(bpe.encode_batch(list(df["review"])), sizes["length"],
                                        bpe.bos_id, bpe.pad_id)
        out[f"{name}_labels"] = torch.tensor((df["sentiment"] == "positive").to_numpy(),
                                             dtype=torch.long)
    return out
