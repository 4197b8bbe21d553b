"""Hugging Face transformers' `examples/flax/question-answering/run_qa.py` with its `utils_qa.py`
(fetched from GitHub, not on PyPI; `benchmarks/real_programs.py` copies them beside this driver),
its `main()` run whole: a tiny BERT fine-tuned for extractive question answering on SQuAD-format
JSON files made here (no `--dataset_name`: the script reads `--train_file`/`--validation_file`
with `load_dataset("json", field="data")`, and takes `question`, `context` and `answers` as the
columns). Only data and configuration are chosen: a WordLevel tokenizer over a few dozen words
with the special tokens BERT needs (`[PAD]` 0, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, a whitespace
pre-tokenizer, so that the offsets map tokens to the context's characters, and the
`[CLS] A [SEP] B [SEP]` template with its token types and sequence ids), saved as a
`PreTrainedTokenizerFast` (the script refuses a slow tokenizer), a BERT of width 16 with 2 layers
(`FlaxBertForQuestionAnswering`) saved with `save_pretrained` beside the tokenizer (the script's
`--model_name_or_path`; `initializer_range` 0.2, as hf_glue's, so that the start and end logits
differ from token to token from the start), and fixed seeds. Each example's context is a few
words with one colour and one animal among them, its question `which colour` or `which animal`,
its answer that word (with its `answer_start`): the model can learn a little of it. 64 training
questions, 2 per device, 3 epochs (12 steps on 8 devices, 96 as 2 processes of 1 device),
`--max_seq_length 16` (every question and context fit: one feature an example), `--doc_stride 4`,
`--logging_steps 1` (every step's training metrics are read and logged), `--eval_steps 1000`
(the script evaluates at the end of each epoch, and once more after training), and every dropout
probability 0 (pmap drew each device's masks from a key of its own, the global view draws them
from one key). The output folder is made before the run (the script's first evaluation writes its
predictions there, before anything has saved into it).

The validation set has `EVAL_EXAMPLES` (41) questions, not a multiple of the evaluation batch (2 per
device: 16 on 8 devices, 2 a process on 2 processes x 1 device), so that the script's "leftover
examples evaluated on one device" branch (process 0 only) runs as well as the sharded batches;
`HF_QA_EVAL_EXAMPLES` in the environment chooses another count (32: no leftover on either).

The shims, the same on both sides (`_hf_shims`: the tensorboard writer that records, the
metric given to `datasets.load_metric`, offline, quiet logging; and two of this driver's):

- `datasets.load_metric("squad")` downloads the metric's script from the Hub; the local metric's
  `compute(predictions=[{"id", "prediction_text"}], references=[{"id", "answers"}])` returns
  `{"exact_match": ..., "f1": ...}` in percent, SQuAD v1.1's (answers normalised: lower case, no
  punctuation, no articles `a`/`an`/`the`, single spaces; exact match and token F1, the best over an
  example's answers, averaged). It keeps what each `compute()` returned and the answers it was
  computed over (one string an evaluation, `|`-joined): main() returns both.
- The script logs through tensorboard only where `transformers.is_tensorboard_available()` says
  yes, which the shim makes it say: its `write_train_metric` then reads every step's training
  metrics on the host (`get_metrics`), and main() returns the training loss and learning rate it
  logged for each step (not `train_time`, nor the evaluation's: the metric's, above).
- The script makes its evaluation batches with `np.array(v)` of every column, `offset_mapping`
  too, whose rows are pairs for the context's tokens and `None` for the others: ragged, which NumPy
  made an object array of (with a warning) before 1.24 and refuses since (both venvs have a later
  NumPy). The driver gives the script (its module's `np`) a NumPy whose `array()`, where the
  NumPy here raises `ValueError` on a list without `dtype=`, makes that object array, as NumPy did
  in the script's day; every other call is NumPy's own. The script pops `offset_mapping` before
  its steps: those arrays never reach JAX.
- `postprocess_qa_predictions` (utils_qa, as the script imports it) is wrapped to record the start
  and end logits the script gives it (every evaluation's, -100 where a feature has none) before it
  runs as it is: main() returns them (as float32: the model computes them in float32).

`--cache_dir` is the run's temporary folder, so that the JSON files' Arrow tables and `map` caches
stay out of `~/.cache`.

transformers 4.46.3 runs this version of the script as it is (no shim of the library's calls).

main() returns the parameters the script saved (`model.save_pretrained(output_dir, params=...)` at
the last step, on process 0), the exact match, F1, answers and logits of each evaluation (4: one an
epoch, one after training), and the logged training metrics. The script saves and logs on process 0
only: another process returns its index and what its own evaluations gave (its own batches: every
process reads the whole JSON and takes the same ones; only process 0 evaluates the leftover, so
another's last rows of logits are -100)."""

import json
import os
import random
import re
import string
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path

import _hf_shims

_hf_shims.work_offline()

import jax  # noqa: E402
import numpy as np  # noqa: E402

