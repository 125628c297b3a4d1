"""Analysis, pure and re-runnable on captures: catalog and matcher, wait-for graph, root causes, verdict."""
