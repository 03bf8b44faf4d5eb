"""Exact mode (specviz/models/exact.py): in bfloat16 a verify forward gives each row, bit for bit, what a one-token
forward gives it, so greedy speculative output equals plain decoding's for every drafter on prompts where, without
the mode, a near tie tips it apart; sampling keeps the target's law; where the mode cannot hold it says why.

Whether a CPU's kernels show the problem at all is the machine's business, not the code's: on a CPU whose kernels do
not show it, rows and outputs agree without the mode too, and a check of the mode on them alone could not fail. So the
checks of the mode on this CPU's kernels run everywhere, and beside each one the same check runs on kernels that show
the problem on any CPU (`kernels_that_count_rows`): there the rows and outputs must part without the mode and agree in
it. Whether this CPU's own kernels show it is measured, never asserted: where they do not, a warning says so."""

import copy
import warnings
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from laws import chain
from tiny import dflash_config, loaded, perturbed, tiny_llama

from specviz.drafters.dflash.dflash_checkpoint import build_draft
from specviz.drafters.eagle.eagle_checkpoint import head_config
from specviz.drafters.eagle.head import EagleHead
from specviz.drafters.medusa.heads import MedusaHeads
from specviz.drafters.suffix_index import RunMemory
from specviz.engine.cached_lm import CachedLM
from specviz.engine.static_lm import StaticLM
from specviz.engine.tree import build_tree, row_after
from specviz.events import generated_ids
from specviz.models.exact import EXACT_ATTENTION, PairedLinear, exact_problem, is_exact, rows_product, set_exact
from specviz.models.quantize import RowInt8Linear
from specviz.runs import generate_named
from specviz.settings import Settings

# The tiny target's MLP is this wide so that its down projection reads more than 1,024 inputs: there a CPU whose
# kernels show the problem sums a one-row bfloat16 product in another order than a product of several rows, as in
# real models.
WIDE = 2048

# Prompts on which each drafter's greedy output parted from plain decoding's without exact mode (found by a search
# over 80 random prompts of the tiny vocabulary, with one thread and with two, on a CPU whose kernels show the
# problem; on one whose kernels do not, or show less of it, some drafters' do not part). On kernels that count rows at
# least one of each drafter's parts, whatever the CPU.
PARTING = {
    "draft": ("w6 w11 w40 w46 w55 w18 w7 w47", "w31 w30 w7 w1 w19"),
    "draft tree": ("w51 w54 w52 w59 w16 w2 w53", "w46 w10 w28"),
    "hybrid": ("w16 w7 w31", "w15 w17 w7 w51 w39"),
    "ngram": ("w13 w41 w20", "w1 w0 w50"),
    "history": ("w46 w10 w28", "w1 w0 w50"),
    "suffix": ("w46 w10 w28", "w13 w41 w20"),
    "medusa": ("w16 w7 w31", "w57 w46 w45 w32 w59"),
    "eagle": ("w51 w54 w52 w59 w16 w2 w53", "w13 w17 w43 w6 w53 w24"),
    "dflash": ("w18 w8 w48 w6", "w19 w6 w46 w4"),
}


@pytest.fixture(scope="module")
def wide(tokenizer):
    """(target, draft, Medusa heads, EAGLE head, DFlash drafter of block 4), all in bfloat16; the target in exact mode
    until a test says not."""
    target = loaded(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE).bfloat16(), tokenizer, "tiny-wide")
    draft = perturbed(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE), seed=3, scale=0.3)
    torch.manual_seed(0)
    heads = MedusaHeads(64, target.vocab_size, 4, 1).bfloat16()
    torch.manual_seed(0)
    head = EagleHead(head_config({}, target.model.config), "eagle1", target.model).eval().bfloat16()
    torch.manual_seed(0)
    block = dflash_config(target.model, 4, target.model.config.vocab_size - 1, target_layers=(0, 1))
    dflash = build_draft(block, target.model).eval().bfloat16()
    assert set_exact(target.model, True) == ""
    yield target, loaded(draft.bfloat16(), tokenizer, "tiny-wide-draft"), heads, head, dflash
    set_exact(target.model, False)


