"""Chapter 8 (``08_position_only``): position-only linear attention, Linear Representation Complexity, and what
gradient descent leaves untrained.

The model family is :mod:`lengthgen.model.pola`: ``y_i = sum_{j <= i} theta_{rho(i, j)} x_j`` with the positional
relation ``rho`` the only thing that changes. For every (task, relation) the chapter computes, *before training*,

* ``LRC(n)``: the rank of the operators a single table needs to represent every instance up to scale ``n``
  (``inf`` when none does), for ``n`` up to ``scale_factor * T``, and from it a verdict: *not representable*
  (``LRC(T) = inf``), *generalizes* (``LRC`` stops growing at ``T``) or *fails* (it grows);
* the predicted test error at every scale, in closed form: gradient descent's iterate on the expected loss
  after the chapter's step budget (:func:`lengthgen.model.pola.closed_form`), with every operator the training
  scales never touch left at its init (zero, or a random draw);

then trains each model by SGD on sampled sequences and measures its expected test error at every scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm import tqdm  # not tqdm.auto: in a notebook without ipywidgets it warns on the page

from ..analysis.lrc import lrc_verdict
from ..book.parameters import ParameterError, parameter
from ..model import pola
from .common import Seeds

LG_ERROR = 0.01  # relative squared error at or below which a scale counts as solved
VERDICTS = ("not representable", "generalizes", "fails")
NOT_LEARNED = "not fit in budget"

# The zero-init verdicts derived by hand from the definitions, before any computation (tabular relations only: the
# rotary span's verdicts depend on the numerical rank of its features, and come from the LRC computation).
N, G, F = VERDICTS
REGISTERED_VERDICTS: dict[tuple[str, str], str] = {
    **{("shift", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (F, G, G, N, N), strict=True)},
    **{("prefix_sum", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (F, F, G, F, G), strict=True)},
    **{("reversal", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (N, N, G, G, N), strict=True)},
    **{("copy", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (N, N, G, N, N), strict=True)},
    **{("unaligned_copy", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (N, N, G, N, N), strict=True)},
    **{("parity_cot", r): v for r, v in zip(("ape", "rpe", "ipe", "mirror", "nope"), (F, G, G, N, N), strict=True)},
}
del N, G, F


@dataclass(frozen=True)
class Parameters(Seeds):
    """Chapter 8's parameters (``seeds``: random inits per init scale and cell, besides the zero init)."""

    chapter = "08_position_only"
    train_scale: int = parameter("largest training scale T (every scale from the task's smallest to T is trained)", 3, 64)
    scale_factor: int = parameter("largest test scale, in multiples of T", 2, 32)
    shift: int = parameter("offset k of the shift task", 1, 32)
    prefix_max: int = parameter("longest random prefix P of the unaligned copy task", 0, 16)
    rope_dim: int = parameter("rotary features (even: cos and sin of dim/2 frequencies)", 4, 512)
    rope_base: float = parameter("base b of the rotary frequencies pi * b^(-(2m+1)/dim)", 1.5, 1e6)
    init_stds: tuple[float, ...] = parameter("standard deviations of the random inits (one set of seeds each)", 1e-5, 1.0)
    steps: int = parameter("SGD steps per model", 1, 100_000)
    batch: int = parameter("sampled input sequences per training instance and step", 1, 4096)
    lr: float = parameter("step size, as a fraction of the inverse curvature (1: a Newton step for a tabular "
                          "relation)", 0.01, 1.0)
    factor_rank: int = parameter("rank r of the factorized APE p_i^T A p_j (numbers per position)", 1, 256)
    factor_lr: float = parameter("Adam's initial step size for the factorized APE (decays linearly to zero over "
                                 "'steps' steps)", 1e-4, 0.1)

    def check(self) -> None:
        super().check()
        if self.train_scale < self.shift + 2:
            raise ParameterError(f"parameter 'train_scale' = {self.train_scale} is out of range: must be >= shift + 2 "
                                 f"= {self.shift + 2}, so that the shift task has at least two training scales")
        if self.rope_dim % 2:
            raise ParameterError(f"parameter 'rope_dim' = {self.rope_dim} is out of range: must be even")
        reached = self.prefix_max + 2 * self.train_scale  # the most positions a task's training scales reach
        if self.factor_rank < reached:
            raise ParameterError(f"parameter 'factor_rank' = {self.factor_rank} is out of range: must be >= prefix_max "
                                 f"+ 2 * train_scale = {reached}, the positions the unaligned copy's training scales "
                                 "reach, so that the factorized APE can represent any table on them")

    @property
    def longest(self) -> int:
        return self.scale_factor * self.train_scale


