"""Chapter 13: the rescaled initialization, the collapse prediction rule and its scoring."""

import numpy as np
import pandas as pd
import pytest
import torch

from lengthgen.book.parameters import ParameterError
from lengthgen.book.paths import REPO_ROOT
from lengthgen.book.rerun import default_parameters
from lengthgen.chapters.initialization import (
    Parameters,
    ScaledInitRunConfig,
    adam_control_jobs,
    beaten_beyond_T,
    far_outweighs,
    init_scale_error,
    initial_model,
    network_jobs,
    plane_changes,
    scale_initialization,
)
from lengthgen.chapters.initialization.collapse import (
    balanced_accuracy,
    configuration_rule,
    length_only_rule,
    split_groups,
)
from lengthgen.chapters.initialization.phases import (
    far_lift,
    lift_pairs_value,
    paired_shares,
    phase_summary,
    unseen_phase,
    unseen_phase_lifts,
    unseen_shares,
)
from lengthgen.chapters.initialization.registered import ADAM_CONTROL, CHAPTER6_SEEDS, INIT_SCHEMES, STANDARD_BASE
from lengthgen.model.training import TrainedRun, stack_key
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig

SMALL = TransformerConfig(vocab=16, dim=16, layers=2, heads=2, max_length=64)


def defaults() -> dict:
    return default_parameters(REPO_ROOT / "book" / "13_initialization.ipynb")


def test_scaling_touches_exactly_the_weights_its_scope_names():
    plain = NetworkRunConfig(model=SMALL, seed=3).build_model()
    qk = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=2.5, init_scope="qk").build_model()
    wide = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=2.5, init_scope="all").build_model()
    same = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=1.0, init_scope="all").build_model()
    d = SMALL.dim
    for (name, p), q, w, s in zip(plain.named_parameters(), qk.parameters(), wide.parameters(), same.parameters(),
                                  strict=True):
        assert torch.equal(s, p)  # factor 1: chapter 6's initialization bit for bit
        if name.endswith("qkv.weight"):
            assert torch.equal(q[: 2 * d], p[: 2 * d] * 2.5) and torch.equal(q[2 * d:], p[2 * d:])
        else:
            assert torch.equal(q, p)
        if p.dim() >= 2 and "ln" not in name:
            assert torch.equal(w, p * 2.5)
        else:
            assert torch.equal(w, p)  # LayerNorms (and zero biases) untouched
    with pytest.raises(ValueError, match="init_scope"):
        scale_initialization(plain, 2.0, "mlp")


def test_init_scale_error_is_zero_for_the_right_scope_and_not_for_a_wrong_one():
    for scope in ("qk", "all"):
        cfg = ScaledInitRunConfig(model=SMALL, seed=2, init_scale=3.6, init_scope=scope)
        state = {name: p.detach() for name, p in cfg.build_model().named_parameters()}
        assert init_scale_error(cfg, state) < 1e-6
        other = cfg.with_(init_scope="all" if scope == "qk" else "qk")
        assert init_scale_error(other, state) > 0.5  # the other scope's factors are off by s on some group
    plain = ScaledInitRunConfig(model=SMALL, seed=2)
    assert init_scale_error(plain, {n: p.detach() for n, p in plain.build_model().named_parameters()}) == 0.0


def test_collapse_rules_on_a_kernel():
    T, k = 8, 2
    kernel = np.zeros(32)
    kernel[k] = 1.0
    assert not beaten_beyond_T(kernel, k, T, 32)  # nothing beats the target
    kernel[20] = 1.5
    assert not beaten_beyond_T(kernel, k, T, 20)  # the offset that beats it is not inside a sequence of 20 tokens
    assert beaten_beyond_T(kernel, k, T, 21)
    kernel[:] = 0.0
    kernel[k], kernel[3] = 1.0, 5.0  # offsets inside the training range never count
    assert not beaten_beyond_T(kernel, k, T, 32) and not far_outweighs(kernel, k, T, T + 1)
    # the softmax version adds up offsets below the target: 24 far offsets at -2 against the target at 1
    kernel[T:] = -2.0
    assert not beaten_beyond_T(kernel, k, T, 32)
    assert far_outweighs(kernel, k, T, 32) == (24 * np.exp(-3.0) > 1.0)
    kernel[T:] = -5.0
    assert not far_outweighs(kernel, k, T, 32)