@pytest.fixture
def exact(wide, request):
    """The wide target with exact mode as the test's parameter asks (on by default), and on again afterwards."""
    on = getattr(request, "param", True)
    set_exact(wide[0].model, on)
    yield on
    set_exact(wide[0].model, True)


def rows_one_at_a_time(make, prompt: list[int], fed: list[int]) -> list[torch.Tensor]:
    """What plain decoding computes: after the prompt's prefill, one token per forward."""
    lm = make()
    lm.extend(torch.tensor(prompt[:-1]), last_only=True)
    return [lm.extend(torch.tensor([t]))[0] for t in fed]


def caches(model):
    return {"dynamic": lambda: CachedLM(model), "static": lambda: StaticLM(model, 256)}


class KernelsDoNotShowIt(UserWarning):
    """This CPU's kernels give a row what they give it whatever shares its call, where a test measured it: there the
    mode's check on this CPU's kernels cannot fail, and the check on kernels that count rows is the one that can."""


def measured(shown: bool, problem: str) -> None:
    """Reports (in the warnings summary) where this CPU's kernels do not show `problem`; never fails."""
    if not shown:
        warnings.warn(f"this CPU's kernels do not show it: {problem}", KernelsDoNotShowIt, stacklevel=2)


def one_step_up(t: torch.Tensor) -> torch.Tensor:
    """Every value rounded one representable step up: what summing in another order can give."""
    return torch.nextafter(t, torch.full_like(t, torch.inf))


SWITCH_PAST = 8  # the emulated kernels switch again past this many rows, as an AMX Xeon's bfloat16 ones do past 32


@contextmanager
def kernels_that_count_rows(*models):
    """A matrix product and attention whose result for a row depends on how many rows share the call, on any CPU, as
    some CPUs' bfloat16 kernels do: the product of one row comes out one step above the row that this CPU's product of
    2 to SWITCH_PAST rows gives it (whatever this CPU's own one-row kernel gives), a product of more rows one step
    below, and attention over several query rows with a mask (a verify forward without the mode) one step above what
    this CPU's kernel gives. Everything that looks the functions up on torch.nn.functional at call time gets them:
    Linear layers, PairedLinear, transformers' attention and exact mode's. What exact mode probed of `models`' kernels
    is forgotten on the way in and out, so switching it on in here probes these kernels."""
    linear, attention = F.linear, F.scaled_dot_product_attention

    def product(x, weight, bias=None):
        rows = x.numel() // x.shape[-1]
        if rows > SWITCH_PAST:
            return torch.nextafter(linear(x, weight, bias), torch.tensor(-torch.inf, dtype=x.dtype))
        if rows > 1:
            return linear(x, weight, bias)
        row = x.reshape(1, -1)
        out = one_step_up(linear(torch.cat([row, torch.zeros_like(row)]), weight, bias)[:1])
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def attend(query, key, value, attn_mask=None, **options):
        out = attention(query, key, value, attn_mask, **options)
        return one_step_up(out) if attn_mask is not None and query.shape[-2] > 1 else out

    forget = lambda: [m.__dict__.pop("_specviz_exact_problem", None) for m in models]  # noqa: E731
    forget()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(F, "linear", product)
            patch.setattr(F, "scaled_dot_product_attention", attend)
            yield
    finally:
        forget()


def on_both_kernels(model, apart) -> tuple[bool, bool, list]:
    """`apart()` yields what comes out otherwise than plain decoding's (rows, prompts): whether anything does on this
    CPU's kernels without exact mode, and on kernels that count rows without it (each stops at the first), and all
    that does on them in it. Leaves the mode on."""
    assert set_exact(model, False) == ""
    here = next(apart(), None) is not None
    with kernels_that_count_rows(model):
        without = next(apart(), None) is not None
        assert set_exact(model, True) == ""
        within = list(apart())
    return here, without, within


