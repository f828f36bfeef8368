import math

import numpy as np
import pytest
import torch

from lengthgen.chapters.transfer import (
    Parameters,
    content_averaged_kernels,
    head_target_mass,
    measure_network,
    shift_deviation,
)
from lengthgen.chapters.transfer.masking import (
    first_collapse,
    forward_with_masked_offsets,
    hijacking_offsets,
    last_query_masses,
    mask_sets,
    masking_test,
    masking_values,
    masking_verdicts,
)
from lengthgen.chapters.transfer.registered import MASK_CONDITIONS
from lengthgen.model.encodings import identifiable_base, rope_frequencies, rotation_matrix
from lengthgen.model.evaluation import length_sweep
from lengthgen.model.seeding import generator
from lengthgen.model.tasks import IGNORE, copy_batch, shift_batch, task_batch
from lengthgen.model.training import train
from lengthgen.model.transformer import NetworkRunConfig, Transformer, TransformerConfig


def model(encoding="rope", **kw):
    return Transformer(TransformerConfig(vocab=11, dim=16, heads=2, layers=2, max_length=64, encoding=encoding, **kw),
                       generator(0, "init")).double()


@torch.no_grad()
def test_rope_attention_equals_naive_rotation_matrices():
    m = model()
    attn = m.blocks[0].attn
    x = torch.randn(2, 9, 16, dtype=torch.float64, generator=generator(1, "x"))
    q, k, _ = attn.split_heads(x)
    hd = m.cfg.head_dim
    freqs = rope_frequencies(hd)
    naive = torch.empty(2, 2, 9, 9, dtype=torch.float64)
    for t in range(9):
        for s in range(9):
            rq = rotation_matrix(t, freqs, "half") @ q[:, :, t, :, None]
            rk = rotation_matrix(s, freqs, "half") @ k[:, :, s, :, None]
            naive[:, :, t, s] = (rq * rk).sum((-1, -2)) / math.sqrt(hd)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    got = attn.logits(x, m.rotation(torch.arange(9)[None], x.dtype))
    assert torch.allclose(got[..., causal], naive[..., causal], atol=1e-12)
    assert torch.isinf(got[..., ~causal]).all()


@pytest.mark.parametrize("encoding", ["rope", "ape", "nope"])
@torch.no_grad()
def test_fast_path_equals_explicit_path(encoding):
    m = model(encoding)
    x = torch.randn(3, 12, 16, dtype=torch.float64, generator=generator(2, "x"))
    attn = m.blocks[1].attn
    rotation = m.rotation(torch.arange(5, 17)[None], x.dtype)
    weights = torch.softmax(attn.logits(x, rotation), -1)
    _, _, v = attn.split_heads(x)
    explicit = attn.proj((weights @ v).transpose(1, 2).reshape(3, 12, 16))
    assert torch.allclose(attn(x, rotation, None), explicit, atol=1e-12)


@pytest.mark.parametrize("encoding", ["rope", "ape", "nope"])
@torch.no_grad()
def test_fused_and_explicit_attention_are_one_network(encoding):
    """The decoder's two attention paths compute the same function of the same weights."""
    fused = model(encoding, ape_init_std=0.5)
    explicit = Transformer(fused.cfg.with_(attention="explicit"), generator(0, "init")).double()
    explicit.load_state_dict(fused.state_dict())
    tokens = torch.randint(0, 11, (2, 10), generator=generator(4, "t"))
    assert torch.allclose(fused(tokens, start=3), explicit(tokens, start=3), atol=1e-12)
    with pytest.raises(ValueError, match="attention must be 'explicit'"):
        Transformer(fused.cfg.with_(encoding="alibi"), generator(0, "init"))


@torch.no_grad()
def test_network_is_shift_equivariant_with_rope_and_nope_not_ape():
    tokens = torch.randint(0, 11, (2, 10), generator=generator(3, "t"))
    for encoding, equivariant in (("rope", True), ("nope", True), ("ape", False)):
        m = model(encoding, ape_init_std=0.5)
        same = torch.allclose(m(tokens, start=0), m(tokens, start=40), atol=1e-10)
        assert same == equivariant, encoding


