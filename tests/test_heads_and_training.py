import subprocess
import sys

import pytest
import torch

from lengthgen.analysis.kernels import logit_matrix, toeplitz_deviation
from lengthgen.model.evaluation import length_sweep, metric_positions
from lengthgen.model.heads import ApeHead, HeadRunConfig, LinearRunConfig, RopeHead, offset_features, unit_key
from lengthgen.model.seeding import generator, resolve_device
from lengthgen.model.tasks import sample_tokens, shift_batch
from lengthgen.model.training import RunConfig, train, train_together
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig

SMALL = HeadRunConfig(dim=16, vocab=8, train_length=12, offset=3, batch=16, steps=40, max_length=64)


@pytest.mark.parametrize("kind", ["rope", "ape"])
def test_training_is_bitwise_deterministic(kind):
    a, b = train(SMALL.with_(kind=kind)), train(SMALL.with_(kind=kind))
    assert a.losses == b.losses
    for (name, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert train(SMALL.with_(kind=kind, seed=1)).losses != a.losses


def test_training_learns_the_task():
    cfg = HeadRunConfig(dim=32, vocab=16, train_length=16, offset=3, steps=300, batch=32)
    run = train(cfg)
    sweep = length_sweep(run.model, cfg, [16], 64)
    assert sweep[sweep.metric == "last"].accuracy.iloc[0] > 0.9


def test_ape_rows_beyond_training_length_are_untouched():
    run = train(SMALL.with_(kind="ape"))
    table, init = run.model.table.detach(), run.initial_state["table"]
    assert torch.equal(table[SMALL.train_length :], init[SMALL.train_length :])
    assert not torch.equal(table[: SMALL.train_length], init[: SMALL.train_length])


def test_query_logits_equal_full_forward():
    for head in (SMALL.with_(kind="rope").build_model(), SMALL.with_(kind="ape").build_model()):
        tokens = sample_tokens(5, 30, SMALL.vocab, generator(0, "t"))
        full = head(tokens)
        queries = torch.tensor([0, 7, 29])
        assert torch.allclose(head.query_logits(tokens, queries), full[:, queries], atol=1e-5)


def test_rope_logits_are_toeplitz_but_ape_are_not():
    rope = SMALL.with_(kind="rope").build_model()
    ape = SMALL.with_(kind="ape", table_init_std=1.0).build_model()
    assert toeplitz_deviation(logit_matrix(rope, 64)) < 1e-12
    assert toeplitz_deviation(logit_matrix(ape, 64)) > 1e-2


def test_rope_offset_logits_match_matrix():
    head = SMALL.with_(kind="rope").build_model().double()
    mat = head.position_logits(torch.arange(20), torch.arange(20))
    f = head.offset_logits(torch.arange(20))
    assert torch.allclose(mat[19].flip(0), f, atol=1e-12)


def test_predict_agrees_with_argmax_of_forward_for_heads_and_networks():
    tokens = sample_tokens(8, 20, SMALL.vocab, generator(0, "a"))
    sets = [torch.tensor([19]), torch.arange(3, 12), torch.arange(12, 20)]
    head = SMALL.with_(kind="rope").build_model()
    net = NetworkRunConfig(model=TransformerConfig(vocab=SMALL.vocab, dim=16, heads=2, max_length=64)).build_model()
    for model in (head, net):
        full = model(tokens).argmax(-1)
        for positions, predicted in zip(sets, model.predict(tokens, sets), strict=True):
            assert torch.equal(predicted, full[:, positions])


def test_metric_positions_split_and_thin():
    sets = metric_positions(torch.arange(3, 100), 12, out_of_range_queries=10)
    assert sets["last"].tolist() == [99] and sets["in_range"].tolist() == list(range(3, 12))
    assert len(sets["out_of_range"]) == 10 and sets["out_of_range"][0] == 12 and sets["out_of_range"][-1] == 99
    assert "out_of_range" not in metric_positions(torch.arange(3, 12), 12, None)


def test_length_sweep_counts_and_reproduces():
    cfg = SMALL.with_(kind="rope")
    head = cfg.build_model()
    sweep = length_sweep(head, cfg, [12, 24], 16, out_of_range_queries=5)
    assert set(sweep.metric) == {"last", "in_range", "out_of_range"}
    oor = sweep[(sweep.metric == "out_of_range") & (sweep.length == 24)]
    assert int(oor.n.iloc[0]) == 16 * 5
    assert sweep.equals(length_sweep(head, cfg, [12, 24], 16, out_of_range_queries=5))
    chunked = length_sweep(head, cfg, [12, 24], 16, out_of_range_queries=5, sequence_chunk=5)
    assert (chunked.accuracy - sweep.accuracy).abs().max() < 1e-12  # chunks draw the same sequences


def test_ape_refuses_positions_beyond_its_table():
    head = ApeHead(8, 4, 10, generator(0, "i"))
    with pytest.raises(ValueError, match="max_length"):
        head.attention(11)


def test_rope_head_accepts_custom_frequencies():
    head = RopeHead(8, 4, generator(0, "i"), freqs=torch.ones(4))
    assert torch.equal(head.freqs, torch.ones(4, dtype=torch.float64))


def test_one_training_loop_trains_every_model_kind():
    """Heads, the transformer and the linear kernel all go through ``train``; each learns from its loss."""
    configs = [SMALL.with_(steps=60), NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=32),
                                                       train_length=12, offset=2, steps=30, batch=8),
               LinearRunConfig(dim=16, vocab=8, train_length=12, offset=3, steps=60, batch=16, lr=0.05)]
    for cfg in configs:
        run = train(cfg)
        assert isinstance(run.config, RunConfig) and len(run.losses) == cfg.steps
        assert sum(run.losses[-5:]) < sum(run.losses[:5]), type(cfg).__name__


