"""`python -m devhost.rpc`: generate the protocol's message classes (see the package's text)."""

from devhost.rpc import generate

print(f"Generated the Functions RPC messages: {generate()}")
