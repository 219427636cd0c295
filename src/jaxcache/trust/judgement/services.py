"""What an audit cannot see of an object store's access control, per service: the grants that
let a principal write, and how to check by hand who holds them.

The audit judges a bucket (trust/judgement/bucket_view.py, trust/judgement/audit.py's plain URL
finding); the stores that talk to the services are seal/'s (seal/objects/gcs_store.py,
s3_store.py). A scheme jaxcache does not serve gets no service's wording.
"""

from __future__ import annotations

from jaxcache.text import safe
from jaxcache.trust.rules.target import BucketUrl

_GCS_WRITE_GRANTS = "storage.objects.create / roles/storage.objectAdmin"
_WRITE_GRANTS = {
    "gs": _GCS_WRITE_GRANTS,
    "s3": "s3:PutObject / s3:DeleteObject in the bucket policy or an IAM policy",
}


def write_grants(scheme: str) -> str:
    """The service's names for write access, for a plain reader's finding; for a scheme
    jaxcache serves no store for, the service's own write permissions, unnamed (Cloud
    Storage's names beside an http:// URL misled)."""
    return _WRITE_GRANTS.get(scheme, "the service's write permission")


def unchecked(url: BucketUrl, publishers: list[str]) -> tuple[str, str]:
    """What an audit of `url` cannot see, and how to check it by hand."""
    return (_s3_unchecked if url.scheme == "s3" else _gcs_unchecked)(url, publishers)


def _gcs_unchecked(url: BucketUrl, publishers: list[str]) -> tuple[str, str]:
    """What an audit of `url` cannot see, and how to check it by hand (Cloud Storage)."""
    b = safe(url.bucket)
    return (f"gs://{b}" + (f" under {safe(url.prefix)}/" if url.prefix else "")
            + " (the bucket's IAM policy, ACLs and managed folders are not visible to jaxcache)",
            f"check by hand: `gcloud storage buckets get-iam-policy gs://{b}` (and `gcloud "
            f"storage managed-folders list gs://{b}` if used): only "
            f"{', '.join(safe(p) for p in publishers)} should hold object create/delete "
            "(roles/storage.objectCreator, objectAdmin or broader); readers need only "
            "roles/storage.objectViewer; no allUsers or allAuthenticatedUsers grant; and the "
            "private key stays in that publisher's secret store")


def _s3_unchecked(url: BucketUrl, publishers: list[str]) -> tuple[str, str]:
    """What an audit of `url` cannot see, and how to check it by hand (S3)."""
    b = safe(url.bucket)
    under = f"/{safe(url.prefix)}/*" if url.prefix else "/*"
    return (f"s3://{b}" + (f" under {safe(url.prefix)}/" if url.prefix else "")
            + " (the bucket policy, IAM policies, ACLs and access points are not visible to "
            "jaxcache)",
            f"check by hand: `aws s3api get-bucket-policy --bucket {b}`, `aws s3api "
            f"get-bucket-acl --bucket {b}` and `aws s3api get-public-access-block --bucket {b}` "
            "(with --endpoint-url for a service other than AWS), and the IAM policies of the "
            f"account's roles and users: only {', '.join(safe(p) for p in publishers)} should "
            f"be allowed s3:PutObject or s3:DeleteObject on arn:aws:s3:::{b}{under}; readers "
            "need only s3:GetObject and s3:ListBucket; no public grant (Principal \"*\", "
            "AllUsers, AuthenticatedUsers); make every writer create-only by denying "
            "s3:PutObject in the bucket policy unless the request carries the "
            "s3:if-none-match condition key (a signature left without its entry is then "
            "removed by hand); and the private key stays in that publisher's secret store")
