"""DFlash on a tiny Qwen3 target with a tiny drafter in the published layout: the drafter is trained for a few
seconds on the target's own continuations (so whole blocks are accepted), saved and loaded back as a checkpoint;
greedy output equals plain decoding for several block sizes and prompt lengths; the `dflash` package's own
reference decoding on the same weights takes the same accepted lengths step by step, and mutants of the features'
layers, the positions and the draft's cache do not; sampling keeps the target's law; bad checkpoints are refused
in one line naming the field."""

import copy
import json
import time
from dataclasses import replace

import pytest
import torch
from laws import exact_law
from test_mutants import HORIZON
from test_mutants import SETTINGS as LAW_SETTINGS
from tiny import dflash_config, loaded, tiny_qwen3, word_tokenizer

from specviz.drafters.dflash.dflash_checkpoint import DFlashCheckpointError, build_draft, load_dflash, save_dflash
from specviz.drafters.dflash.dflash_drafter import DFlashDrafter
from specviz.drafters.dflash.model import ContextCache, DFlashDraft
from specviz.engine import generate
from specviz.engine.step import Judges, Proposal
from specviz.events import generated_ids
from specviz.runs import generate_named
from specviz.settings import Settings
from specviz.training.dflash import DFlashTraining, continuations, features_of, train_dflash

WORDS = [f"w{i}" for i in range(40)]
BLOCK = 8


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(target, its training sequences, the trained drafter loaded back from its folder, that folder)."""
    tok = word_tokenizer(WORDS)
    mask = len(tok)  # past every id the tokenizer writes, within the embedding's rows
    target = loaded(tiny_qwen3(len(tok) + 1, seed=1), tok, "tiny-qwen3")
    prompts = [[3 + 5 * i + j for j in range(6)] for i in range(4)]
    sequences = continuations(target.model, prompts, 40)
    draft = build_draft(dflash_config(target.model, BLOCK, mask), target.model)
    # Four texts only: each step's blocks drawn from across them (one anchor per text drawn) train it in 300 steps.
    training = DFlashTraining(steps=300, train_batch=8, anchors_per_text=1, lr=5e-3)
    train_dflash(draft, target.model, sequences, training)
    folder = save_dflash(draft, tmp_path_factory.mktemp("dflash") / "tiny", target.name, target.model.config)
    return target, sequences, load_dflash(folder, target), folder


def with_block(draft: DFlashDraft, block: int) -> DFlashDraft:
    """The same weights drafting a block of another size."""
    other = copy.copy(draft)
    other.block_size = block
    return other


@pytest.mark.parametrize("block", [4, 8, 16])
@pytest.mark.parametrize("prompt_length", [1, 3, 6, 12])
def test_greedy_dflash_equals_plain(world, block, prompt_length):
    target, sequences, draft, _ = world
    for sequence in sequences[:2]:
        prompt = sequence[:prompt_length]
        plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=30)))
        events = list(
            generate(target, prompt, Settings(max_new_tokens=30, gamma=15), DFlashDrafter(with_block(draft, block)))
        )
        assert generated_ids(events) == plain
        assert max(len(e.proposed) for e in events) == min(block - 1, 15)


@pytest.mark.parametrize("block, nodes", [(4, 3), (8, 6), (16, 24)])
@pytest.mark.parametrize("prompt_length", [1, 6])
def test_greedy_dflash_tree_equals_plain(world, block, nodes, prompt_length):
    target, sequences, draft, _ = world
    drafter = DFlashDrafter(with_block(draft, block), "tree", nodes)
    for sequence in sequences[:2]:
        prompt = sequence[:prompt_length]
        plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=30)))
        events = list(generate(target, prompt, Settings(max_new_tokens=30, gamma=15), drafter))
        assert generated_ids(events) == plain
        trees = [e for e in events if e.candidates]
        assert trees or nodes <= block - 1  # a budget one chain can fill may keep just the chain
        assert all(len({p for c in e.candidates for p in prefixes(c)}) <= nodes for e in trees)
        assert all(e.forward_tokens <= 1 + nodes and e.draft_forwards == 1 and e.block == block - 1 for e in trees)
        assert all(len(c) <= min(block - 1, 15) for e in trees for c in e.candidates)


def prefixes(path: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [path[:i] for i in range(1, len(path) + 1)]


class Watched(DFlashDrafter):
    """Records each tree step's place in the text, the chain the chain mode would send from that pass, and the
    tree's candidates."""

    def start(self, prompt_ids, target, judges=None):
        super().start(prompt_ids, target, judges)
        self.seen = []

    def propose(self, tokens, gamma):
        self.at = len(tokens)
        return super().propose(tokens, gamma)

    def block_tree(self, scores):
        paths, confidence = super().block_tree(scores)
        self.seen.append((self.at, tuple(scores.argmax(dim=-1).tolist()), paths))
        return paths, confidence


