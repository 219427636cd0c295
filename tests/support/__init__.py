"""What the tests stand on: paths, real users and their runtime, jobs run through the CLI, and
the real services (a Cloud Storage emulator, SeaweedFS for S3, a single-node Slurm)."""
