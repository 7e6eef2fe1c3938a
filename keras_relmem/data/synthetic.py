"""The papers' generated tasks: Nth Farthest, paired associative inference, shortest path.

All generators are NumPy-only and seeded: the same arguments and seed give the
same data.
"""

import collections

import numpy as np


def nth_farthest(num_examples, num_objects=8, num_features=16, seed=0):
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
    n = rng.integers(num_objects, size=num_examples)
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


def _knn_graph(points, k):
    """Undirected edges joining every node to its k nearest neighbours."""
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(distances, np.inf)
    edges = set()
    for node in range(len(points)):
        for neighbour in np.argsort(distances[node], kind="stable")[:k]:
            edges.add((min(node, int(neighbour)), max(node, int(neighbour))))
    return sorted(edges)


def _bfs_paths(num_nodes, edges, source):
    """Shortest-path hop counts and the number of shortest paths from source."""
    neighbours = collections.defaultdict(list)
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    dist = {source: 0}
    count = collections.Counter({source: 1})
    parent = {source: None}
    queue = collections.deque([source])
    while queue:
        node = queue.popleft()
        for nxt in neighbours[node]:
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                parent[nxt] = node
                queue.append(nxt)
            if dist[nxt] == dist[node] + 1:
                count[nxt] += count[node]
    return dist, count, parent


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
        edges = _knn_graph(points, num_neighbours)
        candidates = []
        for source in range(num_nodes):
            dist, count, parent = _bfs_paths(num_nodes, edges, source)
            for dest, d in dist.items():
                if d >= min_path_length and (max_path_length is None or d <= max_path_length) and count[dest] == 1:
                    candidates.append((source, dest, parent))
        if not candidates:
            continue
        source, dest, parent = candidates[rng.integers(len(candidates))]
        path = [dest]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
        path.reverse()
        relabel = rng.permutation(num_nodes)
        directed = [(relabel[a], relabel[b]) for a, b in edges] + [(relabel[b], relabel[a]) for a, b in edges]
        directed = [directed[i] for i in rng.permutation(len(directed))]
        positions = np.zeros_like(points)
        positions[relabel] = points
        graphs.append((directed, [relabel[source], relabel[dest]], [relabel[p] for p in path], positions))
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
