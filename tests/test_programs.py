"""Sequential Representation Complexity of step-by-step programs: hand-checkable costs, the registered verdicts."""

from __future__ import annotations

import math

import pytest

from lengthgen.model import programs

SCALES = list(range(1, 7))

# The conjecture's verdict for every (task, scheme) cell, registered before any model is trained on these tasks.
SCHEME_ORDER = ("ape", "nope", "rpe", "coupled", "rpe_scale_hint", "lbpe")
VERDICT = {"G": "generalizes", "F": "fails"}
REGISTERED = {task: dict(zip(SCHEME_ORDER, (VERDICT[v] for v in verdicts), strict=True)) for task, verdicts in {
    #                         ape nope rpe coupled scale-hint lbpe
    "copy":                   "FFGGGG",
    "copy_repeat":            "FFFGGG",
    "reversal":               "FFGGGG",
    "reversal_repeat":        "FFFGGG",
    "parity_cot":             "FFFGGG",
    "parity_cot_interleaved": "FFGFGG",
    "addition":               "FFFGGG",
    "mode":                   "GGGGGG",
    "parity":                 "GGGGGG",
}.items()}


def cost(head: programs.Head, scheme: str) -> list[float]:
    return programs.head_cost(head, scheme, SCALES)[0]


def test_direct_copy_needs_a_new_offset_at_every_scale_and_one_coupled_operator():
    direct = programs.PROGRAMS["copy"]["direct"][0]
    assert programs.head_cost(direct, "rpe", SCALES) == ([1, 2, 3, 4, 5, 6], "offset")  # offset n at scale n
    assert cost(direct, "ape") == [n * (n + 1) / 2 for n in SCALES]  # a cell per answer, new at every scale
    assert programs.head_cost(direct, "coupled", SCALES) == ([1] * 6, "coupled")  # source id = query id + 1
    assert programs.head_cost(direct, "rpe_scale_hint", SCALES) == ([1] * 6, "hint_offset_1")  # i - j - n = 0


def test_induction_needs_only_the_previous_token_offset():
    previous, match, flag = programs.PROGRAMS["copy"]["induction"]
    assert cost(previous, "rpe") == [1] * 6
    assert cost(match, "rpe") == [0] * 6 and cost(flag, "nope") == [0] * 6  # content heads are free
    assert cost(previous, "ape") == SCALES  # the cells (j, j - 1), j <= n: a new one at every scale


def test_a_key_read_in_one_cell_and_ignored_in_another_is_not_representable():
    reverse = programs.PROGRAMS["reversal"]["direct"][0]
    r = reverse.build(2)  # answer 1 (query 2) reads position 1; answer 2 (query 3) reads 0 and ignores 2 and 1
    assert programs.scale_operators("offset", r) is None  # offset 1 is read by query 2 and ignored by query 3
    assert programs.scale_operators("hint_mirror_2", r) == {-1}  # i + j - 2n = -1 at every answer
    assert programs.scale_operators("absolute", r) is not None
    assert programs.head_cost(reverse, "rpe", SCALES)[1] == "absolute"  # falls back to counting, which grows


def test_addition_is_two_coupled_operators_and_four_scale_hinted_ones():
    curve, program, relations = programs.src_curve("addition", "coupled", SCALES)
    assert curve == [2] * 6 and program == "by digit" and set(relations.values()) == {"coupled"}
    curve, program, relations = programs.src_curve("addition", "rpe_scale_hint", SCALES)
    assert curve[1:] == [4] * 5 and program == "by operand"  # offsets 2n + 1 and n (and 2n + 2, n + 1) minus c n
    rpe, _, _ = programs.src_curve("addition", "rpe", SCALES)
    assert rpe[-1] > rpe[2] > 0


def test_src_takes_the_cheapest_program():
    curve, program, _ = programs.src_curve("copy", "rpe", SCALES)
    assert curve == [1] * 6 and program == "induction"  # direct costs 1, 2, .. 6
    repeat, program, _ = programs.src_curve("copy_repeat", "rpe", SCALES)
    assert repeat == SCALES and program == "direct"  # no content match without distinct tokens


def test_verdicts_and_bad_inputs():
    assert programs.src_verdict(1, 1) == "generalizes" and programs.src_verdict(3, 9) == "fails"
    assert programs.src_verdict(math.inf, math.inf) == "fails"
    with pytest.raises(ValueError, match="scale"):
        programs.answer_read(lambda n, t: t - 1)(0)
    with pytest.raises(ValueError, match="earlier positions"):
        programs.reads(2, 5, programs.np.zeros(5, dtype=int), [(2, [2])])
    with pytest.raises(ValueError, match="scheme"):
        programs.head_cost(programs.PROGRAMS["copy"]["direct"][0], "alibi", SCALES)
    with pytest.raises(ValueError, match="task"):
        programs.src_curve("sorting", "rpe", SCALES)
    for bad in ([], [3, 2], [2, 3, 4]):
        with pytest.raises(ValueError, match="every scale"):
            programs.src_curve("copy", "rpe", bad)
    with pytest.raises(ValueError, match="scale_factor"):
        programs.src_table(4, 1)
    with pytest.raises(ValueError, match="relation"):
        programs.relation_keys("mirror", programs.PROGRAMS["copy"]["direct"][0].build(2))


@pytest.mark.parametrize(("train_scale", "factor"), [(2, 2), (5, 3), (8, 4)])
def test_the_registered_verdicts(train_scale, factor):
    """The whole table, at several training scales; parity against Zhou et al. is the disagreement expected in advance
    (SRC counts no readout)."""
    table = programs.src_table(train_scale, factor)
    assert {(r["task"], r["scheme"]): r["predicted"] for r in table} == {
        (task, scheme): verdict for task, by_scheme in REGISTERED.items() for scheme, verdict in by_scheme.items()}
    assert set(REGISTERED) == set(programs.TASKS) == set(programs.PROGRAMS)
    assert {r["task"] for r in table if r["rasp_l"] and r["rasp_l"] != r["predicted"] and r["scheme"] == "rpe"} == {
        "parity"}
