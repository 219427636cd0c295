#!/usr/bin/env bash
# Rehearse the sealed CI flow of docs/how-to/ci.md on this machine, before pushing the workflow.
#
#   bash ci-templates/rehearse.sh                       # the bundled example job (jaxcache.examples.mlp)
#   bash ci-templates/rehearse.sh -- python train.py    # your job (run from your repository)
#   RUN_FLAGS="--min-compile-time 0" bash ci-templates/rehearse.sh   # more `jaxcache run` flags, both runs
#
# It plays the steps the GitHub action (action.yml) and the GitLab template run, with the same
# jaxcache commands, in a new folder (printed; removed at the end unless --keep):
#
#   you        keygen, and the committed policy that trusts the public key
#   publisher  restore (nothing the first time), gate, run --sealed --signing-key, seal what is
#              left unsigned and verify, save (a tarball stands in for the CI cache)
#   consumer   restore the tarball into a fresh directory, gate (verify --strict), run --sealed
#              read-only: the entries the publisher signed load (hits)
#   attacker   plants an unsigned entry into a copy of the tarball (what any default-branch
#              workflow could save under the cache key); a second consumer restores it and its
#              gate must refuse it
#
# Each role has a HOME of its own (no state, ledger or policy carried between them) and runs
# with CI=true, as on a runner. Every command is shown as `$ ...` before it runs.
# JAXCACHE: the jaxcache command (default: the one on PATH); PYTHON: the interpreter of the
# default job (default: python3). Exit code: 0 the rehearsal went as the docs say (clean cache
# passed and hit, poisoned cache refused), 1 it did not (the step is named), 2 usage.
set -euo pipefail

keep=false
work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=true; shift ;;
    --work) work=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "rehearse: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
