"""Every relative link and anchor in README.md, CONTRIBUTING.md and the pages under docs/ resolves: the file
exists, and an anchor is one a heading of the target page produces under GitHub's rule (lower case, spaces
to hyphens, punctuation other than hyphens and underscores dropped, repeats numbered -1, -2, ...)."""

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def github_anchor(heading):
    """The anchor GitHub gives a heading (before numbering repeats)."""
    text = re.sub(r"`|\*\*|\*|_(?=\W)|(?<=\W)_", "", heading.strip())  # markup, not text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page):
    found, seen = set(), {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            anchor = github_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    found.update(re.findall(r'<a (?:name|id)="([^"]+)"', page.read_text()))
    return found


def test_the_anchor_rule_on_known_headings():
    assert github_anchor("Task 16 alone, `bag_init` (seed 0)") == "task-16-alone-bag_init-seed-0"
    assert github_anchor("PAI, length 4: halting on distance and entropy, annealed rate") == \
        "pai-length-4-halting-on-distance-and-entropy-annealed-rate"
    assert github_anchor("Default recipe, seeds 0-4: tied keys, cyclic rate, decay on matrices, embeddings "
                         "N(0, 0.3)") == \
        "default-recipe-seeds-0-4-tied-keys-cyclic-rate-decay-on-matrices-embeddings-n0-03"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            shown = destination.relative_to(REPO) if REPO in destination.parents else destination
            broken.append(f"{target}: no file {shown}")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading of {destination.name} gives #{anchor}")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)
