"""The trusted inputs, each read through trusted_file.py (which judges the folders above a file
with the audit, so it sits above judgement/): the policy file, public and signing keys (a
file or a token), the origin ledger."""
