"""Pilot: which training recipe makes chapter 11's decoder learn copy and reversal at every training size.

Successive halving over recipes (depth, learning-rate schedule, initialization, steps) on pilot seeds that no
page, sweep or held-out check uses. Each job trains one (recipe, encoding, task) cell on the pilot seeds stacked,
then scores exact match at sizes N/2, N, N+1, N+2, 3N/2 and 2N. Results append to ``results.jsonl`` beside
this file's ``--out``; a rerun skips the jobs already there.

    python pilots/recipe.py --round 1 --out pilots/recipe_ch11
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

N, VOCAB, DIM, HEADS, BATCH, LR, OFFSET = 10, 64, 64, 4, 32, 3e-3, 3
SIZES = (5, 10, 11, 12, 15, 20)
SEEDS = (1100, 1101)  # pilot seeds: used by no page, sweep or held-out check


@dataclass(frozen=True)
class Recipe:
    layers: int = 2
    schedule: str = "constant"  # "constant" after warm-up, or "cosine" (decay to zero after warm-up)
    init: str = "gpt2"  # "gpt2" (the book's), or "torch" (PyTorch's defaults, lengthgen.model.transformer.torch_init)
    steps: int = 4000

    @property
    def name(self) -> str:
        return f"L{self.layers}-{self.schedule}-{self.init}-{self.steps}"


def lr_factor(step: int, steps: int, schedule: str, warmup_fraction: float = 0.1) -> float:
    """The learning rate's multiple after ``step`` steps: linear warm-up, then constant or a cosine decay to zero."""
    warmup = max(1, math.floor(steps * warmup_fraction))
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def torch_init(model, cfg, gen) -> None:
    """PyTorch's default draws from the run's generator, one pass in parameter order: every Linear's weight and
    bias uniform within 1/sqrt(fan_in), every Embedding N(0, 1); every other parameter as the book's GPT-2 init
    (zero biases, normal 0.02, residual projections scaled by depth, the APE table at ``ape_init_std``)."""
    import torch
    from torch import nn

    owner = {id(p): module for module in model.modules() for p in module.parameters(recurse=False)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            module = owner[id(p)]
            if isinstance(module, nn.Linear):
                bound = 1 / math.sqrt(module.in_features)
                p.copy_(torch.rand(p.shape, generator=gen) * (2 * bound) - bound)
            elif isinstance(module, nn.Embedding):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.zero_()
            elif p.dim() >= 2 and "ln" not in name:
                std = 0.02 / math.sqrt(2 * cfg.layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * (cfg.ape_init_std if name == "position" else std))


def run_job(job: tuple[dict, str, str]) -> dict:
    import torch

    torch.set_num_threads(1)
    from lengthgen.model import training, transformer
    from lengthgen.model.zoo_network import ZooNetworkRunConfig, exact_match, zoo_config

    recipe, encoding, task = Recipe(**job[0]), job[1], job[2]
    if not hasattr(transformer, "BOOK_INIT"):
        transformer.BOOK_INIT = transformer.gpt2_init
    transformer.gpt2_init = torch_init if recipe.init == "torch" else transformer.BOOK_INIT
    longest = 2 * max(SIZES)
    model = zoo_config(vocab=VOCAB, dim=DIM, layers=recipe.layers, heads=HEADS, encoding=encoding, max_length=longest,
                       rope_base=1e4, rotary_fraction=0.25, random_span=256, fire_threshold=float(2 * N))
    configs = [ZooNetworkRunConfig(model=model, task=task, train_size=N, offset=OFFSET, steps=recipe.steps,
                                   batch=BATCH, lr=LR, seed=s, device="cpu") for s in SEEDS]
    start = time.time()
    stack = training.Stack(configs)
    stack.schedule = torch.optim.lr_scheduler.LambdaLR(
        stack.opt, lambda step: lr_factor(step, recipe.steps, recipe.schedule))
    for _ in range(recipe.steps):
        stack.step()
    runs = stack.runs()
    seconds = time.time() - start
    out = []
    for run in runs:
        rows = exact_match(run.model, run.config, list(SIZES), 256)
        curve = [float(sum(run.losses[i:i + 100]) / len(run.losses[i:i + 100])) for i in range(0, len(run.losses), 100)]
        out.append(dict(seed=run.config.seed, exact={r["size"]: r["exact"] for r in rows},
                        token={r["size"]: r["token"] for r in rows}, loss=curve))
    return dict(recipe=asdict(recipe), name=recipe.name, encoding=encoding, task=task, seconds=seconds, runs=out,
                trainer="one-pass")


ROUNDS = {
    1: dict(recipes=[Recipe(4, "cosine", "gpt2"), Recipe(4, "cosine", "torch"), Recipe(4, "cosine", "torch", 8000),
                     Recipe(2, "cosine", "torch", 8000), Recipe(4, "cosine", "gpt2", 8000)],
            cells=[("nope", "reversal"), ("rope", "reversal")]),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--recipes", type=str, default="", help="json list of recipe dicts (overrides the round's)")
    ap.add_argument("--cells", type=str, default="", help="json list of [encoding, task] (overrides the round's)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["name"], r["encoding"], r["task"]))
    spec = ROUNDS.get(args.round, {})
    recipes = [Recipe(**r) for r in json.loads(args.recipes)] if args.recipes else spec["recipes"]
    cells = [tuple(c) for c in json.loads(args.cells)] if args.cells else spec["cells"]
    jobs = [(asdict(r), e, t) for r in recipes for e, t in cells if (r.name, e, t) not in done]
    jobs.sort(key=lambda j: -j[0]["layers"] * j[0]["steps"])  # longest first
    print(f"{len(jobs)} jobs", flush=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with ProcessPoolExecutor(args.workers) as pool:
        for r in pool.map(run_job, jobs):
            with results.open("a") as f:
                f.write(json.dumps(r) + "\n")
            summary = " ".join(f"{run['exact']['10']:.2f}/{run['exact']['12']:.2f}" if isinstance(
                next(iter(run["exact"])), str) else f"{run['exact'][10]:.2f}/{run['exact'][12]:.2f}" for run in r["runs"])
            print(f"{r['name']:24s} {r['encoding']:12s} {r['task']:9s} {r['seconds']:6.0f}s  N/N+2: {summary}", flush=True)


if __name__ == "__main__":
    main()