COLOURS = ["red", "blue", "green", "black", "white"]
ANIMALS = ["cat", "dog", "bird", "fox", "cow"]
FILLER = ["the", "sat", "on", "mat", "ran", "to", "a", "big", "ball", "near", "tree", "small", "by", "hill"]
QUESTION = ["which", "colour", "animal"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TRAIN_EXAMPLES = 64
EVAL_EXAMPLES = int(os.environ.get("HF_QA_EVAL_EXAMPLES", "41"))


def _normalise(text):
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _f1(prediction, answer):
    predicted, gold = _normalise(prediction).split(), _normalise(answer).split()
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


class _Squad:
    """The Hub's `squad` metric (v1.1), local: compute returns exact match and F1 in percent."""

    computed: list = []  # every compute()'s result, of every metric made, in order

    def compute(self, *, predictions, references):
        answers = {r["id"]: r["answers"]["text"] for r in references}
        exact = [max(float(_normalise(p["prediction_text"]) == _normalise(a)) for a in answers[p["id"]])
                 for p in predictions]
        f1 = [max(_f1(p["prediction_text"], a) for a in answers[p["id"]]) for p in predictions]
        result = {"exact_match": 100.0 * float(np.mean(exact)), "f1": 100.0 * float(np.mean(f1))}
        _Squad.computed.append({**result, "answers": "|".join(p["prediction_text"] for p in predictions)})
        return result


def _load_metric(path, *args, **kwargs):
    if path != "squad":
        raise ValueError(f"the driver's load_metric has `squad` only, not {path!r}")
    return _Squad()


class _NumpyOfItsDay(types.ModuleType):
    """numpy, but `array()` of a ragged list (no dtype given) makes an object array, as numpy did
    (with a VisibleDeprecationWarning) before 1.24, instead of raising."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def array(obj, *args, **kwargs):
        try:
            return np.array(obj, *args, **kwargs)
        except ValueError:
            if args or "dtype" in kwargs:
                raise
            return np.array(obj, dtype=object, **kwargs)


_logits: list = []  # (start, end) logits of every evaluation, as the script gives them to utils_qa


def _recording(postprocess):
    def postprocess_qa_predictions(*args, **kwargs):
        start, end = kwargs["predictions"] if "predictions" in kwargs else args[2]
        _logits.append((np.asarray(start, np.float32), np.asarray(end, np.float32)))
        return postprocess(*args, **kwargs)

    return postprocess_qa_predictions


def _script():
    """run_qa, imported at the first call of main() (as hf_clm's script: nothing may start JAX's
    backend before several processes join), with the shims."""
    if "run_qa" in sys.modules:
        return sys.modules["run_qa"]
    _hf_shims.install(_load_metric)
    import run_qa

    run_qa.np = _NumpyOfItsDay("numpy")
    run_qa.postprocess_qa_predictions = _recording(run_qa.postprocess_qa_predictions)
    return run_qa


def _inputs(root: Path) -> None:
    """The tokenizer and the model (one folder) and the train and validation JSON files."""
    from transformers import BertConfig, FlaxBertForQuestionAnswering

    vocab = {w: i for i, w in enumerate([*SPECIAL, *COLOURS, *ANIMALS, *FILLER, *QUESTION])}
    _hf_shims.save_bert_tokenizer(vocab, root / "model")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
                        pad_token_id=0, initializer_range=0.2)
    FlaxBertForQuestionAnswering(config, seed=0).save_pretrained(root / "model")
    draw = random.Random(0)
    for name, count in (("train.json", TRAIN_EXAMPLES), ("validation.json", EVAL_EXAMPLES)):
        data = []
        for i in range(count):
            words = [draw.choice(FILLER) for _ in range(draw.randint(2, 5))]
            colour, animal = draw.choice(COLOURS), draw.choice(ANIMALS)
            for word in (colour, animal):
                words.insert(draw.randint(0, len(words)), word)
            asked = draw.choice(["colour", "animal"])
            answer = colour if asked == "colour" else animal
            at = words.index(answer)
            context = " ".join(words)
            data.append({"id": f"{name.split('.')[0]}-{i}", "title": "toy", "context": context,
                         "question": f"which {asked}",
                         "answers": {"text": [answer], "answer_start": [len(" ".join(words[:at] + [""]))]}})
            assert context[data[-1]["answers"]["answer_start"][0]:].startswith(answer)
        (root / name).write_text(json.dumps({"data": data}))


def main():
    run_qa = _script()
    _hf_shims.quiet_logging()
    _Squad.computed.clear()
    _hf_shims.SummaryWriter.logged.clear()
    _logits.clear()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _inputs(root)
        out = root / "out"
        out.mkdir()
        sys.argv = ["run_qa.py", f"--model_name_or_path={root / 'model'}",
                    f"--train_file={root / 'train.json'}", f"--validation_file={root / 'validation.json'}",
                    f"--cache_dir={root / 'cache'}", "--do_train", "--do_eval",
                    "--max_seq_length=16", "--doc_stride=4", "--per_device_train_batch_size=2",
                    "--per_device_eval_batch_size=2", "--learning_rate=3e-3", "--num_train_epochs=3",
                    "--warmup_steps=2", "--logging_steps=1", "--eval_steps=1000",
                    f"--output_dir={out}", "--seed=0"]
        run_qa.main()
        logged = _hf_shims.logged(("train_learning_rate", "train_loss"))
        ran = {"eval": {"exact_match": np.asarray([c["exact_match"] for c in _Squad.computed], np.float32),
                        "f1": np.asarray([c["f1"] for c in _Squad.computed], np.float32),
                        "answers": tuple(c["answers"] for c in _Squad.computed),
                        "start_logits": np.stack([start for start, _ in _logits]),
                        "end_logits": np.stack([end for _, end in _logits])},
               "logged": logged}
        if jax.process_index() != 0:
            return {"process": np.int32(jax.process_index()), **ran}
        params = _hf_shims.saved_params(out)
    return {"params": params, **ran}
