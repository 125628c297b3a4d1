"""Pool-worker functions of ocr_pool_initializer (a module, so that multiprocessing pickles them by name)."""
import os

_MODEL: bytes | None = None


def load_model() -> None:
    global _MODEL
    path = os.environ.get("OCR_MODEL_PATH", "/models/ocr/crnn-v3.bin")
    with open(path, "rb") as fh:
        _MODEL = fh.read(16)


def score_page(i: int) -> float:
    assert _MODEL is not None
    return (i * 7919 % 101) / 100.0
