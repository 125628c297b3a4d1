"""Parsing what people paste or save: py-spy text/JSON, faulthandler, `ray stack`; grouping identical stacks."""
