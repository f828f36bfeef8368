"""The small decoder whose only position information is a learned bias on the relations of a scheme.

Part II asks whether a model generalizes across scales exactly when the cost of its program, counted in the
operators of the position relations it can use (:mod:`lengthgen.model.programs`), stays the same. To test that
account and not the quirks of one encoding, this network sees positions *only* through those relations: each
head adds to its logits, for every relation ``r`` of the scheme, a learned scalar per value of ``r(i, j)``
(zero at initialization; a value never seen in training keeps its zero). Everything else is the book's decoder
(:class:`lengthgen.model.transformer.Transformer`) with ``nope`` and explicit attention: token embedding, causal
pre-LayerNorm blocks, no position embedding, so the causal mask's counting is available to every scheme, as the
programs assume (where the sequence offers a token to count from: queries that see only equal tokens get the same
output whatever the weights, :func:`constant_prefix_gap`).

Relations (per sequence of scale ``n``; ``i`` the query's position, ``j`` the key's, ``id`` the coupled ids):

* ``absolute``: the cell ``(i, j)`` itself, one scalar per cell (APE's relation, as a bias);
* ``offset``: ``i - j`` (T5's bias without buckets);
* ``coupled``: ``id_i - id_j`` (position coupling's offsets);
* ``hint_offset_c``, ``hint_mirror_c``: ``i - j - c n`` and ``i + j - c n``, ``c = 0 .. 3`` (Scale Hint, as we
  read it: relations that know the scale).

**Few operators.** SRC counts the operators (table entries) a program needs, and its conjecture is about the
cheapest program. Gradient descent left alone need not find that one: with many relations it can spread a scale's
answer over many entries that mean something else at the next scale. Two settings make the tables' entries cheap
to move and costly to keep: ``table_scale`` (the bias is that multiple of the tables, so Adam moves logits faster
through a table than through query-key products) and ``table_l1`` (an L1 penalty on the entries, the convex
stand-in for counting them). Both are the same for every scheme and task of a study.

For comparison, ``encoding="fire"`` (with the scheme ``nope``: no tables) adds FIRE's learned bias
(:class:`lengthgen.model.position_zoo.FireBias`, one MLP shared by the layers, as in chapter 11's networks), the closest
published learned relative bias, so that both learned encodings sit in the same network.

Each layer has its own tables. The tables cover every value a sequence of up to ``max_length`` tokens can take, so
nothing is clipped and a value never met in training keeps its zero. ``table_scale`` is the same for every table,
so a scheme with more relations moves a cell's bias through more tables at once: a choice, stated here, that
favours the schemes with more relations early in training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn

from . import programs
from .reasoning_tasks import answer_scores, check_task, reasoning_batch, sequence_length, training_batch
from .seeding import generator
from .transformer import NetworkRunConfig, Transformer, TransformerConfig

SCHEMES: tuple[str, ...] = tuple(programs.SCHEMES)
# The relations each scheme's bias learns: the programs' relations, but ``absolute`` only for ape and lbpe (elsewhere
# it is the counting every scheme can do through the causal mask, not a table of its own), and ``hint_offset_0``
# (``i - j``, the same relation as ``offset``) once.
SCHEME_RELATIONS: dict[str, tuple[str, ...]] = {
    scheme: tuple(r for r in relations if (r != "absolute" or scheme in ("ape", "lbpe")) and r != "hint_offset_0")
    for scheme, relations in programs.SCHEMES.items()
}


# The network's own position encoding: none, or FIRE (Li et al. 2023), the closest published learned relative bias,
# which the chapters compare with the learned relation tables (FIRE runs use the scheme ``nope``: no tables).
OWN_ENCODINGS = ("nope", "fire")
LOWEST, HIGHEST = -4, 2  # every relation value lies in [LOWEST M, HIGHEST M] (M = max_length; see relation_values)
USED_BIAS = 0.5  # logits: a table entry counts as used by table_usage from this magnitude on


def relation_values(relation: str, ids: torch.Tensor, scales: torch.Tensor, max_length: int) -> torch.Tensor:
    """``(batch, length, length)`` index of every cell's value of a relation in the relation's table, for sequences
    with coupled ``ids`` ``(batch, length)`` and scales ``(batch,)``. Nothing is clipped: with positions, ids and
    scales below ``M = max_length``, ``i - j - c n >= -4 M`` and ``i + j - c n < 2 M``, so the value ``v`` sits at
    ``v + 4 M`` of a table of ``6 M + 1`` entries (``absolute``: ``i M + j`` of ``M^2``); a value never met in training
    keeps its initial zero."""
    length = ids.shape[-1]
    if length > max_length:
        raise ValueError(f"a sequence of {length} tokens is longer than max_length {max_length}")
    pos = torch.arange(length, device=ids.device)
    i, j = pos[:, None], pos[None, :]
    if relation == "absolute":
        return (i * max_length + j).expand(ids.shape[0], length, length)
    if relation == "offset":
        value = (i - j).expand(ids.shape[0], length, length)
    elif relation == "coupled":
        value = ids[:, :, None] - ids[:, None, :]
    elif relation.startswith("hint_"):
        _, kind, c = relation.split("_")
        value = (i - j if kind == "offset" else i + j)[None] - int(c) * scales[:, None, None]
    else:
        raise ValueError(f"relation {relation!r} is not one of {sorted({r for s in SCHEME_RELATIONS.values() for r in s})}")
    return value - LOWEST * max_length


def table_size(relation: str, max_length: int) -> int:
    """Entries of a relation's table per (layer, head)."""
    return max_length ** 2 if relation == "absolute" else (HIGHEST - LOWEST) * max_length + 1


