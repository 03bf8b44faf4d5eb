"""The int8 target (models/quantize.py): every row of a product is the same bits whichever rows share it, so exact
mode holds for it and a greedy race writes plain decoding's tokens; the product stays close to the float one; the
smoothing changes the model's function by no more than rounding; and the layer survives a pickle (ZeroGPU)."""

import pickle

import pytest
import torch
import torch.nn.functional as F
from tiny import loaded, perturbed, tiny_llama

from specviz.events import generated_ids
from specviz.models.exact import exact_problem, is_exact, set_exact
from specviz.models.quantize import RowInt8Linear, int8_rows
from specviz.models.smoothing import input_maxima, smooth
from specviz.runs import generate_named
from specviz.settings import Settings


def layer(inputs=96, outputs=80, seed=0, bias=True) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(inputs, outputs, bias=bias)


def per_tensor(linear: RowInt8Linear):
    """The mutant: one input scale for the whole product (what torch's dynamic int8 Linear does)."""

    def forward(x):
        scale = x.abs().amax().clamp_min(1e-30) / 63
        out = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(x / scale, 1.0, 64, linear._packed)
        return out * scale + linear.bias

    return forward


def rows_part(forward, x: torch.Tensor) -> list[int]:
    """The row counts n at which a product of the first n rows gives some row other bits than that row alone."""
    alone = torch.cat([forward(x[i : i + 1]) for i in range(len(x))])
    return [n for n in range(2, len(x) + 1) if not torch.equal(forward(x[:n]), alone[:n])]


def test_a_rows_product_is_the_same_bits_whatever_shares_it():
    quantised = RowInt8Linear(layer())
    x = torch.randn(16, 96) * torch.linspace(0.1, 10, 16).unsqueeze(1)  # rows of very different sizes
    assert rows_part(quantised.forward, x) == []
    # one scale for the whole product (the mutant) ties a small row's rounding to the largest row beside it
    assert rows_part(per_tensor(quantised), x) != []


def test_the_product_stays_close_to_the_float_one():
    linear = layer(inputs=512, outputs=256)
    x = torch.randn(9, 512)
    exact, quantised = F.linear(x, linear.weight, linear.bias), RowInt8Linear(linear)(x)
    assert (quantised - exact).norm() / exact.norm() < 0.03
    assert quantised.shape == exact.shape and quantised.dtype == torch.float32
    assert torch.equal(quantised.reshape(-1), RowInt8Linear(linear)(x.reshape(1, 9, 512)).reshape(-1))


def test_smoothing_moves_outliers_without_changing_the_function(tokenizer):
    model = tiny_llama(len(tokenizer), seed=4)
    ids = tokenizer.encode("w1 w2 w3 w4 w5 w6 w7 w8")
    with torch.no_grad():  # an outlier channel, as real models have in the MLP's down projection's input
        for block in model.model.layers:
            block.mlp.up_proj.weight[3] *= 40
    before = model(input_ids=torch.tensor([ids])).logits
    maxima = input_maxima(model, ids)
    down = maxima["model.layers.0.mlp.down_proj"]
    assert smooth(model, maxima)
    after_maxima = input_maxima(model, ids)["model.layers.0.mlp.down_proj"]
    spread = lambda m: (m.max() / m.median()).item()  # noqa: E731
    assert spread(after_maxima) < spread(down) / 3
    assert torch.allclose(model(input_ids=torch.tensor([ids])).logits, before, atol=1e-4, rtol=1e-4)


def test_a_layer_survives_a_pickle():
    quantised = RowInt8Linear(layer())
    x = torch.randn(3, 96)
    back = pickle.loads(pickle.dumps(quantised))
    assert torch.equal(back(x), quantised(x)) and torch.equal(back.weight().int_repr(), quantised.weight().int_repr())


@pytest.fixture(scope="module")
def int8_pair(tokenizer):
    target = loaded(int8_rows(tiny_llama(len(tokenizer), seed=1, intermediate=256)), tokenizer, "tiny-int8")
    draft = loaded(int8_rows(perturbed(tiny_llama(len(tokenizer), seed=1, intermediate=256), 3, 0.3)), tokenizer)
    assert exact_problem(target.model) == ""
    assert set_exact(target.model, True) == "" and is_exact(target.model)
    yield target, draft
    set_exact(target.model, False)


PROMPTS = ("w6 w11 w40 w46 w55 w18 w7", "w31 w30 w7 w1 w19", "w51 w54 w52 w59 w16 w2 w53", "w13 w41 w20")


@pytest.mark.parametrize("drafter", ["draft", "ngram"])
def test_an_int8_target_in_exact_mode_races_to_plain_decodings_tokens(int8_pair, tokenizer, drafter):
    target, draft = int8_pair
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt)
        settings = Settings(max_new_tokens=24, gamma=4)
        plain = generated_ids(generate_named(target, ids, settings))
        spec = generated_ids(generate_named(target, ids, settings, drafter, draft if drafter == "draft" else None))
        assert spec == plain, (prompt, drafter)
