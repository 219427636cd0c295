"""Is this process running under a CI system? Read from the variables each one documents.

Under CI a plain cache directory is usually restored (actions/cache, GitLab's `cache:`, a
Buildkite or CircleCI cache): its entries belong to the runner's user whoever wrote them, so
jaxcache refuses entries of unknown origin there unless the policy names their source
(trust/provenance/origin.py). A variable set by a job to hide from this check hides nothing the job
could not do anyway: it runs as the user already.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# (variable, the values that mean "yes" (None: any non-empty value), the system's name), in
# the order they are tried: the specific systems first, the generic CI last (any value but
# false/0/no/off: Woodpecker sets CI=woodpecker). A heuristic that fails open where the
# environment is stripped (docker build, sudo's env_reset): CI scripts pass --require-origin.
_SYSTEMS = (
    ("GITHUB_ACTIONS", ("true",), "GitHub Actions"),
    ("GITLAB_CI", ("true",), "GitLab CI"),
    ("BUILDKITE", ("true",), "Buildkite"),
    ("CIRCLECI", ("true",), "CircleCI"),
    ("JENKINS_URL", None, "Jenkins"),
    ("TF_BUILD", ("true",), "Azure Pipelines"),
    ("CODEBUILD_BUILD_ID", None, "AWS CodeBuild"),
    ("TEAMCITY_VERSION", None, "TeamCity"),
    ("BITBUCKET_BUILD_NUMBER", None, "Bitbucket Pipelines"),
    ("CI", None, "a CI system (CI is set)"),
)
_NO = ("false", "0", "no", "off")
VARIABLES = tuple(v for v, _, _ in _SYSTEMS)


def detect(env: Mapping[str, str] | None = None) -> str | None:
    """The CI system this process runs under, by name, or None outside CI."""
    env = os.environ if env is None else env
    for variable, yes, name in _SYSTEMS:
        value = env.get(variable, "").strip()
        if value and (value.lower() in yes if yes is not None else value.lower() not in _NO):
            return name
    return None
