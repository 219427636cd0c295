"""jaxcache's own XDG lookup must agree with platformdirs, which it replaces on Linux for speed."""

from __future__ import annotations

import sys

import platformdirs
import pytest

from jaxcache.userdirs import user_dir

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG is Linux's")


@pytest.mark.parametrize("kind", ["config", "cache", "state"])
@pytest.mark.parametrize("xdg", [None, "/srv/xdg-base", "relative/ignored"])
def test_matches_platformdirs(monkeypatch, tmp_path, kind, xdg):
    monkeypatch.setenv("HOME", str(tmp_path))
    variable = f"XDG_{kind.upper()}_HOME"
    if xdg is None:
        monkeypatch.delenv(variable, raising=False)
    else:
        monkeypatch.setenv(variable, xdg)
    expected = getattr(platformdirs, f"user_{kind}_dir")("jaxcache")
    assert user_dir(kind) == expected
    assert user_dir(kind).startswith("/srv/xdg-base" if xdg == "/srv/xdg-base" else str(tmp_path))