class RelationBias(nn.Module):
    """Per layer and head, a learned scalar for every value of every relation of a scheme, times ``scale``; the bias
    of a cell is their sum. Each layer has its own tables (an induction circuit needs an offset in its first layer
    and none in its second)."""

    def __init__(self, relations: tuple[str, ...], layers: int, heads: int, max_length: int, scale: float = 1.0) -> None:
        super().__init__()
        self.relations, self.layers, self.heads = relations, layers, heads
        self.max_length, self.scale = max_length, scale
        self.tables = nn.ParameterDict({r: nn.Parameter(torch.zeros(layers * heads, table_size(r, max_length)))
                                        for r in relations})

    def forward(self, ids: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """``(batch, layers, heads, length, length)`` bias (zero for a scheme without relations)."""
        b, n = ids.shape
        bias = torch.zeros(b, self.layers * self.heads, n, n, device=ids.device)
        for relation, table in self.tables.items():
            bias = bias + table[:, relation_values(relation, ids, scales, self.max_length)].transpose(0, 1)
        return (self.scale * bias).view(b, self.layers, self.heads, n, n)


def _table_value(relation: str, index: int, max_length: int) -> int | tuple[int, int]:
    """The relation's value at a table index (``absolute``: the cell ``(i, j)``)."""
    return divmod(index, max_length) if relation == "absolute" else index + LOWEST * max_length


def table_usage(model: RelationTransformer, used_bias: float = USED_BIAS) -> list[dict]:
    """What the learned tables use, per layer, head and relation: the entries whose bias reaches ``used_bias`` logits
    in magnitude (``used``: how many; ``mass``: their summed magnitude, so that the small entries Adam leaves
    wobbling around zero under the L1 penalty do not count, however many a table has), the share of the
    (layer, head)'s mass, the largest entry in magnitude (``top_value``: the relation's value there; ``top_bias``) and
    the largest positive entry (``peak_value``, ``peak_bias``: what a read attends to). With the L1 penalty, the
    relation that carries a head's mass is the one it selected."""
    bias_module, rows = model.relation_bias, []
    m = bias_module.max_length
    for relation, table in bias_module.tables.items():
        weights = bias_module.scale * table.detach().cpu()
        for k, row in enumerate(weights):
            top, peak = int(row.abs().argmax()), int(row.argmax())
            used = row.abs() >= used_bias
            rows.append(dict(layer=k // bias_module.heads, head=k % bias_module.heads, relation=relation,
                             used=int(used.sum()), mass=float(row.abs()[used].sum()),
                             top_value=_table_value(relation, top, m), top_bias=float(row[top]),
                             peak_value=_table_value(relation, peak, m), peak_bias=float(row[peak])))
    total: dict[tuple[int, int], float] = {}
    for r in rows:
        total[r["layer"], r["head"]] = total.get((r["layer"], r["head"]), 0.0) + r["mass"]
    for r in rows:
        r["share"] = r["mass"] / total[r["layer"], r["head"]] if total[r["layer"], r["head"]] > 0 else 0.0
    return rows


@dataclass(frozen=True)
class RelationNetworkConfig(TransformerConfig):
    """The decoder without a position encoding, plus the learned bias of a scheme's relations."""

    encoding: str = "nope"
    attention: str = "explicit"  # the relation bias is added to the logits
    ape_init_first: bool = False
    scheme: str = "rpe"  # any of SCHEMES
    max_length: int = 128  # the longest sequence evaluated (sizes the tables)
    table_l1: float = 0.0  # weight of the L1 penalty on the relation tables (training mode only)
    table_scale: float = 1.0  # the bias is this times the tables' sum: a larger scale lets Adam move the logits faster


class RelationTransformer(Transformer):
    """Decoder-only transformer whose positions enter only through :class:`RelationBias` (and FIRE's bias, when
    ``encoding`` is ``fire``)."""

    def __init__(self, cfg: RelationNetworkConfig, gen: torch.Generator) -> None:
        if cfg.scheme not in SCHEME_RELATIONS:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {cfg.scheme!r}")
        if cfg.encoding not in OWN_ENCODINGS:
            raise ValueError(f"the relation network's own position encoding must be one of {OWN_ENCODINGS} (FIRE "
                             f"only as the published learned relative bias to compare with), got {cfg.encoding!r}")
        super().__init__(cfg, gen)
        self.relation_bias = RelationBias(SCHEME_RELATIONS[cfg.scheme], cfg.layers, cfg.heads, cfg.max_length,
                                          cfg.table_scale)

    def forward(self, tokens: torch.Tensor, ids: torch.Tensor,  # type: ignore[override]
                scales: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Vocabulary logits ``(batch, length, vocab)`` of tokens with their coupled ``ids`` and ``scales``. In
        training mode with ``table_l1 > 0`` the output is ``(logits, penalty)``, the penalty being ``table_l1`` times
        the tables' summed absolute entries, so that the one training loop (which differentiates ``loss(output)``
        through the stacked replicas' parameters) minimizes it too; :meth:`loss` adds it."""
        n = tokens.shape[-1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
        x = self.embed(tokens)
        bias = self.relation_bias(ids, scales).to(x.dtype).masked_fill(~causal, float("-inf"))
        if self.fire is not None:  # FIRE's bias (shared by the layers) with the causal mask in it
            bias = bias + self.bias(n, x.dtype, tokens.device)[:, None]
        for layer, block in enumerate(self.blocks):
            x = block(x, None, bias[:, layer])
        logits = self.readout(self.ln_out(x))
        if self.training and self.cfg.table_l1 > 0:
            return logits, self.cfg.table_l1 * sum(t.abs().sum() for t in self.relation_bias.tables.values())
        return logits

    def loss(self, output: torch.Tensor | tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the answered positions, plus the tables' L1 penalty when the output carries it."""
        if isinstance(output, tuple):
            logits, penalty = output
            return super().loss(logits, targets) + penalty
        return super().loss(output, targets)


@dataclass(frozen=True)
class RelationRunConfig(NetworkRunConfig):
    """The relation network on a reasoning task, trained on scales ``1 .. train_scale``."""

    model: RelationNetworkConfig = field(default_factory=RelationNetworkConfig)
    task: str = "copy"  # type: ignore[assignment]
    train_scale: int = 8

    network: ClassVar[type[Transformer]] = RelationTransformer  # tables at zero
    init_stream: ClassVar[str] = "relation-network-init"
    data_stream: ClassVar[str] = "relation-network-data"

    def __post_init__(self) -> None:
        check_task(self.task, self.train_scale, self.model.vocab)
        object.__setattr__(self, "train_length", sequence_length(self.task, self.train_scale))
        if self.train_length > self.model.max_length:
            raise ValueError(f"max_length {self.model.max_length} is shorter than a training sequence "
                             f"({self.train_length} tokens)")

    def sample_batch(self, gen: torch.Generator) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """Scales ``1 .. train_scale``; the inputs are ``(tokens, ids, scales)``."""
        tokens, ids, scales, targets = training_batch(self.task, self.batch, self.train_scale, self.vocab, gen)
        return (tokens, ids, scales), targets


@torch.no_grad()
def exact_match(model: RelationTransformer, cfg: RelationRunConfig, scales: list[int], batch: int) -> list[dict]:
    """Per scale: the share of ``batch`` fresh instances answered entirely right (``exact``) and of answers right
    (``token``), from the run's evaluation stream (one per scale)."""
    device = next(model.parameters()).device
    check_task(cfg.task, max(scales), cfg.vocab)
    rows = []
    for n in scales:
        tokens, ids, sizes, targets = reasoning_batch(cfg.task, batch, n, cfg.vocab,
                                                      generator(cfg.seed, f"{cfg.eval_stream}-scale-{n}"))
        predicted = model(tokens.to(device), ids.to(device), sizes.to(device)).argmax(-1).cpu()
        rows.append(dict(scale=n, **answer_scores(predicted, targets), n=batch))
    return rows


@torch.no_grad()
def constant_prefix_gap(model: RelationTransformer, opened: bool) -> float:
    """Largest logit difference between the query of ``z_1`` on an interleaved-parity instance opening ``x_1 = 1``
    and that of ``z_2`` on one opening ``x_1 = x_2 = 1`` (tokens ``1`` and ``1 1 1``, with the layout's coupled ids and
    scales 1 and 2; ``opened``: with the separator in front, as the layout has it). Without the separator the two
    queries see only equal tokens, and a network whose positions enter only through attention logits computes the same
    output at both, whatever its weights, ids and scales (every layer averages equal values): why interleaved parity
    opens with the separator (chapter 12)."""
    device = next(model.parameters()).device
    front = [model.cfg.vocab - 1] if opened else []

    def last_logits(tokens: list[int], scale: int) -> torch.Tensor:
        ids = programs.interleaved_ids(scale)[(0 if opened else 1):][:len(tokens)]
        output = model(torch.tensor([tokens], device=device), torch.as_tensor(ids, device=device)[None],
                       torch.tensor([scale], device=device))
        return (output[0] if isinstance(output, tuple) else output)[0, -1]

    return float((last_logits([*front, 1], 1) - last_logits([*front, 1, 1, 1], 2)).abs().max())
