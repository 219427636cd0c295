"""The project file: `[tool.jaxcache]` in pyproject.toml, or `.jaxcache.toml` beside it.

A project's defaults for every command and for enable(): the cache directory, JAX's write
thresholds, the records folder, bench's trials. effective.py walks up from the working
directory to the nearest folder holding either file; locate.py reads it (through a descriptor,
no link followed, bounded, owned by you or root); project_toml.py parses it once into a typed
model. Each setting's candidates, in the order they win (a flag or enable()'s argument, JAX's
variable where JAX has one, the project file), are listed once in effective.py: the first one
set is the value, else the default. The commands' defaults, the default cache directory
(trust/create.py), the records folder (records/record_dir.py) and enable() take the values
from there; `jaxcache config` (chosen.py) also says where each came from. Trust settings are
never read from a project file: they are the protected policy's (trust/inputs/policy.py).

The path of every `jaxcache run`: with no file (or a pyproject.toml that does not mention
tool.jaxcache) it costs a few failed `open` calls and imports nothing.
"""

from __future__ import annotations

# the bounds of bench's -t and -k, which a project file's [bench] is checked against too
# (cli/common.py reads them here: nothing more is imported with them)
MAX_TRIALS = 1000
MAX_WARM = 100
