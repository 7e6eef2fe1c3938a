"""Learning to Execute (Zaremba & Sutskever 2014), the RMC paper's Table 1 tasks.

Programs of a small Python subset are read one character at a time and the
model writes their value. Two settings govern difficulty: the literal
**length** and the **nesting** (how many operations are combined). The
operations follow the LTE paper §3: addition, subtraction, multiplication by a
small number, `if`-`else` expressions, `for` loops (never nested) and variable
assignments; multiplication factors and loop counts are drawn from
`[1, 4 * length]`, as there.

Two generators (`style`):

- `"paper"` (the default): as the paper and Sonnet's `learn_to_execute.py`
  make them. Literals have exactly `length` digits; the program's last line
  is its expression (no `print`); the target is its value modulo
  `10**(length + 1)` for the program tasks (as Sonnet's `generate_code`
  takes it); the answer has no end mark: its length is known from the target,
  and the loss and accuracy cover its characters only (padding after it is
  masked, as Sonnet masks it).
- `"v1"`: the generator of keras-relmem 1.0, which 1.0's Learning to Execute
  runs used (their page is in the benchmarks' archive): literals uniform in `[1, 10**length)`, a `print(...)`
  around the last expression, Python's value as the target, and a trained
  end mark after the answer.

The six tasks of the RMC paper's Table 1 (Santoro et al. 2018, §4.4):

- `add`: additions only; `control`: `if`-`else` and `for` loops;
  `program`: every operation (the full programs with variables).
- `copy`, `reverse`, `double`: the memorization tasks; the input is a number
  of exactly `length` digits and the target is the number, its reverse, or
  the number written twice.

Curricula (LTE paper §4): `baseline` trains on the target setting only;
`naive` starts at length 1, nesting 1 and raises the length, then the
nesting, each time `CurriculumLevel.advance` is called; `mix` draws every
example's length and nesting uniformly up to the target; `combine` (the LTE
paper's best) takes half its examples from the naive level and half from the
mix. (Sonnet's `CombineCurriculum` instead draws uniformly up to the current
level.) The level moves on when a probe passes a threshold, or, with
`CurriculumLevel(every=N)`, after every `N` training examples: one schedule
that every model follows alike. Test sets always use the target setting
(`baseline`), from a fixed seed.

Example:

```python
>>> import numpy as np
>>> from keras_relmem.data import lte
>>> rng = np.random.default_rng(0)
>>> program, answer = lte.generate("add", length=2, nesting=2, rng=rng)
>>> program.count("+"), str(eval(program) % 10 ** 3) == answer  # Add: one expression, no statements
(2, True)

```

References:
    Zaremba & Sutskever, "Learning to Execute", arXiv:1410.4615 (§3 the
    programs, §4 the curricula). Santoro et al., "Relational recurrent
    neural networks", NeurIPS 2018, §4.4 and Table 1.
"""

import itertools
import string

import numpy as np

TASKS = ("add", "control", "program", "copy", "reverse", "double")
STYLES = ("paper", "v1")
PROGRAM_TASKS = ("add", "control", "program")
CURRICULA = ("baseline", "naive", "mix", "combine")

PAD, EOS, UNK = 0, 1, 2
# Every character a program or an answer can hold; id = position + 3.
CHARACTERS = "\n " + "()*+-:<=>" + string.digits + string.ascii_lowercase
# Variable names: one letter, never the loop's `x` nor a letter that starts a keyword used bare.
VARIABLES = "abcdeghjklmnopqstuvwyz"


class CharacterVocabulary:
    """Characters <-> ids: 0 pads, 1 ends an answer, 2 stands for a character outside the grammar.

    Example:

    ```python
    >>> vocab = CharacterVocabulary()
    >>> ids = vocab.encode("print(12)")
    >>> vocab.decode(ids + [EOS, PAD])
    'print(12)'

    ```
    """

    def __init__(self):
        self.tokens = ["<pad>", "<eos>", "<unk>", *CHARACTERS]
        self._ids = {c: i + 3 for i, c in enumerate(CHARACTERS)}

    def __len__(self):
        return len(self.tokens)

    def encode(self, text, strict=True):
        """Ids of `text`'s characters. `strict` raises on a character outside the grammar; else it becomes UNK."""
        ids = []
        for position, char in enumerate(text):
            if char not in self._ids and strict:
                raise ValueError(f"character {char!r} at position {position} of {text!r} is not in the "
                                 "Learning to Execute vocabulary (digits, lower-case letters, spaces, "
                                 "newlines and ()*+-:<=>)")
            ids.append(self._ids.get(char, UNK))
        return ids

    def decode(self, ids):
        """The text of `ids` up to the first end mark (or padding)."""
        chars = []
        for i in ids:
            i = int(i)
            if i in (PAD, EOS):
                break
            chars.append(self.tokens[i] if i != UNK else "?")
        return "".join(chars)


