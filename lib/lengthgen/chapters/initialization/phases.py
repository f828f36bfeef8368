"""Chapter 13's planes and phases: the share of kernel amplitude the planes that never turn within T hold, and how
their phases, continued beyond T, lift far offsets over the target."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .registered import (
    NETWORK_KEYS,
    PHASE_MIN_PAIRED,
)


def out_of_range_at(accuracy: pd.DataFrame, networks: pd.DataFrame, length: int, **where: str) -> pd.Series:
    """Out-of-range accuracy at ``length`` of every learned network matching ``where``, indexed by ``NETWORK_KEYS``."""
    learned = networks[networks.learned]
    for key, value in where.items():
        learned = learned[learned[key] == value]
    sub = accuracy[(accuracy.metric == "out_of_range") & (accuracy.length == length)]
    return sub.merge(learned[NETWORK_KEYS], on=NETWORK_KEYS).set_index(NETWORK_KEYS).accuracy


def mean_out_of_range(accuracy: pd.DataFrame, networks: pd.DataFrame, length: int, **where: str) -> float:
    """Mean out-of-range accuracy at ``length`` over the learned networks matching ``where`` (NaN if none)."""
    at = out_of_range_at(accuracy, networks, length, **where)
    return float(at.mean()) if len(at) else float("nan")


def learned_planes(planes: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """The plane rows of the learned networks' retrieval heads."""
    if not len(planes):
        return planes
    return planes.merge(networks[networks.learned][NETWORK_KEYS], on=NETWORK_KEYS)


def unseen_plane_change(planes: pd.DataFrame, init: str) -> float:
    """Median relative weight change of the base-10^4 retrieval heads' planes that turn less than once within T."""
    if not len(planes):
        return float("nan")
    sub = planes[(planes.init == init) & (planes.base_kind == "standard") & (planes.turns_in_T < 1.0)]
    return float(sub.weight_change.median()) if len(sub) else float("nan")


def per_network_ratio(rows: pd.DataFrame, numerator: np.ndarray, denominator: np.ndarray, name: str) -> pd.DataFrame:
    """Per network of ``rows`` (plane rows): the median, over its retrieval heads, of the head's ``sum numerator / sum
    denominator``, as column ``name``. A head whose denominator sums to 0 has no ratio, and a network without any is
    left out."""
    columns = [*NETWORK_KEYS, name]
    if not len(rows):
        return pd.DataFrame(columns=columns)
    per_head = rows.assign(top=numerator, bottom=denominator).groupby([*NETWORK_KEYS, "layer", "head"])[
        ["top", "bottom"]].sum()
    per_head = per_head[per_head.bottom > 0]
    per_head[name] = per_head.top / per_head.bottom
    return per_head.groupby(NETWORK_KEYS)[name].median().reset_index()[columns]


def unseen_shares(planes: pd.DataFrame, amplitude: str = "amplitude") -> pd.DataFrame:
    """Per base-10^4 network: the median, over its retrieval heads, of the share of the planes that turn less than once
    within ``T`` in the sum of plane amplitudes (column ``amplitude``: after training, or ``amplitude_init``) of the
    head's mean-query-and-key kernel."""
    sub = planes[planes.base_kind == "standard"] if len(planes) else planes
    if not len(sub):
        return per_network_ratio(sub, np.array([]), np.array([]), "unseen_share")
    weight = sub[amplitude].to_numpy()
    return per_network_ratio(sub, weight * (sub.turns_in_T < 1.0).to_numpy(), weight, "unseen_share")


def paired_shares(shares: pd.DataFrame, first: str = "gpt2", second: str = "all",
                  column: str = "unseen_share") -> pd.DataFrame:
    """A per-network ``column`` (the unseen share unless told) of two initializations (columns named after them; GPT-2
    and 'all x s' unless told) side by side, one row per (head width, offset, seed) that has both."""
    pair = ["head_dim", "base_kind", "offset", "seed"]
    return pd.concat([shares[shares.init == init].set_index(pair)[column].rename(init) for init in (first, second)],
                     axis=1, join="inner").reset_index()