@torch.inference_mode()
def verify_rows_apart(target, tokenizer):
    """Yields (plain decoding's cache, the verify forward's, k, row) of every row of a verify forward of k = 2..16
    tokens that is not the one-token forward's row, over both caches on each side."""
    prompt = tokenizer.encode("w6 w11 w40 w46 w55 w18 w7")
    drafts = tokenizer.encode("w3 w9 w27 w44 w5 w12 w33 w8 w19 w2 w50 w41 w7 w30 w16")
    for plain_cache, make_plain in caches(target.model).items():
        alone = rows_one_at_a_time(make_plain, prompt, [prompt[-1], *drafts])
        for verify_cache, make_verify in caches(target.model).items():
            for k in range(2, 17):
                lm = make_verify()
                lm.extend(torch.tensor(prompt[:-1]), last_only=True)
                rows = lm.extend(torch.tensor([prompt[-1], *drafts[: k - 1]]))
                yield from ((plain_cache, verify_cache, k, i) for i in range(k) if not torch.equal(rows[i], alone[i]))


@torch.inference_mode()
def tree_rows_apart(target, tokenizer):
    """Yields (cache, node) of every node of a tree verified at once whose row is not what one-token forwards along
    its path give it, in both caches."""
    prompt = tokenizer.encode("w51 w54 w52 w59 w16")
    w = tokenizer.convert_tokens_to_ids
    tree = build_tree(
        [w(["w3", "w9", "w27", "w4"]), w(["w3", "w9", "w5"]), w(["w3", "w40"]), w(["w12", "w13", "w14"]), w(["w8"])]
    )
    for name, make in caches(target.model).items():
        lm = make()
        lm.extend(torch.tensor(prompt[:-1]), last_only=True)
        rows = lm.extend_tree(prompt[-1], tree)
        for node in range(len(tree.tokens)):
            path = [tree.tokens[n] for n in tree.path_to(node)]
            alone = rows_one_at_a_time(caches(target.model)["dynamic"], prompt, [prompt[-1], *path])[-1]
            if not torch.equal(rows[row_after(node)], alone):
                yield name, node


def test_a_verify_forward_of_k_tokens_gives_the_one_token_forwards_rows(wide, tokenizer, exact):
    apart = list(verify_rows_apart(wide[0], tokenizer))
    assert not apart, apart


def test_every_node_of_a_tree_gets_its_paths_one_token_rows(wide, tokenizer, exact):
    apart = list(tree_rows_apart(wide[0], tokenizer))
    assert not apart, apart


@pytest.mark.parametrize("rows_apart", [verify_rows_apart, tree_rows_apart], ids=["chain", "tree"])
def test_on_kernels_that_count_rows_a_verify_forwards_rows_part_without_exact_mode_and_not_in_it(
    wide, tokenizer, exact, rows_apart
):
    """Without the mode some rows come out otherwise (on this CPU's kernels, if they show the problem; on kernels
    that count rows, always), so the test can tell; in the mode none does."""
    here, without, within = on_both_kernels(wide[0].model, lambda: rows_apart(wide[0], tokenizer))
    measured(here, "without exact mode a verify forward's rows are the one-token forwards' rows")
    assert without  # the problem the mode answers, on kernels that count rows
    assert not within, within


def drafter_for(label: str, wide):
    """(registry name, draft model, options) for a PARTING label."""
    target, draft, heads, head, dflash = wide
    return {
        "draft": ("draft", draft, {}),
        "draft tree": ("draft", draft, {"draft_tree": "tree", "draft_nodes": 6}),
        "hybrid": ("hybrid", draft, {}),
        "ngram": ("ngram", None, {}),
        "history": ("history", None, {"candidates": 4}),
        "suffix": ("suffix", None, {}),
        "medusa": ("medusa", None, {"medusa": heads}),
        "eagle": ("eagle", None, {"eagle": (head, (-1,))}),
        "dflash": ("dflash", None, {"dflash": dflash}),
    }[label]


def greedy_pair(wide, tokenizer, label: str, prompt: str) -> tuple[list[int], list[int]]:
    """(plain decoding's tokens, the drafter's) at γ 4, 40 tokens; suffix decoding drafts from plain's run."""
    target = wide[0]
    name, draft, options = drafter_for(label, wide)
    ids, settings = tokenizer.encode(prompt), Settings(max_new_tokens=40, gamma=4)
    plain = generated_ids(generate_named(target, ids, settings))
    memory = RunMemory() if name == "suffix" else None
    if memory is not None:
        memory.remember(ids, plain)
    return plain, generated_ids(generate_named(target, ids, settings, name, draft, options, memory=memory))


