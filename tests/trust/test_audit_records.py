"""The audit's results are immutable records (NamedTuples, for `run`'s start-up), and keep the
promises their dataclasses made: a writer's chain is escaped exactly once however the writer
is made, copied or changed, and the counts jaxcache.audit() callers read are the kinds' and
origins' counts, never a tuple's count of its own fields."""

from __future__ import annotations

import copy
import os
import pickle

from jaxcache import audit
from jaxcache.trust.findings import Writer
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.principals import Principal, Trust

RAW = ("\x1b[2J\u202eevil", "C:\\dir")
ESCAPED = ("\\x1b[2J\\u202eevil", "C:\\\\dir")


def _writer() -> Writer:
    return Writer(Principal("user", 1000, "alice"), Action.REPLACE, "/c", RAW, Trust.UNTRUSTED)


def test_a_writers_chain_is_escaped_once_however_it_is_made():
    w = _writer()
    assert w.chain == ESCAPED
    assert Writer._make(list(w[:3]) + [RAW, w.trust]).chain == ESCAPED
    assert w._replace(target="/d").chain == ESCAPED  # kept: not escaped again
    assert w._replace(chain=RAW).chain == ESCAPED  # given raw: escaped
    assert copy.copy(w) == w and copy.deepcopy(w) == w
    assert pickle.loads(pickle.dumps(w)) == w
    more = w.with_reason("on \x07", Trust.POLICY)
    assert more.chain == (*ESCAPED, "on \\x07") and more.trust is Trust.POLICY


def test_an_audits_counts_are_the_kinds_and_the_origins(tmp_path):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    (cache / f"jit_f-{'0' * 64}-cache").write_bytes(b"x")
    (cache / f"jit_g-{'1' * 64}-cache").write_bytes(b"y")
    os.chmod(cache / f"jit_g-{'1' * 64}-cache", 0o600)
    report = audit(str(cache), scan_processes=False, scan_handles=False)
    assert report.inventory is not None and report.inventory.count("cache") == 2
    assert report.inventory.count("signature") == 0
    assert report.origins is not None
    assert report.origins.count("unknown") == report.origins.counts()["unknown"] == 2