def held(draft: tuple[int, ...], text: list[int]) -> int:
    """How many leading drafts greedy verification keeps against the text plain decoding writes."""
    return next((i for i, (a, b) in enumerate(zip(draft, text)) if a != b), min(len(draft), len(text)))


@pytest.mark.parametrize("block, gamma, nodes", [(8, 7, 7), (16, 15, 16)])
def test_a_dflash_tree_never_needs_more_verify_forwards_than_its_own_chain(world, block, gamma, nodes):
    """At every step the tree holds, whole, the chain the chain mode verifies from the same pass, so greedy
    verification accepts at least what the chain would there; on every prompt, for a short answer and a long one,
    the tree takes no more verify forwards than the chain, and both write plain decoding's tokens."""
    target, sequences, draft, _ = world
    for sequence, new in [(sequence, new) for sequence in sequences for new in (16, 40)]:
        prompt, settings = sequence[:6], Settings(max_new_tokens=new, gamma=gamma)
        plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=new)))
        chain = list(generate(target, prompt, settings, DFlashDrafter(with_block(draft, block))))
        drafter = Watched(with_block(draft, block), "tree", nodes)
        tree = list(generate(target, prompt, settings, drafter))
        assert generated_ids(chain) == generated_ids(tree) == plain
        assert len(tree) <= len(chain), (prompt, new, len(chain), len(tree))
        text, accepted, at = prompt + plain, {}, len(prompt)
        for event in tree:
            accepted[at], at = event.accepted, at + len(event.tokens)
        assert drafter.seen and all(chain_draft in paths for _, chain_draft, paths in drafter.seen)
        assert all(accepted[at] >= held(chain_draft, text[at:]) for at, chain_draft, _ in drafter.seen), prompt


def brute_force_tree(scores: torch.Tensor, width: int, nodes: int):
    """(the chain, every path through each position's `width` best tokens, each path's summed log-probability)."""
    import itertools

    logp = torch.log_softmax(scores, dim=-1)
    best = [torch.topk(logp[d], width).indices.tolist() for d in range(len(scores))]
    every = [p for d in range(1, len(scores) + 1) for p in itertools.product(*best[:d])]
    score = {p: sum(float(logp[i, t]) for i, t in enumerate(p)) for p in every}
    return tuple(scores.argmax(dim=-1).tolist()), every, score


def chain_and_best_others(scores: torch.Tensor, width: int, nodes: int) -> set:
    """The block tree by brute force: the chain's prefixes (as many as the budget holds), then the best-scored other
    paths through each position's `width` best tokens with the nodes left."""
    chain, every, score = brute_force_tree(scores, width, nodes)
    on_chain = prefixes(chain)[:nodes]
    others = sorted((p for p in every if p not in prefixes(chain)), key=lambda p: -score[p])
    return set(on_chain) | set(others[: max(0, nodes - len(on_chain))])


@pytest.mark.parametrize("depth, width, nodes", [(3, 3, 10), (4, 2, 7), (2, 4, 20), (5, 3, 1), (5, 3, 3), (6, 3, 11)])
def test_the_block_tree_keeps_the_whole_chain_then_the_likeliest_other_prefixes(depth, width, nodes):
    """Against brute force: the chain of each position's best token, whole (cut only by a smaller node budget), and
    with the nodes left the best-scored other paths through each position's `width` best tokens, a path scored by
    the sum of its positions' log-probabilities; the chain is the first candidate, the others likeliest leaf first."""
    torch.manual_seed(depth * 10 + width)
    scores = torch.randn(depth, 9) * 2
    drafter = DFlashDrafter.__new__(DFlashDrafter)
    drafter.nodes, drafter.width, drafter.judges = nodes, width, None
    paths, confidence = drafter.block_tree(scores)
    assert confidence is None  # only adaptive drafting reports the first path's probabilities
    chain, _, score = brute_force_tree(scores, width, nodes)
    assert {p for path in paths for p in prefixes(path)} == chain_and_best_others(scores, width, nodes)
    assert paths[0] == chain[:nodes]
    assert [score[p] for p in paths[1:]] == sorted((score[p] for p in paths[1:]), reverse=True)