def test_warmup_schedule_and_optimizers():
    cfg = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=32), train_length=12, offset=2,
                           steps=20, batch=4)
    assert cfg.warmup_fraction == 0.1 and cfg.vocab == 8 and cfg.eval_stream == "eval-shift"
    with pytest.raises(ValueError, match="optimizer must be"):
        train(SMALL.with_(optimizer="lion"))


def test_linear_head_matches_its_definition():
    cfg = LinearRunConfig(dim=8, vocab=5, train_length=10, offset=2)
    model = cfg.build_model()
    with torch.no_grad():
        model.q.copy_(torch.randn(8, generator=generator(0, "q"), dtype=torch.float64))
    tokens, targets = shift_batch(3, 10, 5, 2, generator(1, "t"))
    out = model(tokens)
    f = offset_features(torch.arange(10), cfg.frequency_set(), unit_key(8, 0)) @ model.q
    t = 7
    expected = sum(f[d] * torch.nn.functional.one_hot(tokens[:, t - d], 5).double() for d in range(t + 1))
    assert torch.allclose(out[:, t - 2], expected.detach())
    assert model.loss(out, targets) > 0


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            resolve_device("cuda")


def test_single_query_evaluation_at_8192_is_memory_frugal():
    """Peak resident memory of a one-query evaluation at L = 8192 (batch 256) stays well under 2 GB."""
    code = """
import resource, torch
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.evaluation import length_sweep
cfg = HeadRunConfig(kind="rope")
head = cfg.build_model()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
length_sweep(head, cfg, [8192], 256, out_of_range_queries=1)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before_kb, peak_kb = map(int, out)
    assert peak_kb < 2 * 1024 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    assert peak_kb - before_kb < 512 * 1024, f"evaluation added {(peak_kb - before_kb) / 1024:.0f} MB"


def test_every_tensor_is_made_on_the_device_of_its_inputs():
    """Models and data live on the CPU; the default device is set to ``meta`` while they train and predict.

    A tensor created without ``device=`` (which on a GPU would land on the CPU) is then a meta
    tensor, and combining it with the real ones raises. So the training step, the loss, the
    prediction and the length sweep create every tensor on the device of their inputs.
    """
    configs = [SMALL.with_(kind="rope"), SMALL.with_(kind="ape"), SMALL.with_(kind="rope", rope_convention="interleaved"),
               NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=64), train_length=12, offset=2),
               NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, encoding="ape", max_length=64),
                                train_length=12, offset=2, task="copy"),
               LinearRunConfig(dim=16, vocab=8, train_length=12, offset=3)]
    models = [cfg.build_model() for cfg in configs]
    batches = [cfg.sample_batch(generator(0, "x")) for cfg in configs]
    with torch.device("meta"):
        for cfg, model, (inputs, targets) in zip(configs, models, batches, strict=True):
            loss = model.loss(model(inputs), targets)
            loss.backward()
            assert loss.device.type == "cpu", type(cfg).__name__
            if hasattr(model, "predict"):
                sweep = length_sweep(model, cfg, [12, 30], 4, out_of_range_queries=5)
                assert len(sweep) and sweep.accuracy.between(0, 1).all()


@pytest.mark.parametrize("base", [SMALL.with_(kind="rope"), SMALL.with_(kind="ape"),
                                  NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=32),
                                                   train_length=12, offset=2, steps=15, batch=4),
                                  LinearRunConfig(dim=16, vocab=8, train_length=12, offset=3, steps=40, batch=8, lr=0.05)],
                         ids=["rope head", "ape head", "transformer", "linear kernel"])
def test_replicas_trained_together_match_training_alone(base):
    """Bitwise for the heads and the transformer; the linear kernel (float64) within 1e-12 relative."""
    configs = [base.with_(seed=s) for s in range(3)]
    together = train_together(configs)
    for cfg, stacked in zip(configs, together, strict=True):
        alone = train(cfg)
        assert stacked.config == cfg and stacked.initial_state.keys() == alone.initial_state.keys()
        for (name, a), (_, b) in zip(alone.model.named_parameters(), stacked.model.named_parameters(), strict=True):
            if isinstance(base, LinearRunConfig):
                assert float((a - b).abs().max() / a.abs().max()) < 1e-12, name
            else:
                assert torch.equal(a, b), name
        if not isinstance(base, LinearRunConfig):
            assert stacked.losses == alone.losses


def test_only_runs_that_differ_in_their_seed_train_together():
    with pytest.raises(ValueError, match="differ only in their seed"):
        train_together([SMALL, SMALL.with_(seed=1, lr=0.5)])


def test_seed_stacks_group_by_everything_but_the_seed_and_keep_workers_busy():
    from lengthgen.chapters.common import MAX_STACK, seed_stacks

    configs = [SMALL.with_(seed=s, offset=k) for k in (2, 3) for s in range(12)]
    stacks = seed_stacks(configs, workers=2)
    assert sorted(i for s in stacks for i in s) == list(range(len(configs)))
    assert all(len({configs[i].offset for i in s}) == 1 and len(s) <= MAX_STACK for s in stacks)
    assert len(seed_stacks(configs[:3], workers=2)) == 2  # one group split so both workers train
    assert len(seed_stacks(configs[:1], workers=2)) == 1