def test_ape_rows_beyond_training_length_never_move():
    cfg = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, encoding="ape", max_length=40),
                           train_length=12, offset=2, steps=3, batch=4)
    run = train(cfg)
    assert torch.equal(run.model.position[12:], run.initial_state["position"][12:])
    assert not torch.equal(run.model.position[:12], run.initial_state["position"][:12])
    with pytest.raises(ValueError, match="beyond the APE table"):
        run.model(torch.zeros(1, 41, dtype=torch.long))


def test_tasks():
    tokens, targets = shift_batch(3, 10, 7, 2, generator(0, "s"))
    assert (targets[:, :2] == IGNORE).all() and torch.equal(targets[:, 2:], tokens[:, :-2])
    tokens, targets = copy_batch(50, 21, 9, generator(0, "c"), variable=False)
    assert (tokens[:, 10] == 8).all() and torch.equal(tokens[:, 11:21], tokens[:, :10])
    assert torch.equal(targets[:, 10:20], tokens[:, :10]) and (targets[:, :10] == IGNORE).all()
    tokens, targets = copy_batch(200, 21, 9, generator(0, "c"), variable=True)
    n = (tokens == 8).int().argmax(1)
    assert n.min() >= 1 and n.max() <= 10 and len(n.unique()) > 3
    for i in range(5):
        j = int(n[i])
        assert torch.equal(targets[i, j : 2 * j], tokens[i, :j]) and (targets[i, 2 * j :] == IGNORE).all()
    with pytest.raises(ValueError, match="task must be"):
        task_batch("sort", 1, 5, 4, 1, generator(0, "x"))


def test_identifiable_base():
    for dim, T, turns in ((16, 32, 1.0), (32, 64, 2.0)):
        base = identifiable_base(dim, T, turns)
        assert rope_frequencies(dim, base).min().item() * T == pytest.approx(2 * math.pi * turns)


def test_transfer_measurements_on_a_tiny_network():
    params = Parameters.from_values(dict(
        seeds=1, vocab=8, dim=16, layers=2, heads=2, offsets=[2], train_length=12, steps=20, batch=8, lr=3e-3,
        length_factor=4, eval_batch=8, kernel_batch=2, retrieval_mass=0.0, null_draws=100, compare_heads=1,
        fixed_turns=1.0, mask_batch=16, committed_sweep="", workers=1, device="cpu", backend="eager", seed_start=0))
    cfg = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=48), train_length=12,
                           offset=2, steps=20, batch=8)
    run = train(cfg)
    assert shift_deviation(run, 30, torch.float64) < 1e-12
    mass = head_target_mass(run, 12, 4)
    assert mass.shape == (2, 2) and ((mass >= 0) & (mass <= 1)).all()
    kernels = content_averaged_kernels(run, 20, 2)
    tokens, _ = task_batch("shift", 2, 20, 8, 2, generator(cfg.seed, "kernel-20"))
    logits = run.model.attention_logits(tokens)[1][:, 0]
    assert kernels[1, 0, 3] == pytest.approx(float(torch.diagonal(logits, -3, 1, 2).mean()), rel=1e-5)
    [(target, hijacked)] = last_query_masses(run, [(1, 0, kernels[1, 0])], [12, 20], 2)
    assert len(target) == 2 and all(0 <= v <= 1 for v in target + hijacked)
    out = measure_network(run, ("RoPE", params))
    assert {"sweep", "shift_f64", "heads", "kernels"} <= set(out)
    assert len(out["heads"]) == 4  # retrieval_mass = 0 keeps every head
    heads = [(1, 0, kernels[1, 0], kernels[1, 0]), (1, 1, kernels[1, 1], -kernels[1, 1])]
    result = masking_test(run, heads, 20, 16, np.random.default_rng(0), "masking-test")
    assert result["collapse_length"] == 20 and result["masked_layers"] == "1"
    assert result["hijackers_offsets"] == sum(len(hijacking_offsets(kernels[1, h], 2, 12, 20)) for h in (0, 1))
    assert result["all_far_offsets"] == 16 and result["complement_offsets"] + result["hijackers_offsets"] == 16
    assert all(0 <= result[f"accuracy_{c}"] <= 1 for c in MASK_CONDITIONS)
    sweep = length_sweep(run.model, cfg, [12, 24], 4, sequence_chunk=2)
    assert set(sweep.metric) == {"last", "in_range", "out_of_range"}
    assert np.isfinite(sweep.accuracy).all()