def cut_block_tree(scores: torch.Tensor, width: int, nodes: int, budget: int):
    """(the nodes' path probabilities the controller is handed, the paths, the confidence) of a block tree that
    adaptive γ cuts to `budget` nodes."""
    asked = []

    def tree_size(paths, depth):
        asked.append(paths)
        return budget

    drafter = DFlashDrafter.__new__(DFlashDrafter)
    drafter.nodes, drafter.width, drafter.judges = nodes, width, Judges(tree_size)
    return asked, *drafter.block_tree(scores)


def test_an_adaptive_cut_of_the_block_tree_takes_the_chain_first_then_the_branches():
    """The controller is handed the nodes chain first, then branches best first, and any first n of them form a tree:
    none is a plain step, up to the depth the chain's prefix alone, more the whole chain and the best branches."""
    depth, width, nodes = 5, 3, 12
    torch.manual_seed(3)
    scores = torch.randn(depth, 9) * 2
    chain = tuple(scores.argmax(dim=-1).tolist())
    chain_probabilities = torch.softmax(scores, dim=-1).max(dim=-1).values.tolist()
    for budget in range(nodes + 1):
        asked, paths, confidence = cut_block_tree(scores, width, nodes, budget)
        assert all(asked[0][d] == pytest.approx(chain_probabilities[: d + 1]) for d in range(depth))
        if budget == 0:
            assert (paths, confidence) == ([], None)
        elif budget <= depth:
            assert paths == [chain[:budget]] and confidence == pytest.approx(chain_probabilities[:budget])
        else:
            assert paths[0] == chain and {p for path in paths for p in prefixes(path)} == chain_and_best_others(
                scores, width, budget
            )


def test_many_blocks_in_one_pass_score_as_each_block_alone(world):
    """Training's pass over several anchors of one text (a block-sparse mask) gives each block the scores that
    drafting's own pass gives it with the features before its anchor as context (which a block reading another
    block's rows, or context past its anchor, would not)."""
    target, sequences, draft, _ = world
    tokens = torch.tensor(sequences[2])
    features = features_of(target.model, sequences[2], draft.target_layers)
    anchors = [5, 1, 17, 30, 9]
    with torch.no_grad():
        together = draft.fill_blocks(features, tokens, anchors)
        for k, anchor in enumerate(anchors):
            alone = draft.fill(features[:anchor], int(tokens[anchor]), draft.new_cache())
            assert torch.allclose(together[k], alone, atol=1e-4, rtol=1e-4), anchor


def test_a_shortlist_scores_the_ids_the_texts_use_most_and_the_loss_learns_over_them(world):
    from specviz.training.dflash import blocks_loss, shortlist_of

    target, sequences, draft, _ = world
    vocab = target.model.get_output_embeddings().weight.shape[0]
    assert shortlist_of(draft, sequences, 0) is None and shortlist_of(draft, sequences, vocab) is None
    ids, rows, place = shortlist_of(draft, sequences, 12)
    counts = torch.bincount(torch.tensor([t for s in sequences for t in s]), minlength=vocab)
    assert len(ids) == 12 and counts[ids].min() >= counts[[i for i in range(vocab) if i not in ids.tolist()]].max()
    assert torch.equal(rows, target.model.get_output_embeddings().weight[ids])
    assert place[ids].tolist() == list(range(12)) and (place >= 0).sum() == 12
    torch.manual_seed(7)
    fresh = build_draft(dflash_config(target.model, BLOCK, draft.mask_id), target.model)
    tokens, features = torch.tensor(sequences[0]), features_of(target.model, sequences[0], draft.target_layers)
    with torch.no_grad():
        before = float(blocks_loss(fresh, tokens, features, [2, 9, 20], (ids, rows, place)))
    train_dflash(fresh, target.model, sequences, DFlashTraining(steps=40, train_batch=8, lr=5e-3, shortlist=12))
    with torch.no_grad():
        after = float(blocks_loss(fresh, tokens, features, [2, 9, 20], (ids, rows, place)))
    assert after < before * 0.8, (before, after)


