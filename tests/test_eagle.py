"""The EAGLE drafter through the engine: whatever the head guesses, greedy output equals plain; the head's own tree
attention gives every node what its path alone gives; a trained head is accepted; sampling keeps the target's law."""

import pytest
import torch
from laws import exact_law
from test_draft_tree import TREE_GAMMAS
from test_mutants import HORIZON
from test_mutants import SETTINGS as LAW_SETTINGS

from specviz.drafters.eagle.eagle_checkpoint import eagle3_layers, head_config
from specviz.drafters.eagle.eagle_drafter import EagleDrafter
from specviz.drafters.eagle.head import EagleHead
from specviz.drafters.tree_growth import tokens_to
from specviz.engine import generate
from specviz.engine.cached_lm import CachedLM
from specviz.engine.tree import build_tree
from specviz.events import generated_ids, summarize
from specviz.runs import generate_named
from specviz.settings import Settings
from specviz.training.distill import Text, split_by_group
from specviz.training.eagle import EagleTraining, chain_acceptance, read_features, train_eagle


def random_head(target, layout="eagle1", seed=0, draft_vocab=0, shortlist=None):
    torch.manual_seed(seed)
    head = EagleHead(
        head_config({}, target.model.config), layout, target.model, draft_vocab=draft_vocab, shortlist=shortlist
    ).eval()
    if layout == "eagle3":
        with torch.no_grad():
            head.d2t.copy_(torch.arange(draft_vocab) * 2)  # draft id i is target id 3i
    return head


def layers_of(target, layout):
    return eagle3_layers(target.model.config.num_hidden_layers) if layout == "eagle3" else (-1,)


@pytest.mark.parametrize("layout", ["eagle1", "eagle3"])
@pytest.mark.parametrize("tree", ["chain", "dynamic"])
@pytest.mark.parametrize("prompt", list(TREE_GAMMAS))  # each layout and tree meets γ 1, 2 and 5 twice
def test_greedy_eagle_equals_plain(target, tokenizer, layout, tree, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    head = random_head(target, layout, draft_vocab=20)
    for gamma in TREE_GAMMAS[prompt]:
        events = list(
            generate(
                target,
                ids,
                Settings(max_new_tokens=40, gamma=gamma),
                EagleDrafter(head, layers_of(target, layout), tree, nodes=10),
            )
        )
        assert generated_ids(events) == plain, f"gamma={gamma}"
        if tree == "dynamic" and gamma > 1 and len(ids) > 1:
            assert any(e.candidates for e in events)


def test_eagle3_drafts_only_mapped_ids(target, tokenizer):
    head = random_head(target, "eagle3", draft_vocab=20)
    events = list(
        generate(
            target,
            tokenizer.encode("w1 w2 w3"),
            Settings(max_new_tokens=20, gamma=3),
            EagleDrafter(head, layers_of(target, "eagle3"), "dynamic", 10),
        )
    )
    drafted = {t for e in events for c in (e.candidates or [e.proposed]) for t in c}
    assert drafted and all(t % 3 == 0 for t in drafted)


def started(target, head, tokens, nodes):
    """A dynamic-tree drafter after the prompt `tokens`, as the engine leaves it: all but the last token cached."""
    lm = CachedLM(target.model, keep_hidden=True)
    lm.extend(torch.tensor(tokens[:-1]))
    drafter = EagleDrafter(head, (-1,), "dynamic", nodes=nodes)
    drafter.start(tokens, lm)
    return lm, drafter


def test_every_tree_node_gets_what_its_path_alone_gives(target, tokenizer):
    """The head's tree attention (mask, positions = depth, cache columns) against the head run causally over the
    committed pairs and the node's own path."""
    head = random_head(target, seed=4)
    tokens = tokenizer.encode("w3 w9 w27 w4 w16 w8")
    lm, drafter = started(target, head, tokens, nodes=20)
    with torch.inference_mode():
        nodes = drafter.grow_tree(4)
    fed = [n for n in nodes if n.state is not None]
    assert len({n.depth for n in fed}) == 3  # nodes of depths 1, 2 and 3 were fed (depth 4 is only scored)
    committed = lm.hidden(0, lm.length)
    for node in fed:
        path, up = [], node
        while True:
            path.append(up)
            if up.parent < 0:
                break
            up = nodes[up.parent]
        path = path[::-1]
        with (
            torch.inference_mode()
        ):  # pairs: committed (f_i, x_{i+1}), then (guess before the node, node token) down the path
            feats = [committed] + [drafter.last[None]] + [p.state[None] for p in path[:-1]]
            ids = tokens[1:] + [p.token for p in path]
            n = len(ids)
            mask = torch.zeros(n, n).masked_fill(
                ~torch.ones(n, n, dtype=torch.bool).tril(), torch.finfo(torch.float32).min
            )
            alone = head(torch.cat(feats)[None], torch.tensor([ids]), torch.arange(n)[None], mask[None, None])[0, -1]
        assert torch.allclose(node.state, alone, atol=1e-5)


def test_the_kept_tree_is_the_best_scored_nodes_and_closed_under_parents(target, tokenizer):
    head = random_head(target, seed=5)
    tokens = tokenizer.encode("w1 w2 w3")
    _, drafter = started(target, head, tokens, nodes=7)
    proposal = drafter.propose(tokens, 4)
    tree = build_tree(proposal.candidates)
    assert len(tree.tokens) == 7
    assert drafter.cache.get_seq_length() == drafter.fed == len(tokens) - 1  # drafts forgotten
    with torch.inference_mode():  # the same growth again, from the same committed pairs
        nodes = drafter.grow_tree(4)
    best = sorted(range(len(nodes)), key=lambda n: (-nodes[n].score, n))[:7]
    assert all(nodes[n].parent < 0 or nodes[n].parent in best for n in best)  # closed under parents
    kept = {tokens_to(nodes, n) for n in best}
    assert kept == {tuple(tree.tokens[m] for m in tree.path_to(node)) for node in range(len(tree.tokens))}


def test_hidden_rows_follow_rollback_and_compaction(target, tokenizer):
    tokens = tokenizer.encode("w1 w2 w3 w4")
    lm = CachedLM(target.model, keep_hidden=True)
    lm.extend(torch.tensor(tokens[:-1]))
    tree = build_tree([[7, 8], [9, 10, 11]])
    lm.extend_tree(tokens[-1], tree)
    lm.keep(len(tokens), [2, 3])  # the second branch's first two nodes
    kept = tokens + [9, 10]
    with torch.no_grad():
        fresh = target.model(torch.tensor([kept]), output_hidden_states=True).hidden_states[-1][0]
    assert lm.length == len(kept)
    assert torch.allclose(lm.hidden(0, lm.length), fresh, atol=1e-5)
    lm.truncate(3)
    assert torch.allclose(lm.last_hidden, fresh[2], atol=1e-5)


def greedy_answers(target, prompts: int, prompt_length: int, tokens: int, seed: int) -> list[Text]:
    """Random prompts and the tiny target's greedy answers to them (it falls into loops a head can learn)."""
    texts, g = [], torch.Generator().manual_seed(seed)
    for i in range(prompts):
        prompt = torch.randint(2, target.vocab_size, (prompt_length,), generator=g).tolist()
        answer = generated_ids(generate(target, prompt, Settings(max_new_tokens=tokens)))
        texts.append(Text(prompt + answer, len(prompt), f"prompt {i}"))
    return texts


@pytest.fixture(scope="module")
def trained(target):
    """A head trained on the tiny target's own greedy answers."""
    features = read_features(target, greedy_answers(target, prompts=12, prompt_length=6, tokens=64, seed=0))
    how = EagleTraining(steps=60, lr=3e-3, train_batch=4, window=48, unroll=2, shortlist=0, init="random", held_out=0.2)
    head, report = train_eagle(target, features, how)
    return head, report, features


def test_training_lowers_the_loss_and_the_head_is_accepted(target, trained):
    head, report, features = trained
    assert report.last_loss < report.first_loss / 2
    assert report.held_out_positions > 100
    untrained = chain_acceptance(random_head(target, seed=9), features[:6], 3)[0]
    assert report.acceptance[0] > 0.3 > untrained[0]
    assert report.acceptance[0] >= report.acceptance[1] >= report.acceptance[2]  # deeper is never likelier
    texts = [Text(f.ids.tolist(), f.answer_from, f.group) for f in features]
    seen = split_by_group(texts, 0.2, 0)[0][0]  # a prompt the head trained on: a tiny random model's loops are
    prompt = seen.ids[: seen.answer_from]  # its own; a head learns them, but they say little of others
    plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=60)))
    for tree in ("chain", "dynamic"):
        events = list(generate(target, prompt, Settings(max_new_tokens=60, gamma=4), EagleDrafter(head, (-1,), tree)))
        assert generated_ids(events) == plain
        assert summarize(events).target_forwards < 45


