"""The shell examples of README.md and docs/**/*.md, run: no page can drift from what jaxcache does.

Convention (README.md, "Set up"; docs/index.md): a ```console block is a shell session. `$ CMD`
lines are run by bash, in order, in a fresh directory holding a link to the bundled examples/,
with this checkout's venv first on PATH and HOME inside it; the lines up to the next `$ ` are the
output expected (stdout and stderr together). A line `...` stands for any lines, `...` inside a
line for any text. Numbers, long hex digests and ed25519 keys match any value (timings, sizes,
keys differ per run), runs of spaces match any run (column widths follow the values), and
the directory and HOME print as /tmp/readme and /home/alice. A block right after
`<!-- readme-test: skip: REASON -->` is skipped with that reason; one right after
`<!-- readme-test: jax <= X.Y: REASON -->` is run only where the installed JAX is of line
X.Y or older (what it shows changed after), and skipped with that reason elsewhere; one right
after `<!-- readme-test: tmp on /: REASON -->` only where /tmp is no mount of its own (the
filesystem rows it shows are those of /, not of a tmpfs /tmp, as on Debian 13).
HOME starts as that of someone who has run jaxcache before on this install: the build's digests
are kept in its state folder (fingerprint/memo.py), so no page's output starts with the one-time
"hashing ... once per install" line (docs/reference/fingerprint.md shows it).

Every page of docs/ is listed in docs/index.md, and every relative link of these pages (a file,
and the heading its #anchor names) resolves.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import paths
from support.users import isolation

ROOT = paths.CHECKOUT
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = (README, *sorted(DOCS.rglob("*.md")))
# what a ``` block of a page may be besides a console session; docs/ also hold policies,
# schemas and commands to copy (```sh: not run, no output shown)
KINDS = {README: ("console", "python", "text")}
DOC_KINDS = ("console", "python", "text", "toml", "json", "dockerfile", "sh")
SKIP = re.compile(r"<!-- readme-test: skip: (.+?) -->\s*$")
UP_TO = re.compile(r"<!-- readme-test: jax <= (\d+)\.(\d+): (.+?) -->\s*$")
TMP_ON_ROOT = re.compile(r"<!-- readme-test: tmp on /: (.+?) -->\s*$")


def _skip_reason(before: str) -> str | None:
    """Why the block after this line is not run here, or None."""
    skip = SKIP.match(before)
    if skip:
        return skip.group(1)
    tmp_on_root = TMP_ON_ROOT.match(before)
    if tmp_on_root:
        return f"/tmp is a mount of its own here: {tmp_on_root.group(1)}" if os.path.ismount(
            "/tmp") else None
    up_to = UP_TO.match(before)
    if up_to is None:
        return None
    from jaxcache import jaxcompat
    from jaxcache.jaxcompat import versions

    jax = jaxcompat.installed_version("jax")
    line = (int(up_to.group(1)), int(up_to.group(2)))
    if jax is not None and versions.parse(jax)[:2] <= line:
        return None
    return f"shows JAX <= {line[0]}.{line[1]} (JAX {jax} here): {up_to.group(3)}"
SHOWN_DIR, SHOWN_HOME = "/tmp/readme", "/home/alice"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def blocks(page: Path = README) -> list[tuple[int, str, str | None]]:
    """(line number, block text, skip reason) of every ```console block of the page."""
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            end = lines.index("```", i + 1)
            before = lines[i - 1] if i else ""
            found.append((i + 1, "\n".join(lines[i + 1:end]), _skip_reason(before)))
            i = end
        i += 1
    return found