VOCABULARY = CharacterVocabulary()


class _Draw:
    """The random choices of one program; `largest=True` makes every choice its longest (for length bounds)."""

    def __init__(self, rng, length, largest=False, style="paper"):
        self.rng, self.length, self.largest, self.style = rng, length, largest, style

    def literal(self):
        top = 10 ** self.length - 1
        # the paper's literals have exactly `length` digits; 1.0's were uniform in [1, 10**length)
        bottom = 10 ** (self.length - 1) if self.style == "paper" else 1
        return top if self.largest else int(self.rng.integers(bottom, top + 1))

    def small(self):
        top = 4 * self.length
        return top if self.largest else int(self.rng.integers(1, top + 1))

    def pick(self, options):
        return options[0] if self.largest else options[int(self.rng.integers(len(options)))]


# Each operation takes the program so far (its statements and the expression the last operation left,
# or None at the start) and returns the new statements and expression. An operation uses the pending
# expression as its first operand, as in Sonnet's generator, so nesting is the number of operations.
def _operand(expression, draw):
    return expression if expression is not None else str(draw.literal())


def _add(lines, expression, draw):
    return lines, f"({_operand(expression, draw)}+{draw.literal()})"


def _subtract(lines, expression, draw):
    return lines, f"({_operand(expression, draw)}-{draw.literal()})"


def _multiply(lines, expression, draw):
    return lines, f"({_operand(expression, draw)}*{draw.small()})"


def _if_else(lines, expression, draw):
    comparator = draw.pick(["<", ">"])
    condition = f"{draw.literal()}{comparator}{draw.literal()}"
    return lines, f"({_operand(expression, draw)} if {condition} else {draw.literal()})"


def _for_loop(lines, expression, draw):
    name = draw.pick(VARIABLES)
    sign = draw.pick(["+", "-"])
    loop = f"for x in range({draw.small()}):{name}{sign}={draw.literal()}"
    return [*lines, f"{name}={_operand(expression, draw)}", loop], name


def _assign(lines, expression, draw):
    name = draw.pick(VARIABLES)
    return [*lines, f"{name}={_operand(expression, draw)}"], name


OPERATIONS = {
    "add": (_add,),
    "control": (_if_else, _for_loop),
    "program": (_add, _subtract, _multiply, _if_else, _for_loop, _assign),
}


def _program_text(operations, draw):
    lines, expression = [], None
    for operation in operations:
        lines, expression = operation(lines, expression, draw)
    if draw.style == "v1":
        return "\n".join([*lines, f"print({expression})"])
    # Sonnet's generate_code drops the outermost parentheses of the final expression
    if expression.startswith("(") and expression.endswith(")"):
        expression = expression[1:-1]
    return "\n".join([*lines, expression])


def _run(program, style="paper", length=1):
    """The program's target, by executing it (the programs are our own: only arithmetic and loops): what
    it prints (`v1`), or its last line's value modulo `10**(length + 1)` (`paper`)."""
    import contextlib
    import io

    if style == "paper":
        *statements, expression = program.split("\n")
        scope = {}
        exec("\n".join(statements), scope)  # noqa: S102
        return str(eval(expression, scope) % 10 ** (length + 1))  # noqa: S307
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(program, {})  # noqa: S102
    return out.getvalue().strip()


