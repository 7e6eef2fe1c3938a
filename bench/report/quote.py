"""Quoting a results file in a note or a claim: `{{path:format}}` replaced by the value the JSON holds there.

A number is typed once, in its JSON; a note that quotes a number its results do not hold is an error.
"""

import re

from bench.report import catalogue

QUOTE = re.compile(r"\{\{([^}:]+)(?::([^}]*))?\}\}")
NUMBER = re.compile(r"[0-9][0-9_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?")
SLICE = re.compile(r"(-?[0-9]+)\.\.(-?[0-9]+)")
KEY = re.compile(r"-?[0-9]+\.\.-?[0-9]+|[^.]+")
OTHER_FILE = re.compile(r"([\w.-]+\.json(?:\|[\w.-]+\.json)*)/(.+)")
# What a note says of the values a slice gives, each formatted with what follows it in the format.
AGGREGATE = re.compile(r"(min|max|mean|median|range|len|count(>=|<=|==|>|<)(-?[0-9.]+))(?: (.*))?")
COMPARE = {">=": float.__ge__, "<=": float.__le__, "==": float.__eq__, ">": float.__gt__, "<": float.__lt__}


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def quote(note, results, where="note", load=None):
    """`note` with each `{{path:format}}` replaced by the value at `path` in `results`, formatted.

    A path is keys joined by dots (a list takes an index, -1 the last): `{{rmc.perplexity:.1f}}`,
    `{{rmc.curve.-1.minutes:.0f}}`. A ratio ` / ` of two paths, or of a path and a number, quotes
    what a note would otherwise work out by hand: `{{rmc.accuracy / lstm.accuracy:.2f}}` times,
    `{{lstm.examples / 1e6:.1f}}` million. A slice `A..B` of a list (both ends included, negative
    from the end) takes the rest of the path from each item, and the format then says what of those
    values the note quotes: `{{curve.154..-1.task_errors.17.0:range .1f}}` (lowest-highest, "2.7-4.7"),
    `min`, `max`, `mean` and `median` with a number format, `len` (how many), and `count>=19` (how many at
    least 19; also `>`, `<=`, `<`, `==`). Keys joined by `|` take some items by name the same way:
    `{{curve.-1.task_hops.2|3|16|19:range .1f}}`; a quote sums up one slice or one set. A path may
    start in another results file, for a note that sets its run beside another:
    `{{memo_babi_seed1.json/curve.-1.mean_error:.2f}}` (`load(name)` gives that file's results). A
    path may also start in several files at once, the same path in each (a recipe's seeds), and
    then sums up as a slice does: `{{memo_babi.json|memo_babi_seed1.json/mean_error:median .1f}}`. A
    path that leads nowhere is an error naming `where`, so a note cannot quote a number its results
    file does not hold.
    """
    def lookup(match, path):
        def walk(found, keys, sliced):
            for at, key in enumerate(keys):
                ends = SLICE.fullmatch(key)
                if (ends or "|" in key) and sliced:
                    raise ValueError(f"{where}: {match.group(0)} takes items of items ({key!r}): a quote sums up "
                                     "one slice or one set of keys")
                if ends and isinstance(found, list):
                    first, last = (int(end) + len(found) if int(end) < 0 else int(end) for end in ends.groups())
                    if not 0 <= first <= last < len(found):
                        raise ValueError(f"{where}: {match.group(0)} slices {key!r} of a list of {len(found)}, "
                                         "which holds no such items")
                    return [walk(item, keys[at + 1:], True) for item in found[first:last + 1]]
                if "|" in key:
                    return [walk(found, [one, *keys[at + 1:]], True) for one in key.split("|")]
                try:
                    found = found[int(key)] if isinstance(found, list) else found[key]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise ValueError(f"{where}: {match.group(0)} quotes {path.strip()!r}, which the results "
                                     f"do not hold (no {key!r})") from None
            return found
        path = path.strip()
        elsewhere = OTHER_FILE.fullmatch(path)
        if elsewhere:
            starts = []
            for name in elsewhere.group(1).split("|"):
                try:
                    starts.append((load or catalogue.load)(name))
                except FileNotFoundError:
                    raise ValueError(f"{where}: {match.group(0)} quotes {name}, which is in no "
                                     "study's results") from None
            path = elsewhere.group(2)
            if len(starts) > 1:  # the same path in several files (seeds): a set of values, as `|` gives
                return [walk(start, KEY.findall(path), True) for start in starts]
            start = starts[0]
        else:
            start = results
        # A slice's two dots do not split the path.
        return walk(start, KEY.findall(path), False)

    def operand(match, text):
        # Digits only, so that a run named like a float ("inf", "nan") is still looked up.
        return float(text) if NUMBER.fullmatch(text.strip()) else lookup(match, text)

    def aggregate(values, how):
        name, operator, bound, number = how.group(1), how.group(2), how.group(3), how.group(4) or ""
        if name == "len":
            return str(len(values))
        if operator:
            return str(sum(COMPARE[operator](float(value), float(bound)) for value in values))
        if name == "range":
            low, high = format(min(values), number), format(max(values), number)
            return low if low == high else f"{low}-{high}"
        found = {"min": min, "max": max, "mean": lambda v: sum(v) / len(v), "median": _median}[name](values)
        return format(found, number)

    def value(match):
        expression = match.group(1)
        if " / " in expression:
            numerator, denominator = (operand(match, part) for part in expression.split(" / ", 1))
            try:
                found = numerator / denominator
            except (TypeError, ZeroDivisionError) as error:
                raise ValueError(f"{where}: {match.group(0)} cannot divide {numerator!r} by "
                                 f"{denominator!r}: {error}") from None
        else:
            found = lookup(match, expression)
        spec, how = match.group(2) or "", None
        if isinstance(found, list):
            how = AGGREGATE.fullmatch(spec)
            if not how:
                raise ValueError(f"{where}: {match.group(0)} slices a list, so its format must say what of its "
                                 f"values to quote (min, max, mean, range, len or count>=N), not {spec!r}")
        try:
            return aggregate(found, how) if how else format(found, spec)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{where}: {match.group(0)} cannot format {found!r}: {error}") from None

    return QUOTE.sub(value, note)