def session(text: str) -> list[tuple[str, list[str]]]:
    """The block as (command, expected output lines) pairs."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            # /tmp/readme is how the output shows the directory: a command using it would
            # share state between runs (use $PWD or a relative path)
            assert SHOWN_DIR not in line and SHOWN_HOME not in line, line
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"output before the first `$ ` command: {line!r}")
    return steps


def normalize(line: str) -> str:
    line = re.sub(r"ed25519:[A-Za-z0-9+/=]+", "ed25519:KEY", line)
    line = re.sub(r"[0-9a-f]{8,}", "HEX", line)
    line = re.sub(r"\d+(\.\d+)?", "0", line)
    return re.sub(r"\s+", " ", line).strip()


def pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            body = ".*".join(re.escape(p) for p in normalize(line).split("..."))
            parts.append(body + r"\n")
    return re.compile("".join(parts), re.DOTALL)


# A module row of `run` (and explain): its name, outcome, and compile seconds
_ROW = re.compile(r"^\s*(jit_\w+)\s+(written|skipped|hit)\s+(?:compile|load)\s+([\d.]+) s")
_BELOW = re.compile(r"below the ([\d.]+) s compile-time threshold")


def _other_side(expected: list[str], actual: str) -> str | None:
    """The modules whose compile time fell on the other side of the compile-time threshold
    here than in the README, each judged consistently with the time jaxcache printed (a
    row skipped 'below the T s threshold' compiled under T here; a row written, at or over
    it); None if anything else differs. A machine's speed decides which side a module
    falls on, never whether jaxcache applies and reports JAX's rule right."""
    shown = {m.group(1): m.group(2) for m in map(_ROW.match, expected) if m}
    moved = []
    for text in actual.splitlines():
        m = _ROW.match(text)
        if not m or shown.get(m.group(1)) in (None, m.group(2)):
            continue
        name, outcome, seconds = m.group(1), m.group(2), float(m.group(3))
        below = _BELOW.search(text)
        under = outcome == "skipped" and below and seconds < float(below.group(1))
        if under or (outcome == "written" and seconds >= 1.0) or (  # JAX's default
                outcome == "hit" and shown[name] == "skipped"):  # written by a slower run
            moved.append(f"{name} ({seconds:.2f} s)")
        else:
            return None  # a difference the machine's speed does not explain
    return ", ".join(moved) or None


_MEMO: list[bytes] = []


def _kept_digests(home: Path) -> None:
    """The fingerprint memo of this install, as a user who ran jaxcache once has it."""
    from jaxcache import fingerprint
    from jaxcache.fingerprint import memo

    if not _MEMO:
        with tempfile.TemporaryDirectory() as state:
            fingerprint.current(state=state, fresh=True)
            _MEMO.append((Path(state) / memo.NAME).read_bytes())
    folder = home / ".local" / "state" / "jaxcache"
    folder.mkdir(parents=True, mode=0o700)
    for up in (folder.parent, folder.parent.parent):
        up.chmod(0o700)
    (folder / memo.NAME).write_bytes(_MEMO[0])
    (folder / memo.NAME).chmod(0o600)


def run_session(steps: list[tuple[str, list[str]]], work: Path) -> list[str]:
    """Run the commands in one bash, each output cut out by a marker line."""
    marker = "@@readme-step@@"
    script = ["exec 2>&1"]
    for command, _ in steps:
        script.append(f"__s=$?; echo {marker}; (exit $__s)")
        script.append(command)
    home = work / "home" / "alice"
    home.mkdir(parents=True)
    _kept_digests(home)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home),
           "LANG": "C.UTF-8", "JAX_PLATFORMS": "cpu", "TERM": "dumb", "NO_COLOR": "1",
           "COLUMNS": "200", **isolation()}
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    me, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    out = done.stdout.replace(str(home), SHOWN_HOME).replace(str(work), SHOWN_DIR)
    if me != "root":  # the README shows root's view (CI runs as root)
        out = re.sub(rf"\b{re.escape(me)}\b", "root", out)
        out = re.sub(rf"\b{re.escape(group)}\b", "root", out)
    return out.split(f"{marker}\n")[1:]


@pytest.mark.parametrize("page, line, text, skip",
                         [pytest.param(page, *b, id=f"{_name(page)}:{b[0]}")
                          for page in PAGES for b in blocks(page)])
