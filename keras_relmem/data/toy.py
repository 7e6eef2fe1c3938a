"""Tiny generated tasks that a memory layer learns in seconds (sanity checks).

These are not the papers' benchmarks (see `keras_relmem.data.synthetic` for
those): they exist so that a quick run, a test or the README's example can show
that a layer really stores and retrieves information.
"""

import numpy as np


def associative_recall(num_examples, num_pairs=3, num_keys=6, num_values=6, seed=0):
    """Key-value pairs shown one per step, then a key to look up.

    Each step's input is `[one_hot(key), one_hot(value), is_query]`. The first
    `num_pairs` steps show distinct keys with random values; the last step
    shows one of those keys with `is_query = 1` and no value. The target is the
    value stored with that key. Chance accuracy is `1 / num_values`.

    Args:
        num_examples: int, number of sequences.
        num_pairs: int, pairs per sequence (default 3); at most `num_keys`.
        num_keys: int, size of the key alphabet (default 6).
        num_values: int, size of the value alphabet (default 6).
        seed: int, random seed; the same seed gives the same data.

    Returns:
        `(inputs, targets)`: float32 `(num_examples, num_pairs + 1,
        num_keys + num_values + 1)` and int32 `(num_examples,)`.

    Example:

    ```python
    x, y = associative_recall(1000)
    ```
    """
    if not 1 <= num_pairs <= num_keys:
        raise ValueError(
            f"num_pairs must be in [1, num_keys={num_keys}]; received {num_pairs}."
        )
    rng = np.random.default_rng(seed)
    width = num_keys + num_values + 1
    inputs = np.zeros((num_examples, num_pairs + 1, width), "float32")
    targets = np.zeros((num_examples,), "int32")
    for n in range(num_examples):
        keys = rng.choice(num_keys, size=num_pairs, replace=False)
        values = rng.integers(num_values, size=num_pairs)
        inputs[n, np.arange(num_pairs), keys] = 1.0
        inputs[n, np.arange(num_pairs), num_keys + values] = 1.0
        asked = rng.integers(num_pairs)
        inputs[n, num_pairs, keys[asked]] = 1.0
        inputs[n, num_pairs, -1] = 1.0
        targets[n] = values[asked]
    return inputs, targets


def world_state(num_examples, num_entities=3, num_locations=3, num_sentences=6, seed=0):
    """Stories of entities moving between locations; ask where one of them is.

    Word ids: 0 is padding, `1..num_entities` are entities and
    `num_entities + 1 .. num_entities + num_locations` are locations. Each
    sentence is `[entity, location]` ("entity went to location"); the query is
    `[entity, 0]` for an entity that moved at least once, and the answer is the
    index (0-based) of its last location. A bAbI task 1 in miniature; chance
    accuracy is `1 / num_locations`.

    Args:
        num_examples: int, number of stories.
        num_entities: int (default 3).
        num_locations: int (default 3).
        num_sentences: int, sentences per story (default 6).
        seed: int, random seed.

    Returns:
        `(story, query, answer)`: int32 `(n, num_sentences, 2)`, `(n, 2)`,
        `(n,)`. The vocabulary size is `1 + num_entities + num_locations`.

    Example:

    ```python
    story, query, answer = world_state(2000)
    ```
    """
    rng = np.random.default_rng(seed)
    story = np.zeros((num_examples, num_sentences, 2), "int32")
    query = np.zeros((num_examples, 2), "int32")
    answer = np.zeros((num_examples,), "int32")
    for n in range(num_examples):
        who = rng.integers(num_entities, size=num_sentences)
        where = rng.integers(num_locations, size=num_sentences)
        story[n, :, 0] = who + 1
        story[n, :, 1] = where + 1 + num_entities
        asked = rng.choice(who)
        query[n, 0] = asked + 1
        answer[n] = where[np.nonzero(who == asked)[0][-1]]
    return story, query, answer
