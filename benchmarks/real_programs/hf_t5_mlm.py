"""Hugging Face transformers' `examples/flax/language-modeling/run_t5_mlm_flax.py` (fetched from
GitHub, not on PyPI; `benchmarks/real_programs.py` copies it beside this driver), T5's span-masked
language modelling, run whole on a tiny T5 and a tiny text corpus made here. The script is all
`if __name__ == "__main__":` (no `main()`), so the driver runs it as `__main__` (`runpy`) with its
command line, and reads what it left: the parameters it saved and its last evaluation's metrics.

Only data and configuration are chosen: a WordLevel tokenizer over a dozen words with the
`<extra_id_N>` sentinels the collator needs (added tokens, so that they come right after the
vocabulary: the collator numbers its sentinels from `tokenizer.vocab_size` up, and drops every id
0, the padding), a T5 of width 16 with one layer each side, 2 epochs, fixed seeds, `dropout_rate`
0 (pmap drew each device's masks from a key of its own, the global view draws them from one key).
The collator masks spans with NumPy's global generator, which the script seeds (`set_seed`).

The one shim, the same on both sides: transformers 4.46's Flax T5 (the library, not the script)
calls `jnp.clip(x, a_max=...)` in its relative position buckets, keywords JAX 0.10 no longer takes
(`TypeError: clip() got an unexpected keyword argument 'a_max'`); the driver gives `jnp.clip` them
back as the `min=`/`max=` that JAX 0.4.30 takes as well, so both sides compute the same clip.

The script's `logging.basicConfig(level="NOTSET")` would print every library's debug messages,
JAX's included; the driver sets a root handler at WARNING first, which makes that call do nothing.

main() returns the parameters the script saved and its last evaluation's loss and accuracy. The
script saves on process 0 only: another process returns its index."""

import runpy
import sys
import tempfile
from pathlib import Path

import _hf_shims

_hf_shims.work_offline()

import jax  # noqa: E402
import numpy as np  # noqa: E402

_clip = jax.numpy.clip


def _clip_a_min_a_max(arr, min=None, max=None, *, a_min=None, a_max=None):
    """`jnp.clip` that also takes the `a_min=`/`a_max=` transformers' Flax T5 passes."""
    return _clip(arr, a_min if min is None else min, a_max if max is None else max)


jax.numpy.clip = _clip_a_min_a_max

SCRIPT = Path(__file__).resolve().parent / "run_t5_mlm_flax.py"
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "a", "big", "red", "ball"]
SENTINELS = 4  # an example of 17 tokens has 3 of noise (15%), in one span (of 3): one sentinel; spares


def _inputs(root: Path) -> None:
    """The tokenizer, the model's configuration and the train and validation text files."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, T5Config

    vocab = {w: i for i, w in enumerate(["<pad>", "</s>", "<unk>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                            additional_special_tokens=[f"<extra_id_{i}>" for i in range(SENTINELS)],
                            model_input_names=["input_ids", "attention_mask"]).save_pretrained(root / "tokenizer")
    # vocab_size is set by the script (len(tokenizer)); pad 0 and eos 1 as T5's own.
    T5Config(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2,
             relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
             pad_token_id=0, eos_token_id=1, decoder_start_token_id=0).save_pretrained(root / "config")
    _hf_shims.write_sentences(root, WORDS, {"train.txt": 96, "validation.txt": 32})


def main():
    _hf_shims.quiet_logging()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _inputs(root)
        out = root / "out"
        sys.argv = [str(SCRIPT), f"--output_dir={out}", f"--cache_dir={root / 'cache'}",
                    f"--config_name={root / 'config'}", f"--tokenizer_name={root / 'tokenizer'}",
                    f"--train_file={root / 'train.txt'}", f"--validation_file={root / 'validation.txt'}",
                    "--do_train", "--do_eval", "--max_seq_length=16", "--per_device_train_batch_size=1",
                    "--per_device_eval_batch_size=1", "--num_train_epochs=2", "--learning_rate=3e-3",
                    "--warmup_steps=2", "--logging_steps=1", "--eval_steps=5", "--save_steps=1",
                    "--overwrite_output_dir", "--seed=0"]
        left = runpy.run_path(str(SCRIPT), run_name="__main__")
        if jax.process_index() != 0:
            return {"process": np.int32(jax.process_index())}
        params = _hf_shims.saved_params(out)
    return {"params": params,
            "eval": {k: np.float32(v) for k, v in sorted(left["eval_metrics"].items())}}
