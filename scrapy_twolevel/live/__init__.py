"""The live view of a crawl: a snapshot of the frontier's state (:mod:`.snapshot`) and its
Prometheus rendering (:mod:`.prometheus`); both pure, so tests and tools can drive them."""
