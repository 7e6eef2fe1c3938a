"""What the serving benches share: an exported bAbI EntNet and our server started in its own process."""

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def export_babi_entnet(base, name="babi"):
    """Export an untrained bAbI EntNet (task 1 sizes: the weights do not change the cost) as `base/name/1`.

    Returns `(data, path)`: the task's `BabiData` (vocabularies and shapes) and the version folder.
    """
    from keras_relmem import export
    from keras_relmem.data import babi
    from keras_relmem.models import babi_qa

    data = babi.load_babi([1])
    model = babi_qa.build_babi_model("entnet", len(data.vocab), len(data.answer_vocab), data.story_length,
                                     data.sentence_length, data.query_length)
    return data, export.export_babi(model, data, base, name=name)


def start_server(flags, stderr=subprocess.DEVNULL):
    """Start `serving/server.py --port 0 FLAGS...`; returns `(process, ports)` once it prints its ports.

    `ports` maps "grpc" (and "rest" when a REST port is asked for) to the port numbers.
    """
    process = subprocess.Popen([sys.executable, str(REPO / "serving" / "server.py"), "--port", "0", *flags],
                               stdout=subprocess.PIPE, stderr=stderr, text=True)
    for line in process.stdout:
        if line.startswith("SERVING"):
            return process, {key: int(value) for key, value in (part.split("=") for part in line.split()[1:])}
    process.kill()
    raise RuntimeError("the server exited before it served (see its stderr)")
