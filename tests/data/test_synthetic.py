"""The generated tasks give right answers (checked by brute force) and are seeded."""

import collections

import numpy as np
import pytest

from keras_relmem.data import synthetic


def all_simple_paths(edges, source, dest):
    neighbours = collections.defaultdict(set)
    for a, b in edges:
        neighbours[int(a)].add(int(b))
    paths, stack = [], [(int(source), [int(source)])]
    while stack:
        node, path = stack.pop()
        if node == dest:
            paths.append(path)
            continue
        for nxt in neighbours[node]:
            if nxt not in path:
                stack.append((nxt, path + [nxt]))
    return paths


def test_nth_farthest_answers_by_brute_force():
    data = synthetic.nth_farthest(200, seed=1)
    assert data["inputs"].shape == (200, 8, 16 + 24)
    for i in range(200):
        vectors, labels = data["vectors"][i], data["labels"][i]
        ref = vectors[list(labels).index(data["m"][i])]
        dist = {int(labels[j]): float(np.sum((vectors[j] - ref) ** 2)) for j in range(8)}
        ranked = sorted(dist, key=lambda label: -dist[label])
        assert ranked[data["n"][i]] == data["target"][i]
        # The question is in every step's input.
        assert np.all(np.argmax(data["inputs"][i, :, 24:32], -1) == data["n"][i])
        assert np.all(np.argmax(data["inputs"][i, :, 32:40], -1) == data["m"][i])


def test_nth_farthest_plateau_without_distances():
    # The accuracy a model reaches with no notion of distance: the nearest
    # (n = N - 1) is m itself, whose label is in the input, and every other
    # answer is one of the N - 1 other labels, so answering m for n = N - 1 and
    # guessing among the others gives 1/N + (N-1)/N * 1/(N-1) = 2/N.
    for num_objects in (4, 8):
        data = synthetic.nth_farthest(2000, num_objects=num_objects, num_features=4, seed=3)
        nearest = data["n"] == num_objects - 1
        assert np.all(data["target"][nearest] == data["m"][nearest])
        assert np.all(data["target"][~nearest] != data["m"][~nearest])
        expected = np.mean(nearest) + np.mean(~nearest) / (num_objects - 1)
        assert abs(expected - 2 / num_objects) < 0.03


@pytest.mark.parametrize("length", [3, 4, 5])
def test_paired_associative_inference_by_brute_force(length):
    data = synthetic.paired_associative_inference(300, sequence_length=length, num_sequences=6, seed=2)
    assert data["memory"].shape == (300, 6 * (length - 1), 2, 64)
    assert 0.35 < data["indirect"].mean() < 0.65
    for k in range(300):
        memory = data["memory"][k]
        cue, *choices = data["query"][k]

        def successors(vec, memory=memory):
            return [fact[1] for fact in memory if np.array_equal(fact[0], vec)]

        # Follow the stored pairs from the cue: the match is reachable, the lure not.
        reachable, frontier, hops_to = [], [cue], {}
        for hop in range(1, length):
            frontier = [nxt for vec in frontier for nxt in successors(vec)]
            for vec in frontier:
                reachable.append(vec)
                hops_to[vec.tobytes()] = hop
        match, lure = choices[data["target"][k]], choices[1 - data["target"][k]]
        assert any(np.array_equal(match, r) for r in reachable)
        assert not any(np.array_equal(lure, r) for r in reachable)
        assert hops_to[match.tobytes()] == data["hops"][k]
        assert data["indirect"][k] == (data["hops"][k] > 1)


def test_shortest_path_by_brute_force():
    data = synthetic.shortest_path(60, num_nodes=8, seed=3)
    for k in range(60):
        edges = data["edges"][k][: data["num_edges"][k]]
        source, dest = data["query"][k]
        path = [int(n) for n in data["path"][k] if n >= 0]
        candidates = all_simple_paths(edges, source, dest)
        shortest = min(len(p) for p in candidates)
        assert len(path) == shortest and path[0] == source and path[-1] == dest
        assert [p for p in candidates if len(p) == shortest] == [path]  # unique
        assert data["path_length"][k] == len(path) - 1 >= 2


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: synthetic.nth_farthest(20, seed=seed),
        lambda seed: synthetic.paired_associative_inference(20, seed=seed),
        lambda seed: synthetic.shortest_path(20, seed=seed),
    ],
)
def test_same_seed_same_data(make):
    a, b, c = make(5), make(5), make(6)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert any(not np.array_equal(a[key], c[key]) for key in a)


def test_bad_arguments():
    with pytest.raises(ValueError, match="sequence_length"):
        synthetic.paired_associative_inference(5, sequence_length=2)


def test_item_pool_is_shared_across_examples_and_seeds():
    a = synthetic.paired_associative_inference(30, num_sequences=3, num_items=20, seed=1)
    b = synthetic.paired_associative_inference(30, num_sequences=3, num_items=20, seed=2)
    vectors = np.concatenate([a["items"].reshape(-1, 64), b["items"].reshape(-1, 64)])
    assert len(np.unique(vectors.round(6), axis=0)) <= 20
    with pytest.raises(ValueError, match="num_items"):
        synthetic.paired_associative_inference(2, num_sequences=3, num_items=5)


def test_pool_ids_name_the_query_items_and_the_match():
    data = synthetic.paired_associative_inference(40, num_sequences=3, num_items=25, seed=3)
    pool = np.random.default_rng(7919).normal(size=(25, 64)).astype("float32")
    pool /= np.linalg.norm(pool, axis=-1, keepdims=True)
    np.testing.assert_allclose(pool[data["query_ids"]], data["query"], atol=1e-6)
    choice = data["query_ids"][np.arange(40), 1 + data["target"]]
    np.testing.assert_array_equal(data["match_id"], choice)
    assert "match_id" not in synthetic.paired_associative_inference(3, num_sequences=3)


def test_nth_farthest_questions_restrict_n():
    data = synthetic.nth_farthest(300, num_objects=4, num_features=4, seed=2, questions=[0, 3])
    assert set(np.unique(data["n"])) == {0, 3}
    farthest = data["n"] == 0
    for i in np.flatnonzero(farthest)[:50]:
        ref = data["vectors"][i][list(data["labels"][i]).index(data["m"][i])]
        distances = np.sum((data["vectors"][i] - ref) ** 2, axis=-1)
        assert data["labels"][i][np.argmax(distances)] == data["target"][i]
    with pytest.raises(ValueError, match="0..3"):
        synthetic.nth_farthest(10, num_objects=4, num_features=4, questions=[4])
