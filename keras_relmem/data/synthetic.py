"""The papers' generated tasks: Nth Farthest, paired associative inference, shortest path.

All generators are NumPy-only and seeded: the same arguments and seed give the
same data.
"""

import numpy as np


def nth_farthest(num_examples, num_objects=8, num_features=16, seed=0, questions=None):
    """Nth Farthest (Santoro et al. 2018, §4.1).

    Each example is a sequence of `num_objects` random vectors (uniform in
    [-1, 1]) with random distinct labels. The question, repeated in every step's
    input, is "what is the label of the n-th farthest vector from the vector
    labelled m?"; `n = 0` asks for the farthest.

    Each step's input is `[vector, one_hot(label), one_hot(n), one_hot(m)]`
    (size `num_features + 3 * num_objects`, the layout of Sonnet's example).

    Args:
        num_examples: int.
        num_objects: int, vectors per sequence (default 8, as in the paper).
        num_features: int, vector size (default 16, as in the paper).
        seed: int.
        questions: the values `n` is drawn from (default: all of
            `0 .. num_objects - 1`), e.g. `[0]` asks only for the farthest.

    Returns:
        dict with `inputs (N, num_objects, num_features + 3 * num_objects)`
        float32 and int32 `target (N,)` (a label), `n (N,)`, `m (N,)`,
        `vectors (N, num_objects, num_features)`, `labels (N, num_objects)`.

    Example:

    ```python
    >>> data = nth_farthest(100)
    >>> data["inputs"].shape, data["target"].shape  # 8 objects, 16 + 3 * 8 features
    ((100, 8, 40), (100,))

    ```

    `model.fit(data["inputs"], data["target"])` then trains a classifier.
    """
    rng = np.random.default_rng(seed)
    vectors = rng.uniform(-1.0, 1.0, size=(num_examples, num_objects, num_features))
    labels = np.stack([rng.permutation(num_objects) for _ in range(num_examples)])
    if questions is None:
        n = rng.integers(num_objects, size=num_examples)
    else:
        questions = np.asarray(questions, "int64")
        if questions.size == 0 or questions.min() < 0 or questions.max() >= num_objects:
            raise ValueError(f"questions must be values of n in 0..{num_objects - 1}; got {questions.tolist()}")
        n = rng.choice(questions, size=num_examples)
    m = rng.integers(num_objects, size=num_examples)
    eye = np.eye(num_objects, dtype="float32")
    targets = np.zeros(num_examples, "int32")
    for i in range(num_examples):
        reference = vectors[i, np.argmax(labels[i] == m[i])]
        distances = np.linalg.norm(vectors[i] - reference, axis=-1)
        order = np.argsort(-distances, kind="stable")
        targets[i] = labels[i, order[n[i]]]
    question = np.concatenate([eye[n], eye[m]], axis=-1)[:, None, :]
    inputs = np.concatenate(
        [
            vectors.astype("float32"),
            eye[labels],
            np.broadcast_to(question, (num_examples, num_objects, 2 * num_objects)),
        ],
        axis=-1,
    )
    return {
        "inputs": inputs.astype("float32"),
        "target": targets,
        "n": n.astype("int32"),
        "m": m.astype("int32"),
        "vectors": vectors.astype("float32"),
        "labels": labels.astype("int32"),
    }


