"""Probes recompute the layers' own math; the pictures are written and not blank."""

import json
import os

import keras
import numpy as np
import pytest

import keras_relmem as kr
from keras_relmem import probes, viz
from keras_relmem.commands import explain
from keras_relmem.commands import train as commands
from keras_relmem.models.memo import MEMOClassifier
from tests.helpers import randomize_weights

needs_data = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")


def assert_picture(path):
    import matplotlib.image

    assert path.is_file() and path.stat().st_size > 5000
    image = matplotlib.image.imread(path)
    assert image.std() > 0.02  # not a blank canvas


def test_rmc_probe_follows_the_cell_and_rows_sum_to_one(tmp_path):
    cell = kr.RelationalMemoryCell(mem_slots=3, head_size=4, num_heads=2, num_blocks=2)
    xs = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    rnn = keras.layers.RNN(cell)
    expected = np.asarray(rnn(xs, mask=mask))
    randomize_weights(cell, seed=1)
    expected = np.asarray(rnn(xs, mask=mask))
    attention, memory = probes.rmc_attention(cell, xs, mask)
    assert attention.shape == (2, 5, 2, 2, 3, 4)
    np.testing.assert_allclose(memory, expected, atol=1e-5)
    valid = attention[1]
    np.testing.assert_allclose(valid.sum(-1), 1.0, atol=1e-5)
    assert np.isnan(attention[0, 3:]).all()
    assert_picture(viz.rmc_attention_grid(attention[1], tmp_path / "rmc.png"))


def test_entnet_probe_gates_and_memory(tmp_path):
    cell = kr.EntNetCell(num_blocks=4, units=6)
    xs = np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    rnn = keras.layers.RNN(cell)
    rnn(xs)
    randomize_weights(cell, seed=2)
    expected = np.asarray(rnn(xs, mask=mask)).reshape(2, 4, 6)
    gates, memory = probes.entnet_gates(cell, xs, mask)
    np.testing.assert_allclose(memory, expected, atol=1e-5)
    assert np.nanmin(gates) >= 0 and np.nanmax(gates) <= 1 and np.isnan(gates[0, 2:]).all()
    # The gate of step 0 is sigmoid(s.h + s.w + b) with h = w = keys at the start.
    keys = np.asarray(cell.key_vectors)
    g0 = 1 / (1 + np.exp(-(2 * xs[:, 0] @ keys.T + np.asarray(cell.gate_bias))))
    np.testing.assert_allclose(gates[:, 0], g0, atol=1e-5)
    words = probes.nearest_words(memory[1], np.eye(6), list("abcdef"), k=2)
    assert len(words) == 4 and all(len(w) == 2 for w in words)
    assert_picture(viz.entnet_gates(gates[1], [f"sentence {i}" for i in range(5)], words, tmp_path / "g.png"))


