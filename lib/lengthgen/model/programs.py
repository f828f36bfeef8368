"""Step-by-step programs of reasoning tasks, and their Sequential Representation Complexity (SRC).

The second paper proposes SRC for transformers and conjectures that length generalization is possible if and
only if SRC stays invariant across scales; its definition is not available to us, so this is our
reconstruction, in the terms of chapter 8 (a position relation maps each (query, key) cell to a key; cells with
one key share one *operator*).

**Programs.** A program of a task lists the attention reads one step of the task needs, written once for every
scale ``n``. Each read is a *head*:

* a **position head** says which earlier positions each answer's query reads (:class:`Reads`: rows, a 0/1 target
  map, the coupled position ids);
* a **content head** is a read decided by token identity (a match of the query's token against the keys', or
  of a flag an earlier head wrote, such as "has no previous token" or "comes after the separator"), the query's
  own token (the residual stream carries it), or a uniform read of every earlier token (equal logits give the
  mean). It uses no position relation and costs nothing.

**Cost of a position head under a relation.** At each scale, the set of keys its read cells use; if a key is
read in one cell and ignored in another of the same scale, no operator table of the relation represents the
head there (``inf``). Over scales ``1 .. n`` the cost is the size of the union of those sets: operators a model
trained up to ``N`` has fixed are reused, new ones are not trained. One operator may be read at one scale and
ignored at another, because every model can know the scale and its absolute position: the causal mask lets a
first layer count tokens (Kazemnejad et al. 2023 show NoPE does), given a first token unlike the rest (every
layout here has one: the separator opens interleaved parity for that reason). So every scheme has the ``absolute`` relation
(one key per (query, key) cell) besides its own; NoPE has nothing else and therefore, in this account, the
verdicts of APE.

**Schemes** (:data:`SCHEMES`): ``ape`` and ``nope`` (absolute only), ``rpe`` (offsets ``i - j``: T5, ALiBi and RoPE
alike), ``coupled`` (offsets of *coupled* position ids, Cho et al. 2024's position coupling, where an answer
and its sources share an id; we assume their random id offsets in training, so that ids beyond the trained ones
act as offsets do), ``rpe_scale_hint`` (offsets, plus relations that know the scale ``n``: ``i - j - c n``
and ``i + j - c n`` for ``c = 0 .. 3``, our reading of Scale Hint), and ``lbpe`` (a learned position-relation
encoding that may use every relation above, absolute ones included, and learns which).

**SRC.** ``SRC_S(task, n)`` is the summed cost, over the position heads, of the program and relations with the
least cost at the largest scale considered (every head takes its cheapest relation of the scheme). Since the
conjecture speaks of what is *possible*, the cheapest program is the one that counts, whether or not training
finds it. The conjecture, in these terms: trained on scales up to ``N``, a model can generalize to ``n > N``
exactly when ``SRC(n) == SRC(N)``. The programs are ours: the minimum is over those listed here.

**Layouts.** Inputs ``x_1 .. x_n`` at positions ``0 .. n - 1``, a separator at ``n``, then the answers fed back
(teacher forcing): answer ``t`` is asked at position ``n + t - 1``, the separator's for ``t = 1``. Coupled ids:
``x_t`` has id ``t``; an answer has the id of its source, and the separator the id before the first answer's.
Interleaved parity and addition have their own layouts (see their builders). Coupling ``x_t`` with ``z_t`` in
interleaved parity leaves ``z_(t-1)`` and ``x_(t-1)`` one id, so the coupled scheme cannot single out the read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import pola

HINT_MULTIPLES = (0, 1, 2, 3)  # c of the scale-hint relations i - j - c n and i + j - c n
SCHEMES: dict[str, tuple[str, ...]] = {
    "ape": ("absolute",),
    "nope": ("absolute",),  # by counting through the causal mask: the verdicts of APE
    "rpe": ("absolute", "offset"),
    "coupled": ("absolute", "coupled"),
    "rpe_scale_hint": ("absolute", "offset", *(f"hint_{kind}_{c}" for kind in ("offset", "mirror")
                                               for c in HINT_MULTIPLES)),
}
# A learned position-relation encoding (LBPE) may use any relation above: its SRC is the least over all of them.
SCHEMES["lbpe"] = tuple(dict.fromkeys(r for relations in SCHEMES.values() for r in relations))


@dataclass(frozen=True)
class Reads:
    """What one position head reads at one scale: ``target[i, j] = 1`` where query ``i`` reads key ``j``."""

    scale: int
    length: int
    rows: np.ndarray  # the queries that read
    target: np.ndarray  # (length, length), zero above the diagonal
    ids: np.ndarray  # (length,) coupled position ids


def _check_scale(n: int) -> None:
    if n < 1:
        raise ValueError(f"scale n must be at least 1, got {n}")


def reads(n: int, length: int, ids: np.ndarray, pairs: list[tuple[int, list[int]]]) -> Reads:
    """A head's reads at scale ``n``: ``pairs`` lists each query with the keys it reads."""
    target = np.zeros((length, length))
    for row, sources in pairs:
        if any(j >= row or j < 0 for j in sources):
            raise ValueError(f"query {row} cannot read {sources}: keys must be earlier positions")
        target[row, sources] = 1.0
    return Reads(n, length, np.array([row for row, _ in pairs], dtype=int), target, ids)


