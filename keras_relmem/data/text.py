"""How text becomes words and sentences: one definition for training, `relmem-explain`, the client and the
served signatures.

A word break is any Unicode punctuation or separator (categories P and Z) or an ASCII control space; text is
lower-cased, word breaks become spaces, and the words are what lies between spaces. Every other character
belongs to a word: a non-ASCII word (`märy`, `约翰`, an emoji) is one word, so a vocabulary that lacks it reports
it as unknown rather than losing it. A story given as text splits into sentences at `.` and `!`.

The patterns are RE2 syntax, which the `regex` module reads alike: the exported SavedModels run the same
patterns in the graph (`tf.strings.regex_replace`), and a test feeds the same non-ASCII story to each path.

Example:

```python
>>> words("Märy wënt to the kïtchen, with 约翰!")
['märy', 'wënt', 'to', 'the', 'kïtchen', 'with', '约翰']
>>> sentences("Mary went to the kitchen. John moved to the garden!")
['Mary went to the kitchen', ' John moved to the garden']

```
"""

import regex

WORD_BREAK = r"[\p{P}\p{Z}\t\n\v\f\r]"
SENTENCE_END = r"[.!]"
_WORD_BREAK = regex.compile(WORD_BREAK)
_SENTENCE_END = regex.compile(SENTENCE_END)


def words(text):
    """The words of `text`: lower-cased, split at punctuation and spaces."""
    return [word for word in _WORD_BREAK.sub(" ", text.lower()).split(" ") if word]


def sentences(text):
    """The sentences of a story given as one string (split at `.` and `!`), empty ones left out."""
    return [part for part in _SENTENCE_END.split(text) if words(part)]