def paired_associative_inference(
    num_examples,
    sequence_length=3,
    num_sequences=16,
    embedding_size=64,
    indirect_fraction=0.5,
    seed=0,
    num_items=None,
):
    """Paired associative inference (Banino et al. 2020, §4 and appendix A.1).

    Random vectors stand in for the paper's ImageNet embeddings. Each example
    draws `num_sequences` sequences of `sequence_length` distinct items
    (A-B-C for length 3). The memory holds every consecutive pair of every
    sequence (A-B, B-C, ...), each fact a set of two items, in random order.
    A query is `[cue, choice_0, choice_1]`: the cue is an item of one
    sequence, the match is a later item of the same sequence and the lure the
    item at the same position of another sequence; the target is the index of
    the match. Direct queries ask for the next item (A-B); indirect ones skip
    at least one (A-C needs chaining A-B and B-C). Direct and indirect queries
    are balanced by `indirect_fraction`.

    Args:
        num_examples: int.
        sequence_length: int, 3, 4 or 5 in the paper (default 3).
        num_sequences: int, sequences stored in one memory (default 16).
        embedding_size: int, size of each item's vector (default 64).
        indirect_fraction: float in [0, 1], share of indirect queries
            (default 0.5).
        seed: int.
        num_items: int or None. With a number, every example draws its items
            from one fixed pool of that many vectors (as the paper draws from a
            fixed set of ImageNet embeddings); None draws fresh vectors for
            every example.

    Returns:
        dict with `memory (N, num_sequences * (L-1), 2, E)` float32,
        `query (N, 3, E)` float32, `target (N,)` int32 (0 or 1),
        `indirect (N,)` bool, `hops (N,)` int32 (pairs to chain: 1 for
        direct), `query_type (N,)` str such as `"AC"`, and the item indices
        `memory_items (N, facts, 2)`, `query_items (N, 3)` (indices into
        `items`), `items (N, num_sequences * L, E)`; with `num_items`, also
        the pool indices `query_ids (N, 3)` of the query's items and
        `match_id (N,)` of the match (a target over the item pool).

    Example:

    ```python
    >>> data = paired_associative_inference(10, sequence_length=3)
    >>> data["memory"].shape, data["query"].shape  # 32 facts of 2 items
    ((10, 32, 2, 64), (10, 3, 64))

    ```
    """
    if sequence_length < 3:
        raise ValueError(f"sequence_length must be >= 3; received {sequence_length}.")
    if num_sequences < 2:
        raise ValueError(f"num_sequences must be >= 2; received {num_sequences}.")
    if not 0.0 <= indirect_fraction <= 1.0:
        raise ValueError(f"indirect_fraction must be in [0, 1]; received {indirect_fraction}.")
    rng = np.random.default_rng(seed)
    length, seqs = sequence_length, num_sequences
    facts = seqs * (length - 1)
    letters = "ABCDEFGHIJ"
    direct_pairs = [(i, i + 1) for i in range(length - 1)]
    indirect_pairs = [(i, j) for i in range(length) for j in range(i + 2, length)]

    if num_items is None:
        items = rng.normal(size=(num_examples, seqs * length, embedding_size)).astype("float32")
        chosen = None
    else:
        if num_items < seqs * length:
            raise ValueError(f"num_items must be >= num_sequences * sequence_length = {seqs * length}.")
        # One pool for every seed, so train and test sets share their items.
        pool = np.random.default_rng(7919).normal(size=(num_items, embedding_size)).astype("float32")
        chosen = np.stack([rng.choice(num_items, size=seqs * length, replace=False) for _ in range(num_examples)])
        items = pool[chosen]
    items /= np.linalg.norm(items, axis=-1, keepdims=True)
    memory_items = np.zeros((num_examples, facts, 2), "int32")
    query_items = np.zeros((num_examples, 3), "int32")
    target = np.zeros(num_examples, "int32")
    indirect = np.zeros(num_examples, bool)
    query_type = np.empty(num_examples, dtype="<U2")
    for k in range(num_examples):
        item = np.arange(seqs * length).reshape(seqs, length)  # item[s, position]
        pairs = np.array([(item[s, i], item[s, i + 1]) for s in range(seqs) for i in range(length - 1)])
        memory_items[k] = pairs[rng.permutation(facts)]
        indirect[k] = rng.random() < indirect_fraction
        choices = indirect_pairs if indirect[k] else direct_pairs
        i, j = choices[rng.integers(len(choices))]
        s, other = rng.choice(seqs, size=2, replace=False)
        match_first = rng.random() < 0.5
        match, lure = item[s, j], item[other, j]
        query_items[k] = [item[s, i], match, lure] if match_first else [item[s, i], lure, match]
        target[k] = 0 if match_first else 1
        query_type[k] = letters[i] + letters[j]
    gather = np.take_along_axis
    memory = gather(items[:, :, None, :], memory_items.reshape(num_examples, -1)[:, :, None, None], axis=1)
    memory = memory.reshape(num_examples, facts, 2, embedding_size)
    query = gather(items[:, :, None, :], query_items[:, :, None, None], axis=1)[:, :, 0, :]
    hops = np.array([letters.index(t[1]) - letters.index(t[0]) for t in query_type], "int32")
    pool_ids = {}
    if chosen is not None:
        query_ids = np.take_along_axis(chosen, query_items, axis=1).astype("int32")
        pool_ids = {"query_ids": query_ids, "match_id": query_ids[np.arange(num_examples), 1 + target]}
    return {
        **pool_ids,
        "memory": memory.astype("float32"),
        "query": query.astype("float32"),
        "target": target,
        "indirect": indirect,
        "hops": hops,
        "query_type": query_type,
        "memory_items": memory_items,
        "query_items": query_items,
        "items": items,
    }


def _knn_adjacency(points, k):
    """Symmetric 0/1 adjacency joining every node to its k nearest neighbours."""
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(distances, np.inf)
    nearest = np.argsort(distances, axis=1, kind="stable")[:, :k]
    adjacency = np.zeros(distances.shape, bool)
    adjacency[np.arange(len(points))[:, None], nearest] = True
    return adjacency | adjacency.T


