"""The CI files of the sealed flow (docs/how-to/ci.md): action.yml,
ci-templates/github/jax-cache.yml and ci-templates/gitlab/jaxcache.gitlab-ci.yml.

Checked four ways: the linters a CI author would run (zizmor offline, check-jsonschema with the
vendored GitHub and GitLab schemas), the safety properties that a later edit could break (read
from the parsed YAML), the jaxcache commands and flags the files call (against the real CLI's
--help), and the scripts themselves, run end to end with the real CLI and JAX: the action's
steps in order as the runner would (actions/cache simulated by a folder of saved caches), and the
GitLab jobs' scripts as the runner would concatenate them.
"""

from __future__ import annotations

import base64
import copy
import getpass
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import builds, paths
from support.jobs import environ_without
from support.sigstore_stack import SAFE_TABLE

REPO = paths.CHECKOUT
ACTION = REPO / "action.yml"
WORKFLOW = REPO / "ci-templates" / "github" / "jax-cache.yml"
GITLAB = REPO / "ci-templates" / "gitlab" / "jaxcache.gitlab-ci.yml"
TWO_JITS = REPO / "tests" / "programs" / "two_jits.py"
BIN = Path(sys.executable).parent  # the venv's bin (not resolved: that is the base Python's)
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
DEFAULT_BRANCH_IF = ("github.event_name == 'push' && github.ref == "
                     "format('refs/heads/{0}', github.event.repository.default_branch)")
TIMEOUT_S = 600


# -- loading -------------------------------------------------------------------------------

class Reference(list):
    """GitLab's `!reference [.job, key]`."""


class _GitLabLoader(yaml.SafeLoader):
    pass


_GitLabLoader.add_constructor(
    "!reference", lambda loader, node: Reference(loader.construct_sequence(node)))


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=_GitLabLoader)  # noqa: S506 (a SafeLoader)


def triggers(workflow: dict) -> dict:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    return {on: None} if isinstance(on, str) else dict.fromkeys(on) if isinstance(on, list) \
        else on


def tool_env() -> dict:
    """No token: zizmor must not go online, whatever this machine has in its environment."""
    return {k: v for k, v in os.environ.items()
            if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}


def run_tool(*argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=REPO,
                          env=tool_env(), timeout=TIMEOUT_S, **kw)


# -- the linters ---------------------------------------------------------------------------

def test_zizmor_offline_finds_nothing():
    # default persona and configuration; --strict-collection: a file zizmor cannot parse is an
    # error, not a warning and a silent "no findings"
    names = ("action.yml", "ci-templates/github/jax-cache.yml")  # relative to the repository: cwd
    done = run_tool(BIN / "zizmor", "--offline", "--strict-collection", "--format", "json",
                    *names)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == [], done.stdout
    for name in names:
        assert f"completed {name}" in done.stderr, done.stderr


def test_zizmor_really_audits_the_action(tmp_path):
    """The same call on a copy with an expression in a script finds the injection."""
    text = ACTION.read_text()
    marker = 'echo "jaxcache: signing as $public"'
    assert marker in text
    (tmp_path / "action.yml").write_text(text.replace(marker, 'echo "${{ inputs.key-prefix }}"'))
    done = run_tool(BIN / "zizmor", "--offline", "--strict-collection", "--format", "json",
                    tmp_path / "action.yml")
    assert done.returncode != 0
    assert {f["ident"] for f in json.loads(done.stdout)} == {"template-injection"}


