"""Object stores behind one interface (object_store.py): Cloud Storage, S3 and a read-only
directory, under one deadline and retry policy (resilient.py), opened by URL (store_for_url.py).
They move bytes; nothing here judges them (the stores above verify what they load)."""
