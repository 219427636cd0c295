"""Signing keys in a token (trust/inputs/pkcs11.py, docs/how-to/hsm.md), against a real SoftHSM2
token.

A private token under the module's temporary directory (SOFTHSM2_CONF) holds an Ed25519
pair made with python-pkcs11. Everything that touches the token runs in its own process, as a
publisher would: `jaxcache keygen --public-of`, `seal`, `run --sealed`, real JAX jobs. The key
is made extractable only so the tests can look for its bytes in every file jaxcache wrote.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import paths
from support.jobs import clean_env, jaxcache

from jaxcache.trust.inputs import pkcs11, pkcs11_uri

LIBRARIES = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
             "/usr/lib64/pkcs11/libsofthsm2.so", "/usr/lib64/softhsm/libsofthsm2.so",
             "/usr/local/lib/softhsm/libsofthsm2.so")
LIBRARY = next((p for p in LIBRARIES if os.path.isfile(p)), None)
JOB = str(paths.PROGRAMS / "two_jits.py")


GENERATE = """\
import sys, pkcs11
from pkcs11 import Attribute, KeyType, Mechanism
from pkcs11.util.ec import encode_named_curve_parameters
lib = pkcs11.lib(sys.argv[1])
with lib.get_token(token_label=sys.argv[2]).open(rw=True, user_pin=sys.argv[3]) as s:
    both = {Attribute.LABEL: "ci", Attribute.ID: b"\\x01", Attribute.TOKEN: True}
    pub, priv = s.generate_keypair(
        KeyType.EC_EDWARDS, mechanism=Mechanism.EC_EDWARDS_KEY_PAIR_GEN, store=True,
        public_template={**both, Attribute.EC_PARAMS: encode_named_curve_parameters(
            "1.3.101.112"), Attribute.VERIFY: True},
        private_template={**both, Attribute.SIGN: True, Attribute.PRIVATE: True,
                          Attribute.SENSITIVE: False, Attribute.EXTRACTABLE: True})
    s.generate_keypair(KeyType.RSA, 2048, store=True, label="rsa", id=b"\\x02")
    for private, public in (("mixed", "x-pub"), ("y-priv", "mixed")):  # two pairs, one name
        s.generate_keypair(
            KeyType.EC_EDWARDS, mechanism=Mechanism.EC_EDWARDS_KEY_PAIR_GEN, store=True,
            public_template={Attribute.LABEL: public, Attribute.TOKEN: True,
                             Attribute.EC_PARAMS: encode_named_curve_parameters("1.3.101.112")},
            private_template={Attribute.LABEL: private, Attribute.TOKEN: True,
                              Attribute.SIGN: True})
    print(bytes(pub[Attribute.EC_POINT]).hex(), bytes(priv[Attribute.VALUE]).hex())
"""

SIGN = """\
import json, sys, threading
from jaxcache.trust.inputs import signing_keys as keys
key = keys.load_signing(sys.argv[1])
again = keys.load_signing(sys.argv[1])  # a second load in one process: one login
out = {}
def sign(n):
    for i in range(25):
        message = b"thread %d message %d" % (n, i)
        out[message.decode()] = key.sign(message).hex()
