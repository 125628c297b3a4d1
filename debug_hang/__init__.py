"""debug-hang: find out why a distributed training job scheduled by Ray has hung."""

__version__ = "0.1.0"
