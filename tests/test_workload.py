"""A workload of one's own: prompts pasted or read from .txt, .jsonl and .csv files, refused in one line when they
cannot be read or do not fit the device; the results view's totals and its time-left estimate; a stop keeps what
finished; "each drafter's best" means the same settings in the app and the CLI."""

import json

import pytest

from specviz.cli import build_parser
from specviz.cli.flags import settings_from
from specviz.drafters.registry import kinds
from specviz.drafters.suffix_index import RunMemory
from specviz.events import PLAIN, StepEvent
from specviz.settings import Settings
from specviz.trace import Divergence
from specviz.workload.entrants import best_settings
from specviz.workload.prompts import (
    CPU_LIMITS,
    GPU_LIMITS,
    Limits,
    WorkloadError,
    check_workload,
    limits_for,
    read_prompts,
    split_pasted,
)
from specviz.workload.run import run_workload, side_runner
from specviz.workload.view import Contender, WorkloadView


def test_pasted_prompts_are_lines_or_blank_line_blocks():
    assert split_pasted("first\r\nsecond\n\n  third  \n") == ["first\nsecond", "third"]
    assert split_pasted("one\ntwo\nthree\n") == ["one", "two", "three"]
    assert split_pasted("a multi\nline prompt\n\n\n\nand another\nof two lines") == [
        "a multi\nline prompt",
        "and another\nof two lines",
    ]
    assert split_pasted("   \n\n") == []