def test_collapse_table_explains_collapses_by_hijacking_offsets():
    import pandas as pd

    from lengthgen.chapters.transfer.masking import collapse_table

    heads = pd.DataFrame(dict(label=["A", "A", "B", "C"], offset=5, seed=[0, 0, 0, 0], first_hijack=[49, -1, 100, -1]))
    rows = [("A", 32, 1.0), ("A", 64, 0.1), ("B", 32, 1.0), ("B", 64, 0.2), ("C", 32, 1.0), ("C", 64, 0.9)]
    acc = pd.DataFrame([dict(task="shift", metric="last", label=lab, offset=5, seed=0, length=n, accuracy=a)
                        for lab, n, a in rows])
    table = collapse_table(heads, acc).set_index("label")
    assert table.loc["A", "first_hijack"] == 49 and table.loc["A", "collapse_length"] == 64 and table.loc["A", "explained"]
    assert not table.loc["B", "explained"]  # collapsed at 64 with no hijacking offset below 64
    assert np.isinf(table.loc["C", "first_hijack"]) and table.loc["C", "explained"]  # never collapsed


@pytest.mark.parametrize("encoding", ["rope", "ape", "nope"])
def test_masked_forward_with_nothing_masked_is_the_models_forward(encoding):
    m = model(encoding)
    tokens = torch.randint(0, 11, (3, 13), generator=generator(2, "tokens"))
    assert torch.allclose(forward_with_masked_offsets(m, tokens, {}), m(tokens), atol=1e-10)


def test_masking_every_offset_but_zero_cuts_a_position_off_from_the_others():
    m = model("rope")
    tokens = torch.randint(0, 11, (2, 10), generator=generator(3, "tokens"))
    other = tokens.clone()
    other[:, :-1] = (tokens[:, :-1] + 1) % 11  # change every earlier token, keep the last
    everything = {(layer, head): torch.arange(1, 10) for layer in range(2) for head in range(2)}
    cut = [forward_with_masked_offsets(m, t, everything)[:, -1] for t in (tokens, other)]
    assert torch.allclose(cut[0], cut[1], atol=1e-12)
    assert not torch.allclose(m(tokens)[:, -1], m(other)[:, -1])
    # masking one head's offsets leaves the other heads' view: the earlier tokens still matter
    one_head = {(1, 0): torch.arange(1, 10)}
    partial = [forward_with_masked_offsets(m, t, one_head)[:, -1] for t in (tokens, other)]
    assert not torch.allclose(partial[0], partial[1])


def test_hijacking_offsets_and_first_collapse():
    import pandas as pd

    kernel = np.array([0.0, 0.0, 5.0, 9.0, 0.0, 6.0, 1.0, 7.0, 5.0])
    # offsets 4..8 beyond T = 4; the target's logit is 5 (offset 2); offset 3 beats it but lies in range
    assert hijacking_offsets(kernel, offset=2, train_length=4, length=9).tolist() == [5, 7]
    assert hijacking_offsets(kernel, offset=2, train_length=4, length=6).tolist() == [5]
    assert first_collapse(pd.Series([1.0, 0.4, 0.6], index=[32, 64, 128])) == 64
    assert np.isnan(first_collapse(pd.Series([1.0, 0.5], index=[32, 64])))


