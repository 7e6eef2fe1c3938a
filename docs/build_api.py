"""Build the API reference (HTML, with pdoc) from the package's docstrings; warnings are errors.

    pip install -e ".[all,docs]"
    python docs/build_api.py            # writes build/api/index.html
    python docs/build_api.py --out DIR

Covers every public module of `keras_relmem`: the layers, models, data
loaders, training pieces, export and the serving client and server. A
docstring pdoc cannot read (a broken cross-reference, a module that fails to
import) fails the build, as it fails CI.
"""

import argparse
import os
import pathlib
import re
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def public_modules():
    """`keras_relmem` and its public modules and subpackages (pdoc walks into those; the
    package's own `__all__` would otherwise hide them)."""
    import pkgutil

    import keras_relmem

    # a module the package's `__all__` names (`configs`, `recipes`) pdoc documents through the package
    return ["keras_relmem"] + sorted(
        info.name for info in pkgutil.iter_modules(keras_relmem.__path__, "keras_relmem.")
        if not info.name.rsplit(".", 1)[1].startswith("_") and info.name.rsplit(".", 1)[1] not in keras_relmem.__all__
    )


def public_keras_path(match):
    """The public name of a Keras class that pdoc writes by its private module path (`keras.src.layers.layer.Layer`
    -> `keras.layers.Layer`); the bare class name when Keras exports it nowhere (`DropoutRNNCell`)."""
    import keras

    name = match.group(1)
    for path, module in (("keras.layers", keras.layers), ("keras.callbacks", keras.callbacks),
                         ("keras.optimizers", keras.optimizers), ("keras", keras)):
        if hasattr(module, name):
            return f"{path}.{name}"
    return name


def without_private_paths(folder):
    """Rewrite every `keras.src.` path in the pages and the search index to its public name."""
    for page in [*pathlib.Path(folder).rglob("*.html"), *pathlib.Path(folder).rglob("*.js")]:
        text = page.read_text()
        clean = re.sub(r"keras\.src\.[\w.]*?\.([A-Z]\w*)", public_keras_path, text)
        if clean != text:
            page.write_text(clean)


def _is_ours(warning):
    """pdoc's warnings about our docstrings; not those about annotations that a class inherits
    from another package (tensorflow_datasets' BuilderConfig)."""
    if "pdoc" not in pathlib.Path(warning.filename).parts:
        return False
    about = re.search(r" for ([\w.]+)", str(warning.message))
    return about is None or about.group(1).startswith("keras_relmem")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "api"), help="output folder (default build/api)")
    args = parser.parse_args(argv)
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="google", search=True, show_source=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*public_modules(), output_directory=pathlib.Path(args.out))
    without_private_paths(args.out)
    # Only pdoc's own warnings count: TensorFlow and Keras warn on import about things that are not ours.
    ours = [w for w in caught if _is_ours(w)]
    for warning in ours:
        print(f"error: {warning.message}", file=sys.stderr)
    pages = sorted(pathlib.Path(args.out).rglob("*.html"))
    private = [str(page) for page in pages
               if "keras.src." in page.read_text() or ".seed_generator\"" in page.read_text()]
    for page in private:
        print(f"error: {page} names a private Keras path or an undocumented internal", file=sys.stderr)
    print(f"{len(pages)} pages in {args.out}; {len(ours)} warnings")
    return 1 if ours or private or not pages else 0


if __name__ == "__main__":
    sys.exit(main())
