"""Training-step throughput of the book's models, side by side with a Hugging Face Llama step and the sgemm roofline.

Usage (one torch thread, as the chapters' workers run)::

    python benchmarks/training_step.py            # prints a Markdown table and a per-op profile
    python benchmarks/training_step.py --quick    # fewer repetitions
    python benchmarks/training_step.py --device cuda --compile   # on a GPU, with torch.compile too

Every variant is timed in interleaved rounds (variant A, B, C, A, B, C, ...), so drifts of the
machine hit all of them alike; the table gives the median time per replica-step over rounds and
the interquartile range. The roofline is ``6 x parameters x tokens`` floating-point operations per
step at the single-thread sgemm rate measured here on matrices of the model's shapes.

The Hugging Face comparison needs ``transformers`` (``pip install -r benchmarks/requirements.txt``;
the book itself does not use it) and is skipped without it.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lengthgen.book.harness import cpu_model
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.seeding import generator, resolve_device
from lengthgen.model.tasks import sequence_cross_entropy
from lengthgen.model.training import RunConfig, make_optimizer, train_together
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig

warnings.filterwarnings("ignore", message="There is a performance drop")

CH6 = NetworkRunConfig(model=TransformerConfig(vocab=64, dim=64, layers=2, heads=4), train_length=32, batch=16,
                       lr=3e-3, steps=10**9, warmup_fraction=0.0)
HEAD = HeadRunConfig(kind="rope", steps=10**9)


@dataclass
class Variant:
    """One way of training: each call of ``block()`` takes ``replica_steps`` steps of single runs in all."""

    name: str
    block: Callable[[], None]
    replica_steps: int
    setup_s: float = 0.0


def repeated(step: Callable[[], None], steps: int) -> Callable[[], None]:
    def block() -> None:
        for _ in range(steps):
            step()

    return block


def plain_step(cfg: RunConfig, forward: Callable | None = None) -> Callable[[], None]:
    """A plain (unstacked) training step of ``cfg``'s model; ``forward`` replaces ``model.forward`` if given."""
    device = resolve_device(cfg.device)
    model = cfg.build_model().to(device)
    opt = make_optimizer(cfg, list(model.parameters()))
    gen = generator(0, "bench")
    call = model if forward is None else (lambda x: forward(model, x))

    def step() -> None:
        inputs, targets = cfg.sample_batch(gen)
        loss = model.loss(call(inputs.to(device)), targets.to(device))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    return step


def stacked_loop(cfg: RunConfig, replicas: int, steps: int) -> Callable[[], None]:
    """``steps`` steps of ``replicas`` stacked seeds through ``train_together`` (its set-up amortized)."""
    configs = [cfg.with_(seed=s, steps=steps) for s in range(replicas)]
    return lambda: train_together(configs)


