"""The relation network: each scheme's bias sees exactly its relations, and nothing else about positions."""

from __future__ import annotations

import pytest
import torch

from lengthgen.model import reasoning_tasks as rt
from lengthgen.model.relation_network import (
    LOWEST,
    SCHEME_RELATIONS,
    RelationBias,
    RelationNetworkConfig,
    RelationRunConfig,
    RelationTransformer,
    constant_prefix_gap,
    exact_match,
    relation_values,
    table_size,
    table_usage,
)
from lengthgen.model.seeding import generator
from lengthgen.model.training import train

SMALL = RelationNetworkConfig(vocab=16, dim=16, heads=2, layers=1, max_length=32)


def test_scheme_relations_are_the_programs_less_the_counting_fallback():
    assert SCHEME_RELATIONS["nope"] == ()
    assert SCHEME_RELATIONS["ape"] == ("absolute",)
    assert SCHEME_RELATIONS["rpe"] == ("offset",)
    assert SCHEME_RELATIONS["coupled"] == ("coupled",)
    assert len(SCHEME_RELATIONS["rpe_scale_hint"]) == 8 and "hint_offset_0" not in SCHEME_RELATIONS["rpe_scale_hint"]
    assert set(SCHEME_RELATIONS["lbpe"]) == {"absolute", "coupled", *SCHEME_RELATIONS["rpe_scale_hint"]}


def test_relation_values_by_hand():
    n, m = 3, 32
    _, ids, scales, _ = rt.reasoning_batch("reversal", 1, n, 16, generator(0, "r"))
    assert ids[0].tolist() == [1, 2, 3, 4, 3, 2]

    def value(relation: str) -> torch.Tensor:
        return relation_values(relation, ids, scales, m)[0] + LOWEST * m

    assert value("offset")[4, 1] == 3 and value("offset")[1, 4] == -3
    assert value("coupled")[4, 1] == 1 and value("coupled")[3, 0] == 3
    # reversal: answer t (asked at n + t - 1) reads n - t, so i + j - 2n = -1 at every answer
    assert [int(value("hint_mirror_2")[n + t - 1, n - t]) for t in range(1, n + 1)] == [-1] * n
    assert value("hint_offset_3")[0, 5] == -5 - 9 and value("hint_mirror_0")[5, 5] == 10
    assert relation_values("absolute", ids, scales, m)[0, 4, 1] == 4 * m + 1
    # the extreme values of sequences of up to m tokens fit the tables, unclipped
    longest = torch.arange(m)[None]
    for relation in ("offset", "coupled", "hint_offset_3", "hint_mirror_0"):
        index = relation_values(relation, longest, torch.tensor([m - 1]), m)
        assert index.min() >= 0 and index.max() < table_size(relation, m)
    with pytest.raises(ValueError, match="longer than max_length"):
        relation_values("offset", ids, scales, 4)
    with pytest.raises(ValueError, match="relation 'diagonal'"):
        relation_values("diagonal", ids, scales, m)


def test_bias_is_zero_at_init_and_sums_the_relations_tables_per_layer():
    m = 8
    bias = RelationBias(("offset", "coupled"), layers=2, heads=2, max_length=m)
    ids = torch.tensor([[1, 2, 0, 1]])
    scales = torch.tensor([2])
    assert torch.equal(bias(ids, scales), torch.zeros(1, 2, 2, 4, 4))
    with torch.no_grad():
        bias.tables["offset"][1, 2 - LOWEST * m] = 5.0  # layer 0, head 1, offset 2
        bias.tables["coupled"][2, 0 - LOWEST * m] = 1.0  # layer 1, head 0, equal ids
    out = bias(ids, scales)
    assert out[0, 0, 1, 2, 0] == 5 and out[0, 0, 1, 3, 1] == 5 and out[0, 0, 1, 3, 2] == 0
    assert out[0, 1, 0, 3, 0] == 1 and out[0, 1, 0, 0, 0] == 1 and out[0, 1, 0, 2, 0] == 0
    assert out[0, 1, 1].abs().sum() == 0 and out[0, 0, 0].abs().sum() == 0


def network(scheme: str) -> RelationTransformer:
    model = RelationTransformer(SMALL.with_(scheme=scheme), generator(0, "init"))
    with torch.no_grad():
        for table in model.relation_bias.tables.values():
            table.normal_(generator=generator(1, "tables"))
    return model


