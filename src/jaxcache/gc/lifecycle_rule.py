"""`gc --lifecycle-rule`: the bucket's own age rule for a sealed prefix, for the storage
service to apply (GCS lifecycle JSON, S3 lifecycle configuration).

One rule on the prefix covers entries and their signature objects alike (they share it). What
a bucket rule cannot do, which the text says: it counts age from the upload, not the last use
(an entry every job loads goes as surely as a dead one, and is published again at the next
miss); it deletes without judging (no conditional delete, no unit: for a while an entry may be
left without its signature or the reverse; a reader then misses or rejects it, never loads it);
it knows no size limit.
"""

from __future__ import annotations

import math

from jaxcache.trust.rules.target import BucketUrl

DAY_S = 86_400


def days(max_age_s: float) -> int:
    """Whole days, rounded up (a bucket rule counts in days; at least 1)."""
    return max(1, math.ceil(max_age_s / DAY_S))


def rule(url: BucketUrl, max_age_s: float) -> dict[str, object]:
    """The document to apply: `gcloud storage buckets update gs://B --lifecycle-file=F` or
    `aws s3api put-bucket-lifecycle-configuration --bucket B --lifecycle-configuration
    file://F`."""
    prefix = f"{url.prefix}/" if url.prefix else ""
    if url.scheme == "s3":
        return {"Rules": [{"ID": "jaxcache-gc", "Status": "Enabled",
                           "Filter": {"Prefix": prefix},
                           "Expiration": {"Days": days(max_age_s)}}]}
    condition: dict[str, object] = {"age": days(max_age_s)}
    if prefix:
        condition["matchesPrefix"] = [prefix]
    return {"lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": condition}]}}


def apply_command(url: BucketUrl, file: str) -> str:
    if url.scheme == "s3":
        return (f"aws s3api put-bucket-lifecycle-configuration --bucket {url.bucket} "
                f"--lifecycle-configuration file://{file}")
    return f"gcloud storage buckets update gs://{url.bucket} --lifecycle-file={file}"