def test_readme_console_block(page: Path, line: int, text: str, skip: str | None):
    where = f"{_name(page)} line {line}"
    if skip:
        pytest.skip(f"{where}: {skip}")
    steps = session(text)
    work = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chmod(work, 0o755)  # as `mkdir` makes it, which the shown audits list
        (work / "examples").symlink_to(ROOT / "examples")
        outputs = run_session(steps, work)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    assert len(outputs) == len(steps), outputs
    for (command, expected), actual in zip(steps, outputs, strict=True):
        got = "".join(normalize(a) + "\n" for a in actual.splitlines())
        if not pattern(expected).fullmatch(got) and (other := _other_side(expected, actual)):
            pytest.skip(f"{where}: this machine compiled {other} on the other side of JAX's "
                        "compile-time threshold than the machine the page shows, and jaxcache "
                        "said so (what follows from it differs)")
        assert pattern(expected).fullmatch(got), (
            f"{where}: `$ {command}` printed:\n{actual}\n"
            f"expected (numbers, hex and spacing aside):\n" + "\n".join(expected))


@pytest.mark.parametrize("page", [pytest.param(page, id=_name(page)) for page in PAGES])
def test_every_shell_block_is_run_or_says_why_not(page: Path):
    """A ``` block with `$ ` commands must be a console block (run), else it drifts unseen."""
    lines, kinds = page.read_text().splitlines(), KINDS.get(page, DOC_KINDS)
    fence = [i for i, text in enumerate(lines) if text.startswith("```")]
    for start, end in zip(fence[::2], fence[1::2], strict=True):
        kind, where = lines[start][3:].strip(), f"{_name(page)} line {start + 1}"
        if any(text.startswith("$ ") for text in lines[start + 1:end]):
            assert kind == "console", f"{where}: `$ ` commands in ```{kind}"
        assert kind in kinds, f"{where}: say what the block is (```{', '.join(kinds)})"


def test_most_examples_really_run():
    """Most examples really run: the README's quick start, and the manual's in docs/."""
    assert len([b for b in blocks() if not b[2]]) >= 2  # the quick start
    assert len([b for page in PAGES for b in blocks(page) if not b[2]]) >= 10


def test_docs_index_lists_every_page():
    """docs/index.md names every page of docs/ by a link, and links no page that is not."""
    listed = set(re.findall(r"\]\(((?:[\w-]+/)*[\w.-]+\.md)\)", (DOCS / "index.md").read_text()))
    pages = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")}
    assert pages - listed == set(), f"docs/index.md does not list {sorted(pages - listed)}"
    assert listed - pages == set(), f"docs/index.md lists missing {sorted(listed - pages)}"


def _anchors(page: Path) -> set[str]:
    """The #anchors of a page's headings, as GitHub makes them."""
    found: set[str] = set()
    fenced = False
    for text in page.read_text().splitlines():
        fenced ^= text.startswith("```")
        if fenced or not text.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", text.lstrip("#").strip().lower()).replace(" ", "-")
        n, anchor = 0, slug
        while anchor in found:  # a repeated heading gets -1, -2, ...
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


@pytest.mark.parametrize("page", [pytest.param(page, id=_name(page)) for page in PAGES])
def test_relative_links_resolve(page: Path):
    """A text moved between the README and docs/ keeps links that lead somewhere."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{_name(page)}: the link to {target} leads nowhere"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{_name(page)}: no heading #{anchor} in {path}"


def test_the_readme_is_a_front_door():
    """The README is read in five minutes: at most 180 lines, no prose line over 120
    characters, and the two set-up commands on its first screen (the first 30 lines)."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 180, f"README.md has {len(lines)} lines: move detail into docs/"
    fenced, long = False, []
    for number, text in enumerate(lines, 1):
        if text.startswith("```"):
            fenced = not fenced
        elif not fenced and len(text) > 120:
            long.append(number)
    assert long == [], f"README.md lines over 120 characters outside code blocks: {long}"
    first_screen = "\n".join(lines[:30])
    assert "$ make demo" in first_screen and "$ make test" in first_screen


def test_no_page_speaks_of_issue_numbers():
    """A reader cannot look up this project's issues: no page names one ("issue 12",
    "issues 3 and 4"); another project's is a link to it (jax-ml/jax#18750)."""
    said = [f"{_name(page)}: {m.group(0)!r}" for page in PAGES
            for m in re.finditer(r"\bissues? #?\d+", page.read_text(), flags=re.IGNORECASE)]
    assert said == []
