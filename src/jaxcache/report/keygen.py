"""`jaxcache keygen --format json` (schema jaxcache.keygen/1): where the key went, what to trust."""

from __future__ import annotations

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.inputs.public_keys import PublicKey


def render_json(path: str, public: PublicKey, created: list[str] | tuple[str, ...] = ()) -> str:
    return jsonout.document({
        **envelope("keygen"),
        "private_key": safe(path), "public_key_file": safe(path + ".pub"),
        "public_key": public.text, "key_id": public.id, "key_name": public.name,
        "named_public_key": public.named_text,
        "created_folders": [safe(d) for d in created]})
