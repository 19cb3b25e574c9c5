"""The graph presets equal a fresh import of their PyTorch definitions (tests/graph_presets.py), and their
parameters (the sequence length) work and fail as documented."""

from __future__ import annotations

import pytest
from graph_presets import PRESETS, build

from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.specs import Network


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_stored_preset_equals_a_fresh_import(name: str) -> None:
    fresh = Network.build(build(name))
    stored = presets.network(name)
    assert stored == fresh, "regenerate with: python3 tests/graph_presets.py --write"
    assert not stored.is_chain


def test_published_sizes() -> None:
    """Parameter counts as torchvision documents them, and the transformers' published shapes."""
    assert totals(presets.network("resnet50")).weights == 25_557_032
    assert totals(presets.network("mobilenet-v2")).weights == 3_504_872
    assert totals(presets.network("vit-b16")).weights == 86_567_656
    # GPT-2 small: 124,439,808 with the head tied to the token embedding (as released, and as PyTorch counts
    # the tied module's parameters).
    assert totals(presets.network("gpt2-small")).weights == 124_439_808
    assert totals(presets.network("bert-base")).weights == 109_482_240  # encoder and pooler
    heads = {layer.heads for layer in presets.network("bert-base").layers if layer.kind == "attention"}
    assert heads == {12}


def test_sequence_length_is_a_parameter() -> None:
    short = presets.network("gpt2-small:seq_len=256")
    assert short.input_shape == (256,) and short.name == "gpt2-small:seq_len=256"
    full = presets.network("gpt2-small")
    # Projections scale with S, the attention scores with S²: a quarter of the tokens, less than a quarter
    # of the work.
    assert totals(short).macs_forward < totals(full).macs_forward / 4
    assert totals(short).weights == totals(full).weights
    assert presets.default_dataset_for(short).name == "openwebtext"
    for bad, message in (("gpt2-small:seq_len=2048", "from 1 to 1024"), ("bert-base:seq_len=0", "from 1 to 512"),
                         ("gpt2-small:heads=4", "is not a parameter"), ("resnet50:seq_len=8", "token ids")):
        with pytest.raises(SpecError, match=message) as info:
            presets.network(bad)
        assert "\n" not in str(info.value)