def test_held_out_parameters_and_values():
    import pandas as pd

    from lengthgen.analysis.held_out import CommittedRuns
    from lengthgen.book.parameters import ParameterError
    from lengthgen.book.paths import REPO_ROOT
    from lengthgen.book.rerun import default_parameters
    from lengthgen.chapters.transfer import held_out_values
    from lengthgen.chapters.transfer.registered import HELD_OUT_SEEDS

    good = default_parameters(REPO_ROOT / "book" / "06_transfer.ipynb")
    assert good["committed_sweep"] == "transfer" and not set(Parameters.from_values(good).seed_list) & set(HELD_OUT_SEEDS)
    with pytest.raises(ParameterError, match="committed_sweep"):
        Parameters.from_values({**good, "committed_sweep": "no_such_sweep"})
    with pytest.raises(ParameterError, match="held-out seeds"):
        Parameters.from_values({**good, "committed_sweep": "transfer", "seed_start": HELD_OUT_SEEDS[0]})
    assert np.isnan(held_out_values(None)["held_out_masking"])  # no sweep, no evidence: a failure
    assert np.isnan(held_out_values(None)["held_out_carrier"])
    rows = [("a", "masking_restores", 1.0, True), ("a", "fix_margin_2T", -0.1, False), ("a", "carrier_pooled", 1e-5, None),
            ("a", "carrier_share_standard", 0.0, None), ("a", "carrier_share_identifiable", 0.5, None),
            ("b", "predicted_mask_restores", 0.1, False), ("b", "held_out_masking", float("nan"), False),
            ("b", "shift_f64", 1.0, False), ("b", "carrier_pooled", 0.2, None),
            ("b", "carrier_share_standard", 0.5, None), ("b", "carrier_share_identifiable", 0.5, None)]
    roles = dict(shift_f64="proof", carrier_pooled="reported", carrier_share_standard="reported",
                 carrier_share_identifiable="reported")
    checks = pd.DataFrame([dict(key=k, name=n, value=v, passed=ok, role=roles.get(n, "evidence")) for k, n, v, ok in rows])
    values = held_out_values(CommittedRuns(checks, expected=3, missing=1))
    assert values == dict(held_out_complete=1.0, held_out_masking=1.0, held_out_carrier=1.0,
                          held_out_carrier_identifiable=1.0, held_out_other_failures=1.0)
    no_carrier = checks[~((checks.key == "a") & (checks.name == "carrier_pooled"))]  # a run without the number counts
    assert held_out_values(CommittedRuns(no_carrier, expected=3, missing=1))["held_out_carrier"] == 2.0
    no_shares = checks[~checks.name.str.startswith("carrier_share")]  # runs without the shares are not ahead
    assert held_out_values(CommittedRuns(no_shares, expected=3, missing=1))["held_out_carrier_identifiable"] == 2.0
    nan_share = checks.assign(value=np.where((checks.key == "a") & (checks.name == "carrier_share_standard"), np.nan,
                                             checks.value))
    assert held_out_values(CommittedRuns(nan_share, expected=3, missing=1))["held_out_carrier_identifiable"] == 2.0


def test_seen_directions_count_what_the_training_offsets_show():
    from lengthgen.chapters.transfer.carrier_test import seen_directions
    from lengthgen.model.encodings import identifiable_base, rope_frequencies

    standard = seen_directions(rope_frequencies(16).double().numpy(), 32)
    identifiable = seen_directions(rope_frequencies(16, base=identifiable_base(16, 32, 1.0)).double().numpy(), 32)
    assert standard < identifiable <= 16 and standard >= 4  # the slow planes at base 10^4 show almost nothing


def test_planes_fitted_to_a_rotary_kernel_recover_its_coefficients():
    from lengthgen.analysis.planes import MIN_NORM_RCOND, plane_features
    from lengthgen.chapters.transfer.carrier_test import centred_coefficients, rotary_fit_r2
    from lengthgen.model.encodings import rope_frequencies

    freqs = rope_frequencies(16, base=10.0).double().numpy()  # every plane turns within 256 offsets: all identifiable
    c = np.random.default_rng(0).standard_normal(16)
    kernel = plane_features(freqs, np.arange(256)) @ c + 3.0  # a constant softmax ignores
    fitted, projector = centred_coefficients(kernel, freqs, MIN_NORM_RCOND)
    assert np.allclose(fitted, c, atol=1e-8) and np.allclose(projector, np.eye(16), atol=1e-8)
    assert rotary_fit_r2(kernel, freqs) > 1 - 1e-12
    noisy = kernel + np.random.default_rng(1).standard_normal(256)
    assert rotary_fit_r2(noisy, freqs) < 0.99  # the variance share can fall