TOLERANCE_ABSOLUTE = 0.005  # half the solved threshold
FACTORIZED_CELL_TOLERANCE = 0.01  # largest operator gap between the factorized APE and the full table on training cells
TOLERANCE_RELATIVE = 0.05  # of the predicted error


@dataclass
class PolaStudy:
    """Everything chapter 8 measures."""

    errors: pd.DataFrame  # task, relation, init, init_std, seed, scale, predicted, measured, limit, untrained
    lrc: pd.DataFrame  # task, relation, scale, lrc, operators
    fixed_length: pd.DataFrame  # task, relation, error (trained and tested at T only)
    kernels: pd.DataFrame  # shift task, rpe and rope: init, seed, offset, trained, value (SGD), predicted
    verdicts: pd.DataFrame  # task, relation, init, init_std, seed, lrc_verdict, rule_verdict, measured_verdict, ...
    factorized: pd.DataFrame  # factorized APE: task, init_std, seed, scale, measured, table_fit, cell_gap, reached
    factorized_verdicts: pd.DataFrame  # task, init_std, seed, lrc_verdict, measured_verdict, cell_gap, ...
    factorized_table: np.ndarray  # shift task, first model of the largest init std: theta_ij up to the longest scale


def _verdict(in_range: float, beyond: float) -> str:
    if in_range > LG_ERROR:
        return "not representable"
    return "generalizes" if beyond <= LG_ERROR else "fails"


def _inits(p: Parameters) -> list[tuple[str, float, int]]:
    """(init, std, seed) of every model of a cell: the zero init, then ``p.seeds`` draws per init scale."""
    return [("zero", 0.0, -1)] + [("random", std, seed) for std in p.init_stds for seed in p.seed_list]


def _head_models(p: Parameters, spec: pola.TaskSpec, head: int, relation: str) -> dict:
    """One head of one task under one relation: predictions, SGD-trained models and the LRC curve."""
    scales = list(range(spec.smallest_scale, p.longest + 1))
    insts = {n: pola.instances(spec, head, n) for n in scales}
    by_scale = {n: pola.cells(relation, insts[n]) for n in scales}
    train_insts = [i for n in scales if n <= p.train_scale for i in insts[n]]
    train = pola.cells(relation, train_insts)
    param = pola.parametrization(relation, list(by_scale.values()), p.rope_dim, p.rope_base)
    inits = np.vstack([np.zeros(param.size)] + [pola.random_init(param.size, list(p.seed_list), std)
                                                 for std in p.init_stds])
    predicted = pola.closed_form(param, train, inits, p.steps, p.lr)
    limit = pola.closed_form(param, train, inits)
    trained = pola.train_sgd(param, train_insts, inits, p.steps, p.batch, p.lr, seed=p.seed_start)
    errors = {n: [pola.squared_error(param, w, by_scale[n]) for w in (predicted, trained, limit)] for n in scales}
    untrained = dict(zip(scales, pola.init_weight(param, train, [by_scale[n] for n in scales], p.steps, p.lr),
                         strict=True))
    curve = pola.representation_curve(param, [by_scale[n] for n in scales])
    at_t = pola.cells(relation, insts[p.train_scale])
    fixed = pola.squared_error(param, pola.closed_form(param, at_t, np.zeros(param.size)), at_t)
    return dict(param=param, train=train, errors=errors, untrained=untrained, curve=dict(zip(scales, curve, strict=True)),
                fixed=fixed, trained=trained, predicted=predicted)


