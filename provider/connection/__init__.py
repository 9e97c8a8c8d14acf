"""How a client reaches a ZooKeeper: hosts, TLS, digest and the kazoo client built from them.

Production (the hook, the triggers, the command line) and the development servers read one
:class:`~airflow_epochs.connection.zookeeper.ZooKeeperSettings`, so a server we start and a client of
a user's ensemble are configured the same way. No Airflow import here.
"""
