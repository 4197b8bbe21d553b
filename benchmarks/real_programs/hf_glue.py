"""Hugging Face transformers' `examples/flax/text-classification/run_flax_glue.py` (fetched from
GitHub, not on PyPI; `benchmarks/real_programs.py` copies it beside this driver), its `main()` run
whole: a tiny BERT fine-tuned for sentence-pair classification on CSV files made here (no
`--task_name`: the script reads `--train_file`/`--validation_file`, takes `sentence1`/`sentence2` as
the pair and `label` as the class). Only data and configuration are chosen: a WordLevel tokenizer
over a dozen words with the special tokens BERT needs (`[PAD]` 0, `[UNK]`, `[CLS]`, `[SEP]`,
`[MASK]`, and the `[CLS] A [SEP] B [SEP]` template with its token types), a BERT of width 16 with
2 layers saved with `save_pretrained` beside the tokenizer (the script's `--model_name_or_path`;
`initializer_range` 0.2, so that its predictions differ from example to example from the start:
with BERT's 0.02 this little training predicts one class for every pair, and the accuracy would
compare little), 48 training pairs labelled 1 where the two sentences share a word, 2 per device,
2 epochs (6 steps on 8 devices, 48 as 2 processes of 1 device), fixed seeds, and every dropout
probability 0 (pmap drew each device's masks from a key of its own, the global view draws them
from one key).

The validation set has `EVAL_EXAMPLES` (41) pairs, not a multiple of the evaluation batch (2 per
device: 16 on 8 devices, 2 a process on 2 processes x 1 device), so that the script's "leftover
examples evaluated on one device" branch (process 0 only) runs as well as the sharded batches;
`HF_GLUE_EVAL_EXAMPLES` in the environment chooses another count (32: no leftover on either).

The shims, the same on both sides (`_hf_shims`: the tensorboard writer that records, the
metric given to `datasets.load_metric`, offline, quiet logging):

- `datasets.load_metric("accuracy")` downloads the metric's script from the Hub; the local metric
  accumulates `add_batch(predictions=..., references=...)` (arrays or iterables of scalars) and its
  `compute()` returns `{"accuracy": ...}`, the mean of predictions equal to references, and starts
  over, as the Hub's metric does. It keeps what each `compute()` returned and the predictions it
  was computed over: main() returns both (41 predictions an epoch, with the leftover's, or 40 on
  process 1).
- The script's `write_metric` reads every step's training metrics on the host (`get_metrics`) to
  log them, and main() returns the training loss and learning rate it logged for each step (not
  `train_time`, nor the accuracy: the metric's, above).
- `datasets.config.HF_DATASETS_CACHE` is set to the run's temporary folder (the script has no
  `--cache_dir`), so that the CSVs' Arrow tables and `map` caches stay out of `~/.cache`.

transformers 4.46.3 runs this version of the script as it is (no shim of the library's calls).

main() returns the parameters the script saved (`model.save_pretrained(args.output_dir, ...)`
after each epoch, on process 0: the last epoch's), the accuracy and predictions of each epoch's
evaluation, and the logged training metrics. The script saves on process 0 only: another process
returns its index and what its own evaluations (its own batches: every process reads the whole
CSV and takes the same ones) and logs gave."""

import os
import random
import sys
import tempfile
from pathlib import Path

import _hf_shims

_hf_shims.work_offline()

import jax  # noqa: E402
import numpy as np  # noqa: E402

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "a", "big", "red", "ball"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TRAIN_EXAMPLES = 48
EVAL_EXAMPLES = int(os.environ.get("HF_GLUE_EVAL_EXAMPLES", "41"))


class _Accuracy:
    """The Hub's `accuracy` metric, local: add_batch accumulates, compute returns and starts over."""

    computed: list = []  # every compute()'s result, of every metric made, in order

    def __init__(self):
        self.predictions, self.references = [], []

    def add_batch(self, *, predictions, references):
        self.predictions += [np.asarray(p) for p in np.asarray(list(predictions)).reshape(-1)]
        self.references += [np.asarray(r) for r in np.asarray(list(references)).reshape(-1)]

    def compute(self):
        predictions, references = np.asarray(self.predictions), np.asarray(self.references)
        self.predictions, self.references = [], []
        result = {"accuracy": float(np.mean(predictions == references))}
        _Accuracy.computed.append({**result, "predictions": predictions.astype(np.int32)})
        return result


def _load_metric(path, *args, **kwargs):
    if path != "accuracy":
        raise ValueError(f"the driver's load_metric has `accuracy` only, not {path!r}")
    return _Accuracy()


def _script():
    """run_flax_glue, imported at the first call of main() (as hf_clm's script: nothing may start
    JAX's backend before several processes join), with the shims."""
    _hf_shims.install(_load_metric)
    import run_flax_glue

    return run_flax_glue


def _inputs(root: Path) -> None:
    """The tokenizer and the model (one folder) and the train and validation CSV files."""
    from transformers import BertConfig, FlaxBertForSequenceClassification

    vocab = {w: i for i, w in enumerate([*SPECIAL, *WORDS])}
    _hf_shims.save_bert_tokenizer(vocab, root / "model")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
                        num_labels=2, pad_token_id=0, initializer_range=0.2)
    FlaxBertForSequenceClassification(config, seed=0).save_pretrained(root / "model")
    words = random.Random(0)
    for name, count in (("train.csv", TRAIN_EXAMPLES), ("validation.csv", EVAL_EXAMPLES)):
        lines = ["sentence1,sentence2,label"]
        for _ in range(count):
            a, b = ([words.choice(WORDS) for _ in range(words.randint(2, 4))] for _ in range(2))
            lines.append(f"{' '.join(a)},{' '.join(b)},{int(bool(set(a) & set(b)))}")  # a word in common
        (root / name).write_text("\n".join(lines) + "\n")


def main():
    run_flax_glue = _script()
    _hf_shims.quiet_logging()
    import datasets

    _Accuracy.computed.clear()
    _hf_shims.SummaryWriter.logged.clear()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        datasets.config.HF_DATASETS_CACHE = root / "cache"
        _inputs(root)
        out = root / "out"
        sys.argv = ["run_flax_glue.py", f"--model_name_or_path={root / 'model'}",
                    f"--train_file={root / 'train.csv'}", f"--validation_file={root / 'validation.csv'}",
                    "--max_length=16", "--per_device_train_batch_size=2", "--per_device_eval_batch_size=2",
                    "--learning_rate=3e-3", "--num_train_epochs=2", "--num_warmup_steps=2",
                    f"--output_dir={out}", "--seed=0"]
        run_flax_glue.main()
        logged = _hf_shims.logged(("train_learning_rate", "train_loss"))
        ran = {"eval": {"accuracy": np.asarray([c["accuracy"] for c in _Accuracy.computed], np.float32),
                        "predictions": np.stack([c["predictions"] for c in _Accuracy.computed])},
               "logged": logged}
        if jax.process_index() != 0:
            return {"process": np.int32(jax.process_index()), **ran}
        params = _hf_shims.saved_params(out)
    return {"params": params, **ran}
