"""The hardware regression behind scripts/regress: jobs, result parsing, baselines, coverage and
reports, each in its own module so that the parts that judge results can be unit-tested
(tests/regress)."""
