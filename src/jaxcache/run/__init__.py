"""`jaxcache run`: spawn the job with the probe, behind the audit; which JAX, launcher and rank
it is; which cache directories it really used. Kept import-light: it sits on the job's start-up.
"""