def test_the_carrier_rank_test_separates_carriers_from_equally_efficient_kernels():
    from lengthgen.analysis.carrier import carrier_phases
    from lengthgen.analysis.planes import Planes, coefficients, hard_margin_kernel, margin_rows, plane_features
    from lengthgen.chapters.transfer.carrier_test import (
        carrier_rank_test,
        efficiency_matched_kernel,
        fisher_pooled,
        network_pooled,
        pooled_power,
        visible_coefficients,
    )
    from lengthgen.chapters.transfer.registered import POWER_MIXES
    from lengthgen.model.encodings import rope_frequencies

    freqs, k, T = rope_frequencies(16).double().numpy(), 5, 32
    g, psi = margin_rows(freqs, k, T), plane_features(freqs, np.arange(T))
    rng = np.random.default_rng(0)
    carrier = coefficients(Planes(freqs, np.linspace(1.0, 0.2, 8), carrier_phases(freqs, k)))
    aligned = carrier_rank_test(psi @ carrier + 2.0, freqs, k, np.random.default_rng(1), draws=20)
    assert aligned["carrier_r2"] > 0.99 and aligned["carrier_p"] == 1 / 21  # beats every null kernel (seen part only)
    assert np.shape(aligned["carrier_mixed"]) == (len(POWER_MIXES), 20)
    # the l2 max-margin kernel is as efficient as a kernel can be and has no preference for the carrier: not rejected
    assert carrier_rank_test(psi @ hard_margin_kernel(g), freqs, k, np.random.default_rng(2), draws=20)["carrier_p"] > 0.1
    # a null kernel matches the head's margin and norm
    head = hard_margin_kernel(g) + 0.2 * rng.standard_normal(16)
    c, visible = visible_coefficients(psi @ head, freqs)
    seen, truth = psi @ c - (psi @ c).mean(), psi @ head - (psi @ head).mean()
    assert ((seen - truth) ** 2).sum() < 1e-4 * (truth**2).sum()  # the seen part is nearly all of the kernel in range
    direction = visible @ rng.standard_normal(16)
    null = efficiency_matched_kernel(g, direction / np.linalg.norm(direction), float((g @ c).min()), float(np.linalg.norm(c)),
                                     visible)
    assert np.isclose(np.linalg.norm(null), np.linalg.norm(c), rtol=1e-3) and (g @ null).min() >= (g @ c).min() - 1e-6
    # a head drawn from its own null: p-values spread out, the pooled one is not small
    p_values = [carrier_rank_test(psi @ efficiency_matched_kernel(g, d / np.linalg.norm(d), float((g @ c).min()),
                                                                  float(np.linalg.norm(c)), visible),
                                  freqs, k, np.random.default_rng(10 + i), draws=20)["carrier_p"]
                for i, d in enumerate(rng.standard_normal((6, 16)) @ visible.T)]
    assert np.median(p_values) > 0.1 and fisher_pooled(np.array(p_values)) > 1e-3
    assert fisher_pooled(np.full(4, 1 / 41)) < 1e-3 and np.isnan(fisher_pooled(np.array([])))
    # Bonferroni within a network: two heads of one network count once
    assert np.isclose(network_pooled(np.array([0.01, 0.5]), ["a", "a"]), fisher_pooled(np.array([0.02])), rtol=1e-12)
    assert np.isclose(fisher_pooled(np.array([0.02])), 0.02, rtol=1e-12)  # one p-value pools to itself
    flat = carrier_rank_test(np.zeros(T), freqs, k, rng, draws=5)  # no margin: not tested
    assert np.isnan(flat["carrier_p"]) and flat["carrier_null"] == []
    tests = [aligned] * 6
    power = pooled_power([np.array(t["carrier_null"]) for t in tests], [np.array(t["carrier_mixed"]) for t in tests],
                         list("abcdef"), 1e-3, 500, np.random.default_rng(2))
    assert power[0] <= 0.01 and power[-1] == 1.0 and np.all(np.diff(power) >= -0.05)  # size, power, rising
    one_network = pooled_power([np.array(t["carrier_null"]) for t in tests], [np.array(t["carrier_mixed"]) for t in tests],
                               ["a"] * 6, 1e-3, 500, np.random.default_rng(2))
    assert one_network[-1] == 0.0  # six heads of one network are one unit: 6 / 20 is no evidence

