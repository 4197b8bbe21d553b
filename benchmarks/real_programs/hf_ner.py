"""Hugging Face transformers' `examples/flax/token-classification/run_flax_ner.py` (fetched from
GitHub, not on PyPI; `benchmarks/real_programs.py` copies it beside this driver), its `main()` run
whole: a tiny BERT fine-tuned for named entity recognition on JSON-lines files made here (no
`--dataset_name`: the script reads `--train_file`/`--validation_file` with `load_dataset("json")`,
takes `tokens` as the words and `ner_tags` (its `--task_name` `ner`) as their tags, and, the tags
being strings rather than a `ClassLabel`, the sorted set of the training set's tags as its labels).
Only data and configuration are chosen: a WordLevel tokenizer over a few dozen words with the
special tokens BERT needs (`[PAD]` 0, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, a whitespace
pre-tokenizer and the `[CLS] A [SEP]` template), saved as a `PreTrainedTokenizerFast` (the script
asks `word_ids()`, which only a fast tokenizer has), a BERT of width 16 with 2 layers
(`FlaxBertForTokenClassification`, as many labels as the script will find, so that no weight is
newly initialised when it loads it) saved with `save_pretrained` beside the tokenizer (the
script's `--model_name_or_path`; `initializer_range` 0.2, as hf_glue's, so that the predicted tags
differ from token to token from the start), and fixed seeds. Each sentence is a few filler words
with one to three entities among them, IOB2-tagged: an animal (`B-ANI`), a colour of one or two
words (`B-COL`, or `B-COL I-COL` for `dark red`), a place (`B-LOC`); five labels in all. 48
training sentences, 2 per device, 2 epochs (6 steps on 8 devices, 48 as 2 processes of 1 device),
`--max_seq_length 16` (every sentence fits), `--logging_steps 1` (every step's training metrics
are read and logged), `--eval_steps` one epoch's steps (counted here from
`jax.local_device_count()`, as the script counts them: the script evaluates at the end of each
epoch, and once more after training with `--do_eval`), and every dropout probability 0 (pmap drew
each device's masks from a key of its own, the global view draws them from one key).

The validation set has `EVAL_EXAMPLES` (41) sentences, not a multiple of the evaluation batch (2
per device: 16 on 8 devices, 2 a process on 2 processes x 1 device), so that both of the script's
"leftover examples evaluated on one device" branches (process 0 only: the one in the training loop
and the one after it) run as well as the sharded batches; `HF_NER_EVAL_EXAMPLES` in the environment
chooses another count (32: no leftover on either).

The shims, the same on both sides (`_hf_shims`: the tensorboard writer that records, the
metric given to `datasets.load_metric`, offline, quiet logging):

- `datasets.load_metric("seqeval")` downloads the metric's script from the Hub, and it needs the
  `seqeval` package, which neither venv has; the local metric accumulates
  `add_batch(predictions=..., references=...)` (lists of sentences' tag strings) and its
  `compute()` returns what the script reads of seqeval's: `overall_precision`, `overall_recall`,
  `overall_f1` over entities and `overall_accuracy` over tokens (and each entity type's precision,
  recall, f1 and number), then starts over. Entities are chunked as seqeval's default
  (conlleval's) mode does: a chunk starts at a `B-`, or at an `I-` after `O` or after another type,
  and an entity is correct where its type, start and end all match; a ratio with nothing to divide
  by is 0, as seqeval's. It keeps what each `compute()` returned and the tags it was computed over
  (their labels' indices, in the order the script gave them): main() returns both.
- The script logs through tensorboard only where `transformers.is_tensorboard_available()` says
  yes, which the shim makes it say: its `write_train_metric` then reads every step's training
  metrics on the host (`get_metrics`), and main() returns the training loss and learning rate it
  logged for each step (not `train_time`, nor the evaluation's: the metric's, above).

`--cache_dir` is the run's temporary folder, so that the JSON files' Arrow tables and `map` caches
stay out of `~/.cache`.

transformers 4.46.3 runs this version of the script as it is (no shim of the library's calls).

main() returns the parameters the script saved (`model.save_pretrained(output_dir, params=...)` at
the last step, on process 0), the precision, recall, F1, accuracy and predicted tags of each
evaluation (3: one an epoch, one after training), and the logged training metrics. The script
saves and logs on process 0 only: another process returns its index and what its own evaluations
gave (its own batches: every process reads the whole file and takes the same ones; only process 0
evaluates the leftover, so another's evaluations have fewer tags)."""

