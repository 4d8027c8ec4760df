"""A small stand-in for the Azure Functions host, for machines without Functions Core Tools.

It loads `function_app.app` and serves what the app declares, the way the Functions host does:
HTTP routes under host.json's routePrefix, with function keys. `python -m devhost` also starts
Azurite on a fresh folder and stops it on exit.
"""
