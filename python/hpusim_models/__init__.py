"""hpusim's reference models (MLP, CNN, tiny transformer LM), their data and a training loop,
shared by the main job, the tests and the benchmarks."""
from .data import Batch, corpus_text, decode, encode, make_batches
from .models import CNN, MLP, REFERENCE_MODELS, TinyTransformerLM, build
from .training import evaluate, loss_fn, make_optimizer, train_steps

__all__ = [
    "REFERENCE_MODELS", "build", "make_batches", "train_steps", "evaluate",
    "MLP", "CNN", "TinyTransformerLM", "Batch", "corpus_text", "encode", "decode", "loss_fn",
    "make_optimizer",
]