def relation_keys(relation: str, r: Reads) -> np.ndarray:
    """The key of every cell ``(i, j)`` under a relation, as an ``(length, length)`` integer array (``absolute`` and
    ``offset`` are chapter 8's ``ape`` and ``rpe``)."""
    inst = pola.Instance(r.scale, r.length, r.rows, r.target, np.full(r.length, -1))
    if relation == "absolute":
        return pola.relation_keys("ape", inst)
    if relation == "offset":
        return pola.relation_keys("rpe", inst)
    i, j = np.indices((r.length, r.length))
    if relation == "coupled":
        return r.ids[i] - r.ids[j]
    if relation.startswith("hint_"):
        _, kind, c = relation.split("_")
        return (i - j if kind == "offset" else i + j) - int(c) * r.scale
    raise ValueError(f"relation {relation!r} is not one of {sorted({x for s in SCHEMES.values() for x in s})}")


def scale_operators(relation: str, r: Reads) -> set[int] | None:
    """The keys the head's read cells use at one scale (the cells of its rows strictly before the query: the query's
    own token reaches it through the residual stream whatever the head does), or None when a key is read in one cell
    and ignored in another: no operator table of the relation represents the head at that scale."""
    keys = relation_keys(relation, r)
    read, ignored = set(), set()
    for row in r.rows:
        row_keys, row_target = keys[row, :row], r.target[row, :row]
        read |= set(row_keys[row_target != 0].tolist())
        ignored |= set(row_keys[row_target == 0].tolist())
    return None if read & ignored else read


@dataclass(frozen=True)
class Head:
    """One read of a program at every scale: ``build(n)`` gives its reads (position heads), or ``None`` (content)."""

    name: str
    build: Callable[[int], Reads] | None


def _check_scales(scales: list[int]) -> None:
    if not scales or list(scales) != list(range(1, len(scales) + 1)):
        raise ValueError(f"scales must be 1, 2, .., n (every scale up to the largest), got {scales}")


