import json

import pytest

from lengthgen.book.records import ChapterRecord, checks_table, load_records


def test_record_checks_reports_and_atomic_save(tmp_path):
    record = ChapterRecord("01_equivariance", dict(seeds=2, offsets=(3, 5)))
    assert record.check("a", "small error", 1e-14, "<=", 1e-12, role="proof")
    assert not record.check("b", "high accuracy", 0.5, ">=", 0.95)
    assert not record.check("c", "a NaN never passes", float("nan"), "<", 1.0)
    record.report("d", "a reported number", 0.81)
    record.wall_time_s = 12.5
    path = record.save(tmp_path / "01_equivariance.json")
    assert [p.name for p in tmp_path.iterdir()] == ["01_equivariance.json"]  # no temporary file left behind
    data = json.loads(path.read_text())
    assert data["wall_time_s"] == 12.5 and data["parameters"]["offsets"] == [3, 5]
    records = load_records(tmp_path)
    table = checks_table(list(records.values()))
    assert list(table.passed) == [True, False, False, None]
    assert list(table.role) == ["proof", "evidence", "evidence", "reported"]
    with pytest.raises(AssertionError, match=r"b: high accuracy: measured 0.5, required >= 0.95"):
        record.assert_all()
    with pytest.raises(ValueError, match="comparison must be one of"):
        record.check("e", "bad", 1.0, "~", 1.0)


def test_assert_all_ignores_reported_numbers():
    record = ChapterRecord("x", {})
    record.report("pins", "seeds that pin", 3)
    record.check("ok", "fine", 1, "==", 1)
    record.assert_all()
