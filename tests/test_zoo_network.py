"""The zoo decoder and the full-sequence tasks: task layouts, every encoding trains in the one loop, the encodings
act where they should, and chapter 11's verdict rules."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from lengthgen.analysis import network_zoo
from lengthgen.analysis.held_out import committed_runs
from lengthgen.book.parameters import ParameterError
from lengthgen.chapters import zoo_networks
from lengthgen.model.seeding import generator
from lengthgen.model.sequence_tasks import sequence_batch, sequence_length, training_batch
from lengthgen.model.tasks import IGNORE
from lengthgen.model.training import train_together
from lengthgen.model.transformer import NETWORK_ZOO
from lengthgen.model.zoo_network import ZooNetworkRunConfig, exact_match, zoo_config


def test_copy_and_reversal_layouts():
    gen = generator(0, "t")
    for task in ("copy", "reversal"):
        tokens, targets = sequence_batch(task, 3, 4, 10, 3, gen)
        assert tokens.shape == (3, 8)
        for row, target in zip(tokens, targets, strict=True):
            content = row[:4]
            assert len(set(content.tolist())) == 4 and int(content.max()) < 9  # distinct, never the separator
            assert int(row[4]) == 9
            answers = content if task == "copy" else content.flip(0)
            assert torch.equal(target[4:], answers) and bool((target[:4] == IGNORE).all())
            assert torch.equal(row[5:], answers[:-1])  # teacher forcing: the answers so far follow the separator


def test_shift_layout_and_training_padding():
    gen = generator(0, "t")
    tokens, targets = sequence_batch("shift", 2, 5, 10, 3, gen)
    assert tokens.shape == (2, 8) and torch.equal(targets[:, 3:], tokens[:, :5])
    tokens, targets = training_batch("copy", 16, 6, 10, 3, gen)
    assert tokens.shape == (16, 12)
    answered = (targets != IGNORE).sum(1)
    assert int(answered.min()) >= 1 and int(answered.max()) <= 6 and len(set(answered.tolist())) > 1


def test_bad_task_settings_fail_loudly():
    with pytest.raises(ValueError, match="vocab - 1"):
        ZooNetworkRunConfig(model=zoo_config(vocab=8), task="copy", train_size=10)
    with pytest.raises(ValueError, match="at least 1"):
        ZooNetworkRunConfig(model=zoo_config(vocab=8), task="shift", train_size=0)
    with pytest.raises(ValueError, match="task must be"):
        sequence_length("sort", 3, 1)


def _config(encoding: str, task: str = "copy", **overrides) -> ZooNetworkRunConfig:
    model = zoo_config(vocab=20, dim=16, heads=2, layers=2, encoding=encoding, max_length=40, random_span=80,
                             fire_threshold=8.0)
    return ZooNetworkRunConfig(**{**dict(model=model, task=task, train_size=4, steps=3, batch=4), **overrides})


@pytest.mark.parametrize("encoding", NETWORK_ZOO)
def test_every_encoding_trains_stacked_and_is_scored(encoding):
    runs = train_together([_config(encoding, seed=s) for s in (0, 1)])
    for run in runs:
        assert len(run.losses) == 3 and all(torch.isfinite(torch.tensor(run.losses)))
        rows = exact_match(run.model, run.config, [4, 16], batch=5)
        assert [r["size"] for r in rows] == [4, 16] and all(0 <= r["exact"] <= r["token"] <= 1 for r in rows)
    alone = train_together([_config(encoding, seed=0)])[0]
    for name, p in alone.initial_state.items():
        assert torch.equal(p, runs[0].initial_state[name]), name
    assert torch.allclose(torch.tensor(alone.losses), torch.tensor(runs[0].losses), rtol=1e-4)


def _logit_change_under_translation(encoding: str) -> float:
    """Largest change of the output logits when every position is moved by 7 (positions passed explicitly)."""
    model = _config(encoding).build_model().double().requires_grad_(False)
    tokens = torch.randint(0, 19, (2, 10), generator=generator(1, "x"))
    base = torch.arange(10)[None].expand(2, 10)
    return float((model(tokens, base) - model(tokens, base + 7)).abs().max())


@pytest.mark.parametrize("encoding", ["rope", "partial_rope", "randomized"])
def test_rotary_encodings_ignore_a_translation_of_the_positions(encoding):
    assert _logit_change_under_translation(encoding) < 1e-10


@pytest.mark.parametrize("encoding", ["nope", "t5", "alibi", "fire"])
def test_bias_encodings_refuse_positions(encoding):
    with pytest.raises(ValueError, match="no use for positions"):
        _logit_change_under_translation(encoding)


@pytest.mark.parametrize("encoding", ["ape", "sinusoidal"])
def test_absolute_encodings_see_a_translation(encoding):
    assert _logit_change_under_translation(encoding) > 1e-6


def test_partial_rotary_leaves_the_other_coordinates_alone():
    cfg = _config("partial_rope").model.with_(dim=32, heads=2, rotary_fraction=0.25)  # head_dim 16: 4 rotated
    assert cfg.rotary_dims() == 4
    model = ZooNetworkRunConfig(model=cfg, train_size=4).build_model()
    cos, sin = model.rotation(torch.arange(5)[None], torch.float64)
    assert cos.shape[-1] == 2  # two planes
    x = torch.randn(1, 2, 5, 16, dtype=torch.float64)
    from lengthgen.model.transformer import rotate_planes

    y = rotate_planes(x, cos, sin)
    assert torch.equal(y[..., 4:], x[..., 4:]) and not torch.allclose(y[..., :4], x[..., :4])
    assert torch.allclose(y[..., :4].norm(dim=-1), x[..., :4].norm(dim=-1))


def test_bias_encodings_put_the_causal_mask_in_their_bias():
    for encoding in ("t5", "alibi", "fire"):
        model = _config(encoding).build_model()
        bias = model.bias(6, torch.float32, torch.device("cpu"))
        assert bias.shape == (1, 2, 6, 6)
        assert bool(torch.isinf(bias[0, :, 0, 1:]).all()) and bool(torch.isfinite(bias[0].tril()).all())
    plain = _config("rope").build_model().bias(6, torch.float32, torch.device("cpu"))
    assert bool((plain[0, 0].tril() == 0).all()) and bool(torch.isinf(plain[0, 0, 0, 1:]).all())


def test_ape_refuses_positions_beyond_its_table():
    model = _config("ape").build_model()
    with pytest.raises(ValueError, match="beyond the APE table"):
        model(torch.zeros(1, 41, dtype=torch.long))


def test_parameters_validate_before_work():
    p = zoo_networks.Parameters
    good = dict(seeds=1, seed_start=700, workers=1, device="cpu", encodings=("rope",), tasks=("copy",), train_size=10,
                size_factor=4, offset=3, vocab=64, dim=64, layers=2, heads=4, steps=10, batch=8, lr=3e-3, eval_batch=8,
                rope_base=10_000.0, rotary_fraction=0.25, random_span=256, committed_sweep="", backend="eager")
    p(**good).check()
    with pytest.raises(ParameterError, match="vocab"):
        p(**{**good, "vocab": 30}).check()
    with pytest.raises(ParameterError, match="heads"):
        p(**{**good, "heads": 3}).check()
    with pytest.raises(ParameterError, match="rotary_fraction"):
        p(**{**good, "rotary_fraction": 0.1}).check()
    with pytest.raises(ParameterError, match="random_span"):
        p(**{**good, "random_span": 40}).check()
    with pytest.raises(ParameterError, match="committed_sweep"):
        p(**{**good, "committed_sweep": "no_such_sweep"}).check()
    with pytest.raises(ParameterError, match="held-out seeds"):
        p(**{**good, "committed_sweep": "zoo_networks", "seeds": 11, "seed_start": 710}).check()
    p(**{**good, "seeds": 11, "seed_start": 710}).check()  # the sweep's own held-out runs read no sweep


def test_every_cell_has_a_registered_prediction():
    for encoding in NETWORK_ZOO:
        for task in ("shift", "copy", "reversal"):
            verdict, reason = network_zoo.PREDICTED_VERDICTS[(encoding, task)]
            assert verdict in ("generalizes", "fails", "not learned") and reason


def test_verdicts_and_claim_values():
    rows = []
    for encoding, task, at_n, beyond in [("ape", "copy", 1.0, 0.95), ("rope", "shift", 1.0, 0.5),
                                         ("t5", "shift", 0.5, 0.0), ("nope", "reversal", 1.0, 0.2)]:
        for size, exact in [(4, at_n), (5, beyond), (6, beyond), (8, beyond)]:
            rows.append(dict(encoding=encoding, task=task, seed=0, size=size, exact=exact))
    verdicts = zoo_networks.verdict_table(pd.DataFrame(rows), 4)
    assert list(verdicts.measured) == ["generalizes", "fails", "not learned", "fails"]
    values = zoo_networks.claim_values(verdicts)
    assert values["absolute_never_generalize"] == 1 and values["relative_shift_generalizes"] == 1
    assert values["relative_carries_past_n"] == 1  # the RoPE run drops to 0.5 at N + 1
    assert values["absolute_collapses_past_n"] == 1 and values["judged_groups"] == 0
    assert values["not_learned_runs"] == 1 and values["registered_cells"] == 2  # ape and rope learned, against registration
    assert values["reversal_generalizes"] == 0 and values["reversal_learned"] == 1 and values["learned_somewhere"] == 0


def _runs(cells: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    """Exact match at sizes 4 (= N), 5, 6 and 8 (= 2N) of runs given as (encoding, task, seed, at N, beyond N)."""
    return pd.DataFrame([dict(encoding=e, task=t, seed=seed, size=size, exact=exact, token=exact)
                         for e, t, seed, at_n, beyond in cells
                         for size, exact in [(4, at_n), (5, beyond), (6, beyond), (8, beyond)]])


def test_held_out_checks_judge_only_the_held_out_shift_runs():
    own = zoo_networks.verdict_table(_runs([("rope", "shift", 710, 1.0, 0.95), ("ape", "shift", 710, 1.0, 0.0)]), 4)
    committed = zoo_networks.verdict_table(_runs([
        ("rope", "shift", 720, 1.0, 0.95), ("t5", "shift", 721, 1.0, 0.95), ("partial_rope", "shift", 722, 1.0, 0.95),
        ("t5", "shift", 722, 1.0, 0.3),  # one relative run of four collapses: share 0.75
        ("rope", "shift", 721, 1.0, 0.95), ("rope", "shift", 722, 1.0, 0.95), ("t5", "shift", 720, 1.0, 0.95),
        ("partial_rope", "shift", 720, 1.0, 0.95),  # eight relative runs, six carry
        ("rope", "shift", 720 + 100, 1.0, 0.0),  # not a held-out seed: not judged
        ("rope", "copy", 800, 1.0, 0.0),  # not shift: not judged
        ("alibi", "shift", 720, 0.5, 0.0),  # not learned: not judged
        ("ape", "shift", 720, 1.0, 0.0), ("ape", "shift", 721, 1.0, 0.95)]), 4)
    values = zoo_networks.claim_values(own, committed)
    assert values["held_out_relative_carries"] == 7 / 8 and values["held_out_relative_runs"] == 8
    assert values["held_out_absolute_carries"] == 1 and values["held_out_judged"] == 0
    assert values["relative_carries_past_n"] == 0 and values["absolute_collapses_past_n"] == 0  # this page's runs only
    few = zoo_networks.claim_values(own, committed[committed.encoding != "ape"])  # no absolute group
    assert few["held_out_judged"] == 1
    alone = zoo_networks.claim_values(own)  # no committed sweep: both groups empty
    assert alone["held_out_judged"] == 2 and alone["held_out_relative_runs"] == 0
    assert alone["held_out_relative_carries"] != alone["held_out_relative_carries"]  # nan, which fails ">="


def test_cell_table_numbers_and_disagreements():
    accuracy = _runs([("rope", "shift", 1, 1.0, 0.95), ("rope", "shift", 2, 1.0, 0.5), ("nope", "shift", 1, 0.2, 0.0)])
    study = zoo_networks.NetworkZooStudy(accuracy, pd.DataFrame(columns=["encoding", "task", "seed", "step", "loss"]),
                                         zoo_networks.verdict_table(accuracy, 4))
    table = network_zoo.cell_table(study.verdicts).set_index("encoding")
    assert table.loc["rope", "agree"] == "1 of 2" and table.loc["rope", "exact_at_2N"] == pytest.approx(0.725)
    assert table.loc["nope", "measured"] == "not learned x1"
    numbers = network_zoo.cell_numbers(study, 4)
    assert numbers["shift_rope_n1"] == "0.72" and numbers["shift_rope_learned"] == "2 of 2"
    assert numbers["shift_nope_learned"] == "0 of 1" and numbers["shift_rope_largest"] == "0.72"
    assert numbers["copy_t5_n1"] == "not run" and network_zoo.cell_numbers(None, 4)["reversal_fire_learned"] == "not run"
    assert network_zoo.disagreements(study.verdicts) == ("rope on shift: registered generalizes, measured fails in 1 "
                                                          "of 2; nope on shift: registered fails, measured not learned "
                                                          "in 1 of 1")
    assert network_zoo.disagreements(study.verdicts.iloc[:0]) == "none"
    assert study.select(("copy",)) is None and study.select(("shift",), (2,)).verdicts.seed.tolist() == [2]


def test_literature_sizes_map_their_lengths_to_the_same_multiples():
    assert zoo_networks.literature_sizes(10, "copy") == {21: 11, 25: 13, 29: 15, 33: 17}
    assert zoo_networks.literature_sizes(20, "reversal") == {21: 21, 23: 23, 25: 25}


def test_the_committed_sweep_is_complete_and_current():
    """Every run the spec of ``data/sweeps/zoo_networks`` lists has a record made by this code and this notebook (a
    change to anything chapter 11 runs makes the sweep stale: regenerate it with ``make sweep``)."""
    runs = committed_runs("zoo_networks", network_zoo.CHAPTER, network_zoo.zoo_study)
    assert runs.missing == 0 and runs.study is not None, f"{runs.missing} of {runs.expected} runs missing or stale"
    assert set(runs.study.accuracy.task) == {"copy", "reversal", "shift"}
    held = runs.study.select(("shift",), zoo_networks.HELD_OUT_SHIFT_SEEDS)
    assert held is not None and set(held.verdicts.encoding) == set(NETWORK_ZOO) and held.verdicts.seed.nunique() >= 3
