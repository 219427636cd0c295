"""Building a run record from what the job's probes wrote: probe_output.py reads each probe's
document once into typed data (ProbeOutput), builder.py makes the record's JSON from it.
records/run_record.py runs the job and writes the record; it re-exports the builder's names.
"""
