"""Run the README's `kr.train` snippet as written, on a tiny version of the recipe it names (one task of the 1k
set, a small model, seconds of training), in whatever environment runs this: CI runs it with the base install
(no extras), as a user who followed the README's first line would have."""

import dataclasses
import os
import pathlib
import re
import sys
import tempfile

import keras_relmem as kr

README = pathlib.Path(sys.argv[1]).read_text()
snippet = re.search(r"```python\n(import dataclasses, keras_relmem as kr\n.*?)```", README, re.S).group(1)
TINY = dict(data="en", tasks=(1,), embedding_dim=8, num_heads=2, key_size=4, max_hops=2, batch_size=16,
            steps_per_round=2, starts=1, budget_minutes=0.02, test_limit=20, halting_warmup_rounds=0)
real_get = kr.recipes.get
kr.recipes.get = lambda name: dataclasses.replace(real_get(name), **TINY)
os.chdir(tempfile.mkdtemp())
scope = {}
exec(snippet, scope)  # noqa: S102 - the README's own lines
assert scope["results"]["complete"], scope["results"]
print("the README's snippet ran with the base install")