@pytest.mark.parametrize("scheme", sorted(SCHEME_RELATIONS))
def test_each_scheme_sees_only_its_relations(scheme):
    """Changing the coupled ids moves only the schemes with the coupled relation; changing the scale only those with
    the scale-hinted ones."""
    model = network(scheme)
    tokens, ids, scales, _ = rt.reasoning_batch("copy", 2, 4, 16, generator(2, "x"))
    base = model(tokens, ids, scales)
    moved_ids = not torch.allclose(base, model(tokens, ids.flip(-1), scales))
    moved_scale = not torch.allclose(base, model(tokens, ids, scales + 1))
    assert moved_ids == (scheme in ("coupled", "lbpe"))
    assert moved_scale == (scheme in ("rpe_scale_hint", "lbpe"))


def test_the_offset_bias_is_a_function_of_offsets_alone():
    """The offset scheme's bias is Toeplitz: one value per layer, head and offset, wherever the cell is."""
    bias = network("rpe").relation_bias(torch.zeros(1, 6, dtype=torch.long), torch.tensor([3]))[0]
    for d in range(6):
        diagonal = torch.diagonal(bias, offset=-d, dim1=-2, dim2=-1)
        assert torch.equal(diagonal, diagonal[..., :1].expand_as(diagonal))


def test_bad_configurations_fail_loudly():
    with pytest.raises(ValueError, match="scheme must be one of"):
        RelationTransformer(SMALL.with_(scheme="alibi"), generator(0, "init"))
    with pytest.raises(ValueError, match="own position encoding must be one of"):
        RelationTransformer(SMALL.with_(encoding="rope"), generator(0, "init"))
    with pytest.raises(ValueError, match="max_length 32 is shorter"):
        RelationRunConfig(task="addition", train_scale=12, model=SMALL)
    with pytest.raises(ValueError, match="needs vocab"):
        RelationRunConfig(task="copy", train_scale=20, model=SMALL)


def test_a_short_run_learns_something_and_scores_by_scale():
    cfg = RelationRunConfig(task="copy", train_scale=3, steps=150, batch=16, lr=1e-2, model=SMALL.with_(scheme="rpe"))
    run = train(cfg)
    first, last = sum(run.losses[:10]) / 10, sum(run.losses[-10:]) / 10
    assert last < 0.8 * first
    rows = exact_match(run.model, cfg, [1, 2, 3, 6], 32)
    assert [r["scale"] for r in rows] == [1, 2, 3, 6]
    again = exact_match(run.model, cfg, [1, 2, 3, 6], 32)
    assert rows == again  # the evaluation stream is fixed per scale


def test_the_l1_penalty_is_part_of_the_training_loss_only():
    model = network("coupled")
    tokens, ids, scales, targets = rt.reasoning_batch("copy", 2, 3, 16, generator(3, "x"))
    assert isinstance(model(tokens, ids, scales), torch.Tensor)  # no penalty configured: logits in both modes
    penalized = RelationTransformer(SMALL.with_(scheme="coupled", table_l1=0.5, table_scale=3.0), generator(0, "init"))
    penalized.load_state_dict(model.state_dict())
    logits, penalty = penalized(tokens, ids, scales)
    table = penalized.relation_bias.tables["coupled"]
    assert torch.isclose(penalty, 0.5 * table.abs().sum())
    assert torch.isclose(penalized.loss((logits, penalty), targets), penalized.loss(logits, targets) + penalty)
    penalized.eval()
    eval_logits = penalized(tokens, ids, scales)
    assert torch.allclose(eval_logits, logits)
    # the bias is table_scale times the tables: the same tables under scale 1 give other logits
    assert not torch.allclose(eval_logits, model.eval()(tokens, ids, scales))


def test_table_usage_reads_the_selected_relation():
    model = RelationTransformer(SMALL.with_(scheme="lbpe", table_scale=2.0), generator(0, "init"))
    m = SMALL.max_length
    with torch.no_grad():
        model.relation_bias.tables["hint_mirror_2"][1, -1 - LOWEST * m] = 3.0  # head 1: i + j - 2n = -1
        model.relation_bias.tables["offset"][1, 4 - LOWEST * m] = -1.0
        model.relation_bias.tables["absolute"][0, 5 * m + 2] = 0.5  # head 0: the cell (5, 2)
        model.relation_bias.tables["coupled"][0, :] = 0.2  # wobble below the used bias: not counted
    usage = {(r["layer"], r["head"], r["relation"]): r for r in table_usage(model)}
    mirror = usage[0, 1, "hint_mirror_2"]
    assert mirror["top_value"] == -1 and mirror["top_bias"] == 6.0 and mirror["used"] == 1
    assert mirror["share"] == 0.75 and usage[0, 1, "offset"]["share"] == 0.25
    assert usage[0, 0, "absolute"]["top_value"] == (5, 2) and usage[0, 0, "absolute"]["share"] == 1.0
    assert usage[0, 0, "coupled"]["used"] == 0 and usage[0, 0, "coupled"]["mass"] == 0.0


