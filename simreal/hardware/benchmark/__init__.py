"""Hardware benchmarks: the harness, suites, detectors, reports and trial videos."""