JAXCACHE=${JAXCACHE:-jaxcache}
PYTHON=${PYTHON:-python3}
if [ $# -gt 0 ]; then
  job=("$@")
else
  job=("$PYTHON" -m jaxcache.examples.mlp --steps 1)  # a compile of a few seconds: written
fi
read -ra run_flags <<< "${RUN_FLAGS:-}"
command -v "$JAXCACHE" > /dev/null || { echo "rehearse: $JAXCACHE not found (set JAXCACHE)" >&2; exit 2; }

if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/jaxcache-rehearsal.XXXXXX")
else
  mkdir -m 700 -- "$work"
fi
if [ "$keep" = false ]; then trap 'rm -rf -- "$work"' EXIT; fi
echo "rehearsal in $work"

failed() { echo "rehearsal FAILED: $*" >&2; exit 1; }
# as ROLE: its own HOME, nothing of the caller's jaxcache or JAX settings, CI=true
as() {
  local role=$1; shift
  mkdir -p -- "$work/home/$role"
  printf '[%s] $ %s\n' "$role" "$*"
  env -u XDG_STATE_HOME -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u XDG_DATA_HOME \
    -u JAX_COMPILATION_CACHE_DIR -u JAXCACHE_POLICY HOME="$work/home/$role" CI=true "$@"
}
jaxcache() { "$JAXCACHE" "$@"; }
# the gate, as action.yml's: an empty restore passes (every module compiles); else verify --strict
gate() {
  local role=$1 dir=$2
  if [ ! -d "$dir" ] || [ -z "$(ls -A -- "$dir")" ]; then
    echo "[$role] nothing restored into $dir: every module compiles"
    return 0
  fi
  as "$role" "$JAXCACHE" verify --strict "$dir" --policy "$policy"
}
# what the CI cache does: save = a tarball of the directory, restore = unpack into a fresh one
save() { printf '[%s] $ tar -C %s -czf %s .\n' "$1" "$2" "$3"; tar -C "$2" -czf "$3" .; }
restore() {
  printf '[%s] $ mkdir -p %s && tar -C %s -xzf %s\n' "$1" "$2" "$2" "$3"
  mkdir -p -- "$2" && tar -C "$2" -xzf "$3"
}

# --- you: the key (docs/how-to/ci.md step 1) and the committed policy (step 2) ---------------------
as you "$JAXCACHE" keygen "$work/secrets/ci.key" > "$work/keygen.txt"
cat "$work/keygen.txt"
public=$(sed -n 's/^public key: //p' "$work/keygen.txt")
mkdir -p -- "$work/repo/.jaxcache"
policy="$work/repo/.jaxcache/policy.toml"
holder=$(id -un)  # the account the CI jobs run as (GitHub-hosted runners: runner)
printf 'trusted_keys = [{ holder = "%s", key = "%s" }]\n' "$holder" "$public" > "$policy"
echo "[you] committed $policy: $(cat "$policy")"

# --- publisher: the default branch's job (action.yml mode publish, then mode save) ----------
pub_dir="$work/publisher/jax-cache"
mkdir -p -- "$work/publisher" "$work/ci-cache"
echo "[publisher] restore: no cache saved yet"
gate publisher "$pub_dir" || failed "the publisher's gate refused an empty restore"
as publisher "$JAXCACHE" run --sealed --signing-key "$work/secrets/ci.key" --cache-dir "$pub_dir" \
  --policy "$policy" "${run_flags[@]}" -- "${job[@]}" || failed "the publisher's job"
if ! as publisher "$JAXCACHE" -q verify --strict "$pub_dir" --policy "$policy"; then
  as publisher "$JAXCACHE" seal "$pub_dir" --signing-key "$work/secrets/ci.key" \
    --policy "$policy" || true
  as publisher "$JAXCACHE" verify --strict "$pub_dir" --policy "$policy" \
    || failed "not saving: the cache holds entries consumers would reject"
fi
entries=$(find "$pub_dir" -type f -name '*-cache' | wc -l)
[ "$entries" -gt 0 ] || failed "the publisher's job wrote no entry (JAX's write thresholds: a
quick compile is not cached; try RUN_FLAGS=\"--min-compile-time 0\")"
save publisher "$pub_dir" "$work/ci-cache/clean.tgz"

# --- consumer: a pull request's job (action.yml mode consume) -------------------------------
con_dir="$work/consumer/jax-cache"
restore consumer "$con_dir" "$work/ci-cache/clean.tgz"
gate consumer "$con_dir" || failed "the consumer's gate refused the publisher's cache"
as consumer "$JAXCACHE" run --sealed --cache-dir "$con_dir" --policy "$policy" \
  --record "$work/consumer/run.json" "${run_flags[@]}" -- "${job[@]}" || failed "the consumer's job"
hits=$("$PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["counts"]["hits"])' "$work/consumer/run.json")
[ "$hits" -gt 0 ] || failed "the consumer loaded no entry the publisher signed (0 hits)"

# --- attacker: one unsigned entry planted into the saved cache ------------------------------
mkdir -p -- "$work/attacker/jax-cache"
restore attacker "$work/attacker/jax-cache" "$work/ci-cache/clean.tgz"
victim=$(find "$work/attacker/jax-cache" -type f -name '*-cache' | LC_ALL=C sort | head -n 1)
planted="$(dirname -- "$victim")/jit_planted-$(printf 'planted' | sha256sum | cut -c1-64)-cache"
printf '[attacker] $ cp %s %s\n' "$victim" "$planted"
cp -- "$victim" "$planted"
save attacker "$work/attacker/jax-cache" "$work/ci-cache/poisoned.tgz"

poisoned_dir="$work/consumer-poisoned/jax-cache"
restore consumer-poisoned "$poisoned_dir" "$work/ci-cache/poisoned.tgz"
rc=0
gate consumer-poisoned "$poisoned_dir" || rc=$?
[ "$rc" = 1 ] || failed "the gate let the poisoned cache through (exit $rc, expected 1)"

echo "rehearsal passed: the publisher signed $entries entr$([ "$entries" = 1 ] && echo y || echo ies);" \
  "the consumer's gate passed its cache and the job hit $hits; the gate refused the poisoned" \
  "cache (exit 1), as a CI job would stop there"
