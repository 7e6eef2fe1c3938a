"""Every public layer documents itself as Keras' own layers do: Args, Call arguments, an Example and the paper,
in at most 90 lines (Keras' LSTM has about 110); why a default was chosen belongs in docs/layers.md."""

import pytest

import keras_relmem as kr
from keras_relmem.layers.halting import HaltingPolicy

LAYERS = (kr.MEMO, kr.EntNetCell, kr.EntNetEncoder, kr.EntNetReadout, kr.RelationalMemory, kr.RelationalMemoryCell,
          kr.ReversibleEmbedding, HaltingPolicy)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: layer.__name__)
def test_a_public_layers_docstring_is_complete_and_short(layer):
    text = layer.__doc__ or ""
    assert len(text.splitlines()) <= 90, f"{layer.__name__}: {len(text.splitlines())} lines"
    for section in ("Args:", "Call arguments:", "Example", "Reference"):
        assert section in text, f"{layer.__name__} has no {section}"
