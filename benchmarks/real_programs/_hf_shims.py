"""What the Hugging Face drivers share (`benchmarks/real_programs.py` copies this module beside
each of them, under this name; it is not one of the programs' modules):

- `work_offline()`: local files only, nothing asked of the Hub, on either side;
- `install(load_metric)`, before the script is imported: `datasets.load_metric` becomes the
  driver's local metric (the Hub's metric scripts are downloads); `flax.metrics.tensorboard`, which
  imports TensorFlow (neither venv has it), becomes a module whose `SummaryWriter` records what the
  script gives `scalar()` and ignores `hparams()`; and `transformers.is_tensorboard_available`, as
  the scripts that ask it import it, says yes (neither venv has `tensorboard` either), so that the
  scripts log every step's training metrics (they read them on the host with `get_metrics`);
- `quiet_logging()`: the scripts' `logging.basicConfig(level=INFO)` would print every library's
  messages; a root handler at WARNING set first makes that call do nothing;
- `save_bert_tokenizer(vocab, folder)`: a WordLevel `PreTrainedTokenizerFast` with the special
  tokens BERT needs (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`), a whitespace pre-tokenizer and
  the `[CLS] A [SEP] B [SEP]` template with its token types (the scripts ask `word_ids()`, which only
  a fast tokenizer has);
- `write_sentences(root, words, files)`: text files of random sentences over a few words;
- `logged(tags)` and `saved_params(folder)`: what the script logged and saved, as arrays."""

import logging
import os
import random
import sys
import types
from pathlib import Path

import numpy as np


def work_offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


class SummaryWriter:
    """flax.metrics.tensorboard.SummaryWriter without TensorFlow: scalar() is recorded."""

    logged: dict = {}  # tag -> [(step, value)]

    def __init__(self, log_dir, *args, **kwargs):
        pass

    def hparams(self, hparams):
        pass

    def scalar(self, tag, value, step):
        SummaryWriter.logged.setdefault(tag, []).append((int(step), float(value)))


def install(load_metric) -> None:
    import datasets
    import flax.metrics
    import transformers

    datasets.load_metric = load_metric
    transformers.is_tensorboard_available = lambda: True
    stub = types.ModuleType("flax.metrics.tensorboard")
    stub.SummaryWriter = SummaryWriter
    sys.modules["flax.metrics.tensorboard"] = stub
    flax.metrics.tensorboard = stub


def quiet_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING)


def save_bert_tokenizer(vocab: dict, folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]",
                            model_input_names=["input_ids", "token_type_ids", "attention_mask"]
                            ).save_pretrained(folder)


def write_sentences(root: Path, words: list, files: dict) -> None:
    """Each file (name -> how many lines) a sentence of 6 to 14 of the words a line, drawn with a
    seed of 0 across the files."""
    draw = random.Random(0)
    for name, lines in files.items():
        text = [" ".join(draw.choice(words) for _ in range(draw.randint(6, 14))) for _ in range(lines)]
        (root / name).write_text("\n".join(text) + "\n")


def logged(tags) -> dict:
    """Each tag's logged values, in the order the script logged them."""
    return {tag: np.asarray([value for _, value in SummaryWriter.logged.get(tag, [])], np.float32) for tag in tags}


def saved_params(folder: Path) -> dict:
    """The parameters the script saved with `save_pretrained(folder, ...)`, as NumPy arrays."""
    import jax
    from flax import serialization

    params = serialization.msgpack_restore((folder / "flax_model.msgpack").read_bytes())
    return jax.tree_util.tree_map(np.asarray, params)
