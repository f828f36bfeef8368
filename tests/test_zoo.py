"""The zoo's single heads: every encoding builds, trains in the one loop and is scored; the chapter's verdict rules."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

import lengthgen.chapters.zoo.held_out as zoo_held_out
import lengthgen.chapters.zoo.mechanisms as zoo_mechanisms
import lengthgen.chapters.zoo.registered as zoo_registered
import lengthgen.chapters.zoo.verdicts as zoo_verdicts
from lengthgen.analysis.kernels import toeplitz_deviation
from lengthgen.book.audit import current_defaults
from lengthgen.book.parameters import ParameterError
from lengthgen.chapters import zoo
from lengthgen.claims import zoo as zoo_claims
from lengthgen.model import position_zoo
from lengthgen.model.evaluation import length_sweep
from lengthgen.model.training import train_together
from lengthgen.model.zoo_heads import ZOO, RandomizedRopeHead, ZooRunConfig


def _config(encoding: str, **overrides) -> ZooRunConfig:
    base = dict(encoding=encoding, dim=16, vocab=8, train_length=12, offset=2, steps=3, batch=4, max_length=48,
                random_span=96)
    return ZooRunConfig(**{**base, **overrides})


@pytest.mark.parametrize("encoding", list(ZOO))
def test_every_encoding_trains_stacked_and_is_scored(encoding):
    runs = train_together([_config(encoding, seed=s) for s in (0, 1)])
    for run in runs:
        assert len(run.losses) == 3 and all(torch.isfinite(torch.tensor(run.losses)))
        table = length_sweep(run.model, run.config, [12, 48], batch=4)
        assert set(table.metric) >= {"in_range", "out_of_range"}
    again = train_together([_config(encoding, seed=0)])[0]  # alone: the same init and the same losses as stacked
    for name, p in again.initial_state.items():
        assert torch.equal(p, runs[0].initial_state[name]), name
    # losses agree to rounding (Adam's first steps can amplify rounding in near-zero gradients, so not the parameters)
    assert torch.allclose(torch.tensor(again.losses), torch.tensor(runs[0].losses), rtol=1e-4)


@pytest.mark.parametrize("encoding", ["nope", "alibi", "t5", "rope", "partial_rope"])
def test_relative_encodings_are_functions_of_the_offset(encoding):
    head = _config(encoding).build_model()
    assert zoo.relative_deviation(head, 48) < 1e-12


@pytest.mark.parametrize("encoding", ["ape", "sinusoidal", "randomized"])
def test_the_offset_test_sees_the_others(encoding):
    head = _config(encoding).build_model()
    assert zoo.relative_deviation(head, 48) > 1e-3


def test_fire_is_relative_up_to_its_threshold_only():
    head = _config("fire").build_model()  # threshold starts at the training length, 12
    logits = zoo.logit_matrix(head, 48)
    assert toeplitz_deviation(logits[:12, :12]) < 1e-6  # float32 parameters
    assert toeplitz_deviation(logits) > 1e-3


def test_randomized_positions_are_sorted_in_span_fixed_per_length_and_fresh_per_step():
    cfg = _config("randomized")
    head = cfg.build_model()
    assert isinstance(head, RandomizedRopeHead)
    positions = head.evaluation_positions(40)
    assert torch.equal(positions, head.evaluation_positions(40))
    assert (positions[1:] > positions[:-1]).all() and positions.max() < 96
    gen = torch.Generator().manual_seed(0)
    (_, start_a), _ = cfg.sample_batch(gen)
    (_, start_b), _ = cfg.sample_batch(gen)
    drawn = start_a + torch.arange(12)
    assert (drawn[1:] > drawn[:-1]).all() and not torch.equal(start_a, start_b)
    with pytest.raises(ValueError, match="random_span"):
        _config("randomized", random_span=8).sample_batch(gen)


def test_verdict_rules_and_tables():
    assert zoo_verdicts.measured_verdict(0.98, 1.0) == "not learned"
    assert zoo_verdicts.measured_verdict(1.0, zoo_registered.GENERALIZES_FLOOR) == "generalizes"
    assert zoo_verdicts.measured_verdict(1.0, 0.5) == "fails"
    rows = []
    for encoding, beyond in (("t5", 0.2), ("partial_rope", 0.99), ("nope", 0.01)):
        rows += [dict(encoding=encoding, offset=5, seed=0, length=32, metric="in_range",
                      accuracy=1.0 if encoding != "nope" else 0.1),
                 dict(encoding=encoding, offset=5, seed=0, length=64, metric="out_of_range", accuracy=beyond)]
    verdicts = zoo.verdict_table(pd.DataFrame(rows), 32)
    assert list(verdicts.measured) == ["fails", "generalizes", "not learned"]
    assert list(verdicts.agrees) == [False, False, True]  # the a-priori verdicts for t5 and partial RoPE were wrong
    assert verdicts.agrees_revised.all()
    table = zoo_verdicts.agreement_table(verdicts)
    assert list(table.agree_revised) == [1, 1, 1] and list(table.learned) == [1, 1, 0]
    deviation = pd.DataFrame([dict(encoding="t5", trained=True, t5_margin=0.5)])
    checks = zoo_verdicts.revised_checks(verdicts, deviation, [500])
    assert checks == dict(fresh_seeds=0, generalizes_as_revised=0, fails_when_learned=0, learned_majority=0,
                          not_learnable=0, t5_far_outweigh=0)
    # the checks can fail: a T5 run that learned and generalized, a broken partial RoPE, a learning NoPE, reused seeds
    broken = verdicts.assign(measured=["generalizes", "not learned", "fails"], learned=[True, False, True])
    checks = zoo_verdicts.revised_checks(broken, deviation.assign(t5_margin=-0.1), [300, 501])
    assert checks == dict(fresh_seeds=1, generalizes_as_revised=1, fails_when_learned=1, learned_majority=1,
                          not_learnable=1, t5_far_outweigh=1)


def test_t5_head_reads_the_bucket_of_the_causal_distance():
    head = _config("t5").build_model()
    query = torch.tensor([40])
    for distance in (0, 3, 15, 16, 100):
        logit = head.position_logits(query, query - distance)[0, 0]
        assert logit == head.bucket_logit[position_zoo.t5_bucket(torch.tensor(-distance))]
    assert head.position_logits(query, query - 7)[0, 0] == head.bucket_logit[7]  # exact buckets below 16
    margin = zoo.t5_far_margin(head, 12, 2, 48)
    with torch.no_grad():
        head.bucket_logit.zero_()
        head.bucket_logit[12:] = 1.0  # distances 0-11 reach buckets 0-11; 12-47 only buckets 12-24
    assert zoo.t5_far_margin(head, 12, 2, 48) == 1.0 and margin == margin


def test_parameters_are_checked():
    base = dict(seeds=1, seed_start=0, dim=64, vocab=64, train_length=32, offsets=[5], steps=10, batch=4, lr=0.01,
                length_factor=2, eval_batch=4, encodings=["rope"], rope_base=10000.0, rotary_fraction=0.25,
                alibi_slope=0.5, random_span_factor=2, xpos_scale_base=512.0, committed_sweep="",
                workers=1, device="cpu")
    zoo.Parameters.from_values(base)
    zoo.Parameters.from_values({**base, "committed_sweep": "zoo"})
    with pytest.raises(ParameterError, match="'committed_sweep' = 'nowhere' is out of range"):
        zoo.Parameters.from_values({**base, "committed_sweep": "nowhere"})
    with pytest.raises(ParameterError, match="must avoid the sweep's held-out seeds 660 .. 689"):
        zoo.Parameters.from_values({**base, "committed_sweep": "zoo", "seed_start": 655, "seeds": 10})
    with pytest.raises(ParameterError, match="held-out evidence is the sweep registered for it, 'zoo'"):
        zoo.Parameters.from_values({**base, "committed_sweep": "transfer"})
    zoo.Parameters.from_values({**base, "seed_start": 660})  # the sweep's own runs read no sweep
    seen = {*zoo_registered.REVISION_SEEDS, *zoo_registered.DESIGN_SEEDS, *zoo_registered.EXPLORED_SEEDS, *range(500, 505)}
    assert not seen & set(zoo.HELD_OUT_SEEDS)
    design = [s for starts in zoo_registered.HELD_OUT_DESIGN.values() for s in starts]
    last = zoo_registered.HELD_OUT_RUN_SEEDS - 1
    assert len(design) == len(set(design)) and all(s + last in zoo.HELD_OUT_SEEDS for s in design)
    zoo.Parameters.from_values({**base, "encodings": ["rope", "xpos"]})
    with pytest.raises(ParameterError, match="'rotary_fraction' = 0.01 is out of range"):
        zoo.Parameters.from_values({**base, "rotary_fraction": 0.01})
    with pytest.raises(ParameterError, match="encodings"):
        zoo.Parameters.from_values({**base, "encodings": ["cope"]})
    with pytest.raises(ParameterError, match="xpos_scale_base"):
        zoo.Parameters.from_values({**base, "xpos_scale_base": 0.5})
    assert set(zoo_registered.PREDICTED_VERDICTS) == set(zoo.ENCODINGS) == set(zoo_registered.REVISED_VERDICTS) == {*ZOO, "xpos"}


def test_attention_diagnostics():
    nope = _config("nope").build_model()  # uniform attention
    d = zoo.attention_diagnostics(nope, 12, 2, 48)
    assert abs(d["target_mass"] - 1 / 48) < 1e-6 and abs(d["far_mass"] - 36 / 48) < 1e-6
    alibi = _config("alibi").build_model()  # the most recent key wins: neither the target nor a pinned key
    d = zoo.attention_diagnostics(alibi, 12, 2, 48)
    assert d["argmax_pinned"] == 0.0 and d["argmax_target"] == 0.0
    rope = _config("rope").build_model()
    with torch.no_grad():  # a kernel peaked at offset 2: every query's argmax is its target
        rope.q.copy_(torch.ones(16) * 3)
        rope.k.copy_(zoo_rotated_key(rope, 2))
    d = zoo.attention_diagnostics(rope, 12, 2, 48)
    assert d["argmax_target"] == 1.0 and d["argmax_pinned"] == 0.0


def zoo_rotated_key(head, offset: int) -> torch.Tensor:
    """The key that makes ``<R_t q, R_s k>`` largest at ``t - s = offset``: ``R_offset q``."""
    from lengthgen.model.encodings import rotate

    return rotate(head.q.detach(), torch.tensor([offset]), head.freqs)[0]


def test_fire_drift_prediction():
    import numpy as np

    q = np.array([10.0, 32.0, 64.0, 512.0])
    d = zoo_mechanisms.fire_predicted_offset(1.0, 32.0, 32, 5, q)
    assert np.allclose(d[:2], 5, atol=1e-9)  # up to L the head is relative: no drift
    assert d[2] > 5 and d[3] > d[2]  # beyond L the favoured offset moves farther back
    z_k = np.log1p(5) / np.log1p(32)
    assert np.isclose(d[3], np.expm1(z_k * np.log1p(512)))
    queries = zoo_mechanisms.drift_queries(32, 40.3, 512)
    assert queries.min() == 41 and queries.max() == 511


def _held(checks: list[tuple[str, str, str, object]], verdicts: pd.DataFrame, missing: int = 0,
          parameters: list[dict] | None = None, t5: list[float] = (), fire: list[float] = (),
          xpos_closer: list[bool] = ()) -> zoo_held_out.HeldOutZoo:
    table = pd.DataFrame([dict(key=k, name=n, role=r, passed=v, value=0.0) for k, n, r, v in checks],
                         columns=["key", "name", "role", "passed", "value"])
    runs = zoo_held_out.CommittedRuns(table, expected=table.key.nunique() + missing, missing=missing)
    t5_rows = pd.DataFrame([dict(offset=3, seed=660 + i, t5_margin=m) for i, m in enumerate(t5)],
                           columns=["offset", "seed", "t5_margin"])
    fire_rows = pd.DataFrame([dict(offset=3, seed=660 + i, drift_error=d) for i, d in enumerate(fire)],
                             columns=["offset", "seed", "drift_error"])
    xpos_rows = pd.DataFrame([dict(offset=3, seed=660 + i, measured="generalizes", judged=True, far=1.0,
                                   far_predicted=1.0 if c else 3.0, rope_far=3.0 if c else 1.0, far_init=1.0,
                                   rope_far_init=1.0, parameter_gap=0.3) for i, c in enumerate(xpos_closer)],
                             columns=zoo_verdicts.XPOS_PAIR_COLUMNS)
    diagnostics = pd.DataFrame([dict(encoding=v.encoding, offset=v.offset, seed=v.seed, target_mass=0.5, far_mass=0.1,
                                     argmax_target=0.9 if v.measured == "fails" else 1.0, argmax_pinned=0.0)
                                for v in verdicts.itertuples()] if len(verdicts) else [],
                               columns=["encoding", "offset", "seed", *zoo.DIAGNOSTIC_COLUMNS])
    return zoo_held_out.HeldOutZoo(runs, verdicts, t5_rows, fire_rows, xpos_rows, diagnostics, parameters or [], [1.0])


def _heads(encoding: str, measured: list[str], offset: int = 3) -> list[dict]:
    revised = zoo_registered.REVISED_VERDICTS[encoding][0]
    return [dict(encoding=encoding, offset=offset, seed=660 + i, learned=m != "not learned", measured=m, revised=revised,
                 agrees=m == zoo_registered.PREDICTED_VERDICTS[encoding][0], agrees_revised=m == revised, worst_beyond=0.5)
            for i, m in enumerate(measured)]


def _design_runs(**change) -> tuple[list[dict], dict]:
    defaults = dict(steps=1000, encodings=["rope"], committed_sweep="zoo", workers=2, device="auto")
    return [{**defaults, "offsets": [k], "seed_start": start, "seeds": zoo_registered.HELD_OUT_RUN_SEEDS, "committed_sweep": "",
             "workers": 1, "device": "cpu", **change}
            for k, starts in zoo_registered.HELD_OUT_DESIGN.items() for start in starts], defaults


def test_held_out_values_pool_the_verdicts_and_mechanisms():
    good = {e: ["generalizes" if zoo_registered.REVISED_VERDICTS[e][0] == "generalizes" else "fails"] * 12
            for e in zoo_registered.EXPECT_LEARNED}
    verdicts = pd.DataFrame([h for e, m in good.items() for h in _heads(e, m)]
                            + _heads("nope", ["not learned"] * 12))
    runs, defaults = _design_runs()
    passing = [("a", n, "evidence", True) for n in zoo_registered.HELD_OUT_EVIDENCE]
    mechanisms = dict(t5=[0.5] * 12, fire=[0.1] * 12, xpos_closer=[True] * 12)
    values = zoo_held_out.held_out_values(_held(passing + [("a", "not_learnable", "sanity", True)], verdicts, 0, runs,
                                       **mechanisms), defaults)
    assert values["held_out_verdicts"] == 0 and values["held_out_mechanisms"] == 0 and values["held_out_design"] == 0
    assert values["held_out_complete"] == 0 and values["held_out_other_failures"] == 0
    assert values["held_out_agreement"] == 1.0 and values["held_out_run_failures"] == 0
    assert values["held_out_offset_cells"] == 0
    # the pooled verdicts can fail: 'fails' cells on heads that never learned, a generalizing cell with misses, a
    # missing encoding; one miss in twelve is tolerated
    bad = {**good, "t5": ["not learned"] * 12, "rope": ["fails"] * 4 + ["generalizes"] * 8,
           "partial_rope": ["fails"] + ["generalizes"] * 11}
    bad.pop("xpos")
    verdicts_bad = pd.DataFrame([h for e, m in bad.items() for h in _heads(e, m)])
    values = zoo_held_out.held_out_values(_held(passing, verdicts_bad, 0, runs, **mechanisms), defaults)
    assert values["held_out_verdicts"] == 3  # t5 (nothing judged), rope (4 of 12), xpos (no heads)
    cells = zoo_held_out.held_out_cells(verdicts_bad).set_index("encoding")
    assert cells.loc["partial_rope", "holds"] and not cells.loc["rope", "holds"] and cells.loc["t5", "judged"] == 0
    assert 0 < cells.loc["sinusoidal", "low"] < 1 and cells.loc["sinusoidal", "high"] == 1.0
    assert values["held_out_offset_cells"] == 2  # rope and t5 at offset 3 (xpos has no cell at all)
    assert values["held_out_partial_argmax"] == pytest.approx(0.9)  # the one failing partial-RoPE head
    assert math.isnan(zoo_held_out.held_out_values(_held(passing, verdicts, 0, runs, **mechanisms), defaults)[
        "held_out_partial_argmax"])  # none fails
    # the pooled mechanisms can fail: T5 margins at or below zero, FIRE drift beyond the tolerance or not computable,
    # xPos heads not closer to the prediction, and too few heads
    broken = dict(t5=[0.5] * 8 + [-0.1] * 4, fire=[0.1] * 10 + [float("nan"), 5.0], xpos_closer=[True] * 9)
    table = zoo_held_out.held_out_mechanism_table(_held(passing, verdicts, 0, runs, **broken)).set_index("mechanism")
    assert list(table.misses) == [4, 2, 0] and list(table.holds) == [False, True, False]  # xpos: 9 < 10 heads
    unlearned = verdicts.assign(learned=verdicts.encoding != "fire")
    table = zoo_held_out.held_out_mechanism_table(_held(passing, unlearned, 0, runs, **mechanisms)).set_index("mechanism")
    assert table.loc["fire_drift", "judged"] == 0 and not table.loc["fire_drift", "holds"]  # unlearned FIRE is no evidence
    # per run: a failing evidence check, a missing one, a failing sanity check, a stale run, runs off the design
    failing = [("a", n, "evidence", n != "fire_drift") for n in zoo_registered.HELD_OUT_EVIDENCE]
    partial = [("b", n, "evidence", True) for n in zoo_registered.HELD_OUT_EVIDENCE[1:]]
    values = zoo_held_out.held_out_values(_held(failing + partial + [("b", "not_learnable", "sanity", False)], verdicts, 1,
                                       runs[1:], **mechanisms), defaults)
    assert values["held_out_run_failures"] == 2 and values["held_out_other_failures"] == 1
    assert values["held_out_complete"] == 1
    assert values["held_out_design"] == zoo_registered.HELD_OUT_RUN_SEEDS  # the dropped run's heads are missing
    for change in (dict(steps=2000), dict(device="cuda"), dict(seed_start=640)):
        off = [{**runs[0], **change}, *runs[1:]]
        values = zoo_held_out.held_out_values(_held(passing, verdicts, 0, off, **mechanisms), defaults)
        assert values["held_out_design"] >= 1, change
    twice = zoo_held_out.held_out_values(_held(passing, verdicts, 0, [*runs, runs[0]], **mechanisms), defaults)
    assert twice["held_out_design"] == 1  # the same heads drawn by two runs
    # no sweep: nothing to read and nothing missing, but no evidence (NaN fails == 0); a sweep without runs likewise
    assert zoo_held_out.held_out_values(None, {})["held_out_complete"] == 0
    assert math.isnan(zoo_held_out.held_out_values(None, {})["held_out_verdicts"])
    empty = zoo_held_out.held_out_values(_held([], verdicts.iloc[:0], missing=6), {})
    assert empty["held_out_complete"] == 6 and math.isnan(empty["held_out_mechanisms"])


def test_the_committed_spec_is_the_registered_design():
    import json

    from lengthgen.book.paths import SWEEPS_DIR, notebook_path
    from lengthgen.book.rerun import checked_parameters, default_parameters
    from lengthgen.book.sweep import expand, load_spec

    runs = [r for r in expand(load_spec(SWEEPS_DIR / zoo.HELD_OUT_SWEEP / "spec.yaml")) if r.chapter == "10_zoo"]
    parameters = [json.loads(json.dumps(checked_parameters(r.chapter, r.overrides).as_dict())) for r in runs]
    held = zoo_held_out.HeldOutZoo(None, *[pd.DataFrame()] * 5, parameters, [])
    assert zoo_held_out.design_violations(held, default_parameters(notebook_path("10_zoo"))) == 0


def test_the_held_out_lists_cover_the_evidence_checks():
    evidence = {c.name for c in zoo_claims.CLAIMS if c.role == "evidence" and c.comparison and not c.name.startswith("held_out")}
    assert evidence == set(zoo_registered.HELD_OUT_EVIDENCE) and set(zoo_registered.HELD_OUT_MECHANISMS) < evidence


def test_the_committed_zoo_sweep_is_complete_current_and_on_its_design():
    held = zoo_held_out.held_out_zoo(zoo.HELD_OUT_SWEEP)
    assert held.runs.expected == 6 and held.runs.missing == 0, "regenerate: make sweep SPEC=data/sweeps/zoo/spec.yaml"
    values = zoo_held_out.held_out_values(held, current_defaults("10_zoo"))
    assert values["held_out_design"] == 0 and set(held.verdicts.seed) <= set(zoo.HELD_OUT_SEEDS)
    assert len(held.verdicts) == 6 * zoo_registered.HELD_OUT_RUN_SEEDS * len(zoo.ENCODINGS) and len(held.xpos) == 30