def pola_study(p: Parameters, progress: bool = True) -> PolaStudy:
    """Predict, train and measure every (task, relation) cell at zero init and ``p.seeds`` random inits per scale."""
    inits = _inits(p)
    error_rows, lrc_rows, fixed_rows, kernel_rows = [], [], [], []
    cells_todo = [(t, r) for t in pola.TASKS for r in pola.RELATIONS]
    for task, relation in tqdm(cells_todo, desc="POLA cells", disable=not progress):
        spec = pola.TaskSpec(task, p.shift, p.prefix_max)
        heads = [_head_models(p, spec, h, relation) for h in range(pola.HEADS[task])]
        for n in heads[0]["errors"]:
            energy = sum(h["errors"][n][0][1] for h in heads)
            totals = [sum(h["errors"][n][k][0] for h in heads) / energy for k in range(3)]
            untrained = sum(h["untrained"][n] for h in heads) / energy
            for m, (init, std, seed) in enumerate(inits):
                error_rows.append(dict(task=task, relation=relation, init=init, init_std=std, seed=seed, scale=n,
                                       predicted=totals[0][m], measured=totals[1][m], limit=totals[2][m],
                                       untrained=untrained))
            lrc_rows.append(dict(task=task, relation=relation, scale=n, lrc=sum(h["curve"][n][0] for h in heads),
                                 operators=sum(h["curve"][n][1] for h in heads)))
        fixed_rows.append(dict(task=task, relation=relation,
                               error=sum(float(h["fixed"][0][0]) for h in heads) / sum(h["fixed"][1] for h in heads)))
        if task == "shift" and relation in ("rpe", "rope"):
            h = heads[0]
            trained_keys = set(np.unique(h["train"].keys).tolist())
            tables = h["param"].table(h["trained"]), h["param"].table(h["predicted"])
            shown = [0, 1 + (len(p.init_stds) - 1) * p.seeds]  # the zero init and the first seed of the largest scale
            for m in shown:
                init, std, seed = inits[m]
                for i, key in enumerate(h["param"].keys):
                    kernel_rows.append(dict(task=task, relation=relation, init=init, init_std=std, seed=seed,
                                            offset=int(key), trained=int(key) in trained_keys, value=tables[0][m, i],
                                            predicted=tables[1][m, i]))
    errors, lrc = pd.DataFrame(error_rows), pd.DataFrame(lrc_rows)
    factorized, example = factorized_study(p, progress)
    return PolaStudy(errors, lrc, pd.DataFrame(fixed_rows), pd.DataFrame(kernel_rows), verdict_table(errors, lrc, p),
                     factorized, factorized_verdict_table(factorized, lrc, p), example)


def _factorized_head(p: Parameters, spec: pola.TaskSpec, head: int) -> dict:
    """One head of one task under the factorized APE, for every (init std, seed): the trained model's error and the
    full table's least-squares error at every scale, and the largest operator gap to the table on the training cells."""
    scales = list(range(spec.smallest_scale, p.longest + 1))
    insts = {n: pola.instances(spec, head, n) for n in scales}
    by_scale = {n: pola.cells("ape", insts[n]) for n in scales}
    train = pola.cells("ape", [i for n in scales if n <= p.train_scale for i in insts[n]])
    table = pola.parametrization("ape", list(by_scale.values()))
    table_fit = pola.closed_form(table, train, np.zeros(table.size))  # the full table's fit
    length = max(i.length for n in scales for i in insts[n])
    stream = f"{spec.name}-head{head}"
    inits = [pola.factorized_init(length, p.factor_rank, list(p.seed_list), std, stream) for std in p.init_stds]
    init = pola.FactorizedTable(*(np.concatenate(a) for a in zip(*((i.positions, i.form) for i in inits), strict=True)))
    trained = pola.train_factorized(init, train, p.steps, p.factor_lr)
    gap = np.abs(trained.values(train) - table_fit[table.index(train.keys)][None, :]).max(axis=1)
    errors = {n: (((trained.values(c) - c.targets) ** 2 * c.weights).sum(axis=1),
                  pola.squared_error(table, table_fit, c)[0][0], float((c.targets**2 * c.weights).sum()))
              for n, c in by_scale.items()}
    return dict(errors=errors, trained=trained, gap=gap, reached=pola.trained_positions(train))


