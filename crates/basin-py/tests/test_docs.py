"""Every public callable of the package says what it does, and the examples run."""

import inspect
import pathlib
import subprocess
import sys

import pytest

import basin

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def public_callables():
    """``(dotted name, object)`` of every public class, function, method and property."""
    seen, found = set(), []

    def walk(owner, path):
        for name in dir(owner):
            if name.startswith("_"):
                continue
            value = getattr(owner, name)
            if inspect.ismodule(value):
                if value.__name__.startswith("basin.") and value.__name__ not in seen:
                    seen.add(value.__name__)
                    walk(value, value.__name__)
                continue
            if not (getattr(value, "__module__", None) or "").startswith("basin"):
                continue
            if inspect.isclass(value):
                if f"{value.__module__}.{value.__qualname__}" in seen:
                    continue
                seen.add(f"{value.__module__}.{value.__qualname__}")
                found.append((f"{path}.{name}", value))
                for member, attr in vars(value).items():
                    if not member.startswith("_") and (callable(attr) or isinstance(attr, property)):
                        found.append((f"{path}.{name}.{member}", attr))
            elif callable(value):
                found.append((f"{path}.{name}", value))

    walk(basin, "basin")
    return found


def test_every_public_callable_has_a_docstring():
    names = [name for name, obj in public_callables() if not (obj.__doc__ or "").strip()]
    assert len(public_callables()) > 40
    assert names == []


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_the_example_runs(script):
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok" in done.stdout.splitlines()[-1]


def test_there_are_the_two_examples():
    assert {p.name for p in EXAMPLES.glob("*.py")} == {"train_block.py", "from_hflayers.py"}