LONG_PROMPT = 1100  # tokens: a long document's prompt, read by the static cache


def test_a_prompt_is_read_in_one_ordinary_forward_and_the_steps_after_it_stay_exact(wide, tokenizer, exact):
    """Both sides read a prompt with the same forward, so it needs no row-exactness: on kernels that switch past
    SWITCH_PAST rows, exact mode multiplies a prompt of three times as many tokens whole, a verify after it still in
    pieces, and greedy speculative decoding after it, and after a prompt of LONG_PROMPT tokens, writes plain
    decoding's tokens."""
    target = wide[0]
    text = " ".join(f"w{(7 * i) % 60}" for i in range(3 * SWITCH_PAST + 1))
    prompt = tokenizer.encode(text)
    with kernels_that_count_rows(target.model):
        assert set_exact(target.model, True) == ""
        emulated, rows = F.linear, []

        def counted(x, weight, bias=None):
            rows.append(x.numel() // x.shape[-1])
            return emulated(x, weight, bias)

        for make in caches(target.model).values():
            lm = make()
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(F, "linear", counted)
                lm.read_prompt(prompt)
                assert set(rows) == {len(prompt) - 1, 2}  # every product whole; the kept logits' lone row paired
                rows.clear()
                lm.extend(torch.tensor(prompt[-1:] + prompt[: 2 * SWITCH_PAST]))
                assert max(rows) <= SWITCH_PAST  # a verify of 2·SWITCH_PAST + 1 tokens: in pieces, as before
                rows.clear()
        for label in ("draft", "ngram"):
            plain, spec = greedy_pair(wide, tokenizer, label, text)
            assert spec == plain and len(plain) == 40, label
        # a model whose context holds a long document, read by the static cache
        context = 2 * LONG_PROMPT
        target = loaded(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE, context=context).bfloat16(), tokenizer)
        draft = perturbed(tiny_llama(len(tokenizer), seed=1, intermediate=WIDE, context=context), seed=3, scale=0.3)
        long = (target, loaded(draft.bfloat16(), tokenizer, "tiny-wide-draft"), None, None, None)
        assert set_exact(target.model, True) == ""
        long_text = " ".join(f"w{(7 * i + i // 60) % 60}" for i in range(LONG_PROMPT))
        for label in ("draft", "ngram"):
            plain, spec = greedy_pair(long, tokenizer, label, long_text)
            assert spec == plain and len(plain) == 40, label


# The fast tier's drafters: the draft model's chain and Medusa's tree; every other drafter's are in the slow tier.
FAST_LABELS = ("draft", "medusa")
OTHER_LABELS = [label for label in PARTING if label not in FAST_LABELS]


@pytest.mark.parametrize("label", FAST_LABELS)
def test_a_chain_and_a_tree_write_plain_decodings_tokens_in_exact_mode(wide, tokenizer, exact, label):
    writes_plain_decodings_tokens(wide, tokenizer, label)


@pytest.mark.parametrize("label", OTHER_LABELS)
def test_every_drafter_writes_plain_decodings_tokens_in_exact_mode(thorough, wide, tokenizer, exact, label):
    writes_plain_decodings_tokens(wide, tokenizer, label)


def writes_plain_decodings_tokens(wide, tokenizer, label):
    for prompt in PARTING[label]:
        plain, spec = greedy_pair(wide, tokenizer, label, prompt)
        assert spec == plain, prompt


@pytest.mark.parametrize("label", FAST_LABELS)
def test_without_exact_mode_those_prompts_part_and_in_it_they_do_not_on_kernels_that_count_rows(
    wide, tokenizer, exact, label
):
    part_only_without_exact_mode(wide, tokenizer, label)


