import torch

from lengthgen.chapters.linear_control import (
    evaluate_linear,
    expected_squared_error,
    gradient_descent,
    gradient_descent_closed_form,
    min_norm_interpolant,
    stable_lr,
    task_gram,
)
from lengthgen.model.encodings import full_band_frequencies
from lengthgen.model.heads import LinearRunConfig, offset_features, unit_key
from lengthgen.model.seeding import generator
from lengthgen.model.tasks import sample_tokens
from lengthgen.model.training import train

D64 = torch.float64


def test_hand_computed_min_norm_and_gd_trajectory():
    phi = torch.tensor([[1.0, 1.0]], dtype=D64)
    gram = torch.tensor([[1.0]], dtype=D64)
    y = torch.tensor([1.0], dtype=D64)
    assert torch.allclose(min_norm_interpolant(phi, y), torch.tensor([0.5, 0.5], dtype=D64))
    # one GD step at lr 1/4 from zero: q1 = 1/4 * Phi^T (y - 0) = [1/4, 1/4]; closed form (1 - (1 - 2/4)^1) * [1/2, 1/2]
    assert torch.allclose(gradient_descent(phi, gram, y, 0.25, 1), torch.tensor([0.25, 0.25], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, 1), torch.tensor([0.25, 0.25], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, 3), (1 - 0.5**3) * torch.tensor([0.5, 0.5], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, float("inf")), torch.tensor([0.5, 0.5], dtype=D64))


def test_hand_computed_task_gram():
    expected = torch.tensor([[1.0, 0.5, 0.25], [0.5, 1.0, 0.25], [0.25, 0.25, 0.5]], dtype=D64)
    assert torch.allclose(task_gram(3, 1, 2), expected)


def test_task_gram_matches_sampled_loss():
    T, k, V = 6, 2, 5
    f = torch.randn(T, generator=generator(0, "f"), dtype=D64)
    y = torch.zeros(T, dtype=D64)
    y[k] = 1
    tokens = sample_tokens(40_000, T, V, generator(0, "tok"))
    onehot = torch.nn.functional.one_hot(tokens, V).to(D64)
    losses = []
    for t in range(k, T):
        out = sum(f[d] * onehot[:, t - d] for d in range(t + 1))
        losses.append(((out - onehot[:, t - k]) ** 2).sum(-1).mean())
    sampled = torch.stack(losses).mean()
    exact = (f - y) @ task_gram(T, k, V) @ (f - y)
    assert abs(float(sampled - exact)) < 0.03 * float(exact)


def test_gd_matches_closed_form_on_rotary_features():
    d, T, k, V = 16, 6, 2, 8
    phi = offset_features(torch.arange(T), full_band_frequencies(d, 16.0), unit_key(d, 0))
    gram, y = task_gram(T, k, V), torch.eye(T, dtype=D64)[k]
    lr = stable_lr(phi, gram)
    for steps in (1, 7, 200):
        a, b = gradient_descent(phi, gram, y, lr, steps), gradient_descent_closed_form(phi, gram, y, lr, steps)
        assert torch.allclose(a, b, atol=1e-10)


def test_sgd_from_zero_stays_in_row_space_and_reaches_pinv():
    d, T, k, V = 16, 6, 2, 8
    cfg = LinearRunConfig(dim=d, vocab=V, train_length=T, offset=k, rope_base=16.0, seed=1, steps=400, batch=32)
    phi = cfg.features(torch.arange(T))
    assert torch.equal(phi, offset_features(torch.arange(T), full_band_frequencies(d, 16.0), unit_key(d, 1)))
    q = train(cfg.with_(lr=0.5 * stable_lr(phi, task_gram(T, k, V)))).model.q.detach()
    proj = torch.linalg.pinv(phi) @ phi
    assert (q - proj @ q).norm() < 1e-10
    pinv = min_norm_interpolant(phi, torch.eye(T, dtype=D64)[k])
    assert (q - pinv).norm() / pinv.norm() < 1e-3


def test_unit_key_amplitudes_and_expected_error():
    key = unit_key(8, 3)
    assert torch.allclose(key[:4] ** 2 + key[4:] ** 2, torch.ones(4, dtype=D64))
    f = torch.zeros(5, dtype=D64)
    f[2] = 1.0
    assert expected_squared_error(f, 2, 10) == 0.0
    ev = evaluate_linear(f, [5], 2, 10, seed=0, batch=64)[0]
    assert ev.accuracy == 1.0 and ev.squared_error == 0.0
