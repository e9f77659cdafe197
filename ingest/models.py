"""Where Django looks for the app `ingest`'s models. The pipelines' tables are defined in
`ingest.pipelines.models` (import them from there): importing that module here registers them
under the app label `ingest`, so tables and migrations keep their names."""

import ingest.pipelines.models  # noqa: F401
