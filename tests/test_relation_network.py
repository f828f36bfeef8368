"""The relation network: each scheme's bias sees exactly its relations, and nothing else about positions."""

from __future__ import annotations

import pytest
import torch

from lengthgen.model import reasoning_tasks as rt
from lengthgen.model.relation_network import (
    SCHEME_RELATIONS,
    RelationBias,
    RelationNetworkConfig,
    RelationRunConfig,
    RelationTransformer,
    exact_match,
    relation_values,
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
    n = 3
    _, ids, scales, _ = rt.reasoning_batch("reversal", 1, n, 16, generator(0, "r"))
    m = 32
    offset = relation_values("offset", ids, scales, m)[0] - 2 * m
    assert offset[4, 1] == 3 and offset[1, 4] == -3
    coupled = relation_values("coupled", ids, scales, m)[0] - 2 * m
    assert coupled[4, 1] == ids[0, 4] - ids[0, 1]
    mirror = relation_values("hint_mirror_2", ids, scales, m)[0] - 2 * m
    # reversal: answer t (asked at n + t - 1) reads n - t, so i + j - 2n = -1 at every answer
    assert [int(mirror[n + t - 1, n - t]) for t in range(1, n + 1)] == [-1] * n
    absolute = relation_values("absolute", ids, scales, m)[0]
    assert absolute[4, 1] == 4 * m + 1
    with pytest.raises(ValueError, match="longer than max_length"):
        relation_values("offset", ids, scales, 4)
    with pytest.raises(ValueError, match="relation 'diagonal'"):
        relation_values("diagonal", ids, scales, m)


def test_bias_is_zero_at_init_and_sums_the_relations_tables():
    bias = RelationBias(("offset", "coupled"), heads=2, max_length=8)
    ids = torch.tensor([[1, 2, 0, 1]])
    scales = torch.tensor([2])
    assert torch.equal(bias(ids, scales), torch.zeros(1, 2, 4, 4))
    with torch.no_grad():
        bias.tables["offset"][1, 2 * 8 + 2] = 5.0  # head 1, offset 2
        bias.tables["coupled"][0, 2 * 8 + 0] = 1.0  # head 0, equal ids
    out = bias(ids, scales)
    assert out.shape == (1, 2, 4, 4)
    assert out[0, 1, 2, 0] == 5 and out[0, 1, 3, 1] == 5 and out[0, 1, 3, 2] == 0
    assert out[0, 0, 3, 0] == 1 and out[0, 0, 0, 0] == 1 and out[0, 0, 2, 0] == 0


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
    """The offset scheme's bias is Toeplitz: one value per head and offset, wherever the cell is."""
    bias = network("rpe").relation_bias(torch.zeros(1, 6, dtype=torch.long), torch.tensor([3]))[0]
    for d in range(6):
        diagonal = torch.diagonal(bias, offset=-d, dim1=-2, dim2=-1)
        assert torch.equal(diagonal, diagonal[:, :1].expand_as(diagonal))


def test_bad_configurations_fail_loudly():
    with pytest.raises(ValueError, match="scheme must be one of"):
        RelationTransformer(SMALL.with_(scheme="alibi"), generator(0, "init"))
    with pytest.raises(ValueError, match="encoding must be 'nope'"):
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
    assert all(0 <= r["exact"] <= 1 and 0 <= r["token"] <= 1 for r in rows)
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
        model.relation_bias.tables["hint_mirror_2"][1, 2 * m - 1] = 3.0  # head 1: i + j - 2n = -1
        model.relation_bias.tables["offset"][1, 2 * m + 4] = -1.0
        model.relation_bias.tables["absolute"][0, 5 * m + 2] = 0.5  # head 0: the cell (5, 2)
    usage = {(r["head"], r["relation"]): r for r in table_usage(model)}
    assert usage[1, "hint_mirror_2"]["top_value"] == -1 and usage[1, "hint_mirror_2"]["top_bias"] == 6.0
    assert usage[1, "hint_mirror_2"]["share"] == 0.75 and usage[1, "offset"]["share"] == 0.25
    assert usage[0, "absolute"]["top_value"] == (5, 2) and usage[0, "absolute"]["share"] == 1.0
    assert usage[1, "coupled"]["mass"] == 0.0
