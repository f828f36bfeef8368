"""Training-step throughput of the book's models, side by side with a Hugging Face Llama step and the sgemm roofline.

Usage (one torch thread, as the chapters' workers run)::

    python benchmarks/training_step.py            # prints Markdown tables and per-op profiles
    python benchmarks/training_step.py --quick    # fewer repetitions
    python benchmarks/training_step.py --device cuda   # on a GPU

The network trainer is timed at the shapes of chapters 6, 11 and 12 and at four layers of width
128: one run, the chapters' stacks of three seeds (today's trainer), ten seeds stacked, eager and
compiled (``backend="compiled"``; its compile time, cold and from the warm on-disk cache, beside
it), and an equal-shape Hugging Face Llama step trained one run per process, as its users train it.

Every variant is timed in interleaved rounds (variant A, B, C, A, B, C, ...), so drifts of the
machine hit all of them alike; the table gives the median time per replica-step over rounds and
the interquartile range. The roofline is ``6 x parameters x tokens`` floating-point operations per
step at the single-thread sgemm rate measured here on matrices of the model's shapes.

The Hugging Face comparison needs ``transformers`` (``pip install -r benchmarks/requirements.txt``;
the book itself does not use it) and is skipped without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lengthgen.book.harness import cpu_model
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.relation_network import RelationNetworkConfig, RelationRunConfig
from lengthgen.model.seeding import generator, resolve_device
from lengthgen.model.tasks import sequence_cross_entropy
from lengthgen.model.training import RunConfig, Stack, make_optimizer
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig
from lengthgen.model.zoo_network import ZooNetworkRunConfig, zoo_config

warnings.filterwarnings("ignore", message="There is a performance drop")

CH6 = NetworkRunConfig(model=TransformerConfig(vocab=64, dim=64, layers=2, heads=4), train_length=32, batch=16,
                       lr=3e-3, steps=10**9, warmup_fraction=0.0)
CH11 = ZooNetworkRunConfig(model=zoo_config(encoding="rope", vocab=64, dim=64, layers=2, heads=4, max_length=64),
                           task="copy", train_size=10, batch=32, lr=3e-3, steps=10**9, warmup_fraction=0.0)
CH12 = RelationRunConfig(model=RelationNetworkConfig(vocab=40, dim=64, layers=2, heads=4, scheme="rpe", max_length=64),
                         task="reversal", train_scale=8, batch=32, lr=3e-3, steps=10**9, warmup_fraction=0.0)
WIDE = CH11.with_(model=CH11.model.with_(dim=128, layers=4))
SHAPES = {"ch6 transfer": CH6, "ch11 zoo networks": CH11, "ch12 relation network": CH12, "4 layers, d = 128": WIDE}
TODAY = 3  # seeds the network chapters stack per cell today
SEEDS = 10  # seeds per cell the network chapters need
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


def stacked_loop(cfg: RunConfig, replicas: int, steps: int) -> Variant:
    """``steps`` steps of ``replicas`` stacked seeds of one :class:`Stack` (built, and compiled, once: ``setup_s``)."""
    start = time.perf_counter()
    stack = Stack([cfg.with_(seed=s) for s in range(replicas)])
    stack.step()
    setup = time.perf_counter() - start
    label = f"{cfg.backend}, {'one run' if replicas == 1 else f'{replicas} seeds stacked'}"
    if replicas == TODAY and cfg.backend == "eager":
        label += " (today's trainer)"
    return Variant(label, repeated(stack.step, steps), replicas * steps, setup if cfg.backend == "compiled" else 0.0)


def compile_times(cfg: RunConfig, replicas: int) -> tuple[float, float]:
    """Seconds to build and take the first compiled step of a stack: with an empty cache, then with the warm one."""
    folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    times = []
    with tempfile.TemporaryDirectory() as cold:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cold
        try:
            for _ in range(2):
                torch._dynamo.reset()
                start = time.perf_counter()
                Stack([cfg.with_(seed=s, backend="compiled") for s in range(replicas)]).step()
                times.append(time.perf_counter() - start)
        finally:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
            torch._dynamo.reset()
    return times[0], times[1]


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
        tokens = inputs[0] if isinstance(inputs, tuple) else inputs
        loss = sequence_cross_entropy(model(input_ids=tokens.to(device)).logits, targets.to(device))
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


def profile_step(step: Callable[[], None], steps: int = 20, replicas: int = 1) -> dict[str, float]:
    """Milliseconds per replica-step by kind of work: matrix products, other kernels (compiled ones included), and what
    no kernel accounts for."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    wall = (time.perf_counter() - start) / steps / replicas * 1e3
    matmul_ops = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")
    matmul = other = 0.0
    for event in prof.key_averages():
        self_ms = event.self_cpu_time_total / 1e3 / steps / replicas
        if event.key in matmul_ops:
            matmul += self_ms
        elif event.key.startswith(("aten::", "Optimizer", "## Call CompiledFxGraph")):
            other += self_ms
    return dict(wall=wall, matmul=matmul, other_kernels=other, overhead=max(0.0, wall - matmul - other))