def head_cost(head: Head, scheme: str, scales: list[int]) -> tuple[list[float], str]:
    """The head's cost at every scale ``1 .. n`` under its cheapest relation of the scheme (cheapest at the largest
    scale; 0 for a content head), and that relation."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r} is not one of {sorted(SCHEMES)}")
    _check_scales(scales)
    if head.build is None:
        return [0.0] * len(scales), "content"
    built = [head.build(n) for n in scales]
    curves = {}
    for relation in SCHEMES[scheme]:
        used: set[int] | None = set()
        curve = []
        for r in built:
            at_n = scale_operators(relation, r) if len(r.rows) else set()
            used = None if used is None or at_n is None else used | at_n
            curve.append(np.inf if used is None else float(len(used)))
        curves[relation] = curve
    best = min(curves, key=lambda rel: (curves[rel][-1], curves[rel]))
    return curves[best], best


def src_curve(task: str, scheme: str, scales: list[int]) -> tuple[list[float], str, dict[str, str]]:
    """``SRC(n)`` at every scale ``1 .. n``, the program it is the cost of (the cheapest at the largest scale: a
    model runs one program at every scale), and the relation each of its position heads uses."""
    if task not in PROGRAMS:
        raise ValueError(f"task {task!r} is not one of {sorted(PROGRAMS)}")
    _check_scales(scales)
    totals, relations = {}, {}
    for name, heads in PROGRAMS[task].items():
        costs = [head_cost(h, scheme, scales) for h in heads]
        totals[name] = np.sum([c for c, _ in costs], axis=0)
        relations[name] = {h.name: rel for h, (_, rel) in zip(heads, costs, strict=True) if h.build is not None}
    best = min(totals, key=lambda name: (totals[name][-1], tuple(totals[name]), name))
    return [float(c) for c in totals[best]], best, relations[best]


def src_verdict(at_train: float, at_largest: float) -> str:
    """What the conjecture predicts: ``generalizes`` when SRC is the same at the largest scale as at the training
    scale, ``fails`` when it grew (or when no table represents the program at the training scale)."""
    return "generalizes" if np.isfinite(at_train) and at_largest == at_train else "fails"


# ---- the tasks' layouts and heads ----------------------------------------------------------------------------------

def separated_ids(n: int, sources_of_answer: Callable[[int], int]) -> np.ndarray:
    """Coupled ids of the separated layout: ``x_t`` -> ``t``; answer ``t`` -> its source's id; the separator, where
    answer 1 is asked, continues the answers' ids backwards (0 for copy, ``n + 1`` for reversal)."""
    ids = np.zeros(2 * n + 1, dtype=int)
    ids[:n] = np.arange(1, n + 1)
    ids[n:] = [sources_of_answer(t) + 1 for t in range(0, n + 1)]
    return ids


def answer_read(source: Callable[[int, int], int]) -> Callable[[int], Reads]:
    """The head in which answer ``t = 1 .. n`` (asked at ``n + t - 1``) reads input position ``source(n, t)``."""
    def build(n: int) -> Reads:
        _check_scale(n)
        ids = separated_ids(n, lambda t: source(n, t))
        return reads(n, 2 * n + 1, ids, [(n + t - 1, [source(n, t)]) for t in range(1, n + 1)])
    return build


def previous_token(n: int) -> Reads:
    """The previous-token head of an induction circuit: every position ``j = 1 .. n`` of the input and the separator
    reads ``j - 1`` (it writes, at each position, the token before it; position 0 learns it has none)."""
    _check_scale(n)
    return reads(n, 2 * n + 1, separated_ids(n, lambda t: t - 1), [(j, [j - 1]) for j in range(1, n + 1)])


def interleaved_ids(n: int) -> np.ndarray:
    """Coupled ids of interleaved parity ``SEP x_1 z_1 x_2 z_2 ..``: the separator has the id 0, ``x_t`` and ``z_t``
    the id ``t``."""
    return np.concatenate([[0], np.repeat(np.arange(1, n + 1), 2)])


def interleaved_previous(n: int) -> Reads:
    """Parity with the chain of thought interleaved, ``SEP x_1 z_1 x_2 z_2 ..`` (``x_t`` at ``2t - 1``, ``z_t`` at
    ``2t``, both with id ``t``; the separator at 0 stands for ``z_0 = 0``): ``z_t`` is asked at ``x_t``'s position and
    reads ``z_{t-1}`` one back; ``x_t`` is the query's own token."""
    _check_scale(n)
    return reads(n, 2 * n + 1, interleaved_ids(n), [(2 * t - 1, [2 * t - 2]) for t in range(1, n + 1)])