@pytest.mark.parametrize("schema, path, extra", [
    ("vendor.github-workflows", WORKFLOW, ()),
    ("vendor.github-actions", ACTION, ()),
    # the gitlab-ci transform is what teaches the YAML loader GitLab's `!reference` tag: it
    # resolves nothing and suppresses nothing (without it the file does not even parse)
    ("vendor.gitlab-ci", GITLAB, ("--data-transform", "gitlab-ci")),
], ids=["workflow", "action", "gitlab"])
def test_check_jsonschema(schema, path, extra):
    done = run_tool(BIN / "check-jsonschema", "--builtin-schema", schema, *extra, path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


# -- safety properties: GitHub -------------------------------------------------------------

def action_steps() -> list[dict]:
    return load(ACTION)["runs"]["steps"]


def uses_action(step: dict) -> bool:
    """A step of the workflow that calls this repository's action."""
    uses = step.get("uses", "")
    return uses.split("@")[0].endswith("/jaxcache") or uses in ("./", ".")


def test_no_pull_request_target_anywhere():
    for path in (ACTION, WORKFLOW, GITLAB):
        assert "pull_request_target" not in re.sub(r"#.*", "", path.read_text()), path
    assert "pull_request_target" not in triggers(load(WORKFLOW))
    assert set(triggers(load(WORKFLOW))) == {"push", "pull_request"}


def test_action_scripts_hold_no_expression_and_take_inputs_through_env():
    for step in action_steps():
        if "run" in step:
            assert "${{" not in step["run"], step["name"]
            assert "GITHUB_ENV" not in step["run"] and "GITHUB_PATH" not in step["run"]
            assert step["shell"] == "bash"
            for name, value in step.get("env", {}).items():
                # one plain reference per variable, nothing computed in a script's text
                assert re.fullmatch(r"\$\{\{ (inputs|steps\.[\w-]+\.outputs)\.[\w-]+"
                                    r"( != '')? \}\}", value), (step["name"], name, value)
        else:
            assert SHA_PIN.match(step["uses"]), step["uses"]


def test_action_signing_key_only_in_publish_and_cache_save_only_in_save():
    steps = action_steps()
    for step in steps:
        text = json.dumps(step)
        raw_key = re.search(r"inputs\.signing-key(?! != '')", text)
        if raw_key:  # the secret itself (not whether it was given) reaches one step only
            assert step.get("if") == "inputs.mode == 'publish'", step["name"]
        if step.get("uses", "").startswith("actions/cache/save@"):
            assert step["if"].startswith("inputs.mode == 'save' && "), step
    assert sum(bool(re.search(r"inputs\.signing-key(?! != '')", json.dumps(s)))
               for s in steps) == 1
    assert [s["uses"].split("@")[0] for s in steps if "uses" in s] == [
        "actions/cache/restore", "actions/cache/save"]


def test_workflow_publish_job_is_default_branch_only_and_consumers_never_hold_the_key():
    workflow = load(WORKFLOW)
    assert workflow["permissions"] == {}
    publishers, consumers = [], []
    for name, job in workflow["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, name
        modes = [s.get("with", {}).get("mode") for s in job["steps"] if uses_action(s)]
        (publishers if {"publish", "save"} & set(modes) else consumers).append((name, job))
        for step in job["steps"]:
            if "run" in step:
                assert "${{" not in step["run"], (name, step)
            else:
                assert SHA_PIN.match(step["uses"]), step["uses"]
            if step["uses" if "uses" in step else "run"].startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
    assert publishers and consumers
    for name, job in publishers:
        assert " ".join(job["if"].split()) == DEFAULT_BRANCH_IF, name
        assert job.get("environment"), name
        modes = [s["with"]["mode"] for s in job["steps"] if uses_action(s)]
        assert modes == ["publish", "save"], name  # the save comes after the publish
    for name, job in consumers:
        text = json.dumps(job)
        assert "secrets." not in text and "signing-key" not in text, name
        assert "actions/cache/save" not in text, name
        assert "environment" not in job, name
        assert "pull_request" in job["if"], name
        assert {s["with"]["mode"] for s in job["steps"] if uses_action(s)} == {"consume"}
    # the one secret is the signing key, handed to the publish step only
    for name, job in workflow["jobs"].items():
        for step in job["steps"]:
            text = json.dumps(step)
            if "secrets." in text:
                assert (name, job) in publishers and step["with"]["mode"] == "publish"
                assert set(re.findall(r"secrets\.[\w-]+", text)) == {
                    "secrets.JAXCACHE_SIGNING_KEY"}
                assert step["with"]["signing-key"] == "${{ secrets.JAXCACHE_SIGNING_KEY }}"


# -- safety properties: GitLab -------------------------------------------------------------

def _merge(base, over):
    """GitLab's `extends`: hashes merge deeply, anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def gitlab_jobs() -> dict[str, dict]:
    """Every job, hidden ones too, with `extends` merged and `!reference` resolved."""
    doc = load(GITLAB)
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and k not in (
        "variables", "default", "workflow", "include", "stages")}

    def extended(name, seen=()):
        job = jobs[name]
        parents = job.get("extends", [])
        out = {}
        for parent in [parents] if isinstance(parents, str) else parents:
            assert parent not in seen
            out = _merge(out, extended(parent, (*seen, name)))
        return _merge(out, {k: v for k, v in job.items() if k != "extends"})

    def resolve(value):
        if isinstance(value, Reference):
            target = jobs[value[0]]
            for key in value[1:]:
                target = target[key]
            return resolve(target)
        if isinstance(value, list):  # a referenced list is spliced in, as GitLab flattens it
            out = []
            for item in value:
                (out.extend if isinstance(item, Reference) else out.append)(resolve(item))
            return out
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    return {name: resolve(extended(name)) for name in jobs}


def script_of(job: dict) -> str:
    return "\n".join(job.get("before_script", []) + job.get("script", []))


def test_gitlab_only_the_default_branch_pushes_the_cache():
    doc = load(GITLAB)
    assert "cache" not in doc and "cache" not in doc.get("default", {})  # no cache for all jobs
    jobs = gitlab_jobs()
    pushers, pullers = [], []
    for name, job in jobs.items():
        if "cache" not in job:
            continue
        caches = job["cache"] if isinstance(job["cache"], list) else [job["cache"]]
        policies = {c.get("policy", "pull-push") for c in caches}  # GitLab's default pushes
        assert all(c.get("unprotect") is True for c in caches), name  # see the file's header
        if policies & {"pull-push", "push"}:
            pushers.append(name)
            rules = job.get("rules")
            assert rules, name
            for rule in rules:  # every rule: one without the condition would push elsewhere
                assert "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH" in rule["if"], (name, rule)
                assert rule.get("when", "on_success") != "never"
            assert job["environment"]["name"] == "jax-cache", name
            assert job["variables"]["JAXCACHE_CI_ROLE"] == "publish"
        else:
            assert policies == {"pull"}, name
            pullers.append(name)
    assert set(pushers) == {".jaxcache-publish", ".jaxcache-publish-keyless", "jax-publish"}
    assert {"jax-test", ".jaxcache-consume", ".jaxcache-base"} <= set(pullers)
    # keyless: only the keyless publisher requests an OIDC token, for Sigstore alone
    assert [n for n, job in jobs.items() if "id_tokens" in job] == [".jaxcache-publish-keyless"]
    assert jobs[".jaxcache-publish-keyless"]["id_tokens"] == {
        "SIGSTORE_ID_TOKEN": {"aud": "sigstore"}}
    for name in pullers:
        text = json.dumps(jobs[name])
        assert "--signing-key" not in text and "JAXCACHE_SIGNING_KEY" not in text, name
        assert "--identity" not in text and "SIGSTORE_ID_TOKEN" not in text, name
        assert jobs[name].get("variables", {}).get("JAXCACHE_CI_ROLE", "consume") == "consume"
        assert "environment" not in jobs[name], name
    publish = script_of(jobs["jax-publish"])
    assert publish.index("jaxcache run ") > publish.index("export JAXCACHE_CI_KEY_FILE")
    assert publish.index("jaxcache seal ") > publish.index("jaxcache run ")
    assert "jaxcache verify --strict" in script_of(jobs["jax-test"])


# -- the commands and flags the files call -------------------------------------------------

COMMAND = re.compile(
    r"""(?:^|;|&&|\|\||\bthen|\bif|\belif|\bdo|!|\()\s*(?:jaxcache|"\$JAXCACHE(?:_CLI|_CI_BIN)?"|"\$jaxcache_bin")
        ((?:\s+-[-\w]+)*)\s+([a-z][a-z-]*)\b([^\n]*)""", re.X)
FLAG = re.compile(r"(?<![\w-])--?[a-zA-Z][-\w]*")


def shell_texts() -> list[str]:
    """Every script: the action's run blocks, the workflow's, the GitLab template's."""
    texts = [s["run"] for s in action_steps() if "run" in s]
    texts += [s["run"] for j in load(WORKFLOW)["jobs"].values() for s in j["steps"] if "run" in s]
    texts += [script_of(j) for j in gitlab_jobs().values()]
    return [t.replace("\\\n", " ") for t in texts]


def invocations() -> dict[str, set[str]]:
    """{subcommand: flags} of every jaxcache call; "" for the options before a subcommand.
    The flags in the run-args and trust-args the files build count for `run` (and the trust
    flags for verify and seal too, which receive them)."""
    calls: dict[str, set[str]] = {}
    for text in shell_texts():
        for line in text.splitlines():
            line = line.strip()
            for m in COMMAND.finditer(line):
                before, sub, rest = m.groups()
                calls.setdefault("", set()).update(FLAG.findall(before))
                if sub in ("run",):  # the job's own flags come after `--`
                    rest = rest.split(" -- ")[0]
                calls.setdefault(sub, set()).update(
                    f for f in FLAG.findall(rest) if f.startswith("--"))
            if re.search(r"(run-args=|JAXCACHE_RUN_ARGS=)", line):
                calls.setdefault("run", set()).update(FLAG.findall(line.split("=", 1)[1]))
            if re.search(r"trust_args=", line):
                for sub in ("run", "verify", "seal"):
                    calls.setdefault(sub, set()).update(FLAG.findall(line))
    for m in re.finditer(r"jaxcache\s+(-\w)\b", "\n".join(shell_texts())):
        calls[""].add(m.group(1))  # `jaxcache -V`
    return calls


def test_every_jaxcache_command_and_flag_the_files_call_exists():
    calls = invocations()
    assert {"run", "verify", "seal"} <= set(calls), calls
    assert {"--strict", "--policy"} <= calls["verify"]
    assert {"--sealed", "--cache-dir", "--signing-key", "--policy", "--trusted-key"} <= \
        calls["run"]
    missing = []
    for sub, flags in sorted(calls.items()):
        argv = [BIN / "jaxcache", *([sub] if sub else []), "--help"]
        done = run_tool(*argv)
        if done.returncode != 0:
            missing.append(f"jaxcache {sub} --help: exit {done.returncode}")
            continue
        for flag in sorted(flags):
            if not re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", done.stdout):
                missing.append(f"jaxcache {sub} {flag}")
    assert not missing, missing


def test_the_cache_keys_take_the_build_and_cpu_from_jaxcache_fingerprint():
    """No script of its own reads the CPU or hashes jaxlib: `jaxcache fingerprint --short`
    does, in the action and in the GitLab template."""
    assert "--short" in invocations()["fingerprint"]
    for path in (ACTION, GITLAB):
        assert "fingerprint --short" in path.read_text(), path
    for text in shell_texts():
        assert "/proc/cpuinfo" not in text and 'version("jaxlib")' not in text, text[:200]


# -- the action, run as the runner runs it -------------------------------------------------

def gh_eval(expr: str, ctx: dict):
    """The few GitHub expressions the action uses: inputs.X, steps.ID.outputs.X, string
    literals, ==, !=, &&, ||, !."""
    def ref(m):
        return f"_get({m.group(0)!r})"

    code = re.sub(r"'[^']*'|(?:inputs|steps)\.[\w.-]+",
                  lambda m: m.group(0) if m.group(0).startswith("'") else ref(m), expr)
    code = code.replace("&&", " and ").replace("||", " or ")
    code = re.sub(r"!(?!=)", " not ", code)

    def _get(path):
        node = ctx
        for part in path.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node if isinstance(node, str) else ""

    return eval(code, {"__builtins__": {}}, {"_get": _get})  # noqa: S307 (own expressions)


def gh_render(value: str, ctx: dict) -> str:
    m = re.fullmatch(r"\$\{\{(.*)\}\}", value.strip())
    if not m:
        assert "${{" not in value
        return value
    out = gh_eval(m.group(1), ctx)
    return ("true" if out else "false") if isinstance(out, bool) else str(out)


class Runner:
    """One job's runner: its $RUNNER_TEMP, and the repository's caches (a folder per key)."""

    def __init__(self, root: Path, store: Path, workspace: Path, event: str, ref: str):
        self.root, self.store, self.workspace = root, store, workspace
        # one path for every job, as on hosted runners (/home/runner/work/_temp), emptied at
        # the start of each: the cache directory is then at the same path for all of them
        self.temp = root.parent / "runner-temp"
        shutil.rmtree(self.temp, ignore_errors=True)
        self.temp.mkdir(mode=0o755)
        root.mkdir()
        (root / "event.json").write_text(json.dumps({"repository": {"default_branch": "main"}}))
        self.env = {
            **environ_without("JAX_", "JAXCACHE_", "XLA_", "GITHUB_", "RUNNER_"),
            "HOME": str(root / "home"), "XDG_STATE_HOME": str(root / "home" / "state"),
            "XDG_CONFIG_HOME": str(root / "home" / "config"), "JAX_PLATFORMS": "cpu",
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event,
            "GITHUB_REF": ref, "GITHUB_EVENT_PATH": str(root / "event.json"),
            "GITHUB_WORKSPACE": str(workspace), "GITHUB_ACTION_PATH": str(REPO),
            "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "1", "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64", "RUNNER_TEMP": str(self.temp), "ImageOS": "ubuntu24",
            "ImageVersion": "20261201.1"}
        (root / "home").mkdir(mode=0o700)

    def action(self, **given: str) -> tuple[int, dict, str]:
        """The action's steps in order; (exit status, outputs, log)."""
        spec = load(ACTION)
        inputs = {k: v.get("default", "") for k, v in spec["inputs"].items()}
        inputs.update({"python": sys.executable, "install": "false", **given})
        ctx: dict = {"inputs": inputs, "steps": {}}
        log = []
        for step in spec["runs"]["steps"]:
            if "if" in step and not gh_eval(step["if"], ctx):
                continue
            outputs: dict[str, str] = {}
            if "uses" in step:
                self.cache_action(step["uses"].split("@")[0],
                                  {k: gh_render(v, ctx) for k, v in step["with"].items()},
                                  outputs)
            else:
                out_file = self.temp / "output"
                out_file.write_text("")
                env = {**self.env, "GITHUB_OUTPUT": str(out_file),
                       **{k: gh_render(v, ctx) for k, v in step.get("env", {}).items()}}
                done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                                       step["run"]], env=env, cwd=self.workspace, text=True,
                                      capture_output=True, timeout=TIMEOUT_S)
                log.append(f"== {step['name']}\n{done.stdout}{done.stderr}")
                if done.returncode != 0:
                    return done.returncode, {}, "\n".join(log)
                for line in out_file.read_text().splitlines():
                    name, _, value = line.partition("=")
                    outputs[name] = value
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": outputs}
        result = {k: gh_render(v["value"], ctx) for k, v in spec["outputs"].items()}
        return 0, result, "\n".join(log)

    def cache_action(self, name: str, given: dict, outputs: dict) -> None:
        path = Path(given["path"])
        if name == "actions/cache/restore":
            keys = sorted(self.store.iterdir(), key=lambda p: p.stat().st_mtime_ns)
            exact = [k for k in keys if k.name == given["key"]]
            prefixed = [k for k in keys if k.name.startswith(given["restore-keys"])]
            hit = (exact or prefixed[-1:] or [None])[0]
            if hit is not None:
                shutil.copytree(hit, path, symlinks=True)
                outputs["cache-matched-key"] = hit.name
        else:
            assert name == "actions/cache/save"
            assert not (self.store / given["key"]).exists()  # caches are immutable
            shutil.copytree(path, self.store / given["key"], symlinks=True)

    def job_step(self, outputs: dict, *cmd: str) -> subprocess.CompletedProcess:
        """A step of the job, as the workflow writes it: "$JAXCACHE" run $RUN_ARGS -- CMD."""
        env = {**self.env, "JAXCACHE": outputs["jaxcache"], "RUN_ARGS": outputs["run-args"]}
        return subprocess.run(["bash", "-c", '"$JAXCACHE" run $RUN_ARGS -- "$@"', "step", *cmd],
                              env=env, cwd=self.workspace, text=True, capture_output=True,
                              timeout=TIMEOUT_S)


@pytest.fixture
def keys(tmp_path):
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    done = subprocess.run([BIN / "jaxcache", "keygen", "-q", folder / "ci.key"],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    public = (folder / "ci.key.pub").read_text().strip()
    return folder / "ci.key", public


def write_policy(folder: Path, public: str) -> None:
    (folder / ".jaxcache").mkdir(parents=True)
    (folder / ".jaxcache" / "policy.toml").write_text(
        f'trusted_keys = [{{ holder = "{getpass.getuser()}", key = "{public}" }}]\n')


def plant(directory: Path) -> None:
    """What a cache poisoner writes: an entry with no signature."""
    (directory / f"jit_f-{'ab' * 32}-cache").write_bytes(b"\x7fELF not signed by anyone")


def hits(done: subprocess.CompletedProcess) -> int:
    return json.loads(done.stdout.strip().splitlines()[-1])["hits"]


def test_the_action_publishes_and_consumes_a_sealed_cache(tmp_path, keys):
    key_file, public = keys
    workspace = tmp_path / "ws"
    write_policy(workspace, public)
    store = tmp_path / "caches"
    store.mkdir()
    job = str(TWO_JITS)

    # the publisher: a push to main
    pub = Runner(tmp_path / "publish", store, workspace, "push", "refs/heads/main")
    rc, out, log = pub.action(mode="publish", policy=".jaxcache/policy.toml",
                              **{"signing-key": key_file.read_text()})
    assert rc == 0, log
    assert out["gate"] == "empty" and out["restored-key"] == ""
    assert "--signing-key" in out["run-args"] and out["cache-key"].startswith(
        out["cache-key-prefix"]) and out["cache-key"].endswith("-7-1")
    assert key_file.read_text() not in log
    done = pub.job_step(out, sys.executable, job)
    assert done.returncode == 0, done.stderr
    rc, saved, log = pub.action(mode="save")
    assert rc == 0, log
    assert saved["saved"] == "true"
    assert not (pub.temp / "jaxcache-signing").exists()  # the key is gone after the save
    (cache,) = store.iterdir()
    assert cache.name == out["cache-key"]
    entries = sorted(p.name for p in cache.iterdir() if p.name.endswith("-cache"))
    assert entries and all((cache / f"{e}.sig").exists() for e in entries)

    # a pull request restores it and hits, read-only
    pr = Runner(tmp_path / "pr", store, workspace, "pull_request", "refs/pull/1/merge")
    rc, out, log = pr.action(mode="consume", policy=".jaxcache/policy.toml")
    assert rc == 0, log
    assert out["gate"] == "passed" and out["restored-key"] == cache.name
    assert "--signing-key" not in out["run-args"]
    done = pr.job_step(out, sys.executable, job)
    assert done.returncode == 0, done.stderr
    assert hits(done) >= 2

    # a consumer never holds the key; a publisher signs only with a key the policy trusts
    rc, _, log = Runner(tmp_path / "pr2", store, workspace, "pull_request", "x").action(
        mode="consume", policy=".jaxcache/policy.toml", **{"signing-key": "x"})
    assert rc == 1 and "signing-key is for mode publish only" in log
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    subprocess.run([BIN / "jaxcache", "keygen", "-q", other / "k"], check=True,
                   capture_output=True)
    rc, _, log = Runner(tmp_path / "pub2", store, workspace, "push", "refs/heads/main").action(
        mode="publish", policy=".jaxcache/policy.toml",
        **{"signing-key": base64.b64encode((other / "k").read_bytes()).decode()})
    assert rc == 1 and "is not in the policy or trusted-key" in log
    rc, _, log = Runner(tmp_path / "pub3", store, workspace, "pull_request_target",
                        "refs/heads/main").action(
        mode="publish", policy=".jaxcache/policy.toml", **{"signing-key": "x"})
    assert rc == 1 and "not pull_request_target" in log

    # someone writes an unsigned entry into the cache source
    plant(cache)
    rc, _, log = Runner(tmp_path / "pr3", store, workspace, "pull_request", "x").action(
        mode="consume", policy=".jaxcache/policy.toml")
    assert rc == 1 and "::error title=jaxcache gate::" in log and "UNSIGNED" in log
    report = Runner(tmp_path / "pr4", store, workspace, "pull_request", "x")
    rc, out, log = report.action(mode="consume", policy=".jaxcache/policy.toml", gate="report")
    assert rc == 0 and out["gate"] == "failed" and "::warning title=jaxcache gate::" in log
    done = report.job_step(out, sys.executable, job)
    assert done.returncode == 0, done.stderr
    assert hits(done) >= 2  # the signed entries still load; the planted one is a miss
    pub4 = Runner(tmp_path / "pub4", store, workspace, "push", "refs/heads/main")
    rc, _, log = pub4.action(mode="publish", policy=".jaxcache/policy.toml",
                             **{"signing-key": key_file.read_text()})
    assert rc == 1 and "::error title=jaxcache gate::" in log
    assert not (pub4.temp / "jaxcache-signing").exists()  # the key was never written


def test_the_action_cache_key_changes_with_the_jaxlib_build(tmp_path, keys):
    """Build B (the same jaxlib version, other bytes: tests/support/builds.py) restores from
    another key prefix than build A, and the log names the fingerprint each computed."""
    _, public = keys
    workspace = tmp_path / "ws"
    write_policy(workspace, public)
    store = tmp_path / "caches"
    store.mkdir()
    site = builds.other_build(tmp_path)
    prefixes = []
    for name, build in (("a", None), ("b", site)):
        runner = Runner(tmp_path / name, store, workspace, "pull_request", "refs/pull/1/merge")
        runner.env = builds.build_env(build, runner.env)
        rc, out, log = runner.action(mode="consume", policy=".jaxcache/policy.toml")
        assert rc == 0, log
        ident = subprocess.run([BIN / "jaxcache", "-q", "fingerprint", "--short"],
                               env=runner.env, capture_output=True, text=True,
                               timeout=TIMEOUT_S).stdout.strip()
        assert len(ident) == 16 and f"  fingerprint={ident}\n" in log, log
        prefixes.append(out["cache-key-prefix"])
    assert prefixes[0] != prefixes[1]


def test_the_action_publishes_keyless_and_consumers_need_only_the_policy(tmp_path,
                                                                          sigstore_stack):
    """identity: ci (issue 46): the publisher (a push to main, with the OIDC token
    `id-token: write` gives: ACTIONS_ID_TOKEN_REQUEST_URL) signs as its workflow through the
    loopback Sigstore; a pull request with no token and no secret hits; mode consume refuses
    identity, and a publisher without the token is told to request it."""
    workspace = tmp_path / "ws"
    (workspace / ".jaxcache").mkdir(parents=True)
    (workspace / ".jaxcache" / "policy.toml").write_text(
        f'sigstore_trust_root = "{sigstore_stack.trusted_root}"\n{SAFE_TABLE}')
    store = tmp_path / "caches"
    store.mkdir()
    job = str(TWO_JITS)
    keyless = {"identity": "ci", "sigstore-config": str(sigstore_stack.trust_config)}

    pub = Runner(tmp_path / "publish", store, workspace, "push", "refs/heads/main")
    pub.env.update(sigstore_stack.github_env())
    rc, out, log = pub.action(mode="publish", policy=".jaxcache/policy.toml", **keyless)
    assert rc == 0, log
    assert "--identity ci" in out["run-args"] and "--signing-key" not in out["run-args"]
    done = pub.job_step(out, sys.executable, job)
    assert done.returncode == 0, done.stderr
    assert "signing keyless as identity" in done.stderr and "WARNING" not in done.stderr
    rc, saved, log = pub.action(mode="save")
    assert rc == 0, log
    assert saved["saved"] == "true"
    (cache,) = store.iterdir()
    entries = sorted(p.name for p in cache.iterdir() if p.name.endswith("-cache"))
    assert entries and all("sigstore_bundle" in json.loads((cache / f"{e}.sig").read_bytes())
                           for e in entries)

    pr = Runner(tmp_path / "pr", store, workspace, "pull_request", "refs/pull/1/merge")
    rc, out, log = pr.action(mode="consume", policy=".jaxcache/policy.toml")
    assert rc == 0, log
    assert out["gate"] == "passed" and "--identity" not in out["run-args"]
    done = pr.job_step(out, sys.executable, job)
    assert done.returncode == 0, done.stderr
    assert hits(done) >= 2

    rc, _, log = Runner(tmp_path / "pr2", store, workspace, "pull_request", "x").action(
        mode="consume", policy=".jaxcache/policy.toml", identity="ci")
    assert rc == 1 and "identity and sigstore-config are for mode publish only" in log
    rc, _, log = Runner(tmp_path / "pub2", store, workspace, "push", "refs/heads/main").action(
        mode="publish", policy=".jaxcache/policy.toml", **keyless)
    assert rc == 1 and "permissions: id-token: write" in log


# -- the GitLab template, run as the runner runs it ----------------------------------------

def gitlab_job(name: str, project: Path, tmp: Path, **variables: str) -> tuple[int, str, str]:
    """The job's script as GitLab runs it: one POSIX shell, `set -e`, the job's variables and
    CI's, the project's own install and job commands replaced by `two_jits.py`."""
    job = gitlab_jobs()[name]
    lines = [line.replace("python -m pip install -r requirements.txt", "true")
             .replace("python train.py", f"{sys.executable} {TWO_JITS}")
             .replace("python -m pytest", f"{sys.executable} {TWO_JITS}")
             for line in job.get("before_script", []) + job["script"]]
    env = {
        **environ_without("JAX_", "JAXCACHE_", "XLA_", "CI_", "GITLAB_"),
        "HOME": str(tmp / "home"), "XDG_STATE_HOME": str(tmp / "home" / "state"),
        "JAX_PLATFORMS": "cpu", "CI": "true", "GITLAB_CI": "true", "TMPDIR": str(tmp),
        "CI_PROJECT_DIR": str(project), "CI_JOB_ID": "42", "CI_DEFAULT_BRANCH": "main",
        "CI_JOB_IMAGE": "python:3.12", "CI_RUNNER_EXECUTABLE_ARCH": "linux/amd64",
        **{k: str(v) for k, v in job.get("variables", {}).items()},
        "JAXCACHE_CI_PYTHON": sys.executable, **variables}
    script = "\n".join(lines)
    done = subprocess.run(["sh", "-e", "-c", script], env=env, cwd=project, text=True,
                          capture_output=True, timeout=TIMEOUT_S)
    after = subprocess.run(["sh", "-c", "\n".join(job.get("after_script", []))], env=env,
                           cwd=project, capture_output=True, timeout=TIMEOUT_S)
    assert after.returncode == 0
    assert not (tmp / "jaxcache-42").exists()  # after_script removed the private folder
    return done.returncode, done.stdout, done.stdout + done.stderr


def test_the_gitlab_template_publishes_and_consumes_a_sealed_cache(tmp_path, keys):
    key_file, public = keys
    project = tmp_path / "project"
    write_policy(project, public)
    (tmp_path / "t").mkdir(mode=0o700)
    variable = tmp_path / "JAXCACHE_SIGNING_KEY"  # GitLab's File variable: masked, so base64
    variable.write_text(base64.b64encode(key_file.read_bytes()).decode())
    main = {"CI_COMMIT_BRANCH": "main", "CI_COMMIT_REF_PROTECTED": "true"}

    rc, _, log = gitlab_job("jax-publish", project, tmp_path / "t",
                            JAXCACHE_SIGNING_KEY=str(variable), **main)
    assert rc == 0, log
    assert not variable.exists()  # the runner's copy of the key is removed before the job runs
    (fingerprint,) = (project / ".jax-ci-cache").iterdir()
    entries = [p.name for p in fingerprint.iterdir() if p.name.endswith("-cache")]
    assert entries and all((fingerprint / f"{e}.sig").exists() for e in entries)

    mr = {"CI_COMMIT_REF_PROTECTED": "false"}
    rc, out, log = gitlab_job("jax-test", project, tmp_path / "t", **mr)
    assert rc == 0, log
    assert json.loads(out.strip().splitlines()[-1])["hits"] >= 2

    # not on a branch build of the default branch: no publishing
    variable.write_text(key_file.read_text())  # the PEM text itself works too
    rc, _, log = gitlab_job("jax-publish", project, tmp_path / "t",
                            JAXCACHE_SIGNING_KEY=str(variable), CI_COMMIT_BRANCH="feature",
                            CI_COMMIT_REF_PROTECTED="false")
    assert rc == 1 and "only on the protected default branch" in log, log

    # a branch pipeline pushed an unsigned entry: consumers' gate fails, the publisher resets
    plant(fingerprint)
    rc, _, log = gitlab_job("jax-test", project, tmp_path / "t", **mr)
    assert rc == 1 and "gate failed" in log, log
    rc, out, log = gitlab_job("jax-test", project, tmp_path / "t", JAXCACHE_CI_GATE="report", **mr)
    assert rc == 0 and "WARNING" in log, log
    assert json.loads(out.strip().splitlines()[-1])["hits"] >= 2  # the planted one is a miss
    rc, _, log = gitlab_job("jax-publish", project, tmp_path / "t",
                            JAXCACHE_SIGNING_KEY=str(variable), **main)
    assert rc == 0 and "the publisher starts this directory empty" in log, log
    assert not (fingerprint / f"jit_f-{'ab' * 32}-cache").exists()
    rc, _, log = gitlab_job("jax-test", project, tmp_path / "t", **mr)
    assert rc == 0, log
