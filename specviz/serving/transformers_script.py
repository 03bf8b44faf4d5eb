"""A drafter as transformers runs it: a script that loads the models and writes the continuation with `generate(...)`,
assisted by the draft model, copying by prompt lookup, or decoding plainly. Keys as transformers' documentation spells
them (`GenerationConfig`, assisted decoding, prompt lookup decoding)."""

from .declaration import AssistedGeneration, PromptLookup
from .handoff import Ran


def launch(ran: Ran) -> str:
    """The script that decodes plainly."""
    return _script(ran, [])


def write(ran: Ran, way, own: bool) -> str:
    """The script for `way` (transformers' own options at their values; `own` changes nothing here)."""
    s = ran.settings
    if isinstance(way, AssistedGeneration):
        schedule = "heuristic" if s.adaptive else "constant"
        args = ["assistant_model=assistant", f"num_assistant_tokens={s.gamma}"]
        args.append(f'num_assistant_tokens_schedule="{schedule}"')
        if not ran.same_vocab:
            args += ["tokenizer=tokenizer", "assistant_tokenizer=assistant_tokenizer"]
        return _script(ran, args, ran.draft or "DRAFT")
    if isinstance(way, PromptLookup):
        return _script(ran, [f"prompt_lookup_num_tokens={s.gamma}", f"max_matching_ngram_size={way.window.longest}"])
    return launch(ran)


def gives_up(way, options) -> str:
    """What transformers' own way loses beside specviz's drafter, beyond a tree and adaptive γ."""
    if isinstance(way, PromptLookup) and (shortest := way.window.shortest_for(options)) > 1:
        return f"transformers matches down to 1 token (specviz: {shortest})"
    return ""


def _script(ran: Ran, args: list[str], draft: str = "") -> str:
    """A script that loads the models and writes the greedy (or sampled) continuation, the way specviz did."""
    s = ran.settings
    sampling = (
        ["do_sample=False"]
        if s.greedy
        else ["do_sample=True", f"temperature={s.temperature}", f"top_k={s.top_k}", f"top_p={s.top_p}"]
    )
    lines = [
        "import torch",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f"torch.manual_seed({s.seed})",
        f"tokenizer = AutoTokenizer.from_pretrained({ran.target!r})",
        f'model = AutoModelForCausalLM.from_pretrained({ran.target!r}, dtype="auto")',
    ]
    if draft:
        lines.append(f'assistant = AutoModelForCausalLM.from_pretrained({draft!r}, dtype="auto")')
        if not ran.same_vocab:
            lines.append(f"assistant_tokenizer = AutoTokenizer.from_pretrained({draft!r})")
    lines.append(f"prompt = {ran.prompt!r}")
    if ran.chat:
        lines.append(
            'inputs = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], '
            'add_generation_prompt=True, return_tensors="pt", return_dict=True)'
        )
    else:
        lines.append('inputs = tokenizer(prompt, return_tensors="pt")')
    call = ", ".join(["**inputs", *args, *sampling, f"max_new_tokens={s.max_new_tokens}"])
    lines += [
        f"output = model.generate({call})",
        'new_tokens = output[0, inputs["input_ids"].shape[1] :]',
        "print(tokenizer.decode(new_tokens, skip_special_tokens=True))",
    ]
    return "\n".join(lines)