import json
import os
import random
import sys
import tempfile
from pathlib import Path

import _hf_shims

_hf_shims.work_offline()

import jax  # noqa: E402
import numpy as np  # noqa: E402

ANIMALS = ["cat", "dog", "bird", "fox", "cow"]
COLOURS = ["red", "blue", "green", "black", "white"]
SHADES = ["dark", "light"]  # a colour's first word: `dark red` is B-COL I-COL
PLACES = ["hill", "river", "town", "forest"]
FILLER = ["the", "sat", "on", "ran", "to", "a", "big", "ball", "near", "small", "by", "saw", "and", "was"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LABELS = ["B-ANI", "B-COL", "B-LOC", "I-COL", "O"]  # sorted, as the script orders the tags it finds
TRAIN_EXAMPLES = 48
EVAL_EXAMPLES = int(os.environ.get("HF_NER_EVAL_EXAMPLES", "41"))
TRAIN_BATCH_PER_DEVICE = 2
EPOCHS = 2


def _chunks(tags):
    """The entities of one sentence's IOB tags, as seqeval's default (conlleval's) mode chunks them:
    a set of (type, start, end)."""
    chunks, start, kind = set(), None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, tag_kind = tag.partition("-")
        if start is not None and (prefix in ("B", "O") or tag_kind != kind):
            chunks.add((kind, start, i - 1))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, tag_kind
    return chunks


def _ratio(a, b):
    return a / b if b else 0.0


def _scores(correct, predicted, true):
    precision, recall = _ratio(correct, predicted), _ratio(correct, true)
    return precision, recall, _ratio(2 * precision * recall, precision + recall)


class _Seqeval:
    """The Hub's `seqeval` metric, local: add_batch accumulates, compute returns and starts over."""

    computed: list = []  # every compute()'s result, of every metric made, in order

    def __init__(self):
        self.predictions, self.references = [], []

    def add_batch(self, *, predictions, references):
        self.predictions += [list(p) for p in predictions]
        self.references += [list(r) for r in references]

    def compute(self):
        predictions, references = self.predictions, self.references
        self.predictions, self.references = [], []
        found = [(i, c) for i, p in enumerate(predictions) for c in _chunks(p)]
        gold = [(i, c) for i, r in enumerate(references) for c in _chunks(r)]
        right = set(found) & set(gold)
        result = {}
        for kind in sorted({c[0] for _, c in gold}):
            n_found = sum(c[0] == kind for _, c in found)
            n_gold = sum(c[0] == kind for _, c in gold)
            n_right = sum(c[0] == kind for _, c in right)
            precision, recall, f1 = _scores(n_right, n_found, n_gold)
            result[kind] = {"precision": precision, "recall": recall, "f1": f1, "number": n_gold}
        precision, recall, f1 = _scores(len(right), len(found), len(gold))
        tags = [t for p in predictions for t in p]
        truth = [t for r in references for t in r]
        result.update(overall_precision=precision, overall_recall=recall, overall_f1=f1,
                      overall_accuracy=_ratio(sum(p == t for p, t in zip(tags, truth)), len(truth)))
        _Seqeval.computed.append({**{k: v for k, v in result.items() if k.startswith("overall_")},
                                  "predictions": np.asarray([LABELS.index(t) for t in tags], np.int32)})
        return result


def _load_metric(path, *args, **kwargs):
    if path != "seqeval":
        raise ValueError(f"the driver's load_metric has `seqeval` only, not {path!r}")
    return _Seqeval()


def _script():
    """run_flax_ner, imported at the first call of main() (as hf_clm's script: nothing may start
    JAX's backend before several processes join), with the shims."""
    if "run_flax_ner" in sys.modules:
        return sys.modules["run_flax_ner"]
    _hf_shims.install(_load_metric)
    import run_flax_ner

    return run_flax_ner


def _sentence(draw: random.Random):
    """A few filler words with one to three entities among them, and their IOB2 tags."""
    words = [[(draw.choice(FILLER), "O")] for _ in range(draw.randint(2, 5))]
    entities = [[(draw.choice(ANIMALS), "B-ANI")],
                [(draw.choice(SHADES), "B-COL"), (draw.choice(COLOURS), "I-COL")] if draw.random() < 0.4
                else [(draw.choice(COLOURS), "B-COL")],
                [(draw.choice(PLACES), "B-LOC")]]
    for entity in draw.sample(entities, draw.randint(1, 3)):
        words.insert(draw.randint(0, len(words)), entity)
    return [w for w, _ in sum(words, [])], [t for _, t in sum(words, [])]


def _inputs(root: Path) -> None:
    """The tokenizer and the model (one folder) and the train and validation JSON-lines files."""
    from transformers import BertConfig, FlaxBertForTokenClassification

    vocab = {w: i for i, w in enumerate([*SPECIAL, *ANIMALS, *COLOURS, *SHADES, *PLACES, *FILLER])}
    _hf_shims.save_bert_tokenizer(vocab, root / "model")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
                        num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                        label2id={label: i for i, label in enumerate(LABELS)}, pad_token_id=0,
                        initializer_range=0.2)
    FlaxBertForTokenClassification(config, seed=0).save_pretrained(root / "model")
    draw = random.Random(0)
    for name, count in (("train.json", TRAIN_EXAMPLES), ("validation.json", EVAL_EXAMPLES)):
        rows = [_sentence(draw) for _ in range(count)]
        if name == "train.json":  # the script's labels are the training set's tags, sorted
            assert sorted({t for _, tags in rows for t in tags}) == LABELS
        (root / name).write_text("".join(json.dumps({"tokens": words, "ner_tags": tags}) + "\n"
                                         for words, tags in rows))