def test_prompt_files_by_their_kind(tmp_path):
    (tmp_path / "p.txt").write_text("one\ntwo\n", encoding="utf-8")
    lines = [{"prompt": "first <b>"}, {"turns": ["opening turn", "a follow-up"]}, {"turns": [{"content": "dict"}]}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    (tmp_path / "p.csv").write_text('id,Prompt\n1,"with, a comma"\n2,"two\nlines"\n3,\n', encoding="utf-8")
    assert read_prompts(tmp_path / "p.txt") == ["one", "two"]
    assert read_prompts(tmp_path / "p.jsonl") == ["first <b>", "opening turn", "dict"]
    assert read_prompts(tmp_path / "p.csv") == ["with, a comma", "two\nlines"]
    # an upload's temporary copy is read by the name it was uploaded with
    (tmp_path / "upload-123").write_text("id,prompt\n1,x\n", encoding="utf-8")
    assert read_prompts(tmp_path / "upload-123", name="mine.csv") == ["x"]


BAD_FILES = [
    ("empty.txt", b"", "holds no prompts"),
    ("blank.txt", b"\n \n\n", "holds no prompts"),
    ("binary.txt", b"GIF89a\x00\x01\x02", "not text"),
    ("latin.txt", "café".encode("latin-1"), "not UTF-8"),
    ("noprompt.csv", b"id,question\n1,why\n", 'no "prompt" column'),
    ("broken.jsonl", b'{"prompt": "ok"}\n{"prompt": \n', "line 2 is not JSON"),
    ("fieldless.jsonl", b'{"text": "hi"}\n', 'line 1 has no "prompt"'),
    ("list.jsonl", b'["hi"]\n', "not a JSON object"),
    ("slides.pdf", b"%PDF-1.7", "not .pdf"),
]


@pytest.mark.parametrize("name, data, needle", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_file_is_refused_in_one_line(tmp_path, name, data, needle):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(WorkloadError) as caught:
        read_prompts(tmp_path / name)
    message = str(caught.value)
    assert needle in message and "\n" not in message, message


def test_a_50_mb_upload_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(50 << 20)
    with pytest.raises(WorkloadError, match=r"50\.0 MiB; a prompt file may be at most 1 MiB"):
        read_prompts(big)


def test_a_workload_must_fit_the_device():
    assert limits_for("cpu") == CPU_LIMITS and limits_for("cuda") == GPU_LIMITS
    assert GPU_LIMITS.prompts > CPU_LIMITS.prompts and GPU_LIMITS.tokens > CPU_LIMITS.tokens
    small = Limits(prompts=3, tokens=1000)
    check_workload(["a", "b"], small, prompt_tokens=40, sides=3, max_new_tokens=100)  # 3 × (40 + 200) = 720
    with pytest.raises(WorkloadError, match="4 prompts; this device runs at most 3"):
        check_workload(["a"] * 4, small, 10, 2, 10)
    with pytest.raises(WorkloadError, match="up to 1,200 tokens; this device takes at most 1,000"):
        check_workload(["a", "b"], small, prompt_tokens=0, sides=3, max_new_tokens=200)
    with pytest.raises(WorkloadError, match="no prompts"):
        check_workload([], small, 0, 2, 10)
    with pytest.raises(WorkloadError, match="prompt 2: the prompt is not valid text"):
        check_workload(["fine", "half \ud800"], small, 0, 2, 10)


def test_each_drafters_best_is_what_generate_runs_it_with_whatever_gamma_the_screen_holds():
    """The app's sidebar carries the chosen drafter's γ (8, adaptive, for the draft model); a lookup drafter's best
    is still its own: what `generate --drafter NAME` runs with no --gamma."""
    screen = Settings(gamma=8, adaptive=True, max_new_tokens=64)
    preferring = [k for k in kinds(menu_only=True) if k.listing.preferred]
    assert preferring and len(preferring) < len(kinds(menu_only=True))  # both cases are met below
    for k in kinds(menu_only=True):
        best = best_settings(k, screen)
        cli = settings_from(build_parser().parse_args(["generate", "--target", "t", "--prompt", "p"]), k.name)
        assert (best.gamma, best.adaptive) == (cli.gamma, cli.adaptive), k.name
        assert (best.gamma, best.adaptive) == (k.listing.prefers("gamma", 4), k.listing.prefers("adaptive", False)), (
            k.name
        )
        assert best.max_new_tokens == 64  # everything else is the screen's


def step(i, proposed=(), accepted=0, seconds=0.1, kind=None):
    """A step writing `accepted` draft tokens and one of the target's own, in `seconds`."""
    kind = kind or ("plain" if not proposed else "bonus" if accepted == len(proposed) else "correction")
    return StepEvent(i, tuple(proposed), accepted, 9, kind, (0.5,) * len(proposed), None, 0.0, seconds, seconds)


def plain_side(n=8, seconds=0.1):
    return [step(k, seconds=seconds) for k in range(n)]


def fast_side(n=8):
    """n tokens in n / 2 steps of plain decoding's time: twice its speed, α = 1/2 with two-token drafts."""
    return [step(k, (5, 5), 1) for k in range(n // 2)]


def view_of(prompts=3, contenders=None, greedy=True):
    contenders = contenders or [Contender("alpha-drafter", "alpha words"), Contender("beta-drafter", "beta words")]
    return WorkloadView(
        prompts=[f"prompt {i}" for i in range(prompts)],
        contenders=contenders,
        greedy=greedy,
        setting="best",
        max_new_tokens=8,
    )


def test_each_drafter_is_totalled_over_the_prompts_it_and_plain_both_finished():
    view = view_of(contenders=[Contender("alpha-drafter", "a"), Contender("off", "o", "not available: no heads")])
    parted = Divergence(3, "x", "y", (("x", 0.5), ("y", 0.49)))

    def run_side(i, side, plain_ids):
        assert side != "off"  # a drafter that cannot run is never run
        if side == PLAIN:
            yield from plain_side()
            return
        assert plain_ids == [9] * 8  # a greedy drafter run is handed plain decoding's output on the same prompt
        yield from fast_side()
        if i == 2:
            yield parted

    *_, final = run_workload(view, run_side, every_s=0)
    plain, alpha, off = final.rows()
    assert (plain.name, plain.prompts, plain.speedup, plain.tokens) == (PLAIN, 3, 1.0, 24)
    assert alpha.prompts == 3 and alpha.speedup == pytest.approx(2.0) and alpha.tokens_per_s == pytest.approx(20.0)
    assert alpha.alpha == pytest.approx(0.5) and alpha.tau == pytest.approx(2.0)
    assert alpha.identical == 2  # prompt 3's output parted from plain decoding's
    assert alpha.by_position == pytest.approx((1.0, 0.0))
    assert off.note == "not available: no heads" and off.speedup is None
    assert final.speedup(0, "alpha-drafter") == pytest.approx(2.0) and final.progress() == 1.0
    assert final.finished and not final.stopped and final.message == "done"


def test_time_left_comes_from_measured_speeds_and_plain_lengths():
    view = view_of(prompts=2, contenders=[Contender("alpha-drafter", "a")])
    now = [0.0]

    def run_side(i, side, plain_ids):
        for event in plain_side(n=10) if side == PLAIN else fast_side(n=10):
            now[0] += 0.1 if side == PLAIN else 0.05 * 2  # plain: 10 tok/s of wall time; the drafter: 20 tok/s
            yield event

    seen = []
    for v in run_workload(view, run_side, every_s=0, clock=lambda: now[0]):
        seen.append((v.running, v.seconds_left()))
    assert seen[0] == ((0, PLAIN), None)  # nothing measured yet: no guess
    # after plain decoding's first prompt (10 tokens in 1 s): the drafter's unmeasured runs are guessed at plain's
    # speed, 1 s each, and prompt 2's plain run at 1 s
    assert next(left for running, left in seen if running == (0, "alpha-drafter")) == pytest.approx(3.0)
    # after the drafter's first prompt (10 tokens in 0.5 s): prompt 2 needs 1 s plain and 0.5 s drafted
    assert next(left for running, left in seen if running == (1, PLAIN)) == pytest.approx(1.5)
    assert seen[-1][1] == pytest.approx(0.0)


def test_a_stop_keeps_the_runs_that_finished_and_drops_the_one_under_way():
    view = view_of(prompts=3)
    stop = {"now": False}

    def run_side(i, side, plain_ids):
        for k, event in enumerate(plain_side() if side == PLAIN else fast_side()):
            if (i, side, k) == (1, "alpha-drafter", 2):
                stop["now"] = True
            yield event

    *_, final = run_workload(view, run_side, lambda: stop["now"], every_s=0)
    assert final.stopped and final.finished and "kept" in final.message
    plain, alpha, beta = final.rows()
    assert (plain.prompts, alpha.prompts, beta.prompts) == (2, 1, 1)  # prompt 2's drafter run was cut: not counted
    assert not final.cells[1, "alpha-drafter"].done and (1, "beta-drafter") not in final.cells


def test_a_drafter_that_fails_on_a_prompt_says_why_and_the_others_go_on():
    from specviz.errors import TreeAttentionUnsupported

    view = view_of(prompts=2)

    def run_side(i, side, plain_ids):
        if side == "alpha-drafter":
            raise TreeAttentionUnsupported("this model's attention takes no tree mask")
        yield from plain_side() if side == PLAIN else fast_side()

    *_, final = run_workload(view, run_side, every_s=0)
    _, alpha, beta = final.rows()
    assert alpha.note == "failed: this model's attention takes no tree mask" and alpha.speedup is None
    assert beta.prompts == 2 and beta.speedup == pytest.approx(2.0)


def test_a_sampled_workload_hands_drafters_no_plain_output_and_claims_no_identity():
    view = view_of(prompts=1, greedy=False)
    handed = []

    def run_side(i, side, plain_ids):
        handed.append(plain_ids)
        yield from plain_side() if side == PLAIN else fast_side()

    *_, final = run_workload(view, run_side, every_s=0)
    assert handed == [None, None, None]
    assert all(row.identical is None for row in final.rows())


def test_the_live_table_says_sampled_only_of_a_sampled_workload():
    """A greedy workload's drafters that have not finished a prompt yet are waiting, not 'sampled'."""
    from specviz.app.ui.workload_screen import summary_table

    def identity_column(view):
        rows = summary_table(view).split("<tbody>")[1].split("</tr>")[:-1]
        return [row.split("<td>")[6].removesuffix("</td>") for row in rows]

    greedy = view_of(prompts=2)
    for shown in run_workload(greedy, lambda i, side, plain_ids: iter(plain_side()), every_s=0):
        if shown.running == (0, "alpha-drafter"):  # plain decoding has finished prompt 1, no drafter has
            assert identity_column(shown) == ["the reference", "–", "–"]
            break
    *_, sampled = run_workload(view_of(prompts=1, greedy=False), lambda i, s, p: iter(plain_side()), every_s=0)
    assert identity_column(sampled) == ["the reference", "sampled", "sampled"]


def test_a_remembering_side_drafts_from_a_copy_and_its_finished_run_joins_the_memory_once():
    """As the suffix drafter does, each run begins its own document in the memory it is handed; the workload's memory
    then holds every finished prompt once, and a run that did not end leaves it as it was."""
    memory, seen = RunMemory(), []

    def decode_one(i, side, plain_ids, copy):
        seen.append(copy is not memory and len(copy.runs))
        copy.begin([i, i]).extend([7])
        yield StepEvent(0, (), 0, 7, "plain", (), None, 0.0, 0.0, 0.0)
        return [i, i] if i < 2 else None

    run_side = side_runner(decode_one, {"suffix": memory})
    for i in range(3):
        assert [e.tokens for e in run_side(i, "suffix", None)] == [(7,)]
    assert seen == [0, 1, 2] and [list(run.tokens) for run in memory.runs] == [[0, 0, 7], [1, 1, 7]]
