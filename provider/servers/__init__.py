"""The servers this provider starts for development, the demo, tests and CI (ZooKeeper, Spark Connect),
their certificates, state files, process identities and supervision; and the ZooKeeper connection
settings every client of the provider is built from."""
