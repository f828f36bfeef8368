"""Position-only linear attention (POLA): ``y_i = sum_{j <= i} theta_{rho(i, j)} x_j``.

The attention weights depend on positions only, through a *positional relation* ``rho`` that
maps a cell ``(i, j)`` of a length-``N`` instance to a key; cells with the same key share one
parameter (an *operator*). The relation is the only thing that differs between position
encodings here:

* ``ape``: ``rho = (i, j)``, one operator per cell (learned absolute positions, the full table);
* ``rpe``: ``rho = i - j``, one operator per offset;
* ``ipe``: ``rho = 1[j is the aligned position of i]``, two operators (aligned / any other);
* ``mirror``: ``rho = i + j - N``, a scale-aware relation (it knows the instance's length);
* ``nope``: one operator for every cell (causal mask only);
* ``rope``: ``rho = i - j`` as for ``rpe``, but the offset table is constrained to the span of
  ``cos(w_m D)``, ``sin(w_m D)`` (rotary attention without softmax, chapter 5's family).

A task gives, at every scale ``n``, instances: a length ``N``, the scored rows, the target map
``M`` (lower triangular) and the aligned position of each row. With inputs ``x ~ N(0, I)`` the
expected squared error of a map ``A`` on an instance is ``||(A - M)_rows||_F^2``, a sum over
cells, so training is least squares over cells and gradient descent from ``w0`` converges to
``w0 + A^+ (b - A w0)`` (the interpolant closest to the init in the parameters' own basis).

Nothing here knows about chapters or the book.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .seeding import generator

TASKS: dict[str, str] = {
    "shift": "y_i = x_{i-k}: retrieve the token k back",
    "prefix_sum": "y_i = sum_{j <= i} x_j: counting",
    "reversal": "n inputs, then y_{n+t} = x_{n-1-t}",
    "copy": "n inputs, then y_{n+t} = x_t",
    "unaligned_copy": "a random prefix of p <= P tokens, n inputs, then their copy",
    "parity_cot": "interleaved x_t z_t: at x_t's position gather x_t (head 0) and z_{t-1} (head 1), z_t = z_{t-1} xor x_t",
}
HEADS: dict[str, int] = {task: 2 if task == "parity_cot" else 1 for task in TASKS}
RELATIONS: dict[str, str] = {
    "ape": "(i, j): one operator per cell",
    "rpe": "i - j: one operator per offset",
    "ipe": "1[j aligned with i]: two operators",
    "mirror": "i + j - N: scale-aware",
    "nope": "one operator",
    "rope": "i - j, table in the span of d rotary features",
}
TABULAR = ("ape", "rpe", "ipe", "mirror", "nope")
_CELL = 1 << 20  # ape keys: i * _CELL + j


@dataclass(frozen=True)
class TaskSpec:
    """A task and its size parameters."""

    name: str
    shift: int = 2  # k of ``shift``
    prefix_max: int = 3  # P of ``unaligned_copy``

    def __post_init__(self) -> None:
        if self.name not in TASKS:
            raise ValueError(f"task {self.name!r} is not one of {sorted(TASKS)}")
        if self.shift < 1 or self.prefix_max < 0:
            raise ValueError(f"shift must be >= 1 and prefix_max >= 0, got {self.shift}, {self.prefix_max}")

    @property
    def smallest_scale(self) -> int:
        """The smallest scale with at least one scored cell."""
        return {"shift": self.shift + 1, "parity_cot": 2}.get(self.name, 1)


@dataclass(frozen=True)
class Instance:
    """One length-``N`` instance of one head of a task: scored rows, target map, aligned positions."""

    scale: int
    length: int
    rows: np.ndarray  # scored query positions
    target: np.ndarray  # (N, N), zero above the diagonal
    aligned: np.ndarray  # (N,) the aligned position of each row (-1: none)


def instances(spec: TaskSpec, head: int, scale: int) -> list[Instance]:
    """The instances of ``head`` of the task at scale ``n`` (one, or one per prefix length for unaligned copy)."""
    n = scale
    if n < spec.smallest_scale:
        raise ValueError(f"task {spec.name!r} needs scale >= {spec.smallest_scale}, got {n}")
    if not 0 <= head < HEADS[spec.name]:
        raise ValueError(f"task {spec.name!r} has {HEADS[spec.name]} head(s), got head {head}")
    out = []
    for prefix in range(spec.prefix_max + 1) if spec.name == "unaligned_copy" else (0,):
        if spec.name in ("shift", "prefix_sum"):
            length = n
            rows = np.arange(spec.shift, n) if spec.name == "shift" else np.arange(n)
            sources = rows - spec.shift if spec.name == "shift" else rows
        elif spec.name in ("reversal", "copy", "unaligned_copy"):
            length = prefix + 2 * n
            rows = np.arange(prefix + n, prefix + 2 * n)
            sources = (2 * n - 1 - rows) if spec.name == "reversal" else rows - n
        else:  # parity_cot: x_t at 2t, z_t at 2t + 1; the row of step t is 2t
            length = 2 * n
            steps = np.arange(n) if head == 0 else np.arange(1, n)
            rows = 2 * steps
            sources = rows if head == 0 else rows - 1
        target = np.zeros((length, length))
        aligned = np.full(length, -1)
        aligned[rows] = sources
        if spec.name == "prefix_sum":
            target[np.tril_indices(length)] = 1.0
        else:
            target[rows, sources] = 1.0
        out.append(Instance(n, length, rows, target, aligned))
    return out


def relation_keys(relation: str, inst: Instance) -> np.ndarray:
    """The key ``rho(i, j)`` of every cell of the instance, as an ``(N, N)`` integer array."""
    i, j = np.indices((inst.length, inst.length))
    if relation == "ape":
        return i * _CELL + j
    if relation in ("rpe", "rope"):
        return i - j
    if relation == "ipe":
        return (j == inst.aligned[:, None]).astype(np.int64)
    if relation == "mirror":
        return i + j - inst.length
    if relation == "nope":
        return np.zeros_like(i)
    raise ValueError(f"relation {relation!r} is not one of {sorted(RELATIONS)}")


@dataclass(frozen=True)
class Cells:
    """The scored causal cells of a list of instances: key, target and least-squares weight of each."""

    keys: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    scales: np.ndarray


def cells(relation: str, insts: list[Instance]) -> Cells:
    """Every scored cell ``(i, j <= i)``; each instance has total weight 1, spread over its scored rows
    (the loss is the mean over instances of the mean over scored rows of the squared error)."""
    keys, targets, weights, scales = [], [], [], []
    for inst in insts:
        k = relation_keys(relation, inst)
        for row in inst.rows:
            keys.append(k[row, : row + 1])
            targets.append(inst.target[row, : row + 1])
            weights.append(np.full(row + 1, 1.0 / (len(insts) * len(inst.rows))))
            scales.append(np.full(row + 1, inst.scale))
    return Cells(*(np.concatenate(a) for a in (keys, targets, weights, scales)))


@dataclass(frozen=True)
class Parametrization:
    """How the operator table over keys is parametrized: one free parameter per key (tabular), or
    the rotary span ``table[D] = features(D) . w``."""

    relation: str
    keys: np.ndarray  # sorted keys this parametrization covers
    features: np.ndarray | None  # (len(keys), dim) for rope, None for tabular

    @property
    def size(self) -> int:
        return len(self.keys) if self.features is None else self.features.shape[1]

    def index(self, keys: np.ndarray, outside: int | None = None) -> np.ndarray:
        """Positions of ``keys`` in the table; keys it does not cover are an error, or ``outside`` if given."""
        idx = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        missing = self.keys[idx] != keys
        if missing.any():
            if outside is None:
                raise KeyError(f"{self.relation}: keys outside the parametrization")
            idx = np.where(missing, outside, idx)
        return idx

    def table(self, w: np.ndarray) -> np.ndarray:
        """The operator of every key (``w`` may carry leading batch axes)."""
        return w if self.features is None else w @ self.features.T

    def design(self, c: Cells) -> np.ndarray:
        """The least-squares design ``sqrt(weight) * d table[key] / d w`` of the cells."""
        idx = self.index(c.keys)
        if self.features is None:
            a = np.zeros((len(idx), self.size))
            a[np.arange(len(idx)), idx] = 1.0
        else:
            a = self.features[idx]
        return np.sqrt(c.weights)[:, None] * a


def rotary_frequencies(dim: int, base: float) -> np.ndarray:
    """``w_m = pi * base^(-(2m+1)/dim)``, ``m = 0 .. dim/2 - 1``: the full-band set half a step below Nyquist, so
    that every plane has a live sine feature (at ``w = pi``, ``sin(w D)`` vanishes at every integer offset)."""
    return np.pi * base ** (-(2 * np.arange(dim // 2) + 1) / dim)


def rotary_features(offsets: np.ndarray, dim: int, base: float) -> np.ndarray:
    """``[cos(w_m D), sin(w_m D)] / sqrt(dim)`` for the frequencies of :func:`rotary_frequencies`."""
    angles = offsets[:, None] * rotary_frequencies(dim, base)[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1) / np.sqrt(dim)


def parametrization(relation: str, all_cells: list[Cells], rope_dim: int = 16, rope_base: float = 10.0) -> Parametrization:
    """The parametrization of ``relation`` over every key that the given cells use."""
    keys = np.unique(np.concatenate([c.keys for c in all_cells]))
    features = rotary_features(keys.astype(float), rope_dim, rope_base) if relation == "rope" else None
    return Parametrization(relation, keys, features)


def init_weight(param: Parametrization, train: Cells, cells_list: list[Cells], steps: int | None = None,
                lr: float = 1.0) -> list[float]:
    """``sum_c weight_c ||R^T phi(c)||^2`` for each set of cells, with ``R`` the part of the init that
    :func:`closed_form` leaves in place after ``steps`` steps (``None``: in the limit): the expected squared error
    per unit init variance that an i.i.d. init adds on those cells. For a tabular relation ``R`` is 1 on the
    operators training never touches and ``prod_s (1 - eta_s)`` on the others; for the rotary span it also keeps
    the part of the init along directions gradient descent has not yet filled."""
    a = param.design(train)
    used = np.flatnonzero(np.abs(a).sum(axis=0) > 0)
    etas = step_sizes(steps, lr) if steps is not None else None
    if param.features is None:
        kept = np.ones(param.size)
        kept[used] = 0.0 if etas is None else float(np.prod(1 - etas))
        return [float((c.weights * kept[param.index(c.keys)] ** 2).sum()) for c in cells_list]
    lam, vecs = np.linalg.eigh(a.T @ a)
    keep = lam > lam[-1] * 1e-15
    if etas is None:
        left = np.where(keep, 0.0, 1.0)
    else:
        left = np.where(keep, np.prod(1 - etas[:, None] * lam[None, :] / lam[-1], axis=0), 1.0)
    per_key = (((param.features @ vecs) * left[None, :]) ** 2).sum(axis=1)
    return [float((c.weights * per_key[param.index(c.keys)]).sum()) for c in cells_list]


def step_sizes(steps: int, lr: float) -> np.ndarray:
    """The step schedule of :func:`train_sgd`: ``lr`` decaying linearly to zero over ``steps`` steps."""
    return lr * (1 - np.arange(steps) / steps)


def closed_form(param: Parametrization, train: Cells, init: np.ndarray, steps: int | None = None, lr: float = 1.0,
                ) -> np.ndarray:
    """Where gradient descent on the *expected* training loss from ``init`` is after ``steps`` steps of
    :func:`train_sgd`'s schedule (``None``: its limit ``init + A^+ (b - A init)``), computed in closed form.

    ``init`` may be ``(size,)`` or ``(S, size)``. Parameters the training cells never touch keep their init.
    A tabular parameter moves alone toward the weighted mean of its cells' targets, by the factor
    ``prod_s (1 - eta_s)``; the rotary span moves along each eigenvector of ``A^T A`` by
    ``1 - prod_s (1 - eta_s lambda / lambda_max)`` (gradient descent's spectral filter, chapter 5).
    """
    a = param.design(train)
    b = np.sqrt(train.weights) * train.targets
    used = np.flatnonzero(np.abs(a).sum(axis=0) > 0)
    a = a[:, used]
    w = np.array(init, dtype=float, copy=True)
    w0 = np.atleast_2d(w)[:, used]
    etas = step_sizes(steps, lr) if steps is not None else None
    if param.features is None:
        gram = (a**2).sum(axis=0)
        best = (a.T @ b) / gram
        remaining = 0.0 if etas is None else float(np.prod(1 - etas))
        moved = best[None, :] + remaining * (w0 - best[None, :])
    else:
        lam, vecs = np.linalg.eigh(a.T @ a)
        keep = lam > lam[-1] * 1e-15
        if etas is None:
            filled = np.where(keep, 1.0, 0.0)
        else:
            filled = np.where(keep, 1 - np.prod(1 - etas[:, None] * lam[None, :] / lam[-1], axis=0), 0.0)
        gain = np.where(keep, filled / np.where(keep, lam, 1.0), 0.0)
        residual = b[None, :] - w0 @ a.T
        moved = w0 + ((residual @ a) @ vecs) * gain[None, :] @ vecs.T
    w[..., used] = moved.reshape(w[..., used].shape)
    return w


def squared_error(param: Parametrization, w: np.ndarray, c: Cells) -> tuple[np.ndarray, float]:
    """Expected squared error ``sum weight (table[key] - target)^2`` of the cells (one value per leading row of
    ``w``) and the target energy ``sum weight target^2`` it is relative to."""
    values = param.table(np.atleast_2d(w))[:, param.index(c.keys)]
    return ((values - c.targets) ** 2 * c.weights).sum(axis=1), float((c.targets**2 * c.weights).sum())


def relative_error(param: Parametrization, w: np.ndarray, c: Cells) -> np.ndarray:
    """Expected relative squared error of the cells, one value per leading row of ``w``."""
    error, energy = squared_error(param, w, c)
    return error / energy


def train_sgd(param: Parametrization, insts: list[Instance], init: np.ndarray, steps: int, batch: int, lr: float,
              seed: int) -> np.ndarray:
    """Preconditioned SGD from ``init`` (``(S, size)``: S models, trained on the same sampled sequences) on sampled
    Gaussian input sequences of every training instance.

    The loss is the mean over instances of the mean over scored rows of the squared output error; its gradient
    with respect to the map is ``2 (A - M) C`` with ``C`` the batch's input second moment, computed directly.
    The step is the gradient scaled by the inverse expected curvature: per parameter for a tabular relation
    (each parameter moves alone, so this keeps the limit), one scalar ``1/lambda_max`` for the rotary span (a
    scalar keeps gradient descent in the row space, so the limit stays the min-norm one), times the schedule
    :func:`step_sizes`, which decays to zero so that the iterate settles where targets are not representable.
    """
    train = cells(param.relation, insts)
    a = param.design(train)
    curvature = (a**2).sum(axis=0) if param.features is None else np.full(param.size, np.linalg.eigvalsh(a.T @ a)[-1])
    used = np.unique(param.index(train.keys))  # the keys training touches; no gradient reaches any other
    length = max(inst.length for inst in insts)
    index = np.zeros((len(insts), length, length), dtype=np.int64)
    weight = np.zeros((len(insts), length, length))
    targets = np.zeros((len(insts), length, length))
    for n, inst in enumerate(insts):
        keys = param.index(relation_keys(param.relation, inst), outside=-1)
        index[n, : inst.length, : inst.length] = np.maximum(np.searchsorted(used, keys), 0).clip(max=len(used) - 1)
        rows = np.zeros((inst.length, inst.length))
        rows[inst.rows] = 1.0
        weight[n, : inst.length, : inst.length] = np.tril(rows) / (len(insts) * len(inst.rows))
        targets[n, : inst.length, : inst.length] = inst.target
    flat_index = torch.tensor(index.reshape(-1))
    row_weight = torch.tensor(weight.max(axis=-1, keepdims=True))
    scored = torch.tensor(weight > 0)
    target_t = torch.tensor(targets)
    w_full = np.array(np.atleast_2d(init), dtype=float, copy=True)
    if param.features is None:  # train only the touched operators; the others keep their init exactly
        features, moving = None, used
    else:
        features, moving = torch.tensor(param.features[used]), np.arange(param.size)
    scale = torch.tensor(1.0 / curvature[moving])
    w = torch.tensor(w_full[:, moving])
    gen = generator(seed, "pola-sgd")
    flush = torch.set_flush_denormal(True)  # converged errors underflow; denormal arithmetic is 10-100x slower
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tensors are tiny: threads only add synchronization
    try:
        for eta in step_sizes(steps, lr):
            x = torch.randn(len(insts), batch, length, generator=gen, dtype=torch.float64)
            moment = x.transpose(1, 2) @ x / batch  # (I, N, N)
            table = w if features is None else w @ features.T
            error = (table[:, index] - target_t) * scored  # (S, I, N, N)
            grad_map = 2 * row_weight * (error @ moment) * scored
            grad_table = torch.zeros(w.shape[0], len(used), dtype=torch.float64)
            grad_table.index_add_(1, flat_index, grad_map.reshape(w.shape[0], -1))
            grad = grad_table if features is None else grad_table @ features
            w -= eta * 0.5 * grad * scale
    finally:
        torch.set_num_threads(threads)
        if flush:
            torch.set_flush_denormal(False)
    w_full[:, moving] = w.numpy()
    return w_full


def random_init(size: int, seeds: list[int], std: float) -> np.ndarray:
    """``(len(seeds), size)`` normal init of standard deviation ``std``, one row per seed."""
    return np.stack([torch.randn(size, generator=generator(s, "pola-init"), dtype=torch.float64).numpy() * std
                     for s in seeds]) if seeds else np.zeros((0, size))


def representation_curve(param: Parametrization, cells_by_scale: list[Cells], tol: float = 1e-9,
                         ) -> list[tuple[float, int]]:
    """``(LRC(n), operators(n))`` for the cells of every scale up to ``n``, for each ``n`` of ``cells_by_scale`` in order.

    ``LRC(n)`` is the rank of the operators that the non-zero targets need when one table represents every cell
    of every scale up to ``n`` (``inf`` when no table does): for a tabular relation, the number of keys with a
    non-zero target; for the rotary span, the rank of those keys' features, and ``inf`` when the offset table
    the targets require is not in the span. ``operators(n)`` is the rank of everything the cells involve (the
    number of keys, or the rank of their rotary features): what a random init leaves untrained beyond ``T``.
    """
    high = np.full(len(param.keys), -np.inf)
    low = np.full(len(param.keys), np.inf)
    curve = []
    for c in cells_by_scale:
        idx = param.index(c.keys)
        np.maximum.at(high, idx, c.targets)
        np.minimum.at(low, idx, c.targets)
        seen = np.isfinite(high)
        consistent = bool(np.all(high[seen] - low[seen] <= tol))
        nonzero = seen & (np.abs(high) > tol)
        if param.features is None:
            curve.append((float(nonzero.sum()) if consistent else np.inf, int(seen.sum())))
            continue
        features = param.features[seen]
        operators = int(np.linalg.matrix_rank(features, tol=1e-8))
        if consistent:
            w, *_ = np.linalg.lstsq(features, high[seen], rcond=None)
            consistent = bool(np.abs(features @ w - high[seen]).max() <= 1e-6)
        lrc = float(np.linalg.matrix_rank(param.features[nonzero], tol=1e-8)) if nonzero.any() else 0.0
        curve.append((lrc if consistent else np.inf, operators))
    return curve


# The factorized form of APE: ``theta_ij = p_i^T A p_j`` with a learned position table ``p`` (one row of ``rank``
# numbers per position) and a learned bilinear form ``A`` -- what a transformer's learned position embeddings give
# a position-only head (``A = W_q^T W_k``). Its relation is APE's ``(i, j)``; only the parametrization differs, and it
# is not linear, so there is no closed form and no zero init (zero is a stationary point).
FACTORIZED = "ape_factorized"


@dataclass(frozen=True)
class FactorizedTable:
    """``S`` models ``theta_ij = p_i^T A p_j``: position tables ``(S, L, rank)`` and bilinear forms ``(S, rank, rank)``."""

    positions: np.ndarray
    form: np.ndarray

    def table(self) -> np.ndarray:
        """``(S, L, L)``: the operator of every cell ``(i, j)`` with ``i, j < L``."""
        return self.positions @ self.form @ self.positions.transpose(0, 2, 1)

    def values(self, c: Cells) -> np.ndarray:
        """``(S, cells)``: the operator of each of the cells (APE keys)."""
        i, j = np.divmod(c.keys, _CELL)
        return self.table()[:, i, j]


def factorized_init(length: int, rank: int, seeds: list[int], std: float, stream: str = "") -> FactorizedTable:
    """Normal init of standard deviation ``std`` for positions ``0 .. length-1``, one model per seed; ``stream``
    separates the draws of different tasks or heads that share a seed."""
    def draw(seed: int, shape: tuple[int, ...], name: str) -> np.ndarray:
        return torch.randn(shape, generator=generator(seed, f"pola-{name}-{stream}"), dtype=torch.float64).numpy() * std

    return FactorizedTable(np.stack([draw(s, (length, rank), "positions") for s in seeds]),
                           np.stack([draw(s, (rank, rank), "form") for s in seeds]))


def trained_positions(train: Cells) -> int:
    """The positions training reaches: ``0 .. L-1`` with ``L`` one past the largest position of any training cell
    (each causal row ``i`` involves every ``j <= i``, so no position below ``L`` is skipped)."""
    return int(np.divmod(train.keys, _CELL)[0].max()) + 1


def train_factorized(init: FactorizedTable, train: Cells, steps: int, lr: float) -> FactorizedTable:
    """Adam with ``lr`` decaying linearly to zero over ``steps`` steps on the *expected* training loss
    ``sum_c weight_c (p_i^T A p_j - target_c)^2`` (exact for Gaussian inputs, as in :func:`train_sgd`).

    The gradient is written out: with ``E`` the table of ``2 weight (theta - target)`` over the training cells,
    ``dL/dP = E P A^T + E^T P A`` and ``dL/dA = P^T E P``. Only the rows of the positions training reaches move: no
    gradient reaches any other row, which keeps its init exactly (what the chapter's account of unseen positions
    rests on; computing them would change nothing but the time)."""
    length = trained_positions(train)
    i, j = np.divmod(train.keys, _CELL)
    flat = torch.tensor(i * length + j)
    weights, targets = torch.tensor(train.weights), torch.tensor(train.targets)
    positions = torch.tensor(init.positions[:, :length]).requires_grad_()
    form = torch.tensor(init.form).requires_grad_()
    optimizer = torch.optim.Adam([positions, form], lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronization
    try:
        with torch.no_grad():
            for _ in range(steps):
                p, a = positions, form
                table = (p @ a @ p.transpose(1, 2)).reshape(len(p), -1)
                residual = torch.zeros_like(table)
                residual.index_add_(1, flat, 2 * weights * (table[:, flat] - targets))  # cells may repeat
                e = residual.reshape(len(p), length, length)
                positions.grad = e @ p @ a.transpose(1, 2) + e.transpose(1, 2) @ p @ a
                form.grad = p.transpose(1, 2) @ e @ p
                optimizer.step()
                schedule.step()
    finally:
        torch.set_num_threads(threads)
    rows = init.positions.copy()
    rows[:, :length] = positions.detach().numpy()
    return FactorizedTable(rows, form.detach().numpy())
