"""A token vocabulary saved as a plain text file, one token per line."""

import collections
import pathlib


class Vocabulary:
    """Maps tokens to integer ids and back.

    Special tokens come first: the padding token (id 0) if any, then the
    out-of-vocabulary token. Unknown tokens map to the OOV id, or raise a
    `KeyError` when the vocabulary has none.

    Args:
        tokens: iterable of the ordinary tokens, in id order.
        pad_token: str or None, the padding token (id 0) (default `"<pad>"`).
        oov_token: str or None, the out-of-vocabulary token (default `"<unk>"`).

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> vocab = Vocabulary.build([["mary", "went"], ["john", "went"]])
    >>> vocab.tokens
    ['<pad>', '<unk>', 'went', 'john', 'mary']
    >>> vocab.lookup(["mary", "flew"])  # 'flew' is out of vocabulary
    [4, 1]
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
    >>> Vocabulary.load(vocab.save(path)).tokens == vocab.tokens
    True

    ```
    """

    def __init__(self, tokens, pad_token="<pad>", oov_token="<unk>"):
        self.pad_token = pad_token
        self.oov_token = oov_token
        specials = [t for t in (pad_token, oov_token) if t is not None]
        ordinary = [t for t in tokens if t not in specials]
        self.tokens = specials + ordinary
        self._ids = {token: i for i, token in enumerate(self.tokens)}
        if len(self._ids) != len(self.tokens):
            raise ValueError("Vocabulary tokens must be unique.")

    @classmethod
    def build(cls, sequences, min_count=1, order="frequency", **kwargs):
        """Collect the tokens of `sequences` (iterables of tokens).

        `order='frequency'` sorts by descending count then alphabetically;
        `'alphabetical'` sorts alphabetically.
        """
        counts = collections.Counter(token for seq in sequences for token in seq)
        kept = [t for t, c in counts.items() if c >= min_count]
        if order == "frequency":
            kept.sort(key=lambda t: (-counts[t], t))
        elif order == "alphabetical":
            kept.sort()
        else:
            raise ValueError(f"order must be 'frequency' or 'alphabetical'; received {order!r}.")
        return cls(kept, **kwargs)

    @property
    def pad_id(self):
        return None if self.pad_token is None else self._ids[self.pad_token]

    @property
    def oov_id(self):
        return None if self.oov_token is None else self._ids[self.oov_token]

    def __len__(self):
        return len(self.tokens)

    def __contains__(self, token):
        return token in self._ids

    def __eq__(self, other):
        return (
            isinstance(other, Vocabulary)
            and self.tokens == other.tokens
            and self.pad_token == other.pad_token
            and self.oov_token == other.oov_token
        )

    def __repr__(self):
        return f"Vocabulary({len(self)} tokens, pad={self.pad_token!r}, oov={self.oov_token!r})"

    def token_id(self, token):
        if token in self._ids:
            return self._ids[token]
        if self.oov_token is None:
            raise KeyError(f"Token {token!r} is not in the vocabulary and it has no OOV token.")
        return self._ids[self.oov_token]

    def lookup(self, tokens):
        return [self.token_id(t) for t in tokens]

    def decode(self, ids):
        return [self.tokens[int(i)] for i in ids]

    def save(self, path):
        """Write one token per line, line number = id (a TF lookup-table asset)."""
        path = pathlib.Path(path)
        for token in self.tokens:
            if not token or "\n" in token or token != token.strip():
                raise ValueError(f"Token {token!r} cannot be saved one per line.")
        path.write_text("\n".join(self.tokens) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path, pad_token="<pad>", oov_token="<unk>"):
        """Read a file written by `save`; the special tokens must match."""
        path = pathlib.Path(path)
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            raise ValueError(f"{path}: the vocabulary file is empty.")
        expected = [t for t in (pad_token, oov_token) if t is not None]
        for line_number, token in enumerate(expected, start=1):
            if line_number > len(lines) or lines[line_number - 1] != token:
                found = lines[line_number - 1] if line_number <= len(lines) else None
                raise ValueError(
                    f"{path}:{line_number}: expected the special token {token!r}, "
                    f"found {found!r}."
                )
        return cls(lines, pad_token=pad_token, oov_token=oov_token)
