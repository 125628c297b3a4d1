"""Collection: read the cluster (State/Job API over HTTP), choose targets, dump them on their nodes, gather evidence."""