def test_the_committed_transfer_sweep_is_complete_and_current():
    from lengthgen.analysis.held_out import committed_runs
    from lengthgen.chapters.transfer.registered import HELD_OUT_SEEDS

    held = committed_runs("transfer", "06_transfer")
    assert held.expected >= 3 and held.missing == 0, "regenerate: make sweep SPEC=data/sweeps/transfer/spec.yaml"
    starts = set(held.checks.param_seed_start)
    assert all(start in HELD_OUT_SEEDS for start in starts)
    assert {"masking_restores", "masking_beats_control", "masking_beats_runners_up"} <= set(held.checks.name)


def test_mask_sets_and_verdicts():
    import pandas as pd

    kernel = np.array([0.0, 0.0, 5.0, 9.0, 0.0, 6.0, 1.0, 7.0, 5.0])
    predicted = np.array([0.0, 0.0, 3.0, 0.0, 4.0, 0.0, 0.0, 0.0, 3.5])
    sets = mask_sets(kernel, predicted, offset=2, train_length=4, length=9, rng=np.random.default_rng(0))
    assert sets["hijackers"].tolist() == [5, 7] and sets["predicted"].tolist() == [4, 8]
    assert sets["complement"].tolist() == [4, 6, 8] and sets["all_far"].tolist() == [4, 5, 6, 7, 8]
    assert sets["runners_up"].tolist() == [6, 8]  # the two highest below the target's logit
    assert len(sets["control"]) == 2 and set(sets["control"]) <= {4, 6, 8}
    row = dict(accuracy_unmasked=0.2, accuracy_hijackers=0.9, accuracy_predicted=0.55, accuracy_control=0.2,
               accuracy_runners_up=0.25, accuracy_complement=0.1, accuracy_all_far=0.95)
    masking = pd.DataFrame([row, {**row, "accuracy_unmasked": 0.49, "accuracy_hijackers": 0.51}, {**row,
                            "accuracy_unmasked": 0.6}])
    judged = masking_verdicts(masking, batch=256)  # the third was not collapsed on the masking batch
    assert len(judged) == 2
    assert judged.restored_hijackers.tolist() == [True, False]  # 0.49 -> 0.51 is within the noise margin
    assert judged.restored_predicted.tolist() == [True, False] and not judged.restored_complement.any()
    values = masking_values(judged)
    assert values["masking_restores"] == 0.5 and values["all_far_restored"] == 1.0
    assert np.isnan(masking_values(judged.iloc[:0])["predicted_mask_restores"])


