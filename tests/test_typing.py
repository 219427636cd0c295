"""The public API as a user's type checker and REPL see it: exported, typed, lazily imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import paths

import jaxcache

API = {"audit", "enable", "enabled", "disable", "JaxcacheError", "UntrustedCacheError",
       "CacheLifecycleError", "CacheLifecycleWarning", "PolicyError", "Verdict", "AuditReport",
       "EnableResult", "Trap", "Finding", "Writer", "PublicKey", "SigningKey", "__version__"}


def test_dir_and_all_list_the_api_and_import_stays_light():
    assert set(dir(jaxcache)) >= API and set(jaxcache.__all__) == API
    assert "annotations" not in dir(jaxcache)
    code = ("import sys; before = set(sys.modules); import jaxcache; print(sorted("
            "m for m in set(sys.modules) - before if m.startswith(('jax.', 'jaxcache.', "
            "'jaxlib', 'cryptography')) or m in ('jax', 'typing', 'importlib.resources')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    # the API (and typing: ~5 ms) is imported on first use, not by `import jaxcache`: only
    # the version's own module (jaxcache/_package.py, which imports os alone) comes with it
    assert out.strip() == "['jaxcache._package']", out
    for name in API - {"__version__"}:
        assert getattr(jaxcache, name) is not None
    assert issubclass(jaxcache.UntrustedCacheError, jaxcache.JaxcacheError)
    assert jaxcache.Verdict.PRIVATE.value == "PRIVATE"


def test_mypy_catches_wrong_calls_and_accepts_the_documented_ones(tmp_path: Path):
    pytest.importorskip("mypy")
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        import jaxcache
        from jaxcache import AuditReport, EnableResult, Verdict

        report: AuditReport = jaxcache.audit("/tmp/x", policy=None)
        ok: bool = report.verdict is Verdict.PRIVATE
        result: EnableResult = jaxcache.enable("/tmp/x", sealed=True,
                                               trusted_keys=["ed25519:AAAA", "k.pub"])
        jaxcache.enable("/tmp/x", sealed=True, trusted_keys="ed25519:AAAA")
        with jaxcache.enabled("/tmp/x", sealed=True, trusted_keys=[]) as inner:
            print(inner.path)
        undone: bool = jaxcache.disable()
        try:
            pass
        except jaxcache.UntrustedCacheError as exc:
            print(exc.report)
        except jaxcache.JaxcacheError:
            pass
    """))
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        import jaxcache

        jaxcache.enable(123)
        jaxcache.enable("/tmp/x", trusted_keys=[1, 2])
        jaxcache.audit("/tmp/x", polcy="p.toml")
        n: str = jaxcache.disable()
        jaxcache.no_such_function()
    """))
    argv = [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", "/dev/null",
            "--python-version", f"{sys.version_info[0]}.{sys.version_info[1]}",
            "--follow-imports", "silent", "--ignore-missing-imports"]
    clean = subprocess.run([*argv, str(good)], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    caught = subprocess.run([*argv, str(bad)], capture_output=True, text=True)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    lines = {int(line.split(":")[1]) for line in caught.stdout.splitlines()
             if line.startswith(str(bad)) and ": error:" in line}
    assert lines == {4, 5, 6, 7, 8}, caught.stdout


def test_all_of_src_is_strict():
    """mypy --strict over the whole of src/: no override relaxes a module of jaxcache (the
    only overrides name third-party clients without type information)."""
    import tomllib

    config = tomllib.loads((paths.CHECKOUT / "pyproject.toml")
                           .read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True and config["files"] == ["src"]
    ours = [m for o in config.get("overrides", []) for m in o["module"]
            if m.startswith("jaxcache")]
    assert ours == [], f"modules of jaxcache with their own mypy settings: {ours}"