@pytest.mark.parametrize("label", OTHER_LABELS)
def test_for_every_drafter_those_prompts_part_only_without_exact_mode(thorough, wide, tokenizer, exact, label):
    part_only_without_exact_mode(wide, tokenizer, label)


def part_only_without_exact_mode(wide, tokenizer, label):
    """The prompts above are the ones that tell: without the mode, at least one of each drafter's parts (on this
    CPU's kernels where they show the problem, on kernels that count rows always); in the mode none does."""

    def parted():
        for prompt in PARTING[label]:
            plain, spec = greedy_pair(wide, tokenizer, label, prompt)
            if spec != plain:
                yield prompt

    here, without, within = on_both_kernels(wide[0].model, parted)
    measured(here, f"without exact mode {label}'s greedy output is plain decoding's on every prompt above")
    assert without  # the problem the mode answers, on kernels that count rows
    assert not within, within


@pytest.fixture(scope="module")
def small_bf16(small):
    """`small` (the law tests' vocabulary of 8) in bfloat16, its target in exact mode."""
    target, draft, prompt = small
    bf16 = loaded(copy.deepcopy(target.model).bfloat16(), target.tokenizer, "small-bf16")
    assert set_exact(bf16.model, True) == ""
    return bf16, loaded(copy.deepcopy(draft.model).bfloat16(), target.tokenizer, "small-bf16-draft"), prompt


def test_sampling_in_exact_mode_keeps_the_targets_law(small_bf16, draws):
    target, draft, prompt = small_bf16
    settings = Settings(max_new_tokens=3, gamma=2, temperature=1.0)
    assert draws.law_p(target, prompt, settings, chain(target, draft)) > 1e-3


def test_where_exact_mode_cannot_hold_it_says_why_in_one_line_and_changes_nothing(target):
    mixed = perturbed(target.model, seed=4, scale=0.1)  # one int8 layer among float32 ones
    mixed.model.layers[0].mlp.down_proj = RowInt8Linear(mixed.model.layers[0].mlp.down_proj)
    cases = [
        (target.model, "covers bfloat16 and int8 targets, and this one is float32"),
        (mixed, "covers bfloat16 and int8 (row) Linear layers, and this model has others"),
    ]
    with torch.device("meta"):  # a device other than the CPU, without needing one
        elsewhere = tiny_llama(8, seed=0).bfloat16()
    for model, words in cases:
        before = (model.config._attn_implementation, [type(m) for m in model.modules()])
        problem = set_exact(model, True)
        assert words in problem and "\n" not in problem and not is_exact(model)
        assert (model.config._attn_implementation, [type(m) for m in model.modules()]) == before
    assert "checked on CPUs only" in exact_problem(elsewhere)


