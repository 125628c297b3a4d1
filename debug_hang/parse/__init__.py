"""Parsing what people paste or save into the stack model: one dispatcher (`reader`) over readers by
dump family (py-spy text and JSON, Python's tracebacks, pasted forms, ...); grouping identical stacks."""
