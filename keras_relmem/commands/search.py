"""Hyper-parameter search: the library behind `tuning/search.py`."""

import argparse
import os
import pathlib
import sys
import warnings

from keras_relmem import commands as common
from keras_relmem.data import babi as babi_data

OBJECTIVE = {"babi": "val_accuracy", "lm": "val_loss"}


def parse_task(text):
    """A bAbI task number 1..20 or "all"."""
    if text == "all":
        return "all"
    task = int(text) if text.isdigit() else None
    if task not in babi_data.TASK_NAMES:
        raise argparse.ArgumentTypeError(f"tasks are 1..20 or 'all'; got {text!r}")
    return task


def build_parser():
    parser = argparse.ArgumentParser(
        description="KerasTuner search over the memory models (bAbI, or --task lm for language modelling).",
    )
    parser.add_argument("--model", choices=["entnet", "rmc", "lstm", "memo"], default="entnet")
    parser.add_argument("--task", default="1", help="bAbI task 1..20 or 'all' (joint), or 'lm' (default 1)")
    parser.add_argument("--data", choices=babi_data.DATASETS, default="en")
    parser.add_argument("--corpus", default="ptb", help="with --task lm")
    parser.add_argument("--data-dir", default=None, help="local data (default $KERAS_RELMEM_DATA)")
    parser.add_argument("--tuner", choices=["random", "bayesian", "hyperband"], default="random")
    parser.add_argument("--max-trials", type=common.positive_int, default=10)
    parser.add_argument("--epochs", type=common.positive_int, default=10, help="epochs per trial")
    parser.add_argument("--batch-size", type=common.positive_int, default=32)
    parser.add_argument("--directory", default="runs/tuning", help="KerasTuner's folder (default runs/tuning)")
    parser.add_argument("--project-name", default=None, help="default <model>_<task>")
    parser.add_argument("--overwrite", action="store_true", help="start afresh instead of continuing")
    parser.add_argument("--export-dir", default=None, help="export the best model here (default DIRECTORY/export)")
    parser.add_argument("--no-export", action="store_true")
    parser.add_argument("--max-steps", type=common.positive_int, default=None, help="cap steps per epoch (smoke tests)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipe", default=None, metavar="NAME",
                        help="centre the search on a bAbI recipe (relmem-train-babi --list-recipes): trials train "
                             "as that recipe does, its learning rate, weight decay and embedding scale searched "
                             "around its values; default: the papers' sweep of model sizes and rates")
    return common.show_defaults(parser)


def run(argv=None):
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    is_lm = args.task == "lm"
    try:
        task = None if is_lm else parse_task(args.task)
        from keras_relmem.models.language_model import LM_MODELS

        if is_lm and args.model not in LM_MODELS:
            raise ValueError(f"--task lm takes --model {' or '.join(LM_MODELS)}")
        if is_lm:
            from keras_relmem.data import lm as lm_data

            corpus = lm_data.load_corpus(args.corpus, args.data_dir)
        else:
            data = babi_data.load_babi(task, args.data, data_dir=args.data_dir, seed=args.seed)
        recipe = None
        if args.recipe:
            from keras_relmem import recipes

            if is_lm:
                raise ValueError("--recipe centres a bAbI search; --task lm has the papers' sweep only")
            try:
                recipe = recipes.get(args.recipe)
            except KeyError as error:
                raise ValueError(error.args[0]) from None
            if (type(recipe).__name__, recipe.model) != ("BabiConfig", args.model):
                raise ValueError(f"--recipe {recipe.recipe} is not a one-model-per-task bAbI recipe of --model "
                                 f"{args.model} (it is a {type(recipe).__name__} of {recipe.model})")
    except (argparse.ArgumentTypeError, ValueError, FileNotFoundError, ConnectionError) as error:
        build_parser().error(str(error))

    import keras

    from keras_relmem import tuning

    keras.utils.set_random_seed(args.seed)
    if is_lm:
        hypermodel = tuning.LMHyperModel(args.model, corpus, args.batch_size, max_steps=args.max_steps)
    else:
        hypermodel = tuning.BabiHyperModel(args.model, data, args.batch_size, max_steps=args.max_steps, recipe=recipe)
    project = args.project_name or f"{args.model}_{args.task}"
    tuner = tuning.make_tuner(
        args.tuner, hypermodel, OBJECTIVE["lm" if is_lm else "babi"], args.max_trials,
        args.directory, project, overwrite=args.overwrite, seed=args.seed,
    )
    tuner.search_space_summary()
    tuner.search(epochs=args.epochs)
    chief = os.environ.get("KERASTUNER_TUNER_ID", "chief") == "chief"
    if not chief:
        return None
    completed = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    if not completed:
        raise SystemExit("search.py: no trial completed; see the errors above.")
    tuner.results_summary(num_trials=5)
    best = tuner.get_best_hyperparameters(1)[0]
    trials = tuner.oracle.get_best_trials(num_trials=len(tuner.oracle.trials))
    summary = {
        "best_hyperparameters": best.values,
        "best_score": trials[0].score if trials else None,
        "completed_trials": len(completed),
    }
    print(f"Best hyper-parameters: {best.values} (score {summary['best_score']})")
    if not args.no_export and not is_lm:
        from keras_relmem import export

        with warnings.catch_warnings():
            # the best model is exported, not trained on: the state of its optimizer, which a model rebuilt from
            # the trial's hyper-parameters has not created, is not needed (Keras says so as a warning)
            warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
            model = tuner.get_best_models(1)[0]
        base = args.export_dir or os.path.join(args.directory, "export")
        summary["export"] = str(export.export_babi(model, data, base, name=export.babi_model_name(args.model, task)))
        export.announce(summary["export"])
    from keras_relmem.training import write_json

    write_json(pathlib.Path(args.directory) / project / "best.json", summary)
    return summary


def main():
    run()