def main():
    run_flax_ner = _script()
    _hf_shims.quiet_logging()
    _Seqeval.computed.clear()
    _hf_shims.SummaryWriter.logged.clear()
    # One evaluation an epoch: the script's steps per epoch (its train batch is per device x local devices).
    steps_per_epoch = TRAIN_EXAMPLES // (TRAIN_BATCH_PER_DEVICE * jax.local_device_count())
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _inputs(root)
        out = root / "out"
        out.mkdir()
        sys.argv = ["run_flax_ner.py", f"--model_name_or_path={root / 'model'}",
                    f"--train_file={root / 'train.json'}", f"--validation_file={root / 'validation.json'}",
                    f"--cache_dir={root / 'cache'}", "--do_train", "--do_eval", "--max_seq_length=16",
                    f"--per_device_train_batch_size={TRAIN_BATCH_PER_DEVICE}", "--per_device_eval_batch_size=2",
                    "--learning_rate=3e-3", f"--num_train_epochs={EPOCHS}", "--warmup_steps=2",
                    "--logging_steps=1", f"--eval_steps={steps_per_epoch}", f"--output_dir={out}", "--seed=0"]
        run_flax_ner.main()
        logged = _hf_shims.logged(("train_learning_rate", "train_loss"))
        ran = {"eval": {**{key: np.asarray([c[f"overall_{key}"] for c in _Seqeval.computed], np.float32)
                           for key in ("precision", "recall", "f1", "accuracy")},
                        "predictions": np.stack([c["predictions"] for c in _Seqeval.computed])},
               "logged": logged}
        if jax.process_index() != 0:
            return {"process": np.int32(jax.process_index()), **ran}
        params = _hf_shims.saved_params(out)
    return {"params": params, **ran}