def _shortest_path_counts(adjacency):
    """All-pairs hop distances (-1: unreachable) and numbers of shortest paths.

    The number of walks of d edges from i to j is `(A^d)[i, j]`; at the first
    d where it is non-zero, d is the distance and every such walk is a
    shortest path. Matrix products instead of a BFS per source: the shortest
    path bench draws tens of thousands of graphs per round.
    """
    n = len(adjacency)
    step = adjacency.astype("float64")
    distance = np.where(np.eye(n, dtype=bool), 0, -1)
    count = np.eye(n)
    walks = np.eye(n)
    for d in range(1, n):
        walks = walks @ step
        new = (walks > 0) & (distance < 0)
        if not new.any():
            break
        distance[new] = d
        count[new] = walks[new]
    return distance, count


def shortest_path(
    num_examples,
    num_nodes=10,
    num_neighbours=3,
    min_path_length=2,
    max_path_length=None,
    seed=0,
):
    """Shortest path on random graphs (Banino et al. 2020, appendix B.1).

    Nodes are uniform points in the unit square joined to their
    `num_neighbours` nearest neighbours (undirected). Node ids are shuffled so
    they carry no geometry. The graph is given as its (source, destination)
    edge tuples, both directions, in random order; the query is a pair of nodes
    whose shortest path (fewest edges) is unique and has at least
    `min_path_length` edges; the target is that path's node sequence.

    Args:
        num_examples: int.
        num_nodes: int (default 10).
        num_neighbours: int, K of the K-nearest-neighbour graph (default 3).
        min_path_length: int, minimum edges on the asked path (default 2).
        max_path_length: int or None, maximum edges on the asked path.
        seed: int.

    Returns:
        dict with int32 `edges (N, E, 2)` (padded with -1 where a graph has
        fewer edges), `num_edges (N,)`, `query (N, 2)`, `path (N, P)` (the
        node ids from source to destination, padded with -1), `path_length
        (N,)` (edges), and float32 `positions (N, num_nodes, 2)`.

    Example:

    ```python
    >>> data = shortest_path(10, num_nodes=10)
    >>> len(data["edges"]), data["query"].shape  # (source, destination) per graph
    (10, (10, 2))

    ```
    """
    rng = np.random.default_rng(seed)
    graphs, longest_path, most_edges = [], 0, 0
    while len(graphs) < num_examples:
        points = rng.random((num_nodes, 2))
        adjacency = _knn_adjacency(points, num_neighbours)
        distance, count = _shortest_path_counts(adjacency)
        longest = num_nodes if max_path_length is None else max_path_length
        candidates = np.argwhere((distance >= min_path_length) & (distance <= longest) & (count == 1))
        if not len(candidates):
            continue
        source, dest = (int(n) for n in candidates[rng.integers(len(candidates))])
        # The path is unique, so from each node exactly one neighbour is one edge closer to dest.
        path = [source]
        while path[-1] != dest:
            closer = distance[:, dest] == distance[path[-1], dest] - 1
            path.append(int(np.flatnonzero(adjacency[path[-1]] & closer)[0]))
        edges = np.argwhere(np.triu(adjacency))
        relabel = rng.permutation(num_nodes)
        relabel_edges = relabel[edges]
        directed = np.concatenate([relabel_edges, relabel_edges[:, ::-1]])
        directed = directed[rng.permutation(len(directed))]
        positions = np.zeros_like(points)
        positions[relabel] = points
        graphs.append((directed, relabel[[source, dest]], relabel[path], positions))
        longest_path = max(longest_path, len(path))
        most_edges = max(most_edges, len(directed))
    edges_out = np.full((num_examples, most_edges, 2), -1, "int32")
    num_edges = np.zeros(num_examples, "int32")
    query = np.zeros((num_examples, 2), "int32")
    path_out = np.full((num_examples, longest_path), -1, "int32")
    path_length = np.zeros(num_examples, "int32")
    positions = np.zeros((num_examples, num_nodes, 2), "float32")
    for k, (directed, q, path, pos) in enumerate(graphs):
        edges_out[k, : len(directed)] = directed
        num_edges[k] = len(directed)
        query[k] = q
        path_out[k, : len(path)] = path
        path_length[k] = len(path) - 1
        positions[k] = pos
    return {
        "edges": edges_out,
        "num_edges": num_edges,
        "query": query,
        "path": path_out,
        "path_length": path_length,
        "positions": positions,
    }


__all__ = ["nth_farthest", "paired_associative_inference", "shortest_path"]