def onehot_head_forward(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """The single head's earlier formulation: one-hot values, then the readout (two large products)."""
    attn = model.attention(tokens.shape[1]).to(model.value.dtype)
    mass = attn @ torch.nn.functional.one_hot(tokens, model.vocab).to(attn.dtype)
    return mass @ model.readout_matrix()


def llama_step(cfg: NetworkRunConfig) -> Callable[[], None] | None:
    """An equal-shape ``LlamaForCausalLM`` step (SDPA attention), or None without ``transformers``."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    m = cfg.model
    config = LlamaConfig(vocab_size=m.vocab, hidden_size=m.dim, intermediate_size=m.mlp_ratio * m.dim,
                         num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.heads,
                         max_position_embeddings=512, attn_implementation="sdpa", tie_word_embeddings=False)
    torch.manual_seed(0)
    device = resolve_device(cfg.device)
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = generator(0, "bench")

    def step() -> None:
        inputs, targets = cfg.sample_batch(gen)
        loss = sequence_cross_entropy(model(input_ids=inputs.to(device)).logits, targets.to(device))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    step.parameters = sum(p.numel() for p in model.parameters())  # type: ignore[attr-defined]
    return step


def sgemm_rate(shapes: list[tuple[int, int, int]], repeats: int = 200) -> float:
    """Single-thread sgemm rate (FLOP/s), the median over the given ``(m, k, n)`` shapes."""
    rates = []
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(10):
            a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        rates.append(2 * m * k * n * repeats / (time.perf_counter() - start))
    return statistics.median(rates)


def interleaved(variants: list[Variant], rounds: int) -> dict[str, list[float]]:
    """Seconds per replica-step of every variant in every round, variants interleaved within each round."""
    for v in variants:  # warm-up
        v.block()
    times: dict[str, list[float]] = {v.name: [] for v in variants}
    for _ in range(rounds):
        for v in variants:
            start = time.perf_counter()
            v.block()
            times[v.name].append((time.perf_counter() - start) / v.replica_steps)
    return times


def profile_step(step: Callable[[], None], steps: int = 20) -> dict[str, float]:
    """Milliseconds per step by kind of work: matrix products, other kernels, and what no kernel accounts for."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    wall = (time.perf_counter() - start) / steps * 1e3
    matmul_ops = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")
    matmul = other = 0.0
    for event in prof.key_averages():
        self_ms = event.self_cpu_time_total / 1e3 / steps
        if event.key in matmul_ops:
            matmul += self_ms
        elif event.key.startswith(("aten::", "Optimizer")):
            other += self_ms
    return dict(wall=wall, matmul=matmul, other_kernels=other, overhead=max(0.0, wall - matmul - other))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (for a first look)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile of the transformer's forward")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (the sgemm roofline is measured on the CPU)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    global CH6, HEAD
    CH6, HEAD = CH6.with_(device=args.device), HEAD.with_(device=args.device)
    rounds, steps = (3, 10) if args.quick else (7, 20)
    params = sum(p.numel() for p in CH6.build_model().parameters())
    tokens = CH6.batch * CH6.train_length
    rate = sgemm_rate([(tokens, CH6.model.dim, 3 * CH6.model.dim), (tokens, CH6.model.dim, 4 * CH6.model.dim),
                       (tokens, 4 * CH6.model.dim, CH6.model.dim), (1024, 1024, 1024)])
    roofline_ms = 6 * params * tokens / rate * 1e3
    print(f"machine: {cpu_model()}, torch {torch.__version__}, 1 thread; sgemm {rate / 1e9:.1f} GFLOP/s")
    print(f"chapter 6 model: {params} parameters, {tokens} tokens per step; roofline {roofline_ms:.2f} ms per step\n")

    network = [Variant("transformer, one run", repeated(plain_step(CH6), steps), steps),
               Variant("transformer, 3 seeds stacked", stacked_loop(CH6, 3, steps), 3 * steps)]
    llama = llama_step(CH6)
    if llama is not None:
        network.append(Variant(f"Hugging Face Llama, same shape ({llama.parameters} parameters)", repeated(llama, steps), steps))
    if args.compile:
        model = CH6.build_model()
        start = time.perf_counter()
        compiled = torch.compile(model)
        plain = plain_step(CH6, forward=lambda m, x: compiled(x))
        plain()
        network.append(Variant("transformer, torch.compile forward", repeated(plain, steps), steps,
                               setup_s=time.perf_counter() - start))
    heads = [Variant("single head, one-hot formulation (before)", repeated(plain_step(HEAD, onehot_head_forward), steps), steps),
             Variant("single head, one run", repeated(plain_step(HEAD), steps), steps),
             Variant("single head, 5 seeds stacked", stacked_loop(HEAD, 5, steps), 5 * steps),
             Variant("single head, 10 seeds stacked", stacked_loop(HEAD, 10, steps), 10 * steps)]
    print("| model | variant | ms per replica-step (median) | IQR | vs one run | vs roofline |")
    print("|---|---|---|---|---|---|")
    for group, label, roof in ((network, "ch6 transformer", roofline_ms), (heads, "single head (ch1-4)", None)):
        times = interleaved(group, rounds)
        base = statistics.median(times[group[0].name] if label.startswith("ch6") else times[group[1].name])
        for v in group:
            t = times[v.name]
            q1, _, q3 = statistics.quantiles(t, n=4) if len(t) > 1 else (t[0], t[0], t[0])
            median = statistics.median(t) * 1e3
            versus = f"{base * 1e3 / median:.2f}x"
            rel = f"{roof / median:.0%}" if roof else ""
            extra = f" (compile {v.setup_s:.0f} s)" if v.setup_s else ""
            print(f"| {label} | {v.name}{extra} | {median:.2f} | {(q3 - q1) * 1e3:.2f} | {versus} | {rel} |")
    splits = {name: profile_step(plain_step(cfg)) for name, cfg in (("transformer", CH6), ("single head", HEAD))}
    print("\nPer-op profile of one plain step (ms; the profiler's own cost lands in 'overhead'):\n")
    print("| model | wall | matrix products | other kernels | not in any kernel |")
    print("|---|---|---|---|---|")
    for name, split in splits.items():
        cells = " | ".join(f"{split[key]:.2f}" for key in ("wall", "matmul", "other_kernels", "overhead"))
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()
