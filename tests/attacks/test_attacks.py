"""Issue 12's attack classes, each played by a second real user against real JAX processes.

One module per class (tests/attacks/<class>.py); this file gathers them so `pytest
tests/attacks/test_attacks.py` runs every attack. Each shows the attack works without jaxcache (the
control), then that jaxcache never lets JAX load the planted bytes and names the writer.

1. storage under the mount (overlay layers, loop images, device nodes, bind sources)
2. writers that already hold a handle (write descriptors, shared mappings)
3. trusted inputs from writable places (keys, policies, records, bench and audit documents)
4. and 5. what children inherit from enable(), and the directory JAX really used
6. data loss (outputs never replace a file jaxcache did not create)
"""

from attacks.enable import *  # noqa: F403
from attacks.handles import *  # noqa: F403
from attacks.inputs import *  # noqa: F403
from attacks.outputs import *  # noqa: F403
from attacks.storage import *  # noqa: F403