def test_the_gate_picture_labels_its_colour_bar_and_shows_the_answer(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    gates = np.random.default_rng(0).uniform(size=(3, 2))
    viz.entnet_gates(gates, ["a b", "c d", "e f"], [["x", "z"], ["x", "z"]], tmp_path / "g.png", "Where is Mary?",
                     "kitchen", read_weights=[0.3, 0.7])
    (ax, _, bar), = [figures[0].axes]
    assert bar.get_ylabel() == viz.GATE_LABEL
    assert ax.get_title() == "Where is Mary?  answer: kitchen (read from block 2, weight 0.70)"
    plt.close(figures[0])


def test_the_gate_picture_numbers_its_blocks_with_a_legend_and_marks_the_block_read(tmp_path, monkeypatch):
    """Issue 104: the columns were 5-pixel rotated text, blocks sharing nearest words carried the same label,
    and nothing showed which memory the answer was read from."""
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    gates = np.random.default_rng(0).uniform(size=(3, 4))
    words = [["mary", "kitchen"], ["mary", "kitchen"], ["john", "garden"], ["went", "to"]]
    viz.entnet_gates(gates, ["a b", "c d", "e f"], words, tmp_path / "g.png", read_weights=[0.1, 0.2, 0.6, 0.1])
    fig = figures[0]
    ax, strip = fig.axes[:2]
    labels = [t.get_text() for t in strip.get_xticklabels()]
    assert labels == ["1", "2", "3", "4"]  # distinct, though blocks 1 and 2 share their nearest words
    assert all(t.get_rotation() == 0 and t.get_fontsize() >= 8 for t in strip.get_xticklabels())
    assert all(t.get_fontsize() >= 8 for t in ax.get_yticklabels())
    legend = "\n".join(t.get_text() for t in fig.texts)
    assert "1: mary, kitchen" in legend and "3: john, garden" in legend
    (box,) = [p for p in ax.patches if not p.get_fill()]
    assert box.get_x() == 1.5  # block 3 (column index 2), where the readout's weight is largest
    plt.close(fig)


def test_memo_trace_matches_the_layer(tmp_path):
    model = MEMOClassifier(3, embedding_dim=4, vocab_size=12, max_time=5, num_heads=2, key_size=4, max_hops=3)
    story = np.array([[[1, 2, 0], [3, 4, 5], [0, 0, 0], [0, 0, 0], [0, 0, 0]]], "int32")
    query = np.array([[6, 7]], "int32")
    x = {"story": story, "query": query}
    out = model(x, return_hops=True)
    trace = probes.memo_trace(model, x)
    assert trace["attention"].shape == (1, 3, 2, 5)
    np.testing.assert_allclose(trace["attention"].sum(-1), 1.0, atol=1e-5)
    assert np.all(trace["attention"][0, :, :, 2:] < 1e-6)  # padded facts
    np.testing.assert_array_equal(trace["hops"], np.asarray(out["hops"]))
    embedded, mask = model.embed_inputs(x)
    keys, values, q0 = model.memo.memory(*embedded)
    _, first, _ = model.memo.hop(keys, values, q0, mask)
    np.testing.assert_allclose(trace["attention"][:, 0], first, atol=1e-5)
    assert ((trace["p_halt"] > 0) & (trace["p_halt"] < 1)).all()
    path = viz.memo_hops(trace, 0, ["a b", "c d e"], tmp_path / "m.png", answer_words=["x", "y", "z"])
    assert_picture(path)


def test_the_hops_picture_marks_the_answer_and_the_fact_it_was_read_from(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    attention = np.zeros((1, 3, 2, 3))
    attention[0, :, :, 0] = 1.0
    attention[0, 1, :, :] = [0.1, 0.2, 0.7]  # hop 2 reads fact 3
    trace = {"attention": attention, "answers": np.array([[0, 2, 1]]), "hops": np.array([2])}
    viz.memo_hops(trace, 0, ["a", "b", "c"], tmp_path / "m.png", answer_words=["x", "y", "z"], question="Q?")
    (ax,) = figures[0].axes
    assert ax.get_title().startswith("Q?  answer: z")
    (box,) = [p for p in ax.patches if not p.get_fill()]
    assert (box.get_x(), box.get_y()) == (0.5, 1.5)  # column hop 2, row fact 3
    plt.close(figures[0])


def test_training_curves(tmp_path):
    metrics = {"epochs": [{"epoch": i, "accuracy": 0.3 + 0.1 * i, "val_accuracy": 0.25 + 0.1 * i,
                           "loss": 2 - 0.3 * i, "hops": 4 - i} for i in range(4)], "starts": [0]}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert_picture(viz.training_curves(tmp_path / "metrics.json", tmp_path / "curves.png"))


def test_budget_curves_draw_a_second_metric_dashed_in_each_runs_colour(tmp_path, monkeypatch):
    """A curriculum run's training accuracy goes beside its test accuracy, same colour, dashed; others alone."""
    drawn = {}
    save = viz._save

    def capture(fig, path):
        drawn["lines"] = [(line.get_label(), line.get_linestyle(), line.get_color(), list(line.get_ydata()))
                          for line in fig.axes[0].get_lines()]
        return save(fig, path)

    monkeypatch.setattr(viz, "_save", capture)
    curves = {"RMC": [{"minutes": 1, "test": 12, "train": 14}, {"minutes": 2, "test": 13, "train": 30}],
              "LSTM": [{"minutes": 1, "test": 11, "train": 15}, {"minutes": 2, "test": 12, "train": 16}]}
    assert_picture(viz.budget_curves(curves, "test", "accuracy (%)", "demo", tmp_path / "c.png",
                                     dashed={"RMC": ("train", "(training)")}))
    rmc, training, lstm = drawn["lines"]
    assert rmc == ("RMC", "-", rmc[2], [12, 13])
    assert training == ("RMC (training)", "--", rmc[2], [14, 30])
    assert lstm == ("LSTM", "-", lstm[2], [11, 12]) and lstm[2] != rmc[2]



def test_budget_curves_give_each_of_many_runs_a_colour_of_its_own(tmp_path, monkeypatch):
    """A grid of more runs than the default colour cycle holds still tells its curves apart."""
    drawn = {}
    save = viz._save

    def capture(fig, path):
        drawn["colours"] = [line.get_color() for line in fig.axes[0].get_lines()]
        return save(fig, path)

    monkeypatch.setattr(viz, "_save", capture)
    curves = {f"run {i}": [{"minutes": 1, "test": i}, {"minutes": 2, "test": i + 1}] for i in range(12)}
    assert_picture(viz.budget_curves(curves, "test", "accuracy (%)", "demo", tmp_path / "c.png"))
    assert len(drawn["colours"]) == 12 and len(set(map(str, drawn["colours"]))) == 12
    many = {f"run {i}": [{"minutes": 1, "test": i}, {"minutes": 2, "test": i + 1}] for i in range(23)}
    viz.budget_curves(many, "test", "accuracy (%)", "demo", tmp_path / "many.png")
    assert len(drawn["colours"]) == 23  # more runs than colours: none is left out


def test_budget_curves_on_a_log_axis_label_the_range_perplexities_end_in(tmp_path, monkeypatch):
    """Perplexities that end between 100 and 200 get labelled ticks there, as plain numbers."""
    drawn = {}
    save = viz._save

    def capture(fig, path):
        fig.canvas.draw()
        low, high = fig.axes[0].get_ylim()
        drawn["labels"] = [tick.get_text() for tick in fig.axes[0].get_yticklabels()
                           if low <= tick.get_position()[1] <= high and tick.get_text()]
        return save(fig, path)

    monkeypatch.setattr(viz, "_save", capture)
    curves = {"RMC": [{"minutes": 1, "ppl": 700.0}, {"minutes": 60, "ppl": 112.0}, {"minutes": 120, "ppl": 155.0}]}
    assert_picture(viz.budget_curves(curves, "ppl", "validation perplexity", "demo", tmp_path / "c.png", log_y=True))
    assert {"120", "150", "200", "500"} <= set(drawn["labels"]), drawn["labels"]


@needs_data
# EntNet by default; MEMO and the RMC (the same script, their probes tested above) with `-m slow`.
@pytest.mark.parametrize("model", ["entnet", pytest.param("memo", marks=pytest.mark.slow),
                                   pytest.param("rmc", marks=pytest.mark.slow)])
def test_train_babi_plot_and_explain(model, tmp_path, capsys):
    summary = commands.babi(["--model", model, "--task", "1", "--epochs", "1", "--max-steps", "3",
                             "--embedding-dim", "16", "--workdir", str(tmp_path), "--verbose", "0",
                             "--plot", str(tmp_path / "plots")])
    pictures = sorted((tmp_path / "plots" / "qa1").glob("*.png"))
    assert len(pictures) == 4  # curves + 3 test questions
    for picture in pictures:
        assert_picture(picture)
    assets = tmp_path / "export" / f"babi_{model}_qa1" / "1" / "assets"
    answers, path = explain.run(["--checkpoint", str(tmp_path / "qa1" / "checkpoint.keras"), "--assets", str(assets),
                                 "--story", "Mary went to the kitchen. John moved to the garden.",
                                 "--question", "Where is Mary?", "--out", str(tmp_path / "explain.png")])
    assert len(answers) == 3 and summary["tasks"]["1"]["questions"] == 1000
    assert_picture(path)


def test_hops_per_task_coloured_by_facts_keeps_every_bar_at_its_task(tmp_path, monkeypatch):
    """Bars drawn group by group (one colour per number of supporting facts) still stand at their task."""
    import matplotlib.colors

    drawn = {}
    save = viz._save

    def capture(fig, path):
        bars = fig.axes[0].patches
        drawn["bars"] = sorted((round(b.get_x() + b.get_width() / 2), b.get_height(),
                                matplotlib.colors.to_hex(b.get_facecolor())) for b in bars)
        drawn["labels"] = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        return save(fig, path)

    monkeypatch.setattr(viz, "_save", capture)
    hops = {"1": 1.1, "2": 2.2, "3": 3.3, "4": 1.4}
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}
    assert_picture(viz.hops_per_task(hops, tmp_path / "h.png", facts=facts))
    blue, orange, red = (matplotlib.colors.to_hex(c) for c in ("tab:blue", "tab:orange", "tab:red"))
    assert drawn["bars"] == [(0, 1.1, blue), (1, 2.2, orange), (2, 3.3, red), (3, 1.4, blue)]
    assert drawn["labels"] == ["1", "2", "3", "4"]


def test_explain_says_what_the_model_does_not_see():
    from keras_relmem.data.vocab import Vocabulary

    vocab = Vocabulary(["mary", "went", "to", "the", "kitchen", "where", "is"])
    sentences = [["mary", "went", "to", "the", "kitchen"]] * 3 + [["mary", "went", "to", "the", "pub", "at", "noon"]]
    notes = explain.input_notes(sentences, ["where", "is", "mary"], vocab, story_length=2, sentence_length=6,
                                query_length=3)
    assert notes == ["the story has 4 sentences; the model reads the last 2, so the first 2 are left out",
                     "sentence(s) [4] have more than 6 words; the words after the 6th are left out",
                     "not in the model's vocabulary, read as unknown: at, noon, pub"]
    assert explain.input_notes(sentences[:1], ["where", "is", "mary"], vocab, 2, 6, 3) == []


def test_panel_curves_draw_a_label_in_one_colour_in_every_panel(tmp_path, monkeypatch):
    """A run's curve keeps its colour from panel to panel, even when a panel lacks another's first curve, and the
    figure has one legend for them all (a panel of a dozen runs was hidden under its own)."""
    drawn = {}
    save = viz._save

    def capture(fig, path):
        drawn["panels"] = [{line.get_label(): line.get_color() for line in ax.get_lines()} for ax in fig.axes
                           if ax.get_visible()]
        drawn["panel legends"] = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        drawn["legends"] = [[(text.get_text(), handle.get_color()) for text, handle in
                             zip(legend.get_texts(), legend.legend_handles)] for legend in fig.legends]
        drawn["texts"] = [[text.get_text() for text in ax.texts] for ax in fig.axes if ax.get_visible()]
        return save(fig, path)

    monkeypatch.setattr(viz, "_save", capture)
    curve = [{"examples": 1, "acc": 30}, {"examples": 2, "acc": 90}]
    panels = {"add": {"LSTM": curve, "RMC": curve}, "copy": {"RMC": curve}}
    assert_picture(viz.panel_curves(panels, "examples", "acc", "examples", "accuracy (%)", "demo", tmp_path / "p.png",
                                    marks={"copy": (1.5, "level (5, 1) from here")}))
    add, copy = drawn["panels"]
    assert copy["RMC"] == add["RMC"] != add["LSTM"]
    # one legend for the figure, each label once in its curves' colour, none over a panel's curves
    assert drawn["panel legends"] == []
    assert drawn["legends"] == [[("LSTM", add["LSTM"]), ("RMC", add["RMC"])]]
    assert drawn["texts"] == [[], [" level (5, 1) from here"]]
