"""JAX options put in force after `import jax`, as if their JAX_* variables had been set.

JAX reads each JAX_* variable once, when `import jax` defines its options. The cache directory
a run grants never travels in the job's environment (a process that outlives the run or skips
the probe would read it unjudged): the probe puts it into jax.config once the job imports jax,
and reads it back. An option this JAX lacks, a variable jaxcache has no option for, or a value
JAX does not hold afterwards raises, and the probe turns the cache off (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxcache.jaxcompat.internals import JaxInternalsChanged, check_supported

# variable -> (the option JAX reads it into, how JAX parses its text: config.py's
# optional_string state, 0.5 to 0.12). Only the granted directory: every other option a run
# sets reaches the job in its environment, which JAX reads at import
OPTIONS: dict[str, tuple[str, type]] = {
    "JAX_COMPILATION_CACHE_DIR": ("jax_compilation_cache_dir", str),
}


def put_in_force(env: Mapping[str, str]) -> dict[str, object]:
    """Set each JAX_* variable of `env` as its option, as JAX would have read it at import;
    returns {option: value JAX holds now}. Raises JaxInternalsChanged (this JAX lacks the
    option, or holds another value after the update) or ValueError (a variable with no
    option here, a value JAX could not parse): the caller fails closed."""
    import jax

    check_supported(jax.__version__)
    config: Any = jax.config  # JAX's Config: untyped
    unknown = sorted(n for n in env if n.startswith("JAX_") and n not in OPTIONS)
    if unknown:
        raise ValueError(f"jaxcache cannot put {', '.join(unknown)} in force after import jax")
    held: dict[str, object] = {}
    for variable, text in env.items():
        if variable not in OPTIONS:
            continue
        option, kind = OPTIONS[variable]
        value = kind(text)
        try:
            config.update(option, value)
            now = getattr(config, option)
        except AttributeError:
            raise JaxInternalsChanged(f"JAX {jax.__version__} has no option {option} for "
                                      f"{variable}") from None
        if now != value:
            raise JaxInternalsChanged(f"JAX {jax.__version__} holds {option} = {now!r} after "
                                      f"setting it to {value!r}")
        held[option] = now
    return held
