"""Helper module of plugin_featurizer.py: text normalisers, warmed up when first imported."""
from concurrent.futures import ThreadPoolExecutor

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="plugin-warm")


def _warm(token: str) -> str:
    from _text_plugins import normalise  # resolved lazily so plugins can be swapped at runtime

    return normalise(token)


def normalise(token: str) -> str:
    return token.strip().lower()


VOCAB = list(_POOL.map(_warm, ["The ", " Quick", "Brown ", "FOX"]))