def _check(task, length, nesting, style="paper"):
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}; received {style!r}.")
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; received {task!r}.")
    for name, value in (("length", length), ("nesting", nesting)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer; received {value!r}.")


def generate(task, length, nesting, rng, style="paper"):
    """One example: `(program, answer)` strings.

    Args:
        task: one of `TASKS`.
        length: int >= 1, the literal length.
        nesting: int >= 1, operations combined (ignored by the memorization tasks).
        rng: a `numpy.random.Generator`.
        style: `"paper"` (default) or `"v1"` (see the module's docstring).

    Returns:
        `(program, answer)`: for the program tasks, Python source and its
        value (modulo `10**(length + 1)`; `v1`: what its `print` writes);
        for the memorization tasks, a number and its copy, reverse or double.
    """
    _check(task, length, nesting, style)
    if task in PROGRAM_TASKS:
        draw = _Draw(rng, length, style=style)
        operations = [draw.pick(OPERATIONS[task]) for _ in range(nesting)]
        program = _program_text(operations, draw)
        return program, _run(program, style, length)
    digits = "".join(str(d) for d in [rng.integers(1, 10), *rng.integers(0, 10, size=length - 1)])
    return digits, {"copy": digits, "reverse": digits[::-1], "double": digits + digits}[task]


def program_length(task, length, nesting, style="paper"):
    """The most characters a program of this setting (or any easier one) can have: its padded length.

    Found by writing every sequence of operations with every choice at its
    longest, so the bound is exact rather than a loose formula.
    """
    _check(task, length, nesting, style)
    if task not in PROGRAM_TASKS:
        return length
    draw = _Draw(None, length, largest=True, style=style)
    return max(len(_program_text(ops, draw)) for n in range(1, nesting + 1)
               for ops in itertools.product(OPERATIONS[task], repeat=n))


def answer_length(task, length, nesting, style="paper"):
    """The most characters of an answer of this setting (`v1`: its end mark included): the decoder's steps.

    `paper`: a program's value modulo `10**(length + 1)` has at most
    `length + 1` digits. `v1`: values are at most
    `10**length * (4 * length)**nesting` in size (each operation adds a
    literal, multiplies by at most `4 * length` or loops that often), plus a
    sign and the end mark.
    """
    _check(task, length, nesting, style)
    if style == "paper":
        return length + 1 if task in PROGRAM_TASKS else (2 * length if task == "double" else length)
    if task in PROGRAM_TASKS:
        return length + nesting * len(str(4 * length)) + 1 + 1
    return (2 * length if task == "double" else length) + 1


class CurriculumLevel:
    """The (length, nesting) an LTE curriculum draws from; `advance` moves the naive part one level on.

    The naive curriculum raises the length first, then the nesting (LTE
    paper §4); `mix` and `baseline` ignore the level. Call `advance` when the
    model has mastered the current level (e.g. from a callback when the
    training accuracy passes a threshold).

    Args:
        length, nesting: the target setting.
        curriculum: one of `CURRICULA`.
        level: optional starting `(length, nesting)` (default: (1, 1), or the
            target for `baseline`).
        task: optional task name; for the memorization tasks the target
            nesting is 1 whatever `nesting` says.
        every: optional: the level moves on after every `every` training
            examples (`at_examples`) rather than when a probe passes; then
            every model trained under this schedule is at the same level at
            the same count of examples.

    Example:

    ```python
    >>> level = CurriculumLevel(3, 2, "combine", every=1000)
    >>> [level.at_examples(n) for n in (0, 999, 1000, 2500, 10**6)]
    [(1, 1), (1, 1), (2, 1), (3, 1), (3, 2)]

    ```
    """

    def __init__(self, length, nesting, curriculum="combine", level=None, task=None, every=None):
        if curriculum not in CURRICULA:
            raise ValueError(f"curriculum must be one of {', '.join(CURRICULA)}; received {curriculum!r}.")
        # The memorization tasks have no nesting: their curriculum is over the length alone.
        self.target = (int(length), int(nesting) if task is None or task in PROGRAM_TASKS else 1)
        self.curriculum = curriculum
        start = self.target if curriculum == "baseline" else (1, 1)
        self.level = tuple(int(v) for v in (level or start))
        self.every = every

    def at_examples(self, examples):
        """With `every`: set (and return) the level for a model that has trained on `examples` examples:
        the naive sequence (1, 1), (2, 1), ..., (length, 1), (length, 2), ... one step per `every`."""
        if self.curriculum in ("naive", "combine"):
            self.level = (1, 1)
            for _ in range(int(examples) // int(self.every)):
                if not self.advance():
                    break
        return self.level

    @property
    def at_target(self):
        return self.level == self.target

    def advance(self):
        """Move the naive level on (length first, then nesting); returns whether it moved."""
        length, nesting = self.level
        if length < self.target[0]:
            self.level = (length + 1, nesting)
        elif nesting < self.target[1]:
            self.level = (length, nesting + 1)
        else:
            return False
        return True

    def draw(self, rng):
        """The (length, nesting) of the next example."""
        if self.curriculum == "baseline":
            return self.target
        if self.curriculum == "naive" or (self.curriculum == "combine" and rng.random() < 0.5):
            return self.level
        return int(rng.integers(1, self.target[0] + 1)), int(rng.integers(1, self.target[1] + 1))


def examples(num_examples, task="program", length=5, nesting=2, curriculum="baseline", seed=0, level=None,
             style="paper"):
    """Padded id arrays of `num_examples` examples.

    Args:
        num_examples: int.
        task: one of `TASKS` (default `"program"`).
        length, nesting: the target setting (default 5 and 2, the RMC
            paper's); arrays are padded to its `program_length` and
            `answer_length` whatever the curriculum draws.
        curriculum: one of `CURRICULA` (default `"baseline"`, the test sets').
        seed: int; the same arguments and seed give the same arrays.
        level: a `CurriculumLevel` to draw settings from (its curriculum wins
            over `curriculum`), e.g. one a callback advances.
        style: `"paper"` (default) or `"v1"` (the module's docstring).

    Returns:
        dict with int32 `program (N, program_length)` (character ids, 0
        after the end), int32 `answer (N, answer_length)` (the answer's ids,
        then 0; `v1`: one `EOS` between) and the strings `program_text`,
        `answer_text`.

    Example:

    ```python
    >>> data = examples(4, "copy", length=3)
    >>> data["program"].shape, data["answer"].shape
    ((4, 3), (4, 3))
    >>> data["answer_text"][0] == data["program_text"][0]
    True

    ```
    """
    _check(task, length, nesting, style)
    level = level or CurriculumLevel(length, nesting, curriculum, task=task)
    rng = np.random.default_rng(seed)
    in_length = program_length(task, length, nesting, style)
    out_length = answer_length(task, length, nesting, style)
    programs = np.zeros((num_examples, in_length), "int32")
    answers = np.zeros((num_examples, out_length), "int32")
    program_texts, answer_texts = [], []
    for i in range(num_examples):
        program, answer = generate(task, *level.draw(rng), rng, style=style)
        ids = VOCABULARY.encode(program)
        programs[i, : len(ids)] = ids
        target = VOCABULARY.encode(answer) + ([EOS] if style == "v1" else [])
        answers[i, : len(target)] = target
        program_texts.append(program)
        answer_texts.append(answer)
    return {"program": programs, "answer": answers, "program_text": program_texts, "answer_text": answer_texts}


def test_set(task="program", length=5, nesting=2, num_examples=2000, seed=0, style="paper"):
    """The fixed test set of a setting: `examples` at the target setting from a seed apart from training's."""
    return examples(num_examples, task, length, nesting, "baseline", seed=1_000_003 + seed, style=style)


def dataset(task="program", length=5, nesting=2, batch_size=64, curriculum="combine", seed=0, level=None,
            batches_per_draw=50, first_draw=0, style="paper"):
    """An endless `tf.data.Dataset` of `(program, answer)` batches, fresh examples in every batch.

    TensorFlow-only. Examples are drawn `batches_per_draw` batches at a time
    (NumPy, seeded by `seed` and the draw's index), so a seed gives the same
    batches; a `level` (`CurriculumLevel`) is read at every draw, so a
    callback that advances it changes the data within `batches_per_draw`
    batches. The draws are numbered on across iterations of the dataset
    (from `first_draw`), so `dataset(...).take(n)` repeated epoch after epoch
    gives new examples every epoch, and a resumed run can start where the
    last one stopped.

    Example:

    ```python
    >>> ds = dataset("reverse", length=4, batch_size=8, curriculum="baseline")
    >>> program, answer = next(iter(ds))
    >>> tuple(program.shape), tuple(answer.shape)
    ((8, 4), (8, 4))

    ```
    """
    import tensorflow as tf

    _check(task, length, nesting, style)
    level = level or CurriculumLevel(length, nesting, curriculum, task=task)
    in_length = program_length(task, length, nesting, style)
    out_length = answer_length(task, length, nesting, style)

    numbers = itertools.count(first_draw)  # shared by every iteration of the dataset

    def draws():
        for index in numbers:
            data = examples(batch_size * batches_per_draw, task, length, nesting, seed=[seed, index], level=level,
                            style=style)
            for b in range(batches_per_draw):
                rows = slice(b * batch_size, (b + 1) * batch_size)
                yield data["program"][rows], data["answer"][rows]

    signature = (tf.TensorSpec((batch_size, in_length), tf.int32), tf.TensorSpec((batch_size, out_length), tf.int32))
    return tf.data.Dataset.from_generator(draws, output_signature=signature)


__all__ = [
    "CURRICULA",
    "EOS",
    "PAD",
    "STYLES",
    "TASKS",
    "VOCABULARY",
    "CharacterVocabulary",
    "CurriculumLevel",
    "answer_length",
    "dataset",
    "examples",
    "generate",
    "program_length",
    "test_set",
]