def test_the_targets_features_are_kept_on_disk_and_read_back(world, tmp_path, monkeypatch):
    """Features and labels are computed once and read back; a text read teacher-forced is labelled by the target's
    own argmax after each token, a text the target wrote by its own next tokens."""
    from specviz.errors import InvalidRequest
    from specviz.training import dflash as train

    target, sequences, draft, _ = world
    keep, texts, forced = tmp_path / "features.pt", [sequences[0], list(range(3, 30))], [False, True]
    made, labels = train.texts_features(target.model, texts, draft.target_layers, keep, forced)
    assert keep.is_file() and all(torch.equal(a, b) for a, b in zip(made, [
        features_of(target.model, s, draft.target_layers) for s in texts]))  # fmt: skip
    assert labels[0].tolist() == sequences[0]
    with torch.no_grad():
        logits = target.model(torch.tensor([texts[1]])).logits[0]
    assert labels[1].tolist() == [texts[1][0], *logits[:-1].argmax(-1).tolist()] and labels[1].tolist() != texts[1]

    def computed(*_):
        raise AssertionError("computed again")

    monkeypatch.setattr(train, "read_text", computed)
    again, labels_again = train.texts_features(target.model, texts, draft.target_layers, keep, forced)
    assert all(torch.equal(a, b) for a, b in zip(made + labels, again + labels_again))  # read, not computed
    with pytest.raises(InvalidRequest, match="other texts or other target layers"):
        train.texts_features(target.model, texts, draft.target_layers, keep, [False, False])


def test_the_learning_rate_holds_then_falls_to_a_tenth():
    from specviz.training.dflash import learning_rate

    config = DFlashTraining(steps=100, lr=1.0)
    rates = [learning_rate(config, step) for step in range(100)]
    assert rates[:10] == [1.0] * 10 and all(a >= b for a, b in zip(rates, rates[1:]))
    assert rates[-1] == pytest.approx(0.1, abs=0.01) and learning_rate(DFlashTraining(decay=False), 399) == 1e-3


def test_the_trained_drafter_is_accepted_a_whole_block_at_a_time(world):
    target, sequences, draft, _ = world
    accepted = [
        e.accepted
        for sequence in sequences
        for e in generate(target, sequence[:6], Settings(max_new_tokens=34, gamma=BLOCK - 1), DFlashDrafter(draft))
    ]
    assert accepted.count(BLOCK - 1) >= 3, accepted
    assert sum(accepted) / len(accepted) > 2.0, accepted


@pytest.mark.parametrize("tree", ["chain", "tree"])
def test_the_registry_builds_dflash_from_a_folder(world, tree):
    target, sequences, _, folder = world
    prompt = sequences[0][:6]
    options = {"dflash": str(folder), "dflash_tree": tree, "dflash_nodes": 8}
    events = list(generate_named(target, prompt, Settings(max_new_tokens=20, gamma=7), "dflash", options=options))
    assert generated_ids(events) == generated_ids(generate(target, prompt, Settings(max_new_tokens=20)))
    assert any(e.accepted for e in events) and all(e.draft_forwards in (0, 1) for e in events)
    assert any(e.candidates for e in events) == (tree == "tree")


def test_adaptive_dflash_stays_plain_decodings_output(world):
    target, sequences, draft, _ = world
    prompt = sequences[1][:6]
    settings = Settings(max_new_tokens=34, gamma=15, adaptive=True)
    events = list(generate(target, prompt, settings, DFlashDrafter(with_block(draft, 16))))
    assert generated_ids(events) == generated_ids(generate(target, prompt, Settings(max_new_tokens=34)))
    assert {len(e.proposed) for e in events} - {0}, "adaptive drafting proposed nothing"