def factorized_study(p: Parameters, progress: bool = True) -> tuple[pd.DataFrame, np.ndarray]:
    """Train the factorized APE ``p_i^T A p_j`` on every task from ``p.seeds`` random inits per init scale (the same
    draws at each scale, rescaled), and measure its error at every scale beside the full table's least-squares fit.

    Returns one row per (task, init std, seed, scale) and the learned table of the shift task (first seed of the
    largest init scale), for the chapter's figure."""
    models = [(std, seed) for std in p.init_stds for seed in p.seed_list]
    rows, example = [], np.zeros((0, 0))
    for task in tqdm(list(pola.TASKS), desc="factorized APE", disable=not progress):
        spec = pola.TaskSpec(task, p.shift, p.prefix_max)
        heads = [_factorized_head(p, spec, h) for h in range(pola.HEADS[task])]
        if task == "shift":
            example = heads[0]["trained"].table()[models.index((max(p.init_stds), p.seed_start))]
        gap = np.max([h["gap"] for h in heads], axis=0)
        reached = max(h["reached"] for h in heads)
        for n in heads[0]["errors"]:
            energy = sum(h["errors"][n][2] for h in heads)
            measured, table_fit = (sum(h["errors"][n][k] for h in heads) / energy for k in range(2))
            for m, (std, seed) in enumerate(models):
                rows.append(dict(task=task, relation=pola.FACTORIZED, init="random", init_std=std, seed=seed, scale=n,
                                 measured=measured[m], table_fit=table_fit, cell_gap=gap[m], reached=reached))
    return pd.DataFrame(rows), example


def factorized_verdict_table(factorized: pd.DataFrame, lrc: pd.DataFrame, p: Parameters) -> pd.DataFrame:
    """Per (task, init std, seed) of the factorized APE: APE's LRC verdict (same relation, (i, j)), the measured
    verdict, the operator gap to the full table on the training cells, and the largest errors of the model and of the
    table's least-squares fit over the training scales and beyond."""
    ape = lrc[lrc.relation == "ape"].set_index(["task", "scale"]).lrc
    rows = []
    for (task, std, seed), g in factorized.groupby(["task", "init_std", "seed"], sort=False):
        inside, beyond = g[g.scale <= p.train_scale], g[g.scale > p.train_scale]
        rows.append(dict(task=task, init_std=std, seed=seed,
                         lrc_verdict=lrc_verdict(ape[(task, p.train_scale)], ape[(task, p.longest)]),
                         measured_verdict=_verdict(inside.measured.max(), beyond.measured.max()),
                         cell_gap=g.cell_gap.iloc[0], reached=g.reached.iloc[0], train_error=inside.measured.max(),
                         table_train_error=inside.table_fit.max(), test_error=beyond.measured.max()))
    return pd.DataFrame(rows)


def verdict_table(errors: pd.DataFrame, lrc: pd.DataFrame, p: Parameters) -> pd.DataFrame:
    """Per (task, relation, init, seed): the LRC verdict, the random-init rule's verdict, what the closed form predicts
    and what was measured (largest errors over the training scales and over the test scales)."""
    rows = []
    curves = {key: g.set_index("scale") for key, g in lrc.groupby(["task", "relation"], sort=False)}
    for (task, relation, init, std, seed), g in errors.groupby(["task", "relation", "init", "init_std", "seed"],
                                                               sort=False):
        curve = curves[(task, relation)]
        at_t, last = curve.loc[p.train_scale], curve.loc[p.longest]
        by_lrc = lrc_verdict(at_t.lrc, last.lrc)
        inside, beyond = g[g.scale <= p.train_scale], g[g.scale > p.train_scale]
        init_error = std**2 * beyond.untrained.max()
        rule = "fails" if by_lrc == "generalizes" and init_error > LG_ERROR else by_lrc
        predicted = _verdict(inside.predicted.max(), beyond.predicted.max())
        measured = _verdict(inside.measured.max(), beyond.measured.max())
        shown = NOT_LEARNED if np.isfinite(at_t.lrc) and measured == "not representable" else measured
        rows.append(dict(task=task, relation=relation, init=init, init_std=std, seed=seed, lrc_at_T=at_t.lrc,
                         lrc_longest=last.lrc, operators_at_T=at_t.operators, operators_longest=last.operators,
                         lrc_verdict=by_lrc, predicted_init_error=init_error, rule_verdict=rule,
                         predicted_verdict=predicted, measured_verdict=measured, shown_verdict=shown,
                         train_error=inside.measured.max(), test_error=beyond.measured.max(),
                         registered=REGISTERED_VERDICTS.get((task, relation), "")))
    return pd.DataFrame(rows)