def test_the_registry_builds_eagle_from_a_loaded_head(target, tokenizer):
    ids = tokenizer.encode("w5 w6 w7")
    plain = generated_ids(generate_named(target, ids, Settings(max_new_tokens=20)))
    head = random_head(target)
    events = list(
        generate_named(
            target,
            ids,
            Settings(max_new_tokens=20, gamma=3),
            "eagle",
            options={"eagle": (head, (-1,)), "eagle_tree": "chain"},
        )
    )
    assert generated_ids(events) == plain


def test_eagle_sampling_follows_the_targets_law(sensitive, draws):
    """Several steps of sampling with EAGLE drafts (rollback of the head's cache, the hidden rows' compaction and
    tree verification all feeding later tokens) against the target's exact law of the first tokens."""
    target, _, tok = sensitive
    prompt = tok.encode("a b c d")
    head = random_head(target, seed=2)
    drafter = lambda s, generator: EagleDrafter(head, (-1,), "dynamic", nodes=6)  # noqa: E731 (one per run)
    counts = draws(target, prompt, LAW_SETTINGS, drafter, horizon=HORIZON)
    assert sum(counts.values()) == draws.runs and LAW_SETTINGS.temperature == 1.0
    assert draws.p(counts, exact_law(target, prompt, LAW_SETTINGS, HORIZON)) > 1e-3


def test_a_one_token_prompt_takes_a_plain_first_step(target, tokenizer):
    ids = tokenizer.encode("w9")
    events = list(generate(target, ids, Settings(max_new_tokens=6, gamma=3), EagleDrafter(random_head(target), (-1,))))
    assert events[0].proposed == () and generated_ids(events) == generated_ids(
        generate(target, ids, Settings(max_new_tokens=6))
    )
