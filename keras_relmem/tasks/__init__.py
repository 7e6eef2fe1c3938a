"""The task families `kr.train` runs, one module each; importing this package registers them with
`keras_relmem.runs` (each module's `TASK`)."""

from keras_relmem.tasks import babi, babi_joint, lm, lte, nth_farthest, pai, shortest_path  # noqa: F401
