"""Pictures of what the memories do (matplotlib, headless).

Each function takes what `keras_relmem.probes` returns for one example and
writes a PNG, returning its path. Needs the `viz` extra (matplotlib).
"""

import json
import pathlib

import numpy as np


def _pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError(
            "keras_relmem.viz needs matplotlib: pip install 'keras-relmem[viz]'"
        ) from error

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _colours(plt, labels):
    """`{label: colour}`: the default cycle's ten (tab10), or tab20's when there are more, as a tuning grid's
    eleventh run would otherwise share the first's colour; past twenty they repeat, and every curve is still drawn."""
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    return {label: palette(index % palette.N) for index, label in enumerate(labels)}


def rmc_attention_grid(attention, path, block=-1, title="RMC attention", row_labels=None):
    """RMC paper Fig. 3 style: one panel per step and head, slots x (slots + input).

    Args:
        attention: `(time, blocks, heads, slots, rows)` for one example.
        path: PNG to write.
        block: which attention block to show (default the last).
        row_labels: optional labels of the input at each step.
    """
    plt = _pyplot()
    attention = np.asarray(attention)[:, block]
    steps, heads, slots, rows = attention.shape
    fig, axes = plt.subplots(heads, steps, figsize=(1.2 * steps + 1, 1.2 * heads + 0.8), squeeze=False)
    for h in range(heads):
        for t in range(steps):
            ax = axes[h, t]
            ax.imshow(attention[t, h], vmin=0, vmax=1, cmap="viridis")
            ax.set_xticks([])
            ax.set_yticks([])
            if h == 0:
                ax.set_title(row_labels[t] if row_labels else f"t={t + 1}", fontsize=7)
            if t == 0:
                ax.set_ylabel(f"head {h + 1}", fontsize=7)
    fig.suptitle(f"{title}: slots (rows) attending to slots + input (last column)", fontsize=9)
    return _save(fig, path)


