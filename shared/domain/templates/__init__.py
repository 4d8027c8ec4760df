"""ARM deployment templates, as far as Microsoft.Scheduler resources use them: the expression
language (`expressions.py`, `functions.py`), a template's resources evaluated and put in the order
they apply (`planning.py`, with `evaluation.py` and `resources.py`; its records in
`deployment.py`), and a collection written back as a template (`export.py`)."""