def test_balanced_accuracy_and_the_best_length_only_rule():
    observed = np.array([True, True, False, False, False, False])
    assert balanced_accuracy(observed, observed) == 1.0
    assert balanced_accuracy(observed, ~observed) == 0.0
    assert balanced_accuracy(observed, np.ones(6, bool)) == 0.5  # a constant rule
    assert balanced_accuracy(observed, np.array([True, False, True, False, False, False])) == pytest.approx(0.625)
    assert np.isnan(balanced_accuracy(np.zeros(3, bool), np.zeros(3, bool)))  # one kind absent: cannot judge
    cells = pd.DataFrame(dict(length=[64, 64, 128, 128, 256, 256], collapsed=[False, False, True, False, True, True]))
    rule = length_only_rule(cells)
    assert list(rule) == [False, False, False, False, True, True]  # ties with collapsing at 128 too: the fewer lengths
    assert balanced_accuracy(cells.collapsed, rule) == pytest.approx(5 / 6)


def test_configuration_rule_uses_only_the_other_seeds():
    base = dict(init="gpt2", head_dim=16, base_kind="standard", offset=5, length=64)
    cells = pd.DataFrame([dict(base, seed=s, collapsed=c) for s, c in enumerate([True, True, False])]
                         + [dict(base, length=128, seed=s, collapsed=True) for s in range(3)]
                         + [dict(base, init="all", seed=0, collapsed=False)])
    rule = configuration_rule(cells)
    # seed 0 and 1 see one collapsed and one held other seed (a tie: collapsed); seed 2 sees two collapsed
    assert list(rule) == [True, True, True, True, True, True, True]  # a lone cell has no other seed: collapsed
    assert list(split_groups(cells)) == [True, True, True, False, False, False, False]


def test_unseen_shares_and_pairs():
    rows = []
    for init, slow in (("gpt2", 1.0), ("all", 0.25)):
        for seed in (0, 1):
            for plane, (turns, amplitude) in enumerate([(4.0, 3.0), (0.5, slow)]):
                rows.append(dict(init=init, head_dim=16, base_kind="standard", offset=5, seed=seed, layer=0, head=0,
                                 plane=plane, turns_in_T=turns, amplitude=amplitude, amplitude_init=1.0))
    planes = pd.DataFrame(rows)
    shares = unseen_shares(planes)
    assert shares[shares.init == "gpt2"].unseen_share.tolist() == [0.25, 0.25]
    assert shares[shares.init == "all"].unseen_share.tolist() == pytest.approx([0.25 / 3.25] * 2)
    assert unseen_shares(planes, "amplitude_init").unseen_share.tolist() == [0.5] * 4
    pairs = paired_shares(shares)
    assert len(pairs) == 2 and (pairs.gpt2 > pairs["all"]).all()
    flipped = paired_shares(shares, "all", "gpt2")
    assert list(flipped.columns[-2:]) == ["all", "gpt2"] and (flipped.gpt2 > flipped["all"]).all()


def _plane_rows(init, seed, head_dim, specs, T=32, k=5, head=0):
    """Plane rows of one retrieval head: ``specs`` is a list of (turns in T, amplitude, phase at the target[, phase at
    the target at initialization])."""
    rows = []
    for plane, (turns, amplitude, at_target, *at_init) in enumerate(specs):
        freq = 2 * np.pi * turns / T
        rows.append(dict(init=init, head_dim=head_dim, base_kind="standard", offset=k, seed=seed, layer=0, head=head,
                         plane=plane, freq=freq, turns_in_T=turns, amplitude=amplitude, phase=at_target - freq * k,
                         phase_init=(at_init[0] if at_init else 0.0) - freq * k))
    return rows


