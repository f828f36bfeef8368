"""Position-only linear attention: tasks, relations, the closed-form prediction, SGD and LRC."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lengthgen.book.parameters import ParameterError
from lengthgen.chapters import position_only
from lengthgen.model import pola


def _setup(task: str, relation: str, train_scale: int = 6, longest: int = 12, head: int = 0, **spec_args):
    spec = pola.TaskSpec(task, **spec_args)
    scales = range(spec.smallest_scale, longest + 1)
    insts = {n: pola.instances(spec, head, n) for n in scales}
    by_scale = [pola.cells(relation, insts[n]) for n in scales]
    train_insts = [i for n in scales if n <= train_scale for i in insts[n]]
    train = pola.cells(relation, train_insts)
    param = pola.parametrization(relation, by_scale, 8, 10.0)
    return spec, insts, by_scale, train_insts, train, param


def test_task_targets_and_alignment():
    spec = pola.TaskSpec("shift", shift=2)
    (inst,) = pola.instances(spec, 0, 5)
    assert inst.length == 5 and list(inst.rows) == [2, 3, 4]
    assert np.array_equal(np.argwhere(inst.target), [[2, 0], [3, 1], [4, 2]])
    (rev,) = pola.instances(pola.TaskSpec("reversal"), 0, 3)
    assert rev.length == 6 and list(rev.rows) == [3, 4, 5] and list(rev.aligned[rev.rows]) == [2, 1, 0]
    assert np.allclose(np.triu(rev.target, 1), 0)
    unaligned = pola.instances(pola.TaskSpec("unaligned_copy", prefix_max=2), 0, 3)
    assert [i.length for i in unaligned] == [6, 7, 8]
    assert all(list(i.aligned[i.rows]) == list(i.rows - 3) for i in unaligned)
    x_head, z_head = (pola.instances(pola.TaskSpec("parity_cot"), h, 3)[0] for h in (0, 1))
    assert list(x_head.rows) == [0, 2, 4] and list(x_head.aligned[x_head.rows]) == [0, 2, 4]
    assert list(z_head.rows) == [2, 4] and list(z_head.aligned[z_head.rows]) == [1, 3]
    (prefix,) = pola.instances(pola.TaskSpec("prefix_sum"), 0, 4)
    assert np.array_equal(prefix.target, np.tril(np.ones((4, 4))))


def test_bad_task_parameters_fail_loudly():
    with pytest.raises(ValueError, match="is not one of"):
        pola.TaskSpec("sorting")
    with pytest.raises(ValueError, match="shift must be >= 1"):
        pola.TaskSpec("shift", shift=0)
    with pytest.raises(ValueError, match="needs scale >= 3"):
        pola.instances(pola.TaskSpec("shift", shift=2), 0, 2)
    with pytest.raises(ValueError, match="has 1 head"):
        pola.instances(pola.TaskSpec("copy"), 1, 4)
    with pytest.raises(ValueError, match="relation 'xpos'"):
        pola.relation_keys("xpos", pola.instances(pola.TaskSpec("copy"), 0, 2)[0])


def test_relation_keys():
    (inst,) = pola.instances(pola.TaskSpec("reversal"), 0, 3)
    rpe = pola.relation_keys("rpe", inst)
    assert rpe[4, 1] == 3 and rpe[5, 2] == 3
    mirror = pola.relation_keys("mirror", inst)
    assert set(mirror[inst.rows, inst.aligned[inst.rows]]) == {-1}  # reversal is one key under i + j - N
    ipe = pola.relation_keys("ipe", inst)
    assert ipe.sum() == len(inst.rows) and set(np.unique(ipe)) == {0, 1}
    assert len(np.unique(pola.relation_keys("ape", inst))) == inst.length**2
    assert np.all(pola.relation_keys("nope", inst) == 0)


def test_closed_form_tabular_is_the_weighted_mean_and_untrained_operators_keep_their_init():
    _, _, by_scale, _, train, param = _setup("prefix_sum", "rpe", train_scale=4, longest=8)
    init = np.arange(param.size, dtype=float)
    w = pola.closed_form(param, train, init)
    seen = np.isin(param.keys, train.keys)
    assert np.allclose(w[seen], 1.0)  # every offset's target is 1
    assert np.array_equal(w[~seen], init[~seen])
    assert np.allclose(pola.closed_form(param, train, init, steps=1, lr=1.0), w)  # a Newton step lands there


def test_closed_form_finite_horizon_is_gradient_descent_on_the_expected_loss():
    _, _, _, _, train, param = _setup("shift", "rope", train_scale=6, longest=10)
    a = param.design(train)
    b = np.sqrt(train.weights) * train.targets
    lam_max = np.linalg.eigvalsh(a.T @ a)[-1]
    w = np.random.default_rng(0).normal(size=param.size) * 0.1
    init = w.copy()
    for eta in pola.step_sizes(50, 0.8):
        w = w - eta / lam_max * (a.T @ (a @ w - b))
    assert np.allclose(pola.closed_form(param, train, init, steps=50, lr=0.8), w, atol=1e-10)
    limit = pola.closed_form(param, train, np.zeros(param.size))
    assert np.allclose(limit, np.linalg.pinv(a) @ b, atol=1e-6)


def test_sgd_follows_the_prediction_and_is_deterministic():
    _, _, by_scale, train_insts, train, param = _setup("shift", "rpe", train_scale=6, longest=12)
    init = np.vstack([np.zeros(param.size), pola.random_init(param.size, [3], 0.1)])
    trained = pola.train_sgd(param, train_insts, init, steps=50, batch=16, lr=1.0, seed=0)
    again = pola.train_sgd(param, train_insts, init, steps=50, batch=16, lr=1.0, seed=0)
    assert np.array_equal(trained, again)
    predicted = pola.closed_form(param, train, init, steps=50, lr=1.0)
    assert np.allclose(trained, predicted, atol=1e-9)  # representable: SGD's noise vanishes at the solution
    errors = pola.relative_error(param, trained, by_scale[-1])
    assert errors[0] < 1e-12 and errors[1] > 0.01  # zero init generalizes, the random init's new offsets do not


def test_sgd_gradient_matches_autograd_free_expectation_on_an_unrepresentable_cell():
    _, _, _, train_insts, train, param = _setup("copy", "nope", train_scale=4, longest=6)
    trained = pola.train_sgd(param, train_insts, np.zeros((1, param.size)), steps=400, batch=256, lr=1.0, seed=1)
    predicted = pola.closed_form(param, train, np.zeros(param.size))
    assert abs(trained[0, 0] - predicted[0]) < 0.02 * abs(predicted[0]) + 1e-3


def test_lrc_curves():
    def curve(task, relation, **kw):
        *_, by_scale, _, _, param = _setup(task, relation, **kw)
        return [lrc for lrc, _ in pola.representation_curve(param, by_scale)]

    assert set(curve("shift", "rpe")) == {1.0}
    assert curve("shift", "ape") == sorted(curve("shift", "ape")) and curve("shift", "ape")[-1] > curve("shift", "ape")[0]
    assert curve("copy", "rpe")[0] == 1.0 and all(np.isinf(curve("copy", "rpe")[1:]))  # one length: fine; two: not
    assert set(curve("reversal", "mirror")) == {1.0}
    assert set(curve("prefix_sum", "nope")) == {1.0}
    rope = curve("shift", "rope", longest=16)
    assert rope[0] == 1.0 and np.isinf(rope[-1])  # 8 rotary features cannot hold a delta over 16 offsets


def test_init_weight_is_the_init_term_of_the_closed_form():
    _, _, by_scale, _, train, param = _setup("shift", "rpe", train_scale=6, longest=12)
    assert pola.init_weight(param, train, [by_scale[0]]) == [0.0]  # every offset of a training scale is trained
    last = by_scale[-1]
    new = ~np.isin(last.keys, train.keys)
    assert new.any() and np.isclose(pola.init_weight(param, train, [last])[0], last.weights[new].sum())
    _, _, rope_scales, _, rope_train, rope = _setup("parity_cot", "rope", train_scale=6, longest=12)
    draws = pola.random_init(rope.size, list(range(400)), 1.0)
    kept = pola.closed_form(rope, rope_train, draws, 30, 1.0) - pola.closed_form(rope, rope_train, np.zeros(rope.size), 30, 1.0)
    values = rope.table(kept)[:, rope.index(rope_scales[-1].keys)]
    sampled = (values**2 * rope_scales[-1].weights).sum(axis=1).mean()
    assert np.isclose(pola.init_weight(rope, rope_train, [rope_scales[-1]], 30, 1.0)[0], sampled, rtol=0.2)


def test_verdict_rule():
    assert position_only.lrc_verdict(np.inf, np.inf) == "not representable"
    assert position_only.lrc_verdict(2.0, 2.0) == "generalizes"
    assert position_only.lrc_verdict(2.0, np.inf) == "fails"
    assert position_only.lrc_verdict(2.0, 5.0) == "fails"


def test_parameters_are_checked():
    base = dict(seeds=1, seed_start=0, train_scale=8, scale_factor=2, shift=2, prefix_max=1, rope_dim=8,
                rope_base=10.0, init_stds=(0.1,), steps=10, batch=4, lr=1.0, factor_rank=17, factor_lr=0.01)
    position_only.Parameters.from_values(base)
    with pytest.raises(ParameterError, match="'train_scale' = 3 is out of range: must be >= shift \\+ 2"):
        position_only.Parameters.from_values({**base, "train_scale": 3})
    with pytest.raises(ParameterError, match="'rope_dim' = 7 is out of range: must be even"):
        position_only.Parameters.from_values({**base, "rope_dim": 7})
    with pytest.raises(ParameterError, match="lr"):
        position_only.Parameters.from_values({**base, "lr": 2.0})
    with pytest.raises(ParameterError, match="'factor_rank' = 0 is out of range"):
        position_only.Parameters.from_values({**base, "factor_rank": 0})
    with pytest.raises(ParameterError, match="'factor_rank' = 16 is out of range: must be >= prefix_max"):
        position_only.Parameters.from_values({**base, "factor_rank": 16})


def test_factorized_ape_fits_the_training_cells_and_leaves_unreached_rows_at_their_init():
    _, _, by_scale, _, train, _ = _setup("shift", "ape", train_scale=6, longest=12)
    init = pola.factorized_init(12, 8, [0, 1], 0.1)
    assert not np.array_equal(init.positions[0], init.positions[1])  # one draw per seed
    trained = pola.train_factorized(init, train, steps=300, lr=0.02)
    again = pola.train_factorized(init, train, steps=300, lr=0.02)
    assert np.array_equal(trained.positions, again.positions) and np.array_equal(trained.form, again.form)
    reached = pola.trained_positions(train)
    assert reached == 6  # scales up to 6 reach positions 0 .. 5
    assert np.array_equal(trained.positions[:, reached:], init.positions[:, reached:])
    assert not np.allclose(trained.positions[:, :reached], init.positions[:, :reached])
    fit = ((trained.values(train) - train.targets) ** 2 * train.weights).sum(axis=1)
    assert fit.max() < 1e-6  # rank 8 >= 6 positions: the factorization can be any table there
    # values() is the table read at the cells' (i, j)
    i, j = np.divmod(by_scale[-1].keys, 1 << 20)
    assert np.allclose(trained.values(by_scale[-1]), trained.table()[:, i, j])
    # a scale beyond the reached positions misses the rows it never saw
    longest = by_scale[-1]
    error = ((trained.values(longest) - longest.targets) ** 2 * longest.weights).sum(axis=1)
    assert error.min() > 0.3


def test_factorized_study_fits_like_the_table_and_fails_beyond_the_reached_positions():
    p = position_only.Parameters.from_values(dict(
        seeds=2, seed_start=0, train_scale=4, scale_factor=2, shift=1, prefix_max=1, rope_dim=8, rope_base=10.0,
        init_stds=(0.01, 0.1), steps=300, batch=4, lr=1.0, factor_rank=12, factor_lr=0.02))
    rows, example = position_only.factorized_study(p, progress=False)
    assert example.shape == (p.longest, p.longest)
    assert len(rows) == len(rows.groupby(["task", "init_std", "seed", "scale"]))
    lrc = pd.DataFrame([dict(task=t, relation="ape", scale=n, lrc=lrc) for t in pola.TASKS
                        for n, lrc in _ape_lrc(t, p)])
    verdicts = position_only.factorized_verdict_table(rows, lrc, p)
    assert len(verdicts) == len(pola.TASKS) * 2 * 2
    assert verdicts.cell_gap.max() <= position_only.FACTORIZED_CELL_TOLERANCE
    assert (verdicts.measured_verdict == verdicts.lrc_verdict).all()
    assert set(verdicts.measured_verdict) == {"fails", "not representable"}
    assert dict(verdicts.groupby("task").reached.first()) == dict(
        shift=4, prefix_sum=4, reversal=8, copy=8, unaligned_copy=9, parity_cot=7)
    # an untrained model is far from the table on the training cells: the gap check can fail
    spec = pola.TaskSpec("shift", shift=1)
    train = pola.cells("ape", [i for n in range(2, 5) for i in pola.instances(spec, 0, n)])
    untrained = pola.factorized_init(8, 12, [0], 0.1)
    assert np.abs(untrained.values(train) - train.targets).max() > 0.5


def test_factorized_adam_steps_along_the_autograd_gradient():
    torch = pytest.importorskip("torch")
    _, _, _, _, train, _ = _setup("copy", "ape", train_scale=3, longest=4)
    init = pola.factorized_init(9, 7, [5], 0.3)
    length = pola.trained_positions(train)
    i, j = np.divmod(train.keys, 1 << 20)
    p = torch.tensor(init.positions[:, :length]).requires_grad_()
    a = torch.tensor(init.form).requires_grad_()
    table = p @ a @ p.transpose(1, 2)
    loss = ((table[:, i, j] - torch.tensor(train.targets)) ** 2 * torch.tensor(train.weights)).sum()
    loss.backward()
    # one plain step of Adam moves each coordinate by lr * sign(grad) (bias-corrected first step): compare signs
    stepped = pola.train_factorized(init, train, steps=1, lr=1e-3)
    moved_p = (stepped.positions[:, :length] - init.positions[:, :length]) / -1e-3
    moved_a = (stepped.form - init.form) / -1e-3
    big_p, big_a = p.grad.abs().numpy() > 1e-6, a.grad.abs().numpy() > 1e-6
    assert np.allclose(moved_p[big_p], np.sign(p.grad.numpy()[big_p]), atol=1e-3)
    assert np.allclose(moved_a[big_a], np.sign(a.grad.numpy()[big_a]), atol=1e-3)
    assert np.array_equal(stepped.positions[:, length:], init.positions[:, length:])


def _ape_lrc(task: str, p: position_only.Parameters) -> list[tuple[int, float]]:
    spec = pola.TaskSpec(task, p.shift, p.prefix_max)
    scales = list(range(spec.smallest_scale, p.longest + 1))
    total = np.zeros(len(scales))
    for head in range(pola.HEADS[task]):
        by_scale = [pola.cells("ape", pola.instances(spec, head, n)) for n in scales]
        total += [lrc for lrc, _ in pola.representation_curve(pola.parametrization("ape", by_scale), by_scale)]
    return list(zip(scales, total, strict=True))