def table(label: str, variants: list[Variant], rounds: int, base: str, roofline_ms: float | None) -> None:
    """Time ``variants`` in interleaved rounds and print their rows (``base``: the variant the ratios divide)."""
    times = interleaved(variants, rounds)
    reference = statistics.median(times[base])
    one = next((statistics.median(t) for name, t in times.items() if name.endswith("one run")), reference)
    for v in variants:
        t = times[v.name]
        q1, _, q3 = statistics.quantiles(t, n=4) if len(t) > 1 else (t[0], t[0], t[0])
        median = statistics.median(t)
        rel = f"{roofline_ms / (median * 1e3):.0%}" if roofline_ms else ""
        extra = f" (compile {v.setup_s:.0f} s)" if v.setup_s else ""
        print(f"| {label} | {v.name}{extra} | {median * 1e3:.2f} | {(q3 - q1) * 1e3:.2f} | {reference / median:.2f}x "
              f"| {one / median:.2f}x | {rel} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (for a first look)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (the sgemm roofline is measured on the CPU)")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), help="network shapes to time (default: all)")
    parser.add_argument("--no-heads", action="store_true", help="skip the single head")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds, steps = (3, 5) if args.quick else (7, 10)
    rate = sgemm_rate([(512, 64, 192), (512, 64, 256), (512, 256, 64), (1024, 128, 384), (1024, 1024, 1024)])
    print(f"machine: {cpu_model()}, torch {torch.__version__}, 1 thread, device {args.device}; "
          f"sgemm {rate / 1e9:.1f} GFLOP/s\n")
    print("| shape | trainer | ms per replica-step (median) | IQR | vs today | vs one run | vs roofline |")
    print("|---|---|---|---|---|---|---|")
    profiles = {}
    for label in args.shapes:
        cfg = SHAPES[label].with_(device=args.device)
        params = sum(p.numel() for p in cfg.build_model().parameters())
        roofline_ms = 6 * params * cfg.batch * cfg.train_length / rate * 1e3
        cold, warm = compile_times(cfg, SEEDS)
        compiled = cfg.with_(backend="compiled")
        variants = [stacked_loop(cfg, 1, steps), stacked_loop(cfg, TODAY, steps), stacked_loop(cfg, SEEDS, steps),
                    stacked_loop(compiled, SEEDS, steps)]
        variants[-1].name += f" (compile: {cold:.0f} s cold, {warm:.0f} s from the cache)"
        variants[-1].setup_s = 0.0
        llama = llama_step(cfg)
        if llama is not None:
            variants.append(Variant(f"Hugging Face Llama, one run ({llama.parameters:,} parameters)",
                                    repeated(llama, steps), steps))
        table(f"{label} ({params:,} parameters, {cfg.batch} x {cfg.train_length} tokens)", variants, rounds,
              variants[1].name, roofline_ms)
        if label == "ch6 transfer":
            profiles["one run, eager"] = profile_step(Stack([cfg]).step)
            profiles[f"today's: {TODAY} seeds, eager"] = profile_step(Stack([cfg.with_(seed=s) for s in range(TODAY)]).step,
                                                                      replicas=TODAY)
            profiles[f"{SEEDS} seeds, compiled"] = profile_step(
                Stack([compiled.with_(seed=s) for s in range(SEEDS)]).step, replicas=SEEDS)
    if profiles:
        print("\nPer-op profile at chapter 6's shape (ms per replica-step; the profiler's own cost lands in the last "
              "column):\n")
        print("| trainer | wall | matrix products | other kernels | not in any kernel |")
        print("|---|---|---|---|---|")
        for name, split in profiles.items():
            cells = " | ".join(f"{split[key]:.2f}" for key in ("wall", "matmul", "other_kernels", "overhead"))
            print(f"| {name} | {cells} |")
    if args.no_heads:
        return
    head = HEAD.with_(device=args.device)
    heads = [Variant("single head, one-hot formulation (before)", repeated(plain_step(head, onehot_head_forward), steps), steps),
             stacked_loop(head, 1, steps), stacked_loop(head, 5, steps), stacked_loop(head, 10, steps)]
    print("\n| model | trainer | ms per replica-step (median) | IQR | vs one-hot | vs one run | vs roofline |")
    print("|---|---|---|---|---|---|---|")
    table("single head (ch1-4)", heads, rounds, heads[0].name, None)


if __name__ == "__main__":
    main()