def test_training_with_the_penalty_through_the_stacked_loop_keeps_unseen_values_at_zero():
    """The L1 penalty reaches the replicas' tables through the training loop, and a value never met in training
    (offsets beyond the training length, cells beyond it) keeps exactly its initial zero."""
    base = RelationRunConfig(task="copy", train_scale=3, steps=40, batch=8, lr=1e-2,
                             model=SMALL.with_(scheme="lbpe", table_scale=5.0))
    plain, penalized = train(base), train(base.with_(model=base.model.with_(table_l1=0.05)))
    l1 = {name: sum(t.abs().sum() for t in run.model.relation_bias.tables.values())
          for name, run in (("plain", plain), ("penalized", penalized))}
    assert l1["penalized"] < 0.5 * l1["plain"]
    assert penalized.losses[0] == pytest.approx(plain.losses[0])  # tables at zero: no penalty at the first step
    tables = plain.model.relation_bias.tables
    trained = base.train_length
    m = SMALL.max_length
    assert tables["offset"][:, trained - LOWEST * m:].abs().sum() == 0
    assert tables["offset"][:, - LOWEST * m: trained - LOWEST * m].abs().sum() > 0
    absolute = tables["absolute"].view(-1, m, m)
    assert absolute[:, trained:, :].abs().sum() == 0 and absolute[:, :trained, :trained].abs().sum() > 0


def test_padding_never_changes_an_instance():
    model = network("lbpe").eval()
    tokens, ids, scales, targets = rt.reasoning_batch("addition", 3, [2, 4, 1], 16, generator(6, "pad"), length=20)
    other = tokens.clone()
    for row, n in enumerate(scales.tolist()):
        other[row, rt.sequence_length("addition", n):] = 0
    with torch.no_grad():
        a, b = model(tokens, ids, scales), model(other, ids, scales)
    for row, n in enumerate(scales.tolist()):
        width = rt.sequence_length("addition", n)
        assert torch.equal(a[row, :width], b[row, :width]) and not torch.equal(a[row], b[row])


def test_answer_scores_by_hand():
    targets = torch.tensor([[-100, 1, 2], [-100, 3, 4]])
    predicted = torch.tensor([[9, 1, 2], [9, 3, 0]])
    assert rt.answer_scores(predicted, targets) == dict(exact=0.5, token=0.75)


def test_fire_adds_its_learned_bias_and_stays_causal():
    cfg = SMALL.with_(scheme="nope", encoding="fire", fire_threshold=9.0)
    model = RelationTransformer(cfg, generator(0, "init")).eval()
    tokens, ids, scales, _ = rt.reasoning_batch("copy", 2, 4, cfg.vocab, generator(1, "data"))
    logits = model(tokens, ids, scales)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % cfg.vocab
    assert torch.equal(model(changed, ids, scales)[:, :-1], logits[:, :-1])  # the last token reaches no earlier logit
    with torch.no_grad():
        model.fire.mlp[2].weight.mul_(20.0)  # a steeper FIRE bias over the offsets moves the logits
    assert not torch.allclose(model(tokens, ids, scales), logits)
    assert model.relation_bias.tables.keys() == set()  # the scheme nope: no tables of its own


@pytest.mark.parametrize("scheme", [*SCHEME_RELATIONS, "fire"])
def test_without_an_opening_token_a_constant_prefix_hides_the_position(scheme):
    """Proof check of why interleaved parity opens with the separator (chapter 12): in a network whose positions enter
    only through attention logits, the output at the last of the tokens ``1 1 1`` equals the output at the one token
    ``1``, whatever the weights (every layer averages equal values), so ``z_2`` on instances opening ``1 1`` must be
    answered as ``z_1``. With the separator in front the two queries see different values, and (with the same random
    weights) different outputs: the check can fail."""
    cfg = SMALL.with_(layers=2, scheme="nope", encoding="fire", fire_threshold=9.0) if scheme == "fire" else \
        SMALL.with_(layers=2, scheme=scheme)
    model = RelationTransformer(cfg, generator(0, "init")).eval()
    gen = generator(1, "tables")
    with torch.no_grad():
        for table in model.relation_bias.tables.values():  # tables start at zero: give every relation a say
            table.copy_(torch.randn(table.shape, generator=gen))
    assert constant_prefix_gap(model, opened=False) < 1e-5
    assert constant_prefix_gap(model, opened=True) > 1e-3
