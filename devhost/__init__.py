"""A small stand-in for the Azure Functions host, for machines without Functions Core Tools.

It loads `function_app.app` and runs what the app declares, the way the Functions host does:
HTTP routes under host.json's routePrefix with function keys (`http_host`), timers on their
NCRONTAB schedules and queue triggers with batches, retries and poison queues (`triggers`).
`python -m devhost` also starts Azurite on a fresh folder and stops it on exit.
"""
