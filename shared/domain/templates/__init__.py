"""ARM deployment templates, as far as Microsoft.Scheduler resources use them: the expression
language (`expressions.py`, `functions.py`), a template's resources in the order they apply
(`deployment.py`), and a collection written back as a template (`export.py`)."""
