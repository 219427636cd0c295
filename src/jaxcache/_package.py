"""The package's own facts, at the bottom of the house: its version and where it is installed.

Here rather than in jaxcache/__init__.py, the public facade at the top, so that a module of
any layer can name them without importing upward.
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

# the package's own directory (.../jaxcache): the job's probe finds jaxcache's guard through
# it, whatever Python the job runs (JAXCACHE_LIB)
HOME = os.path.dirname(os.path.abspath(__file__))