def hand_verdict_mismatches(verdicts: pd.DataFrame) -> int:
    """Tabular (task, relation) cells whose LRC verdict differs from :data:`REGISTERED_VERDICTS`."""
    zero = verdicts[(verdicts.init == "zero") & (verdicts.registered != "")]
    return int((zero.lrc_verdict != zero.registered).sum())


def prediction_deviation(errors: pd.DataFrame) -> pd.Series:
    """``|measured - predicted|`` in units of the registered tolerance (above 1: a miss)."""
    return (errors.measured - errors.predicted).abs() / (TOLERANCE_ABSOLUTE + TOLERANCE_RELATIVE * errors.predicted)


def prediction_misses(errors: pd.DataFrame) -> pd.DataFrame:
    """Rows where the SGD-trained error misses the prediction by more than :data:`PREDICTION_TOLERANCE`."""
    return errors[prediction_deviation(errors) > 1]


def lrc_disagreements(verdicts: pd.DataFrame, tabular: bool) -> pd.DataFrame:
    """Zero-init cells of the tabular relations (or of the rotary span) whose measured verdict is not the LRC verdict."""
    zero = verdicts[(verdicts.init == "zero") & (verdicts.relation.isin(pola.TABULAR) == tabular)]
    return zero[zero.measured_verdict != zero.lrc_verdict]


def rule_disagreements(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Random-init cells of the tabular relations whose measured verdict (generalizes or not) is not the random-init
    rule's (for the rotary span the rule inherits LRC's verdict, which chapter 8 reports as not sufficient)."""
    rand = verdicts[(verdicts.init == "random") & verdicts.relation.isin(pola.TABULAR)]
    return rand[(rand.measured_verdict == "generalizes") != (rand.rule_verdict == "generalizes")]


def lrc_blind_scales(errors: pd.DataFrame, lrc: pd.DataFrame, p: Parameters) -> pd.DataFrame:
    """Zero-init test scales where LRC has not grown since ``T`` (and is finite) but the measured error is above
    the solved threshold."""
    zero = errors[(errors.init == "zero") & (errors.scale > p.train_scale)]
    merged = zero.merge(lrc, on=["task", "relation", "scale"])
    at_t = lrc[lrc.scale == p.train_scale].set_index(["task", "relation"]).lrc
    same = merged.apply(lambda r: np.isfinite(r.lrc) and r.lrc == at_t[(r.task, r.relation)], axis=1)
    return merged[same & (merged.measured > LG_ERROR)]


def fits_beyond_ape(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Zero-init (task, relation) cells fit across the training scales whose task APE does not fit."""
    zero = verdicts[verdicts.init == "zero"]
    fit = zero[zero.train_error <= LG_ERROR]
    ape_fails = set(zero[(zero.relation == "ape") & (zero.train_error > LG_ERROR)].task)
    return fit[fit.task.isin(ape_fails)]




def claim_values(study: PolaStudy, p: Parameters) -> dict[str, object]:
    """Every claim's value from the study."""
    verdicts, errors, lrc = study.verdicts, study.errors, study.lrc
    zero = verdicts[verdicts.init == "zero"]
    fixed = study.fixed_length.pivot(index="task", columns="relation", values="error").loc[list(pola.TASKS),
                                                                                            list(pola.RELATIONS)]
    factorized = study.factorized_verdicts
    return dict(ape_fits_fixed_length=fixed["ape"].max(), hand_verdicts=hand_verdict_mismatches(verdicts),
                lg_iff_lrc_tabular=len(lrc_disagreements(verdicts, tabular=True)),
                lrc_rotary_cells=len(lrc_disagreements(verdicts, tabular=False)),
                prediction_matches_tabular=len(prediction_misses(errors[errors.relation != "rope"])),
                prediction_matches_rotary=len(prediction_misses(errors[errors.relation == "rope"])),
                random_init_rule=len(rule_disagreements(verdicts)),
                factorized_fits_like_table=factorized.cell_gap.max(),
                factorized_verdicts=len(factorized[factorized.measured_verdict != factorized.lrc_verdict]),
                lrc_blind_scales=len(lrc_blind_scales(errors, lrc, p)),
                not_fit_in_budget=len(zero[zero.shown_verdict == NOT_LEARNED]),
                fits_beyond_ape=len(fits_beyond_ape(verdicts)),
                generalizing_cells=int(zero.shown_verdict.value_counts().get("generalizes", 0)))
