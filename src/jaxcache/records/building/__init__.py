"""Building a run record from what the job's probes wrote: probe_output.py reads each probe's
document once into typed data (ProbeOutput), builder.py makes the record from it (a
RunRecord: records/run_document.py, which writes it as JSON).
records/run_record.py runs the job and writes the record; it re-exports the builder's names.
"""