@pytest.mark.parametrize("budget", [0, 1, 3, 8])
def test_an_adaptive_dflash_tree_verifies_the_nodes_the_costs_pay_for(world, budget):
    """With adaptive γ the tree is cut to the nodes the controller's measured costs pay for: given the nodes'
    probabilities along their paths, the chain's first, a budget of 0 is a plain step, 1..depth the best chain's
    prefix, more the whole chain and its best branches. The output stays plain decoding's whatever the budget."""
    target, sequences, draft, _ = world
    asked = []

    def tree_size(paths, depth):
        asked.append((paths, depth))
        return min(budget, len(paths))

    class Budgeted(Watched):  # judged as adaptive γ would, at a fixed γ
        def start(self, prompt_ids, target, judges=None):
            super().start(prompt_ids, target, Judges(tree_size))

    drafter = Budgeted(draft, "tree", nodes=8)
    prompt = sequences[3][:6]
    events = list(generate(target, prompt, Settings(max_new_tokens=24, gamma=7), drafter))
    assert generated_ids(events) == generated_ids(generate(target, prompt, Settings(max_new_tokens=24)))
    assert asked and all(0 < len(paths) <= 8 and 0 < depth <= 7 for paths, depth in asked)
    assert all(0 < q <= 1 for paths, _ in asked for path in paths for q in path)
    widths = [e.forward_tokens for e in events]  # the root and the nodes it paid for (fewer near the token budget)
    assert max(widths) == 1 + min(budget, 8) and widths.count(max(widths)) > len(widths) // 2
    assert any(e.accepted for e in events) == (budget > 0)
    cut = [(chain, paths) for _, chain, paths in drafter.seen if paths]  # the chain first, branches after it
    assert all(paths == [chain[:budget]] if budget <= len(chain) else paths[0] == chain for chain, paths in cut)


def test_adaptive_dflash_tree_stays_plain_decodings_output(world):
    target, sequences, draft, _ = world
    prompt = sequences[2][:6]
    settings = Settings(max_new_tokens=34, gamma=7, adaptive=True)
    events = list(generate(target, prompt, settings, DFlashDrafter(draft, "tree", nodes=12)))
    assert generated_ids(events) == generated_ids(generate(target, prompt, Settings(max_new_tokens=34)))
    assert any(e.accepted for e in events) and max(e.forward_tokens for e in events) <= 13


# The reference: the dflash package's own decoding (its model code, on this transformers), with the same weights.


def reference_run(world, sequence, max_new: int = 30):
    """(output after prompt + first token, produced tokens per step) of the package's dflash_generate, greedy."""
    import dflash.model as dflash_model  # installed for the tests only (--no-deps): the README's test command
    from safetensors.torch import load_file
    from transformers import Qwen3Config

    target, _, _, folder = world
    config = Qwen3Config(**json.loads((folder / "config.json").read_text()))
    reference = dflash_model.DFlashDraftModel(config).eval()
    reference.load_state_dict(load_file(str(folder / "model.safetensors")), strict=True)  # the same names
    original = dflash_model._cuda_time
    dflash_model._cuda_time = time.perf_counter  # its timer synchronises CUDA; nothing else is patched
    try:
        stats = dflash_model.dflash_generate(
            reference,
            target.model,
            torch.tensor([sequence]),
            max_new_tokens=max_new,
            stop_token_ids=None,
            temperature=0.0,
            return_stats=True,
        )
    finally:
        dflash_model._cuda_time = original
    return stats.output_ids[0].tolist(), stats.acceptance_lengths


def specviz_run(world, prompt, max_new: int, drafter):
    """specviz with the whole block verified, from the prompt and the target's first token (where the reference
    starts drafting): the output and the tokens each step added."""
    target = world[0]
    first = generated_ids(generate(target, prompt, Settings(max_new_tokens=1)))
    events = list(generate(target, prompt + first, Settings(max_new_tokens=max_new - 1, gamma=BLOCK - 1), drafter))
    return prompt + first + generated_ids(events), [len(e.tokens) for e in events]


def away_from_the_end(steps: list[int], max_new: int) -> list[int]:
    """The steps that started a block or more before the token budget (near it both sides clip their drafts, each
    in its own way)."""
    kept, total = [], 1
    for produced in steps:
        if total + BLOCK + 1 > max_new:
            break
        kept.append(produced)
        total += produced
    return kept