threads = [threading.Thread(target=sign, args=(n,)) for n in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["again"] = again.sign(b"again").hex()
print(json.dumps({"public": key.public.text, "path": key.path, "signatures": out}))
"""


@dataclass(frozen=True)
class Token:
    env: dict[str, str]  # SOFTHSM2_CONF and a clean environment
    pin: str
    pin_file: Path
    public: bytes  # the 32 raw bytes
    seed: bytes  # the private key's 32 bytes (readable here only: the key is extractable)
    tokens: Path

    def uri(self, **changes: str) -> str:
        parts = {"token": "T", "object": "ci", "module-path": LIBRARY,
                 "pin-source": f"file:{self.pin_file}", **changes}
        path = ";".join(f"{k}={v}" for k, v in parts.items() if k in pkcs11_uri.PATH_ATTRIBUTES
                        and v is not None)
        query = "&".join(f"{k}={v}" for k, v in parts.items()
                         if k not in pkcs11_uri.PATH_ATTRIBUTES and v is not None)
        return f"pkcs11:{path}?{query}"

    @property
    def public_text(self) -> str:
        return "ed25519:" + base64.b64encode(self.public).decode()


@pytest.fixture(scope="module")
def token(tmp_path_factory) -> Token:
    if shutil.which("softhsm2-util") is None or LIBRARY is None:
        pytest.skip("softhsm2 not installed (scripts/system-deps.sh installs it as root)")
    if importlib.util.find_spec("pkcs11") is None:
        pytest.skip("python-pkcs11 not installed (the test extra has it)")
    root = tmp_path_factory.mktemp("hsm")
    tokens = root / "tokens"
    tokens.mkdir(mode=0o700)
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n"
                    "log.level = ERROR\n")
    env = clean_env(SOFTHSM2_CONF=str(conf))
    pin = "jxpin-" + secrets.token_hex(12)  # long enough to search the written files for
    subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", "T", "--so-pin",
                    "so-" + secrets.token_hex(8), "--pin", pin], env=env, check=True,
                   capture_output=True)
    made = subprocess.run([sys.executable, "-c", GENERATE, LIBRARY, "T", pin], env=env,
                          capture_output=True, text=True, check=True)
    point, seed = (bytes.fromhex(x) for x in made.stdout.split())
    assert point[:2] == b"\x04\x20" and len(seed) == 32  # SoftHSM2's DER OCTET STRING
    pin_file = root / "pin"
    pin_file.write_text(pin + "\n")
    pin_file.chmod(0o600)
    return Token(env, pin, pin_file, point[2:], seed, tokens)


def user_env(token: Token, tmp_path: Path) -> dict[str, str]:
    """The token's environment, with jaxcache's state and config under tmp_path: every file
    jaxcache writes lands where the tests look for secrets."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    return {**token.env, "HOME": str(home), "XDG_STATE_HOME": str(home / ".state"),
            "XDG_CONFIG_HOME": str(home / ".config")}


def no_secret_in(tmp_path: Path, token: Token) -> int:
    """No file jaxcache wrote holds the private key (PEM, raw, base64, hex) or the PIN; how
    many files were looked at."""
    secrets_ = (b"PRIVATE KEY", token.seed, base64.b64encode(token.seed),
                token.seed.hex().encode(), token.pin.encode())
    looked = 0
    for folder, _, names in os.walk(tmp_path):
        for name in names:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            looked += 1
            for secret in secrets_:
                assert secret not in data, (path, secret[:12])
    return looked


