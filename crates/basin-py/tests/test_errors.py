"""basin's errors arrive as Python exceptions with basin's messages; no panic crosses."""

import pytest
import torch

import basin


def block():
    return basin.EnergyBlock(dim=8, steps=2, terms=[basin.terms.Attention(heads=2, head_dim=4)])


def test_an_unknown_config_field_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"terms\[0\].*unknown field `bogus`"):
        basin.EnergyBlock(dim=8, steps=2, terms=[basin.terms.Attention(heads=2, head_dim=4, bogus=1)])


def test_an_unknown_term_kind_lists_the_registered_ones():
    with pytest.raises(ValueError, match="unknown energy term `nope`.*attention"):
        basin.EnergyBlock(dim=8, steps=2, terms=[basin.terms.term("nope")])


def test_a_tensor_of_the_wrong_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"tensor `x`.*\[B, N, 8\]"):
        block()(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="tensor `mask`"):
        block()(torch.randn(2, 3, 8), mask=torch.ones(2, 3, 3))


def test_a_missing_file_is_a_file_not_found_error():
    with pytest.raises(FileNotFoundError, match="nonexistent.safetensors"):
        basin.load_checkpoint("/nonexistent.safetensors")
    with pytest.raises(FileNotFoundError, match="nonexistent.toml"):
        basin.train("/nonexistent.toml", "/tmp/basin-never")
    with pytest.raises(FileNotFoundError, match="not a registered name"):
        basin.datasets.load("NO-SUCH-SET", data_dir="/nonexistent")


def test_a_damaged_checkpoint_is_a_value_error_naming_the_file(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(ValueError, match="bad.safetensors"):
        basin.load_checkpoint(bad)


def test_an_unknown_table_is_a_value_error():
    with pytest.raises(ValueError, match="unknown table `et-table99`"):
        basin.reproduce("et-table99", "quick", "/tmp/basin-never")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_libtorch_failure_is_a_runtime_error():
    b = block()
    x = torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError):
        b(x.to("meta"))
