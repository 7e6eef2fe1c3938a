"""`python -m bench`: the studies, each with the question it answers and its commands. `python -m bench <study>`
lists what the study keeps, each results file with the commands that made it; `python -m bench <study> FLAGS`
runs the study's runner with them (`python -m bench lte --help`)."""

import importlib
import sys

from bench import STUDIES, study_commands


def listing():
    from bench.report import catalogue

    lines = []
    for study in catalogue.studies():
        lines += [f"{study.name}: {study.question}", *(f"    {command}" for command in study_commands(study.name)), ""]
    return "\n".join(lines).rstrip()


def study_listing(name):
    """A study's question, its page and each results file it keeps with the commands that reproduce it."""
    from bench.report import catalogue, pages

    study = next(s for s in catalogue.studies() if s.name == name)
    lines = [f"{study.name}: {study.question}", f"Its page: bench/{study.name}/README.md", ""]
    for entry in study.entries:
        lines += [f"{entry.title} ({pages.mark(entry)}, {entry.path}):",
                  *(f"    {command}" for command in pages.commands(entry, catalogue.load(entry.name))), ""]
    return "\n".join(lines + [f"Run it with flags: python -m bench {study.name} --help"])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("usage: python -m bench [STUDY [FLAGS]]\n\nThe studies (python -m bench STUDY --help for one's "
              "flags):\n\n" + listing())
        return
    study, rest = argv[0], argv[1:]
    if study not in STUDIES:
        sys.exit(f"error: no study {study!r}; the studies are {', '.join(STUDIES)} (python -m bench lists them)")
    if not rest:
        print(study_listing(study))
        return
    sys.argv = [f"python -m bench {study}", *rest]
    importlib.import_module(f"bench.{study}").main(rest)


if __name__ == "__main__":
    main()