def addition_ids(n: int) -> np.ndarray:
    """``a_1 .. a_n + b_1 .. b_n = s_1 .. s_{n+1}``, least significant digit first: ``a_t`` at ``t - 1``, ``b_t`` at
    ``n + t``, ``=`` at ``2n + 1``, ``s_t`` at ``2n + 1 + t``; digits of one significance share the id ``t``."""
    ids = np.zeros(3 * n + 3, dtype=int)
    ids[:n] = ids[n + 1: 2 * n + 1] = np.arange(1, n + 1)
    ids[2 * n + 2:] = np.arange(1, n + 2)
    return ids


def addition_read(operands: str, lag: int) -> Callable[[int], Reads]:
    """Digit ``s_t`` (asked at ``2n + t``, ``t = 1 .. n + 1``) reads digit ``t - lag`` of the operands (``"a"``,
    ``"b"`` or ``"ab"``), where it exists. With ``lag = 1`` these fix, with the query's own token ``s_{t-1}``, the
    carry into digit ``t``."""
    def build(n: int) -> Reads:
        _check_scale(n)
        pairs = []
        for t in range(1, n + 2):
            d = t - lag
            if not 1 <= d <= n:
                continue
            row = 2 * n + t
            sources = ([d - 1] if "a" in operands else []) + ([n + d] if "b" in operands else [])
            pairs.append((row, sources))
        return reads(n, 3 * n + 3, addition_ids(n), pairs)
    return build


_DIRECT_COPY = Head("x_t", answer_read(lambda n, t: t - 1))
_DIRECT_REVERSE = Head("x_(n+1-t)", answer_read(lambda n, t: n - t))
# Induction: a previous-token head, then a content match of the query's token against "the token before" each
# position (the first answer matches "no token before"); a flag "after the separator" (a uniform read) keeps the
# match off the answers already written. It needs distinct tokens, or the match is ambiguous.
_INDUCTION = (Head("previous token", previous_token), Head("content match", None),
              Head("after the separator", None))
_UNIFORM = (Head("uniform over the input", None),)

# task -> {program: heads}
PROGRAMS: dict[str, dict[str, tuple[Head, ...]]] = {
    "copy": {"direct": (_DIRECT_COPY,), "induction": _INDUCTION},
    "copy_repeat": {"direct": (_DIRECT_COPY,)},
    "reversal": {"direct": (_DIRECT_REVERSE,), "induction": _INDUCTION},
    "reversal_repeat": {"direct": (_DIRECT_REVERSE,)},
    "parity_cot": {"direct": (_DIRECT_COPY,)},  # z_t = z_(t-1) xor x_t: reads x_t; z_(t-1) is the query's own token
    "parity_cot_interleaved": {"direct": (Head("z_(t-1)", interleaved_previous),)},
    "addition": {"by operand": (Head("a_t", addition_read("a", 0)), Head("b_t", addition_read("b", 0)),
                                Head("a_(t-1)", addition_read("a", 1)), Head("b_(t-1)", addition_read("b", 1))),
                 "by digit": (Head("a_t, b_t", addition_read("ab", 0)), Head("a_(t-1), b_(t-1)", addition_read("ab", 1)))},
    "mode": {"vote": _UNIFORM},
    "parity": {"vote": _UNIFORM},  # one answer: the parity of the count of ones
}
TASKS: dict[str, str] = {
    "copy": "x_1 .. x_n, separator, x_1 .. x_n (distinct tokens)",
    "copy_repeat": "copy with tokens that may repeat",
    "reversal": "x_1 .. x_n, separator, x_n .. x_1 (distinct tokens)",
    "reversal_repeat": "reversal with tokens that may repeat",
    "parity_cot": "bits x_1 .. x_n, separator, z_1 .. z_n with z_t = z_(t-1) xor x_t (its reads are copy_repeat's)",
    "parity_cot_interleaved": "separator, x_1 z_1 x_2 z_2 .. with z_t = z_(t-1) xor x_t (z_0 = 0 at the separator)",
    "addition": "a + b = s, n digits each, least significant first",
    "mode": "x_1 .. x_n, separator, the most frequent token",
    "parity": "bits x_1 .. x_n, separator, their parity (no chain of thought)",
}
# What Zhou et al. (2023) report, or their RASP-L conjecture predicts, for the tasks they share with us (our
# reading; the others are not in their study). Their addition is in the standard format, without index hints.
RASP_L: dict[str, str] = {"copy": "generalizes", "copy_repeat": "fails", "addition": "fails", "mode": "generalizes",
                          "parity": "fails"}
