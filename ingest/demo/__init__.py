"""The demo data set: synthetic calls and opportunities (`corpus`) and the seed that ingests
them (`seed`). Used by `manage.py up`, the tests and the benchmarks; production code never
imports it."""
