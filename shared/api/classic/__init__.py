"""The classic (Service Management) API: `serving` (what every classic operation shares),
`bodies` (its XML), `jobs` (the classic shape of a job) and `operations`."""