def agrees_with_reference(world, drafter_for, max_new: int = 30) -> bool:
    """Same output and the same tokens added at every step as the reference, on three prompts."""
    target, sequences, draft, _ = world
    for sequence in sequences[:3]:
        prompt = sequence[:6]
        ours, our_steps = specviz_run(world, prompt, max_new, drafter_for(draft))
        theirs, their_steps = reference_run(world, prompt, max_new)
        if ours != theirs or away_from_the_end(our_steps, max_new) != away_from_the_end(their_steps, max_new):
            return False
    return True


def test_the_reference_decoding_accepts_what_specviz_accepts(world):
    target, sequences, draft, _ = world
    ours, our_steps = specviz_run(world, sequences[0][:6], 30, DFlashDrafter(draft))
    theirs, their_steps = reference_run(world, sequences[0][:6], 30)
    assert ours == theirs[: len(ours)] and max(their_steps) == BLOCK, (our_steps, their_steps)
    assert agrees_with_reference(world, DFlashDrafter)


def off_layers(draft):
    drafter = DFlashDrafter(draft)
    # hidden_states[i] is the output of layer i - 1
    drafter.profile = replace(drafter.profile, hidden_layers=tuple(draft.target_layers))
    return drafter


def off_positions(draft):
    shifted = copy.copy(draft)
    shifted.positions = lambda kept, new: torch.cat(
        [torch.arange(kept, kept + new), torch.arange(kept + new + 1, kept + new + 1 + draft.block_size)]
    )
    return DFlashDrafter(shifted)


class UncutCache(ContextCache):
    """Keeps the block's rows after each pass, as if they were context, and is never cut back."""

    def with_new(self, layer, k, v, n):
        return super().with_new(layer, k, v, k.shape[1])

    def crop(self, length):
        pass


class UncutDrafter(DFlashDrafter):
    def start(self, prompt_ids, target, judges=None):
        self.target_lm, self.cache = target, UncutCache(len(self.draft.layers))

    @torch.inference_mode()
    def propose(self, tokens, gamma):
        committed = self.target_lm.length
        features = self.target_lm.hidden(min(self.cache.length, committed), committed)
        scores = self.draft.fill(features, tokens[-1], self.cache)
        self.cache.length += self.draft.block_size  # what was drafted stays, rejected or not
        return Proposal((tuple(scores.argmax(dim=-1)[: self.max_nodes(gamma)].tolist()),), forwards=1)


@pytest.mark.parametrize(
    "mutant", [off_layers, off_positions, UncutDrafter], ids=["layers", "positions", "uncut cache"]
)
def test_mutants_do_not_agree_with_the_reference(world, mutant):
    assert not agrees_with_reference(world, mutant)


def test_dflash_sampling_follows_the_targets_law(sensitive, draws):
    """Several sampled steps with DFlash drafts (point masses: the lookup rule; a tree's siblings tried in turn, then
    compacted) against the target's exact law."""
    target, _, tok = sensitive
    prompt = tok.encode("a b c d")
    model = target.model
    torch.manual_seed(4)
    draft = build_draft(dflash_config(model, 4, model.config.vocab_size - 1, target_layers=(0,)), model).eval()
    drafter = lambda s, generator: DFlashDrafter(draft, "tree", 6, width=3)  # noqa: E731 (one per run)
    counts = draws(target, prompt, LAW_SETTINGS, drafter, horizon=HORIZON)
    assert sum(counts.values()) == draws.runs and LAW_SETTINGS.temperature == 1.0
    assert draws.p(counts, exact_law(target, prompt, LAW_SETTINGS, HORIZON)) > 1e-3


# Refusals: one line naming the field, the target untouched.


def damaged(world, tmp_path, name):
    target, _, _, folder = world
    bad = tmp_path / "bad"
    bad.mkdir()
    config = json.loads((folder / "config.json").read_text())
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    if name == "hidden size":
        config["hidden_size"] = 2 * config["hidden_size"]
    elif name == "layer past the target's":
        config["dflash_config"]["target_layer_ids"] = [0, target.model.config.num_hidden_layers]
    elif name == "no fc":
        del state["fc.weight"]
    elif name == "mask past the embedding":
        config["dflash_config"]["mask_token_id"] = target.model.get_input_embeddings().weight.shape[0]
    elif name == "block of one":
        config["block_size"] = 1
    elif name == "target layer count":
        config["num_target_layers"] = 99
    elif name == "dflash-2":
        config["architectures"] = ["DFlash2DraftModel"]
    elif name == "wrong shape":
        state["fc.weight"] = state["fc.weight"][:, :-1].contiguous()
    (bad / "config.json").write_text(json.dumps(config))
    save_file(state, str(bad / "model.safetensors"))
    return bad


