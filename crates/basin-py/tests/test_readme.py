"""The README's Python examples run as written."""

import re
from pathlib import Path

from conftest import need

README = Path(__file__).resolve().parents[3] / "README.md"


def examples():
    text = README.read_text(encoding="utf-8")
    section = text.split("### 4. From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_has_its_three_python_examples():
    assert len(examples()) == 3


def test_the_block_example_runs():
    scope = {}
    exec(examples()[0], scope)
    losses, energy = scope["losses"], scope["energy"]
    assert losses[-1] < losses[0] and scope["x"].grad is not None
    assert (energy[1:] <= energy[:-1] + 1e-4).all()


def test_the_model_example_runs():
    need("tu/MUTAG")
    scope = {}
    exec("import torch, basin\n" + examples()[1], scope)
    assert scope["model"].predict([0]).shape == (1, 2)


def test_the_graph_classifier_example_runs():
    import pytest

    pytest.importorskip("torch_geometric")
    need("tu/MUTAG")
    scope = {}
    exec("import torch, basin\n" + examples()[2], scope)
    assert scope["loss"].requires_grad and scope["model"].encoder.weight.grad is not None