def test_one_definition_of_an_identifiable_plane_and_the_turning_planes_ablation():
    from lengthgen.book.parameters import ParameterError
    from lengthgen.book.paths import REPO_ROOT
    from lengthgen.book.rerun import default_parameters
    from lengthgen.chapters.transfer import identifiable_planes, transfer_variants, turning_planes
    from lengthgen.chapters.transfer.registered import TURNING_ONLY

    theta = rope_frequencies(16).numpy()  # 1, 0.316, 0.1, ...: at T = 32 only the first two turn a full circle
    assert identifiable_planes(theta, 32).tolist() == [True, True] + [False] * 6
    assert identifiable_planes(np.array([2 * math.pi / 32]), 32).tolist() == [True]  # exactly one turn counts
    good = default_parameters(REPO_ROOT / "book" / "06_transfer.ipynb")
    p = Parameters.from_values(good)
    assert turning_planes(p) == 2
    fixed = identifiable_base(p.dim // p.heads, p.train_length, 1.0)
    assert identifiable_planes(rope_frequencies(p.dim // p.heads, fixed).numpy(), p.train_length).all()
    variants = dict(transfer_variants(p))
    assert variants[TURNING_ONLY].rope_planes == 2 and variants[TURNING_ONLY].rope_base == 10_000.0
    with pytest.raises(ParameterError, match="train_length"):
        Parameters.from_values({**good, "train_length": 6, "offsets": [3]})


def test_the_carrier_control_trains_single_heads_as_chapter_3_does():
    from lengthgen.book.paths import REPO_ROOT
    from lengthgen.book.rerun import default_parameters
    from lengthgen.chapters.transfer.registered import CHAPTER3_HEAD

    chapter3 = default_parameters(REPO_ROOT / "book" / "03_carrier.ipynb")
    assert {name: chapter3[name] for name in CHAPTER3_HEAD} == CHAPTER3_HEAD


def test_the_carrier_summary_pools_each_variant_and_all_heads_once():
    import pandas as pd

    from lengthgen.analysis.planes import hard_margin_kernel, margin_rows, plane_features
    from lengthgen.book.paths import REPO_ROOT
    from lengthgen.book.rerun import default_parameters
    from lengthgen.chapters.transfer import carrier_summary, transfer_variants
    from lengthgen.chapters.transfer.carrier_test import POOLED, carrier_rank_test
    from lengthgen.chapters.transfer.registered import IDENTIFIABLE, POWER_MIXES
    from lengthgen.model.encodings import rope_frequencies

    p = Parameters.from_values({**default_parameters(REPO_ROOT / "book" / "06_transfer.ipynb"), "committed_sweep": ""})
    models = dict(transfer_variants(p))
    labels = ["RoPE", IDENTIFIABLE]
    rows = []
    for label in labels:
        freqs = rope_frequencies(models[label].head_dim, base=models[label].rope_base).double().numpy()
        g, psi = margin_rows(freqs, 5, p.train_length), plane_features(freqs, np.arange(p.train_length))
        for seed in range(2):
            head = hard_margin_kernel(g) + 0.2 * np.random.default_rng(seed).standard_normal(len(g.T))
            test = carrier_rank_test(psi @ head, freqs, 5, np.random.default_rng(seed), draws=12)
            rows.append(dict(label=label, offset=5, seed=seed, head=0, fit_r2=1.0, **test))
    summary = carrier_summary(pd.DataFrame(rows), p, labels, seed=0)
    assert list(summary.power.columns) == [*labels, POOLED] and list(summary.power.index) == list(POWER_MIXES)
    assert list(summary.table.index) == labels and (summary.table["heads"] == 2).all()
    assert summary.table.loc["RoPE", "seen directions"] < summary.table.loc[IDENTIFIABLE, "seen directions"]
    assert summary.values["carrier_heads"] == 4 and summary.values["carrier_networks"] == 4
    assert summary.values["carrier_test_size"] == summary.power.loc[0.0, POOLED]


def test_chapter_6_reads_chapter_11s_copy_and_reversal_runs():
    from lengthgen.chapters.transfer.full_sequence import FULL_SEQUENCE_TASKS, full_sequence_runs
    from lengthgen.chapters.transfer.registered import FULL_SEQUENCE_ENCODINGS

    full = full_sequence_runs()
    assert full.study is not None  # the committed zoo_networks sweep is current
    runs = full.study.verdicts
    assert set(runs.encoding) == set(FULL_SEQUENCE_ENCODINGS) and set(runs.task) == set(FULL_SEQUENCE_TASKS)
    assert full.numbers["full_runs"] == len(runs) and full.numbers["full_learned"] == int(runs.learned.sum())
    for task in FULL_SEQUENCE_TASKS:
        for encoding in FULL_SEQUENCE_ENCODINGS:
            assert full.numbers[f"z_{task}_{encoding}_measured"] != "not run"
            cell = runs[(runs.task == task) & (runs.encoding == encoding)]
            assert full.numbers[f"z_{task}_{encoding}_learned"] == f"{int(cell.learned.sum())} of {len(cell)}"