REFUSALS = {
    "hidden size": "hidden_size",
    "layer past the target's": "target_layer_ids",
    "no fc": "missing \\['fc.weight'\\]",
    "mask past the embedding": "mask_token_id",
    "block of one": "block_size",
    "target layer count": "num_target_layers",
    "dflash-2": "DFlash-2",
    "wrong shape": "fc.weight has shape",
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_a_damaged_or_mismatched_drafter_is_refused_in_one_line(world, tmp_path, name):
    target = world[0]
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    with pytest.raises(DFlashCheckpointError, match=REFUSALS[name]) as caught:
        load_dflash(damaged(world, tmp_path, name), target)
    assert "\n" not in str(caught.value)
    assert all(torch.equal(before[k], v) for k, v in target.model.state_dict().items())


def test_a_target_without_a_drafter_gets_one_line_saying_how_to_get_one(world):
    target, sequences, _, _ = world
    from specviz.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="train-dflash"):
        list(generate_named(target, sequences[0][:4], Settings(max_new_tokens=4, gamma=3), "dflash"))


def test_train_dflash_writes_a_drafter_that_loads_and_goes_on_from_its_checkpoint(world, tmp_path, capsys):
    """The CLI trains a drafter for a target folder from the target's own answers; a run stopped at step 2 and run
    again (reading the target's features from the file the first run kept) reaches the weights one uninterrupted run of
    4 steps reaches."""
    from safetensors.torch import load_file

    from specviz.cli import main

    target = world[0]
    folder = tmp_path / "target"
    target.model.save_pretrained(folder)
    target.tokenizer.save_pretrained(folder)
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(["w1 w2 w3", "w4 w5 w6 w7"]))
    common = ["train-dflash", "--base", str(folder), "--dtype", "float32", "--prompts", str(prompts)]
    common += ["--tokens-per-prompt", "24", "--samples", "1", "--steps", "4", "--train-batch", "2", "--block-size", "4"]
    assert main([*common, "--out", str(tmp_path / "whole")]) == 0
    stopped = [*common, "--out", str(tmp_path / "resumed"), "--checkpoint", str(tmp_path / "state.pt")]
    stopped += ["--features", str(tmp_path / "features.pt")]  # the second run reads the target's features back
    assert main([*stopped, "--until-step", "2"]) == 0
    assert (tmp_path / "features.pt").is_file()
    assert main(stopped) == 0
    out = capsys.readouterr().out
    assert "loss" in out and "block 4" in out
    whole, resumed = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("whole", "resumed"))
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)
    drafter = load_dflash(tmp_path / "whole", loaded(target.model, target.tokenizer, str(folder)))
    assert drafter.block_size == 4 and drafter.mask_id == len(target.tokenizer)


def test_train_dflash_refuses_a_target_with_no_spare_embedding_row(model_folder, tmp_path, capsys):
    from specviz.cli import main

    code = main(["train-dflash", "--base", str(model_folder), "--out", str(tmp_path / "d"), "--dtype", "float32"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "no spare embedding row" in err and "\n" not in err


def test_the_mask_token_takes_a_row_no_text_encodes_to():
    """Past the tokenizer's ids where there is room; in a vocabulary padded to the embedding's rows (a converted
    checkpoint names those rows [PAD151665] and so on), the first placeholder; none when every row is a token."""
    from specviz.drafters.dflash.dflash_checkpoint import spare_row

    words = ["w1", "w2", "w3"]
    assert spare_row(word_tokenizer(words), 8) == 5
    padded = word_tokenizer([*words, "[PAD5]", "[PAD6]", "[PAD7]"])
    assert spare_row(padded, 8) == 5
    assert spare_row(word_tokenizer([*words, "w4", "w5", "w6"]), 8) is None