def listing(*roots: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for root in roots:
        for folder, dirs, names in os.walk(root):
            for name in dirs + names:
                st = os.lstat(os.path.join(folder, name))
                found[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return found


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxcache: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """A private cache a real JAX job filled with XLA's sub-caches off (what seal signs)."""
    pytest.importorskip("jax")
    from test_seal_unhittable import fill

    tmp = tmp_path_factory.mktemp("filled")
    fill(tmp / "cache", tmp, "none")
    return tmp / "cache"


def copy_of(filled: Path, where: Path) -> Path:
    shutil.copytree(filled, where)
    where.chmod(0o700)
    return where


# --- the URI --------------------------------------------------------------------------------


def test_uri_attributes_are_percent_decoded():
    uri = pkcs11.parse("pkcs11:token=My%20Token;object=ci%2Fkey;id=%01%ff;type=private"
                       "?module-path=/opt/hsm%20lib/p11.so&pin-source=file:///etc/jx/pin")
    assert (uri.token, uri.object, uri.id, uri.type) == ("My Token", "ci/key", b"\x01\xff",
                                                          "private")
    assert uri.module == "/opt/hsm lib/p11.so" and uri.pin_file == "/etc/jx/pin"
    assert pkcs11.parse("pkcs11:token=T;id=%02?module-path=/l.so&pin-source=/p").pin_file == "/p"
    assert pkcs11.is_uri("PKCS11:token=T") and not pkcs11.is_uri("/etc/jaxcache/ci.key")


@pytest.mark.parametrize(("uri", "says"), [
    ("pkcs11:token=T;object=ci?module-path=/l.so&pin-value=1234", "pin-source=file:"),
    ("pkcs11:token=T;object=ci;pin-value=1234?module-path=/l.so", "shell history"),
    ("pkcs11:token=T;object=ci", "add ?module-path="),
    ("pkcs11:token=T;object=ci?module-path=lib.so", "absolute"),
    ("pkcs11:token=T;object=ci?module-name=softhsm2", "module-path=/"),
    ("pkcs11:token=T;object=ci;colour=red?module-path=/l.so", "unknown attribute colour="),
    ("pkcs11:token=T;object=ci;serial=42?module-path=/l.so", "does not select by serial="),
    ("pkcs11:token=T;object=ci;module-path=/l.so", "belongs after '?'"),
    ("pkcs11:token=T;object=ci;object=x?module-path=/l.so", "given twice"),
    ("pkcs11:token=T;object=c i?module-path=/l.so", "percent-encoded"),
    ("pkcs11:token=T;object=%zz?module-path=/l.so", "percent-encoded"),
    ("pkcs11:object=ci?module-path=/l.so", "add token="),
    ("pkcs11:token=T?module-path=/l.so", "object=LABEL"),
    ("pkcs11:token=T;object=ci;type=cert?module-path=/l.so", "type=private"),
    ("pkcs11:token=T;object=ci?module-path=/l.so&pin-source=pin.txt", "file:/ABSOLUTE"),
    ("pkcs11:token=T;object=ci?module-path=/l.so&pin-source=file://host/pin", "file:/ABSOLUTE"),
    ("pkcs11:token=T;object=ci?module-path=/l.so&pin-source=%7C/bin/pinentry", "file:/"),
])
def test_a_bad_uri_is_one_line_saying_what_to_change(uri, says):
    with pytest.raises(pkcs11.TokenError) as caught:
        pkcs11.parse(uri)
    message = str(caught.value)
    assert says in message and "\n" not in message
    assert "1234" not in message  # a PIN given inline is never repeated


def test_without_the_binding_a_uri_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pkcs11", None)  # `import pkcs11` fails
    with pytest.raises(pkcs11.TokenError, match=r"jaxcache\[pkcs11\]"):
        pkcs11.public_of("pkcs11:token=T;object=ci?module-path=/usr/lib/p11.so")


def test_a_uri_signing_key_stays_a_uri_in_the_jobs_environment(tmp_path):
    from jaxcache.lifecycle.sealing import ENV, SealOptions

    uri = "pkcs11:token=T;object=ci?module-path=/l.so&pin-source=file:/p"
    spec = json.loads(SealOptions(signing_key=uri).job_env(str(tmp_path), None)[ENV])
    assert spec["signing_key"] == uri
    spec = json.loads(SealOptions(signing_key="ci.key").job_env(str(tmp_path), None)[ENV])
    assert spec["signing_key"] == os.path.abspath("ci.key")


# --- the token --------------------------------------------------------------------------------


def test_keygen_public_of_prints_the_tokens_key_which_verifies_its_signatures(token, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    env = user_env(token, tmp_path)
    shown = jaxcache("keygen", "--public-of", token.uri(), env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == token.public_text + "\n"
    assert base64.b64decode(shown.stdout.strip()[len("ed25519:"):]) == token.public
    # the public object is readable without logging in: no PIN needed to publish it
    bare = jaxcache("keygen", "--public-of", token.uri(**{"pin-source": None}), env=env)
    assert bare.stdout == shown.stdout, bare.stderr
    by_id = jaxcache("keygen", "--public-of", token.uri(object=None, id="%01"), env=env)
    assert by_id.stdout == shown.stdout, by_id.stderr
    signed = subprocess.run([sys.executable, "-c", SIGN, token.uri()], env=env,
                            capture_output=True, text=True, timeout=120)
    assert signed.returncode == 0, signed.stderr
    doc = json.loads(signed.stdout)
    assert doc["public"] == token.public_text and doc["path"] == token.uri()
    verifier = Ed25519PublicKey.from_public_bytes(token.public)
    assert len(doc["signatures"]) == 8 * 25 + 1  # eight threads at once, and a second load
    for message, signature in doc["signatures"].items():
        verifier.verify(bytes.fromhex(signature), message.encode())
    no_secret_in(tmp_path, token)  # nothing written at all, or nothing with a secret


def test_keygen_public_of_without_the_pin_says_the_pair_was_not_checked(token, tmp_path):
    """Without a login the private key is hidden: the public object alone is printed, with a
    warning (even with --quiet) that another pair's public object under the same name would
    look the same; with the PIN it is checked against a signature of the private key, and a
    public object of another pair is refused (test_a_bad_token_key_..., its last case)."""
    env = user_env(token, tmp_path)
    checked = jaxcache("keygen", "--public-of", token.uri(), env=env)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    for uri, printed in ((token.uri(**{"pin-source": None}), token.public_text),
                         (token.uri(object="mixed", **{"pin-source": None}), None)):
        bare = jaxcache("-q", "keygen", "--public-of", uri, env=env)
        assert bare.returncode == 0, bare.stderr
        assert bare.stdout.startswith("ed25519:") and len(bare.stdout.splitlines()) == 1
        if printed is not None:
            assert bare.stdout == printed + "\n"
        else:  # the public object of another pair: printed, and said to be unchecked
            assert bare.stdout != token.public_text + "\n"
        [line] = bare.stderr.splitlines()
        assert line.startswith("jaxcache: warning: the public key ") and \
            "not checked against the private key" in line and "pin-source=" in line, line


def test_keygen_public_of_a_key_file_prints_its_pub_line(tmp_path):
    key = tmp_path / "keys" / "ci.key"
    assert jaxcache("keygen", str(key)).returncode == 0
    shown = jaxcache("keygen", "--public-of", str(key))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == Path(f"{key}.pub").read_text().strip()
    both = jaxcache("keygen", "--public-of", str(key), str(tmp_path / "new.key"))
    assert "--public-of makes no key" in both.stderr and both.returncode == 2
    assert not (tmp_path / "new.key").exists()


def test_seal_signs_through_the_token_and_verify_accepts_it(token, filled, tmp_path):
    cache = copy_of(filled, tmp_path / "cache")
    env = user_env(token, tmp_path)
    sealed = jaxcache("seal", str(cache), "--signing-key", token.uri(), env=env)
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    sigs = [p for p in cache.iterdir() if p.name.endswith("-cache.sig")]
    assert sigs and len(sigs) == len([p for p in cache.iterdir() if p.name.endswith("-cache")])
    assert {json.loads(p.read_text())["public_key"] for p in sigs} == {token.public_text}
    verify = jaxcache("verify", str(cache), "--trusted-key", token.public_text, env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("VALID: every entry verifies")
    other = jaxcache("verify", str(cache), "--trusted-key", "ed25519:" + base64.b64encode(
        bytes(32)).decode(), env=env)
    assert other.returncode == 1  # the signatures are the token's, not any key's
    assert no_secret_in(tmp_path, token) > len(sigs)  # the entries, signatures, ledger...


def test_run_sealed_publishes_through_the_token_and_a_reader_hits(token, tmp_path):
    pytest.importorskip("jax")
    env = user_env(token, tmp_path)
    cache = tmp_path / "sealed"
    docs, results = [], []
    for name, who in (("publish", ("--signing-key", token.uri())),
                      ("read", ("--trusted-key", token.public_text))):
        record = tmp_path / f"{name}.json"
        proc = jaxcache("run", "--sealed", *who, "--cache-dir", str(cache), "--record",
                        str(record), "--", sys.executable, JOB, env=env)
        assert proc.returncode == 0, proc.stderr
        docs.append(json.loads(record.read_text()))
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    publish, read = docs
    written = {m["name"] for m in publish["modules"] if m["outcome"] == "written"}
    assert {"jit_f", "jit_g"} <= written, publish["modules"]
    assert publish["seal"]["writes"] and publish["seal"]["rejections"] == []
    assert {m["name"] for m in read["modules"] if m["outcome"] == "hit"} >= {"jit_f", "jit_g"}
    assert read["seal"]["rejections"] == [] and read["seal"]["writes"] == []
    assert results[0]["results"] == results[1]["results"] and results[1]["hits"] >= 2
    for sig in cache.glob("*-cache.sig"):
        assert json.loads(sig.read_text())["public_key"] == token.public_text
    assert no_secret_in(tmp_path, token) > 4  # entries, signatures, records, the ledger


def _bad(token: Token, tmp_path: Path, case: str) -> str:
    """A URI (or its PIN file) that must be refused before anything is written."""
    if case == "missing token":
        return token.uri(token="Nope")
    if case == "wrong PIN":
        wrong = tmp_path / "wrong.pin"
        wrong.write_text("not-the-pin\n")
        wrong.chmod(0o600)
        return token.uri(**{"pin-source": f"file:{wrong}"})
    if case == "pin-value":
        return token.uri(**{"pin-value": token.pin, "pin-source": None})
    if case == "PIN file 0644":
        loose = tmp_path / "loose.pin"
        loose.write_text(token.pin + "\n")
        loose.chmod(0o644)
        return token.uri(**{"pin-source": f"file:{loose}"})
    if case == "library missing":
        return token.uri(**{"module-path": str(tmp_path / "no-such-lib.so")})
    if case == "library writable by others":
        lib = tmp_path / "libs" / "libsofthsm2.so"
        lib.parent.mkdir()
        shutil.copy(LIBRARY, lib)
        lib.chmod(0o666)
        return token.uri(**{"module-path": str(lib)})
    if case == "link in a shared folder":
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        (shared / "p11.so").symlink_to(LIBRARY)
        return token.uri(**{"module-path": str(shared / "p11.so")})
    if case == "RSA key":
        return token.uri(object="rsa")
    if case == "no such object":
        return token.uri(object="nothing-here")
    if case == "public key of another pair":
        return token.uri(object="mixed")
    raise AssertionError(case)


REFUSED = {"missing token": "no token labelled 'Nope'", "wrong PIN": "CKR_PIN_INCORRECT",
           "pin-value": "pin-value is refused", "PIN file 0644": "mode 0600 (it is",
           "library missing": "no such PKCS#11 library",
           "library writable by others": "writable by group or others",
           "link in a shared folder": "which others can modify or replace",
           "RSA key": "has key type RSA, not Ed25519",
           "no such object": "key 'nothing-here' on token 'T'",
           "public key of another pair": "not one pair"}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_token_key_is_one_line_and_nothing_is_written(token, filled, tmp_path, case):
    uri = _bad(token, tmp_path, case)
    env = user_env(token, tmp_path)
    cache = copy_of(filled, tmp_path / "cache")
    # SoftHSM2 itself touches its token files (their mtimes) on every session: only their
    # names are jaxcache's business there
    before = listing(tmp_path), set(listing(token.tokens))
    sealed = jaxcache("seal", str(cache), "--signing-key", uri, env=env)
    assert REFUSED[case] in one_line(sealed), case
    ran = jaxcache("run", "--sealed", "--signing-key", uri, "--cache-dir",
                   str(tmp_path / "new-cache"), "--record", str(tmp_path / "run.json"), "--",
                   sys.executable, "-c", "pass", env=env)
    assert REFUSED[case] in one_line(ran), case
    # no signature, no cache dir, no record; no object added to the token
    assert (listing(tmp_path), set(listing(token.tokens))) == before
    shown = jaxcache("keygen", "--public-of", uri, env=env)  # with the PIN: checked
    assert REFUSED[case] in one_line(shown), case
    assert not shown.stdout


def test_a_library_link_in_a_private_folder_is_followed(token, tmp_path):
    own = tmp_path / "lib"
    own.mkdir(mode=0o700)
    (own / "p11.so").symlink_to(LIBRARY)
    shown = jaxcache("keygen", "--public-of", token.uri(**{"module-path": str(own / "p11.so")}),
                     env=user_env(token, tmp_path))
    assert shown.returncode == 0 and shown.stdout == token.public_text + "\n", shown.stderr
