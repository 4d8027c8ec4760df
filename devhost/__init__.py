"""A small stand-in for the Azure Functions host, for machines without Functions Core Tools.

It loads `function_app.app` and runs what the app declares, the way the Functions host does:
HTTP routes under host.json's routePrefix with function keys (`http_host`), timers on their
NCRONTAB schedules and queue triggers with batches, retries and poison queues (`triggers`).
On Python 3.13, where the app pins Azure's Python runtime library, every function is invoked
through that library (`runtime`), as in Azure; elsewhere the functions are called directly.
`python -m devhost` also starts Azurite on a fresh folder and stops it on exit.
"""