def test_far_lift_and_phase_lift_of_single_planes():
    from lengthgen.analysis.planes import plane_sum
    from lengthgen.chapters.initialization.phases import lift_transfer, phase_lift

    T, k = 32, 5
    planes = pd.DataFrame(_plane_rows("gpt2", 0, 16, [(0.3, 1.0, 2.0), (0.5, 2.0, -1.0), (4.0, 1.0, 0.0)], T, k))
    expected = [plane_sum(np.array([1.0]), np.array([r.phase]), np.array([r.freq]), np.arange(T, 2 * T)).mean()
                - np.cos(r.freq * k + r.phase) for r in planes.itertuples()]
    assert far_lift(planes, T) == pytest.approx(expected)
    reach = np.abs(lift_transfer(planes, T))
    assert far_lift(planes, T) == pytest.approx(reach * phase_lift(planes, T))
    # a plane lowest at the target lifts every far offset; one peaked at it lowers them
    lowest, peaked = pd.DataFrame(_plane_rows("gpt2", 0, 16, [(0.4, 1.0, np.pi), (0.4, 1.0, 0.0)], T, k)).pipe(far_lift, T)
    assert lowest > 0 > peaked
    # the phase lift is the phase's share of the best lift, whatever the frequency: a slow plane at its best phase gets 1
    for turns in (0.01, 0.3, 0.9):
        best = -np.angle(lift_transfer(pd.DataFrame(_plane_rows("gpt2", 0, 16, [(turns, 1.0, 0.0)], T, k)), T))[0]
        at_best = pd.DataFrame(_plane_rows("gpt2", 0, 16, [(turns, 1.0, best), (turns, 1.0, best + np.pi)], T, k))
        assert phase_lift(at_best, T) == pytest.approx([1.0, -1.0])
    slow = pd.DataFrame(_plane_rows("gpt2", 0, 16, [(0.01, 1.0, np.pi / 2)], T, k))
    assert abs(far_lift(slow, T)[0]) < 0.1 < abs(phase_lift(slow, T)[0])  # a slow plane lifts little, at any phase


def test_phase_summary_and_the_paired_phase_lift_check():
    T = 32
    lifting, lowering = np.pi, 0.0  # at the target: lowest there (lifts the far offsets) or peaked there
    rows = []
    for seed in (0, 1, 2):
        for head_dim in (16, 32):
            # the GPT-2 network's unseen planes lift in four pairs of six, the wide one's never
            gpt2_phase = lifting if (seed, head_dim) not in {(0, 16), (1, 32)} else lowering
            rows += _plane_rows("gpt2", seed, head_dim, [(4.0, 5.0, 0.0), (0.5, 3.0, gpt2_phase, 0.5 * seed),
                                                          (0.25, 1.0, gpt2_phase, 2.0 * seed)], T)
            rows += _plane_rows("all", seed, head_dim, [(4.0, 5.0, 0.0), (0.5, 3.0, lowering), (0.25, 1.0, lowering)], T)
    rows += _plane_rows("gpt2", 2, 32, [(4.0, 5.0, 0.0), (0.5, 3.0, lifting, 3.0), (0.25, 1.0, lifting, 1.0)], T, head=1)
    planes = pd.DataFrame(rows)
    summary = phase_summary(planes, T).set_index(["init", "unseen"])
    gpt2, wide = summary.loc[("gpt2", True)], summary.loc[("all", True)]
    unseen = ((planes.init == "gpt2") & (planes.turns_in_T < 1)).to_numpy()
    weights = planes.amplitude.to_numpy()[unseen]
    lifts = far_lift(planes, T)[unseen]
    assert gpt2.far_lift == pytest.approx((weights * lifts).sum() / weights.sum())
    assert gpt2.far_lift_nats == pytest.approx((weights * lifts).sum() / 7)  # seven heads, one network with two
    assert gpt2.heads == 7 and gpt2.rows == 14
    assert wide.phase_lift < 0 < gpt2.phase_lift and -1 <= wide.phase_lift and gpt2.phase_lift <= 1
    assert summary.loc[("all", False)].phase_at_target == pytest.approx(0.0, abs=1e-9)
    assert wide.phase_at_target == pytest.approx(0.0, abs=1e-9) and wide.target_resultant == pytest.approx(1.0)
    # per (width, plane), unweighted over the heads: width 16 has 1 lowering and 2 lifting, width 32 1 and 3
    assert gpt2.target_resultant == pytest.approx(np.median([1 / 3, 1 / 3, 2 / 4, 2 / 4]))
    # the same length from the phases at initialization, here set by hand
    init_16 = abs(np.exp(1j * np.array([0.0, 0.5, 1.0])).mean())
    init_32 = abs(np.exp(1j * np.array([0.0, 0.5, 1.0, 3.0])).mean())
    assert gpt2.init_resultant == pytest.approx(np.median([init_16, init_32, abs(np.exp(1j * np.array([0.0, 2.0, 4.0]))
                                                           .mean()), abs(np.exp(1j * np.array([0.0, 2.0, 4.0, 1.0])).mean())]))
    assert unseen_phase(phase_summary(planes, T), "all", "phase_lift") == pytest.approx(wide.phase_lift)
    assert np.isnan(unseen_phase(phase_summary(planes, T), "qk", "phase_lift"))
    per_plane = phase_summary(planes, T, by="plane")
    assert len(per_plane) == 12 and set(per_plane.turns_in_T) == {4.0, 0.5, 0.25}
    assert phase_summary(planes[planes.base_kind == "other"], T).empty
    assert phase_summary(planes.iloc[:0], T, by="plane").empty
    with pytest.raises(ValueError, match="by must be"):
        phase_summary(planes, T, by="head")

    per_network = unseen_phase_lifts(planes, T)
    assert len(per_network) == 12 and unseen_phase_lifts(planes.iloc[:0], T).empty
    networks = pd.DataFrame([dict(init=i, base_kind="standard", head_dim=h, offset=5, seed=s, learned=True)
                             for i in ("gpt2", "all") for s in (0, 1, 2) for h in (16, 32)])
    assert lift_pairs_value(planes, networks, T) == pytest.approx(4 / 6)  # paired by seed and width, not pooled
    # a network without unseen amplitude has no phase lift and no pair: 5 of 6 pairs still judge
    dead = planes.assign(amplitude=planes.amplitude.where(~((planes.init == "gpt2") & (planes.seed == 0)
                                                            & (planes.head_dim == 16) & (planes.turns_in_T < 1)), 0.0))
    assert len(unseen_phase_lifts(dead, T)) == 11 and lift_pairs_value(dead, networks, T) == pytest.approx(4 / 5)
    # fewer than PHASE_MIN_PAIRED of the GPT-2 networks paired: not judged
    assert np.isnan(lift_pairs_value(planes[planes.seed == 0], networks, T))
    assert np.isnan(lift_pairs_value(planes, networks.iloc[:0], T))