# Registered with this module, before any model is trained on these tasks: the verdicts of :func:`src_table` (the
# same at every training scale N >= 3 and factor >= 2, a test checks) are the conjecture's predictions, and the test
# holds the whole table. What could contradict them is in the rpe, coupled, scale-hint and lbpe columns; the ape and
# nope columns fail wherever a position head is needed, by construction of the absolute relation. The lbpe column
# (added later, still before any training on these tasks) is "generalizes" throughout: it has every relation. Parity is a
# disagreement expected in advance: its one read is uniform, so SRC is 0 under every scheme, while Zhou et al. find
# it does not generalize; what this account leaves out there is the readout (the parity of a count that grows with n).


def src_table(train_scale: int, scale_factor: int) -> list[dict]:
    """``SRC(N)``, ``SRC(factor N)``, the program attaining it and the verdict of every (task, scheme) cell, with
    Zhou et al.'s verdict where they have one."""
    if train_scale < 1 or scale_factor < 2:
        raise ValueError(f"need train_scale >= 1 and scale_factor >= 2, got {train_scale}, {scale_factor}")
    scales = list(range(1, scale_factor * train_scale + 1))
    rows = []
    for task in PROGRAMS:
        for scheme in SCHEMES:
            curve, program, relations = src_curve(task, scheme, scales)
            at_train, at_largest = curve[train_scale - 1], curve[-1]
            rows.append(dict(task=task, scheme=scheme, src_train=at_train, src_largest=at_largest, program=program,
                             relations=", ".join(f"{h}: {r}" for h, r in relations.items()),
                             predicted=src_verdict(at_train, at_largest), rasp_l=RASP_L.get(task, "")))
    return rows


def invariant_reads(task: str, scheme: str, train_scale: int, scale_factor: int) -> dict[str, set[int]]:
    """For every relation of the scheme under which some position head of some program of the task has the same
    finite cost at ``scale_factor * train_scale`` as at ``train_scale``, the keys those heads read at the training
    scales: the (relation, value) pairs a model that runs an SRC-invariant program must put its bias on. Empty for a
    task without position heads (mode, parity)."""
    if task not in PROGRAMS:
        raise ValueError(f"task {task!r} is not one of {sorted(PROGRAMS)}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r} is not one of {sorted(SCHEMES)}")
    if train_scale < 1 or scale_factor < 2:
        raise ValueError(f"need train_scale >= 1 and scale_factor >= 2, got {train_scale}, {scale_factor}")
    needed: dict[str, set[int]] = {}
    for heads in PROGRAMS[task].values():
        for head in heads:
            if head.build is None:
                continue
            built = [head.build(n) for n in range(1, scale_factor * train_scale + 1)]
            for relation in SCHEMES[scheme]:
                per_scale = [scale_operators(relation, r) if len(r.rows) else set() for r in built]
                if any(keys is None for keys in per_scale):
                    continue
                trained = set().union(*per_scale[:train_scale])
                if set().union(*per_scale) == trained:
                    needed.setdefault(relation, set()).update(trained)
    return needed


def has_position_head(task: str) -> bool:
    """Whether some program of the task reads by position (mode and parity read uniformly)."""
    return any(h.build is not None for heads in PROGRAMS[task].values() for h in heads)