def memo_hops(trace, index, sentences, path, answer_words=None, question=None):
    """MEMO Fig. 2 style: attention over the story's sentences at every hop.

    Args:
        trace: `keras_relmem.probes.memo_trace(...)`.
        index: which example of the batch.
        sentences: the example's facts as text (one label per fact).
        path: PNG to write.
        answer_words: optional id -> answer text, to label each hop's answer.
        question: optional title text.
    """
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    attention = trace["attention"][index].mean(axis=1)  # (hops, facts), mean over heads
    n_facts = len(sentences)
    attention = attention[:, :n_facts]
    hops = attention.shape[0]
    fig, ax = plt.subplots(figsize=(1.1 * hops + 4, 0.28 * n_facts + 1.5))
    ax.imshow(attention.T, aspect="auto", cmap="Blues", vmin=0)
    ax.set_yticks(range(n_facts))
    ax.set_yticklabels(sentences, fontsize=9)
    labels = []
    for t in range(hops):
        label = f"hop {t + 1}"
        if answer_words is not None:
            label += f"\n{answer_words[int(trace['answers'][index, t])]}"
        if "p_halt" in trace:
            label += f"\nP(halt) {trace['p_halt'][index, t]:.2f}"
        labels.append(label)
    ax.set_xticks(range(hops))
    ax.set_xticklabels(labels, fontsize=8)
    taken = int(trace["hops"][index])
    ax.axvline(taken - 0.5, color="red", linewidth=1)
    # the answer is the last hop's; the fact that hop attended most is the memory it was read from
    read = int(np.argmax(attention[taken - 1]))
    ax.add_patch(Rectangle((taken - 1.5, read - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    said = ""
    if answer_words is not None:
        said = f"  answer: {answer_words[int(trace['answers'][index, taken - 1])]}"
    ax.set_title((question or "MEMO") + said + f"\n(inference stops after hop {taken}; boxed: the fact it "
                 "attended most there)", fontsize=9)
    return _save(fig, path)


GATE_LABEL = "write gate g (0: block unchanged, 1: overwritten)"


def entnet_gates(gates, sentences, block_words, path, title="EntNet gates", answer=None, read_weights=None):
    """Gate heat map (sentence x block), blocks numbered, with a legend of each block's nearest words.

    Args:
        gates: `(time, blocks)` for one example (NaN rows for padding are dropped).
        sentences: the sentences as text (the rows' labels).
        block_words: per block, a list of its nearest vocabulary words (the legend: nearest words are
            often shared between blocks, so the columns are numbered rather than named by them).
        path: PNG to write.
        title: the picture's title (the question, for a bAbI example).
        answer: optional, the model's answer, shown after the title.
        read_weights: optional `(blocks,)`, the readout's attention over the final memory
            (`softmax(qᵀh_j)`, Henaff et al. 2017 eq. 6): drawn as a strip under the gates, and the block
            the answer was mostly read from is outlined.

    Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = entnet_gates(np.full((2, 3), 0.5), ["mary went home", "where is mary"], [["a"], ["b"], ["c"]],
    ...                     os.path.join(tempfile.mkdtemp(), "g.png"), answer="home", read_weights=[0.2, 0.7, 0.1])
    >>> path.name
    'g.png'
    """
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    gates = np.asarray(gates)[: len(sentences)]
    blocks = gates.shape[1]
    rows = [len(sentences), 1] if read_weights is not None else [len(sentences)]
    fig, axes = plt.subplots(len(rows), 1, squeeze=False, height_ratios=rows, sharex=True,
                             figsize=(0.5 * blocks + 5, 0.32 * sum(rows) + 2.6 + 0.16 * blocks))
    ax = axes[0, 0]
    image = ax.imshow(gates, aspect="auto", cmap="magma", vmin=0, vmax=1)
    ax.set_yticks(range(len(sentences)), sentences, fontsize=9)
    ax.set_xticks(range(blocks), [str(j + 1) for j in range(blocks)], fontsize=9)
    ax.tick_params(labelbottom=read_weights is None)
    fig.colorbar(image, ax=axes[:, 0].tolist(), fraction=0.03).set_label(GATE_LABEL, fontsize=8)
    said = f"  answer: {answer}" if answer is not None else ""
    if read_weights is not None:
        read_weights = np.asarray(read_weights, "float64")
        read = int(np.argmax(read_weights))
        strip = axes[1, 0]
        strip.imshow(read_weights[None], aspect="auto", cmap="Greens", vmin=0, vmax=1)
        strip.set_yticks([0], ["answer read"], fontsize=9)
        strip.set_xticks(range(blocks), [str(j + 1) for j in range(blocks)], fontsize=9)
        for target, height in ((ax, len(sentences)), (strip, 1)):
            target.add_patch(Rectangle((read - 0.5, -0.5), 1, height, fill=False, edgecolor="cyan", linewidth=2))
        said += f" (read from block {read + 1}, weight {read_weights[read]:.2f})"
    axes[-1, 0].set_xlabel("memory block", fontsize=9)
    ax.set_title(title + said, fontsize=10)
    legend = [f"{j + 1}: {', '.join(words)}" for j, words in enumerate(block_words)]
    fig.text(0.02, 0.0, "blocks, by the nearest words of their final memory:\n" + "\n".join(legend),
             fontsize=8, va="top", family="monospace")
    return _save(fig, path)


def training_curves(metrics_path, path, title="Training"):
    """Accuracy, loss and (MEMO) mean hops per epoch from a `metrics.json`."""
    plt = _pyplot()
    record = json.loads(pathlib.Path(metrics_path).read_text())
    epochs = [e["epoch"] + 1 for e in record["epochs"]]
    panels = [k for k in ("accuracy", "loss", "hops", "perplexity") if any(k in e for e in record["epochs"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3), squeeze=False)
    for ax, key in zip(axes[0], panels):
        for prefix, style in (("", "-"), ("val_", "--")):
            values = [e.get(prefix + key) for e in record["epochs"]]
            if any(v is not None for v in values):
                ax.plot(epochs, values, style, label=(prefix or "train_") + key)
        ax.set_xlabel("epoch")
        ax.set_title(key)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10, y=1.04)  # above the panel titles
    return _save(fig, path)


def budget_curves(curves, key, ylabel, title, path, log_y=False, dashed=None):
    """A metric against training wall-clock for several models on one plot.

    Args:
        curves: `{label: [{"minutes": m, key: value, ...}, ...]}`, as the
            equal-wall-clock benchmarks record them.
        key: the metric to draw (e.g. `"test_accuracy"`, `"val_perplexity"`).
        ylabel, title: axis label and title.
        path: PNG to write.
        log_y: logarithmic y axis (perplexities).
        dashed: `{label: (key, legend suffix)}`: a second metric of those
            curves, drawn dashed in the curve's colour (e.g. the training
            accuracy of a run whose training asks other questions than its
            test).

    Example:

    >>> import tempfile, os
    >>> path = budget_curves({"RMC": [{"minutes": 1, "acc": 30}, {"minutes": 2, "acc": 40}]},
    ...                      "acc", "accuracy (%)", "demo", os.path.join(tempfile.mkdtemp(), "c.png"))
    >>> path.name
    'c.png'
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    colours = _colours(plt, curves)
    for label, curve in curves.items():
        minutes = [e["minutes"] for e in curve]
        (line,) = ax.plot(minutes, [e[key] for e in curve], label=label, color=colours[label])
        if label in (dashed or {}):
            other, suffix = dashed[label]
            ax.plot(minutes, [e[other] for e in curve], "--", color=line.get_color(), linewidth=0.8,
                    label=f"{label} {suffix}")
    if log_y:
        from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

        ax.set_yscale("log")
        # perplexities end between 100 and 200, where a log axis has no tick: label plain numbers there too
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("training minutes")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if dashed:  # twice the entries: under the axes, where they hide no curve
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    else:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def panel_curves(panels, x, key, xlabel, ylabel, title, path, columns=3, marks=None):
    """One small plot per panel (e.g. per task), each with a curve per run, `key` against `x`.

    Args:
        panels: `{panel title: {label: [{x: value, key: value, ...}, ...]}}`.
        x, key: the curve entries' keys for the two axes (e.g. `"examples"`, `"accuracy"`).
        xlabel, ylabel, title: axis labels and the figure's title.
        path: PNG to write.
        columns: panels per row.
        marks: optional `{panel title: (x value, label)}`, a dashed vertical line in that panel, its label
            written beside it (e.g. where a curriculum reaches its target).

    The panels share one legend, below them: a label has one colour in every panel.

    Example:

    >>> import tempfile, os
    >>> curves = {"copy": {"RMC": [{"examples": 1, "acc": 30}, {"examples": 2, "acc": 90}]}}
    >>> panel_curves(curves, "examples", "acc", "examples", "accuracy (%)", "demo",
    ...              os.path.join(tempfile.mkdtemp(), "p.png")).name
    'p.png'
    """
    from matplotlib.ticker import EngFormatter

    plt = _pyplot()
    columns = min(columns, len(panels)) or 1  # no empty panels beside a short first row
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.6 * rows), squeeze=False)
    # one colour per label in every panel, so a run reads the same across the figure
    colours = _colours(plt, list(dict.fromkeys(label for curves in panels.values() for label in curves)))
    for ax, (name, curves) in zip(axes.flat, panels.items()):
        for label, curve in curves.items():
            ax.plot([e[x] for e in curve], [e[key] for e in curve], label=label, color=colours[label])
        ax.xaxis.set_major_formatter(EngFormatter())  # 200k, not 200000 or an offset of 1e6
        if name in (marks or {}):
            at, mark = marks[name]
            ax.axvline(at, color="grey", linestyle="--", linewidth=0.8)
            # written beside its line, as each panel's mark says its own thing and the legend is shared
            ax.text(at, 0.02, f" {mark}", transform=ax.get_xaxis_transform(), rotation=90, fontsize=6,
                    color="grey", va="bottom")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    # one legend below the panels, each label once: a label has one colour everywhere, and a panel of a dozen
    # runs (a task with its seeds and a tuning grid) would otherwise hide its own curves under its legend
    handles = [plt.Line2D([], [], color=colour) for colour in colours.values()]
    legend_rows = -(-len(colours) // 4)
    fig.subplots_adjust(bottom=(0.5 + 0.16 * legend_rows) / fig.get_figheight())  # inches: axis label, legend
    fig.legend(handles, list(colours), loc="lower center", ncol=min(4, len(colours)) or 1, fontsize=7,
               frameon=False)
    return _save(fig, path)


def hops_per_task(hops, path, title="Mean hops per task", highlight=(), facts=None):
    """A bar per task of the mean number of hops an adaptive model took.

    Args:
        hops: `{task: mean hops}` (task numbers or their strings).
        path: PNG to write.
        title: the plot's title.
        highlight: tasks drawn in another colour (e.g. the multi-fact ones).
        facts: optional `{task: mean supporting facts}`; the bars are then
            coloured by it (rounded: 1, 2 or 3 facts) with a legend, in place
            of `highlight`, so the picture shows whether hops follow the
            reasoning a task needs.

    Example:

    >>> import tempfile, os
    >>> path = hops_per_task({1: 1.2, 2: 2.8}, os.path.join(tempfile.mkdtemp(), "h.png"), highlight=[2])
    >>> path.name
    'h.png'
    """
    plt = _pyplot()
    tasks = sorted(hops, key=int)
    marked = {int(t) for t in highlight}
    fig, ax = plt.subplots(figsize=(6, 3))
    if facts:
        by_task = {int(t): round(float(v)) for t, v in facts.items()}
        colours = {1: "tab:blue", 2: "tab:orange", 3: "tab:red"}
        for count in sorted(set(by_task.get(int(t), 0) for t in tasks)):
            shown = [i for i, t in enumerate(tasks) if by_task.get(int(t), 0) == count]
            ax.bar(shown, [hops[tasks[i]] for i in shown], color=colours.get(count, "tab:gray"),
                   label=f"{count} supporting fact{'s' if count != 1 else ''}")
        ax.set_xticks(range(len(tasks)), [str(t) for t in tasks])
        ax.set_ylim(0, 1.4 * max(hops.values()))  # room for the legend above the bars
        ax.legend(fontsize=7, loc="upper left", ncol=3)
    else:
        ax.bar([str(t) for t in tasks], [hops[t] for t in tasks],
               color=["tab:orange" if int(t) in marked else "tab:blue" for t in tasks])
    ax.set_xlabel("bAbI task")
    ax.set_ylabel("mean hops at test")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