def test_plane_changes_see_only_the_plane_that_moved():
    cfg = ScaledInitRunConfig(model=SMALL, seed=1)
    model = cfg.build_model()
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    run = TrainedRun(cfg, model, [], initial)
    assert np.array_equal(plane_changes(run, 0, 1), np.zeros(SMALL.head_dim // 2))
    with torch.no_grad():
        row = SMALL.dim + 1 * SMALL.head_dim + 2  # key row of plane 2's first coordinate, head 1 (half convention)
        model.blocks[0].attn.qkv.weight[row] += 1.0
    changes = plane_changes(run, 0, 1)
    assert changes[2] > 0 and np.count_nonzero(changes) == 1
    assert np.array_equal(plane_changes(run, 0, 0), np.zeros(SMALL.head_dim // 2))
    start = initial_model(run)
    assert torch.equal(start.model.blocks[0].attn.qkv.weight, initial["blocks.0.attn.qkv.weight"])


def test_parameters_and_jobs():
    good = defaults()
    p = Parameters.from_values(good)
    assert not set(p.seed_list) & CHAPTER6_SEEDS  # the defaults are fresh seeds
    jobs = network_jobs(p)
    assert len(jobs) == len(INIT_SCHEMES) * 2 * 2 * len(p.offsets) * p.seeds
    assert len({stack_key(cfg) for cfg, _ in jobs}) == len(jobs) // p.seeds  # seeds of one cell train together
    control = adam_control_jobs(p)
    assert len(control) == 2 * len(p.offsets) * p.seeds
    gpt2 = {(cfg.model.heads, cfg.offset, cfg.seed): cfg for cfg, (info, _) in jobs
            if info["init"] == "gpt2" and info["base_kind"] == "standard"}
    for cfg, (info, _) in control:
        assert info["init"] == ADAM_CONTROL and info["base_kind"] == "standard" and cfg.model.rope_base == STANDARD_BASE
        twin = gpt2[(cfg.model.heads, cfg.offset, cfg.seed)]
        assert cfg == twin.with_(lr=p.lr / p.init_scale)  # the GPT-2 network of the same seed, at lr / s and nothing else
    with pytest.raises(ParameterError, match="compare_heads"):
        Parameters.from_values({**good, "compare_heads": good["heads"]})
    with pytest.raises(ParameterError, match="heads"):
        Parameters.from_values({**good, "heads": 3})
    with pytest.raises(ParameterError, match="fixed_turns"):
        Parameters.from_values({**good, "fixed_turns": 50.0})
    with pytest.raises(ParameterError, match="length_factor"):
        Parameters.from_values({**good, "length_factor": 2})
    with pytest.raises(ParameterError, match="init_scale"):
        Parameters.from_values({**good, "init_scale": 0.0})


def test_held_out_parameters_and_the_committed_sweep():
    from lengthgen.analysis.held_out import committed_runs
    from lengthgen.chapters.initialization.registered import INIT_HELD_OUT_SEEDS
    from lengthgen.chapters.initialization.verdicts import held_out_values

    good = defaults()
    assert good["committed_sweep"] == "initialization"
    assert not set(Parameters.from_values(good).seed_list) & set(INIT_HELD_OUT_SEEDS)
    with pytest.raises(ParameterError, match="committed_sweep"):
        Parameters.from_values({**good, "committed_sweep": "no_such_sweep"})
    with pytest.raises(ParameterError, match="held-out seeds"):
        Parameters.from_values({**good, "seed_start": INIT_HELD_OUT_SEEDS[0]})
    assert np.isnan(held_out_values("")["held_out_failures"])  # no sweep, no evidence: a failure
    assert np.isnan(held_out_values("")["held_out_adam_control"]) and np.isnan(held_out_values("")["held_out_phases"])
    held = committed_runs("initialization", "13_initialization")
    assert held.expected == 3 and held.missing == 0  # every run the spec lists, made by this code and this notebook
    assert set(held.checks.offset) == {3, 5, 7}
    starts = {int(s.split("-")[0]) for s in held.checks.seeds}
    assert all(start in INIT_HELD_OUT_SEEDS for start in starts)
    assert set(held_out_values("initialization")) == {"held_out_complete", "held_out_failures", "held_out_adam_control",
                                                      "held_out_phases"}


def test_held_out_counts_a_run_that_fails_or_lacks_a_check(monkeypatch):
    from types import SimpleNamespace

    from lengthgen.chapters.initialization import verdicts
    from lengthgen.chapters.initialization.registered import (
        ADAM_CONTROL_CHECKS,
        HELD_OUT_CHECKS,
        PHASE_CHECKS,
        REGISTERED_PHASE_LIFT_SHARE,
    )

    def run(key, failing=(), missing=(), phase=1.0):
        """A held-out run's checks; the phase check is a report (no verdict), judged by its value against the bar."""
        names = [n for n in HELD_OUT_CHECKS + ADAM_CONTROL_CHECKS + PHASE_CHECKS if n not in missing]
        return [dict(key=key, name=n, offset=3, seeds=key, passed=None if n in PHASE_CHECKS else n not in failing,
                     value=phase if n in PHASE_CHECKS else 0.0) for n in names]

    bar = REGISTERED_PHASE_LIFT_SHARE
    checks = pd.DataFrame(run("a") + run("b", failing=("collapse_predicted",)) + run("c", missing=PHASE_CHECKS)
                          + run("d", failing=("adam_control_helps",), phase=bar - 0.1) + run("e", phase=bar)
                          + run("f", phase=float("nan")))
    monkeypatch.setattr(verdicts, "committed_runs", lambda name, chapter: SimpleNamespace(checks=checks, missing=0))
    values = verdicts.held_out_values("initialization")
    assert values == dict(held_out_complete=0.0, held_out_failures=1.0, held_out_adam_control=1.0, held_out_phases=3.0)
    table = verdicts.held_out_table(checks)
    phase = table.loc["unseen_phase_lift_gpt2_higher"]
    assert [phase[(3, key)].endswith("(fails)") for key in "abdef"] == [False, False, True, False, True]
    assert table.loc["collapse_predicted"][(3, "b")].endswith("(fails)")
    assert not table.loc["collapse_predicted"][(3, "a")].endswith("(fails)")


def test_chapter_6_seeds_written_out_here_match_chapter_6():
    from lengthgen.book.rerun import default_parameters as chapter_defaults
    from lengthgen.chapters.transfer import Parameters as TransferParameters
    from lengthgen.chapters.transfer.registered import HELD_OUT_SEEDS

    six = TransferParameters.from_values(chapter_defaults(REPO_ROOT / "book" / "06_transfer.ipynb"))
    assert CHAPTER6_SEEDS == frozenset(six.seed_list) | frozenset(HELD_OUT_SEEDS)


def test_adam_control_values_pair_by_seed_and_judge_learned_networks_only():
    from lengthgen.chapters.initialization import InitializationStudy
    from lengthgen.chapters.initialization.verdicts import adam_control_values

    def part(init: str, accuracy: dict[int, float], unseen: dict[int, float], learned: set[int]) -> InitializationStudy:
        keys = dict(init=init, head_dim=16, base_kind="standard", offset=5)
        networks = pd.DataFrame([dict(keys, seed=s, learned=s in learned) for s in accuracy])
        acc = pd.DataFrame([dict(keys, seed=s, metric="out_of_range", length=64, accuracy=a) for s, a in accuracy.items()])
        planes = pd.DataFrame([dict(keys, seed=s, layer=0, head=0, plane=m, turns_in_T=turns, freq=turns * np.pi / 16,
                                    amplitude=amp, amplitude_init=1.0, weight_change=change, phase=0.3,
                                    phase_init=0.0)
                               for s, u in unseen.items()
                               for m, (turns, amp, change) in enumerate([(4.0, 3.0, 0.1), (0.5, u, 2.0 * u)])])
        return InitializationStudy(acc, networks, pd.DataFrame(), planes)

    def main_study(control: InitializationStudy | None) -> InitializationStudy:
        gpt2 = part("gpt2", {0: 0.4, 1: 0.5, 2: 0.6}, {0: 1.0, 1: 1.0, 2: 1.0}, {0, 1, 2})
        wide = part("all", {0: 0.8, 1: 0.9, 2: 1.0}, {0: 0.1, 1: 0.1, 2: 0.1}, {0, 1, 2})  # wide gain 0.4, passed in
        tables = [pd.concat([getattr(gpt2, t), getattr(wide, t)], ignore_index=True)
                  for t in ("accuracy", "networks", "heads", "planes")]
        return InitializationStudy(*tables, control=control)

    p = Parameters.from_values(defaults())  # T = 32, so 2T = 64
    unseen = {0: 0.5, 1: 2.0, 2: 0.1}  # shares 1/7, 0.4, 1/31 against GPT-2's 0.25: GPT-2 larger in seeds 0 and 2
    values = adam_control_values(main_study(part(ADAM_CONTROL, {0: 0.9, 1: 0.8, 2: 0.0}, unseen, {0, 1, 2})), p, 0.4)
    assert values["adam_control_paired"] == 3 and values["adam_control_not_learned"] == 0
    assert values["adam_control_gain_2T"] == pytest.approx((0.5 + 0.3 - 0.6) / 3)  # paired by seed
    assert values["adam_control_helps"] == pytest.approx((0.5 + 0.3 - 0.6) / 3 / 0.4)  # a fraction of the wide gain
    assert values["adam_control_share_lower"] == pytest.approx(2 / 3)
    assert values["adam_control_change"] == pytest.approx(1.0)  # median of 1.0, 4.0 and 0.2
    freq = np.pi / 32  # every network's unseen plane: half a turn within T, phase 0.3
    c = np.exp(1j * freq * (np.arange(32, 64) - 5)).mean() - 1
    assert values["adam_control_phase_lift"] == pytest.approx(np.cos(freq * 5 + 0.3 + np.angle(c)))
    # one of three not learned: 2 pairs < ADAM_CONTROL_MIN_PAIRED of 3, so neither check is judged
    values = adam_control_values(main_study(part(ADAM_CONTROL, {0: 0.9, 1: 0.8, 2: 0.0}, unseen, {0, 1})), p, 0.4)
    assert values["adam_control_not_learned"] == 1 and values["adam_control_gain_2T"] == pytest.approx(0.4)
    assert np.isnan(values["adam_control_helps"]) and np.isnan(values["adam_control_share_lower"])
    assert np.isnan(adam_control_values(main_study(None), p, 0.4)["adam_control_helps"])
    wide_too_small = adam_control_values(main_study(part(ADAM_CONTROL, {0: 0.9, 1: 0.8, 2: 0.0}, unseen, {0, 1, 2})), p, 0.05)
    assert np.isnan(wide_too_small["adam_control_helps"])  # below wide_init_helps' bar: nothing to recover, not judged
