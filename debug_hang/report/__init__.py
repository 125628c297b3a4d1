"""Rendering a diagnosis: report.md for people, diagnosis.json for machines, and the output folder."""
