"""`basin reproduce` as a call: the report comes back as the dict `report.json` holds."""

import json

import basin


def test_reproduce_returns_the_report_it_writes(tmp_path):
    report = basin.reproduce("cdat-params", "quick", tmp_path)
    assert report["preset"] == "quick"
    assert report == json.loads((tmp_path / "report.json").read_text())
    assert (tmp_path / "report.md").read_text().startswith("# ")
    assert "cdat-params" in basin.tables()


def test_example_run_files_parse_back():
    for name in ["et-graph", "cdat-graph", "et-anomaly", "cdat-anomaly", "sfi-pattern", "et-image"]:
        assert basin.example(name).startswith("task = ")