def test_switching_it_off_gives_the_model_back_as_it_was(tokenizer):
    model = tiny_llama(len(tokenizer), seed=5, intermediate=WIDE).bfloat16()
    before = model.config._attn_implementation
    assert set_exact(model, True) == "" and is_exact(model)
    assert model.config._attn_implementation == EXACT_ATTENTION
    assert all(type(m) is PairedLinear for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert set_exact(model, False) == "" and not is_exact(model)
    assert model.config._attn_implementation == before
    assert not any(type(m) is PairedLinear for m in model.modules())


def test_a_paired_linear_gives_one_row_what_a_product_of_several_rows_gives_it():
    """At a real model's shape (Qwen2.5-1.5B's gate projection), where a CPU whose kernels show the problem sums one
    row otherwise; and on kernels that count rows, where one row always comes out otherwise."""
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(1536, 8960, bias=False).bfloat16()
    x = torch.randn(SWITCH_PAST, 1536, generator=gen).bfloat16()

    def products():  # (the rows at once, each row alone, each row paired)
        with torch.inference_mode():
            several = F.linear(x, layer.weight)
            alone = torch.cat([F.linear(x[i : i + 1], layer.weight) for i in range(len(x))])
            paired = torch.cat([rows_product(x[i : i + 1], layer.weight, None, None) for i in range(len(x))])
        return several, alone, paired

    several, alone, paired = products()
    measured(not torch.equal(alone, several), "a one-row bfloat16 product gives each row what 8 rows at once give it")
    assert torch.equal(paired, several)
    with kernels_that_count_rows():
        several, alone, paired = products()
    assert not torch.equal(alone, several)  # the trouble the pairing answers
    assert torch.equal(paired, several)


def test_past_the_rows_a_kernel_keeps_rows_apart_at_exact_mode_multiplies_in_pieces(tokenizer):
    """Kernels that switch past SWITCH_PAST rows (an AMX Xeon's bfloat16 ones do past 32): the probe finds the count,
    exact mode's layers take it, and a product of three times as many rows plus one gives each row what it gets
    alone, the last one paired; without the pieces the rows part."""
    model = tiny_llama(len(tokenizer), seed=5, intermediate=WIDE).bfloat16()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3 * SWITCH_PAST + 1, model.config.hidden_size, generator=gen).bfloat16()
    with kernels_that_count_rows(model), torch.inference_mode():
        assert set_exact(model, True) == ""
        layer = model.model.layers[0].mlp.up_proj
        assert type(layer) is PairedLinear and layer.rows_at_once == SWITCH_PAST
        alone = torch.cat([layer(x[i : i + 1]) for i in range(len(x))])
        assert torch.equal(layer(x), alone) and torch.equal(layer(x[None]), alone[None])
        assert not torch.equal(F.linear(x, layer.weight), alone)
        assert set_exact(model, False) == ""
    assert set_exact(model, True) == "" and model.model.layers[0].mlp.up_proj.rows_at_once != SWITCH_PAST


# SmolLM2-135M in bfloat16: without exact mode, on a CPU whose kernels show the problem, 13-15 of the first 24 prompts
# of assets/prompts.json parted from plain decoding within 48 tokens (n-gram lookup, or the model drafting for itself);
# these two among them. On kernels that count rows at least one of them parts, whatever the CPU.
REAL_PARTING = (
    "Write a Python class `LRUCache` with `get(key)` and `put(key, value)` methods running in O(1) time, using "
    "collections.OrderedDict. Add type hints.",
    "Write a short story, about 150 words, about a lighthouse keeper who finds a message in a bottle.",
)


@pytest.fixture(scope="module")
def smollm_bf16(smollm):
    model = loaded(copy.deepcopy(smollm.model).bfloat16(), smollm.tokenizer, "smollm2-135m-instruct (bf16)")
    yield model
    set_exact(model.model, False)


@pytest.mark.budget(180, "SmolLM2-135M in bfloat16, on a CPU without bfloat16 instructions, both ways")
def test_a_real_model_in_bfloat16_writes_plain_decodings_tokens_only_in_exact_mode(smollm_bf16):
    """In the mode on this CPU's kernels; on kernels that count rows, without the mode some prompt parts and in it
    none does. Drafted by n-gram lookup: what parts is the target's verify of several rows, whoever drafted them (the
    tiny models' tests above run every drafter; a real bfloat16 model on a CPU without bfloat16 instructions is slow,
    and drafting with it as well would double that)."""
    from specviz.models import encode_prompt

    settings = Settings(max_new_tokens=48, gamma=4)

    def parted(prompts=REAL_PARTING):
        for prompt in prompts:
            ids = encode_prompt(smollm_bf16, prompt)
            plain = generated_ids(generate_named(smollm_bf16, ids, settings))
            spec = generated_ids(generate_named(smollm_bf16, ids, settings, "ngram"))
            if spec != plain:
                yield prompt

    assert set_exact(smollm_bf16.model, True) == ""
    assert not list(parted())  # this CPU's kernels, in exact mode
    # Whether this CPU's own kernels show the problem, the tiny models' tests measure; a real model's decoding takes
    # long enough here that the check on kernels that count rows runs on the first prompt that parts there.
    with kernels_that_count_rows(smollm_bf16.model):
        assert set_exact(smollm_bf16.model, False) == ""
        first = next(parted(), None)
        assert set_exact(smollm_bf16.model, True) == ""
        assert first is not None  # the problem the mode answers, on kernels that count rows
        assert not list(parted((first,)))  # and in the mode that prompt writes plain decoding's tokens
