"""Learning to Execute data (Zaremba & Sutskever 2014, §3-4; Santoro et al. 2018, §4.4)."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from keras_relmem.data import lte

SETTINGS = [(1, 1), (2, 2), (5, 2), (3, 3)]


def _printed_by_python(programs):
    """What each program prints, run by a separate Python interpreter (not the generator's own exec)."""
    script = (
        "import contextlib, io, json, sys\n"
        "out = []\n"
        "for program in json.load(sys.stdin):\n"
        "    buffer = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buffer):\n"
        "        exec(compile(program, '<program>', 'exec'), {})\n"
        "    out.append(buffer.getvalue())\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(programs), capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("task", lte.PROGRAM_TASKS)
def test_every_v1_program_prints_its_target(task):
    programs, answers = [], []
    for seed, (length, nesting) in enumerate(SETTINGS * 50):
        program, answer = lte.generate(task, length, nesting, np.random.default_rng(seed), style="v1")
        programs.append(program)
        answers.append(answer)
    printed = _printed_by_python(programs)
    assert [p.strip() for p in printed] == answers
    assert all(p.endswith("\n") and p.count("\n") == 1 for p in printed)  # one print, one line


@pytest.mark.parametrize("length, nesting", SETTINGS)
def test_v1_programs_follow_the_grammar_of_their_task(length, nesting):
    rng = np.random.default_rng(length * 10 + nesting)
    for _ in range(100):
        add, _ = lte.generate("add", length, nesting, rng, style="v1")
        # 1.0: literals drawn from [1, 10**length); Add holds nothing but additions, one per level of nesting
        numbers = [int(n) for n in re.findall(r"\d+", add)]
        assert all(1 <= n < 10 ** length for n in numbers)
        assert add.count("+") == nesting and not re.search(r"[-*<>]|for|if", add)
        control, _ = lte.generate("control", length, nesting, rng, style="v1")
        assert not re.search(r"\*|\(\d+[+-]\d+\)", control)  # no arithmetic besides the loops' updates
        assert control.count(" if ") + control.count("for x in range(") == nesting
        # for loops and multipliers run up to 4 * length (LTE §3)
        for text in (control, lte.generate("program", length, nesting, rng, style="v1")[0]):
            for count in re.findall(r"range\((\d+)\)", text) + re.findall(r"\*(\d+)\)", text):
                assert 1 <= int(count) <= 4 * length
            assert text.splitlines()[-1].startswith("print(")


def test_memorization_targets():
    rng = np.random.default_rng(3)
    for length in (1, 4, 7):
        for task, expect in (("copy", lambda d: d), ("reverse", lambda d: d[::-1]), ("double", lambda d: d + d)):
            digits, target = lte.generate(task, length, 2, rng)
            assert re.fullmatch(r"[1-9]\d*", digits) and len(digits) == length
            assert target == expect(digits)


def test_vocabulary_round_trip_and_unknown_characters():
    vocab = lte.VOCABULARY
    data = lte.examples(200, "program", 5, 2, "mix", seed=4)
    for program_ids, answer_ids, program, answer in zip(data["program"], data["answer"], data["program_text"],
                                                          data["answer_text"]):
        assert vocab.decode(program_ids) == program
        assert vocab.decode(answer_ids) == answer
    assert len(set(vocab.tokens)) == len(vocab) == 3 + len(lte.CHARACTERS)
    with pytest.raises(ValueError, match=r"character '\$' at position 5"):
        vocab.encode("print$")
    assert vocab.encode("a$", strict=False) == [vocab.encode("a")[0], lte.UNK]


def test_v1_padding_and_end_mark():
    data = lte.examples(50, "add", 3, 2, "baseline", seed=1, style="v1")
    for ids, answer_ids, program, answer in zip(data["program"], data["answer"], data["program_text"],
                                                 data["answer_text"]):
        assert (ids[len(program):] == lte.PAD).all() and (ids[: len(program)] != lte.PAD).all()
        assert answer_ids[len(answer)] == lte.EOS and (answer_ids[len(answer) + 1:] == lte.PAD).all()


@pytest.mark.parametrize("style", lte.STYLES)
@pytest.mark.parametrize("task", lte.TASKS)
def test_lengths_bound_every_example_of_every_curriculum(task, style):
    length, nesting = 4, 2
    end_mark = 1 if style == "v1" else 0
    for curriculum in lte.CURRICULA:
        data = lte.examples(300, task, length, nesting, curriculum, seed=2, style=style)
        assert max(map(len, data["program_text"])) <= lte.program_length(task, length, nesting, style)
        assert max(map(len, data["answer_text"])) + end_mark <= lte.answer_length(task, length, nesting, style)
    # the bound is reached: a baseline set of the largest setting comes close to it
    longest = max(map(len, lte.examples(2000, task, length, nesting, seed=5, style=style)["program_text"]))
    assert longest >= 0.75 * lte.program_length(task, length, nesting, style)


# Hand-worked programs of each kind in the paper's style (Zaremba & Sutskever 2014, Fig. 1 and §3; Sonnet's
# learn_to_execute.py: literals of exactly `length` digits, no print, value modulo 10**(length + 1)).
HAND_WORKED = [
    # (task, length, program, value worked by hand, target = value mod 10**(length+1))
    ("add", 3, "(865+673)+560", 865 + 673 + 560, "2098"),
    ("add", 2, "(91+99)+98", 288, "288"),
    ("control", 3, "(921 if 831<684 else 553) if 973>756 else 669", 553, "553"),
    ("program", 3, "v=119\nfor x in range(2):v+=876\nn=v\nfor x in range(4):n+=532\nn",
     119 + 2 * 876 + 4 * 532, "3999"),
    ("program", 2, "a=12\nfor x in range(3):a-=45\na", 12 - 3 * 45, str((12 - 3 * 45) % 1000)),  # -123 -> 877
    ("program", 1, "(9*4)*4", 144, "44"),  # 144 mod 100
]


@pytest.mark.parametrize("task, length, program, value, target", HAND_WORKED)
def test_paper_targets_are_the_value_modulo_ten_to_the_length_plus_one(task, length, program, value, target):
    assert str(value % 10 ** (length + 1)) == target
    assert lte._run(program, "paper", length) == target


@pytest.mark.parametrize("task", lte.PROGRAM_TASKS)
def test_paper_programs_have_exact_length_literals_no_print_and_modular_targets(task):
    for seed, (length, nesting) in enumerate(SETTINGS * 25):
        program, answer = lte.generate(task, length, nesting, np.random.default_rng(seed))
        assert "print" not in program
        # every literal has exactly `length` digits (loop counts and factors are not literals: up to 4 * length)
        text = re.sub(r"range\(\d+\)|\*\d+", "", program)
        assert all(len(n) == length for n in re.findall(r"\d+", text)), program
        assert answer.isdigit() and int(answer) < 10 ** (length + 1)
        # the target, computed apart: run the statements, evaluate the last line
        *statements, expression = program.split("\n")
        scope = {}
        exec("\n".join(statements), scope)
        assert int(answer) == eval(expression, scope) % 10 ** (length + 1)


def test_paper_answers_have_no_end_mark():
    data = lte.examples(50, "add", 3, 2, "baseline", seed=1)
    for answer_ids, answer in zip(data["answer"], data["answer_text"]):
        assert lte.VOCABULARY.decode(answer_ids) == answer
        assert lte.EOS not in answer_ids and (answer_ids[len(answer):] == lte.PAD).all()


def test_a_shared_schedule_sets_the_level_by_examples_for_every_model():
    levels = [lte.CurriculumLevel(5, 2, "combine", every=100).at_examples(n) for n in range(0, 800, 100)]
    assert levels == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (5, 2), (5, 2), (5, 2)]
    assert lte.CurriculumLevel(5, 2, "baseline", every=100).at_examples(50) == (5, 2)


def test_same_seed_same_examples():
    first = lte.examples(20, "control", 3, 2, "combine", seed=9)
    again = lte.examples(20, "control", 3, 2, "combine", seed=9)
    other = lte.examples(20, "control", 3, 2, "combine", seed=10)
    assert first["program_text"] == again["program_text"]
    np.testing.assert_array_equal(first["program"], again["program"])
    assert first["program_text"] != other["program_text"]
    test = lte.test_set("control", 3, 2, 20)
    assert test["program_text"] == lte.test_set("control", 3, 2, 20)["program_text"]
    assert test["program_text"] != first["program_text"]


@pytest.mark.parametrize("call, message", [
    (lambda: lte.generate("add", 0, 1, np.random.default_rng()), "length must be a positive integer; received 0"),
    (lambda: lte.examples(2, "add", 2, 0), "nesting must be a positive integer; received 0"),
    (lambda: lte.examples(2, "sort", 2, 2), "task must be one of add, control, program"),
    (lambda: lte.CurriculumLevel(5, 2, "spiral"), "curriculum must be one of baseline, naive, mix, combine"),
    (lambda: lte.program_length("add", 2.5, 1), "length must be a positive integer; received 2.5"),
])
def test_bad_settings_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_curricula_draw_what_the_lte_paper_says():
    rng = np.random.default_rng(0)
    naive = lte.CurriculumLevel(3, 2, "naive")
    levels = [naive.level]
    while naive.advance():
        levels.append(naive.level)
    # LTE §4: the length grows first, then the nesting
    assert levels == [(1, 1), (2, 1), (3, 1), (3, 2)] and naive.at_target
    assert lte.CurriculumLevel(3, 2, "baseline").draw(rng) == (3, 2)
    mixed = [lte.CurriculumLevel(3, 2, "mix").draw(rng) for _ in range(2000)]
    assert set(mixed) == {(length, nesting) for length in (1, 2, 3) for nesting in (1, 2)}
    combine = lte.CurriculumLevel(3, 2, "combine")
    draws = [combine.draw(rng) for _ in range(4000)]
    # half from the naive level (1, 1), half from the mix, which draws (1, 1) one time in six
    assert abs(draws.count((1, 1)) / 4000 - (0.5 + 0.5 / 6)) < 0.03
    assert lte.CurriculumLevel(5, 3, "naive", task="copy").target == (5, 1)


def test_dataset_batches_continue_across_epochs_and_follow_the_level():
    tf = pytest.importorskip("tensorflow")
    level = lte.CurriculumLevel(4, 1, "naive", task="copy")
    ds = lte.dataset("copy", 4, 1, batch_size=8, seed=3, level=level, batches_per_draw=2)
    first = [p.numpy() for p, _ in ds.take(2)]
    second = [p.numpy() for p, _ in ds.take(2)]  # the next epoch: new draws, not the first ones again
    assert first[0].shape == (8, 4) and not np.array_equal(first[0], second[0])
    assert all((batch[:, 1:] == lte.PAD).all() for batch in first)  # level (1, 1): one digit
    level.advance()
    program, answer = next(iter(ds))
    assert (program.numpy()[:, :2] != lte.PAD).all() and (program.numpy()[:, 2:] == lte.PAD).all()
    again = lte.dataset("copy", 4, 1, batch_size=8, seed=3, level=lte.CurriculumLevel(4, 1, "naive"),
                        batches_per_draw=2, first_draw=1)
    np.testing.assert_array_equal(next(iter(again))[0].numpy(), second[0])
    assert isinstance(answer, tf.Tensor) and answer.dtype == tf.int32