PHASE_MEASURES = ("phase_at_target", "phase_lift", "target_resultant")


def lift_transfer(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``c = mean over T <= D < 2T of exp(i theta (D - k)) - 1``. A plane whose phase at the target offset
    is ``psi = theta k + phi`` raises the offsets in ``[T, 2T)`` above the target, on average and per unit of its
    amplitude, by ``Re(exp(i psi) c) = |c| cos(psi + arg c)``: ``|c|`` is the most any phase could give that plane (near
    0 for a plane that barely turns beyond ``T``), ``cos(psi + arg c)`` how much of it its phase gives."""
    far = np.arange(train_length, 2 * train_length, dtype=np.float64)
    delta = far[None, :] - planes.offset.to_numpy()[:, None]
    return np.exp(1j * planes.freq.to_numpy()[:, None] * delta).mean(1) - 1.0


def phase_at_target(planes: pd.DataFrame, phase: str = "phase") -> np.ndarray:
    """Per plane row: ``psi = theta k + phi``, its phase at the target offset ``k`` (``phi`` from column ``phase``: after
    training, or ``phase_init``)."""
    return planes.freq.to_numpy() * planes.offset.to_numpy() + planes[phase].to_numpy()


def far_lift(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``mean over T <= D < 2T of cos(theta D + phi) - cos(theta k + phi)``, how far the plane, continued
    beyond the training range, raises the logit of the offsets in ``[T, 2T)`` above the target's, per unit of its
    amplitude (between -2 and 2; read from the trained planes only)."""
    return np.real(np.exp(1j * phase_at_target(planes)) * lift_transfer(planes, train_length))


def phase_lift(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``cos(psi + arg c)`` (:func:`lift_transfer`), the plane's far lift as a share of the largest any
    phase could give it: set by the phase alone (1: the phase that lifts the far offsets most, -1: the one that lowers
    them most), whatever the plane's frequency."""
    return np.cos(phase_at_target(planes) + np.angle(lift_transfer(planes, train_length)))


def _resultant(planes: pd.DataFrame, phase: str) -> float:
    """Per plane (one head width and plane index, so one frequency), the length of the mean of ``exp(i(theta k +
    phase))`` over the rows, median over the planes (unweighted)."""
    z = pd.Series(np.exp(1j * phase_at_target(planes, phase)), index=planes.index)
    return float(z.groupby([planes.head_dim, planes.plane]).agg(lambda v: abs(v.mean())).median())


def _phase_measures(group: pd.DataFrame, train_length: int) -> dict[str, float]:
    """The measures of :func:`phase_summary` over the plane rows of ``group`` (one initialization)."""
    weight = group.amplitude.to_numpy()
    lift = weight * far_lift(group, train_length)
    heads = group.groupby([*NETWORK_KEYS, "layer", "head"]).ngroups
    return dict(rows=float(len(group)), heads=float(heads),
                phase_at_target=float(np.degrees(np.angle((weight * np.exp(1j * phase_at_target(group))).sum()))),
                phase_lift=float((weight * phase_lift(group, train_length)).sum() / weight.sum()),
                far_lift=float(lift.sum() / weight.sum()), far_lift_nats=float(lift.sum() / heads),
                target_resultant=_resultant(group, "phase"), init_resultant=_resultant(group, "phase_init"))


def phase_summary(planes: pd.DataFrame, train_length: int, by: str = "unseen") -> pd.DataFrame:
    """What training makes of the phases of the base-10^4 retrieval heads' planes, per initialization and per ``by``
    (``"unseen"``: the planes that turn less than once within ``T`` against the others; ``"plane"``: every head width and
    plane index, with its ``turns_in_T``). With ``psi = theta k + phi`` a plane's phase at the target offset ``k`` and
    ``a`` its trained amplitude (weights, so that planes too small to move a logit do not count):

    * ``phase_at_target``: the direction of sum a exp(i psi), in degrees (0: the planes peak at the target, 180: they are
      lowest there, +-90: they are steepest there);
    * ``phase_lift`` = sum a cos(psi + arg c) / sum a (:func:`phase_lift`): how much of the largest possible lift of the
      offsets in ``[T, 2T)`` over the target the planes' phases give, whatever their frequencies (-1 to 1);
    * ``far_lift`` = sum a l / sum a (:func:`far_lift`): the lift itself per unit amplitude, which also depends on which
      planes hold the amplitude; ``far_lift_nats`` = sum a l / heads, the same in nats per head;
    * ``target_resultant``: per plane (one width and index), the length of the mean of exp(i psi) over the heads (0:
      spread evenly, 1: every head the same), median over the planes, unweighted; ``init_resultant``: the same from the
      phases at initialization (random weights), the length that heads with unrelated phases give at this count.
    """
    if by not in ("unseen", "plane"):
        raise ValueError(f"by must be 'unseen' or 'plane', not {by!r}")
    keys = ["init", "unseen"] if by == "unseen" else ["init", "head_dim", "plane", "turns_in_T"]
    columns = [*keys, "rows", "heads", *PHASE_MEASURES, "far_lift", "far_lift_nats", "init_resultant"]
    sub = planes[planes.base_kind == "standard"] if len(planes) else planes
    if not len(sub):
        return pd.DataFrame(columns=columns)
    sub = sub.assign(unseen=sub.turns_in_T < 1.0)
    rows = [dict(zip(keys, key, strict=True)) | _phase_measures(group, train_length)
            for key, group in sub.groupby(keys)]
    return pd.DataFrame(rows, columns=columns)


def unseen_phase_lifts(planes: pd.DataFrame, train_length: int) -> pd.DataFrame:
    """Per base-10^4 network: the median, over its retrieval heads, of the phase lift of the head's planes that turn less
    than once within ``T`` (``sum a cos(psi + arg c) / sum a``, :func:`phase_lift`); a head without unseen amplitude has
    none, and a network without any is left out."""
    sub = planes[(planes.base_kind == "standard") & (planes.turns_in_T < 1.0)] if len(planes) else planes
    if not len(sub):
        return per_network_ratio(sub, np.array([]), np.array([]), "unseen_phase_lift")
    weight = sub.amplitude.to_numpy()
    return per_network_ratio(sub, weight * phase_lift(sub, train_length), weight, "unseen_phase_lift")


def lift_pairs_value(planes: pd.DataFrame, networks: pd.DataFrame, train_length: int) -> float:
    """``unseen_phase_lift_gpt2_higher``: the share of (GPT-2, 'all x s') pairs of learned base-10^4 networks in which the
    GPT-2 network's unseen planes have the higher phase lift; NaN (not judged) unless at least ``PHASE_MIN_PAIRED`` of
    the run's GPT-2 base-10^4 networks are paired."""
    pairs = paired_shares(unseen_phase_lifts(planes, train_length), column="unseen_phase_lift")
    possible = int(((networks.init == "gpt2") & (networks.base_kind == "standard")).sum()) if len(networks) else 0
    if not possible or len(pairs) < PHASE_MIN_PAIRED * possible:
        return float("nan")
    return float((pairs.gpt2 > pairs["all"]).mean())


def unseen_phase(summary: pd.DataFrame, init: str, measure: str) -> float:
    """A column of a :func:`phase_summary` (by ``"unseen"``) over the unseen planes of ``init`` (NaN if none)."""
    row = summary[(summary.init == init) & summary.unseen.astype(bool)] if len(summary) else summary
    return float(row[measure].iloc[0]) if len(row) else float("nan")
