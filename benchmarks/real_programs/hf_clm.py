"""Hugging Face transformers' `examples/flax/language-modeling/run_clm_flax.py` (fetched from GitHub,
not on PyPI; `benchmarks/real_programs.py` copies it beside this driver), its `main()` run whole on
a tiny GPT-2 and a tiny text corpus made here. Only data and configuration are chosen: a WordLevel
tokenizer over a dozen words, 2 layers of width 16, 2 epochs, fixed seeds, and every dropout
probability 0 (the one choice the comparison needs: pmap drew each device's masks from a key of its
own, the global view draws them from one key).

The one shim, the same on both sides: the script is of a transformers whose
`FlaxAutoModelForCausalLM.from_config` took `use_auth_token`; 4.46 passes it on to the model's
module, which refuses it (`TypeError: FlaxGPT2LMHeadModule.__init__() got an unexpected keyword
argument 'use_auth_token'`), so the driver drops it.

main() returns the parameters the script saved and the metrics of its final evaluation. The script
saves on process 0 only: another process returns its index."""

import json
import sys
import tempfile
from pathlib import Path

import _hf_shims

_hf_shims.work_offline()

import jax  # noqa: E402
import numpy as np  # noqa: E402

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "a", "big", "red", "ball"]


def _inputs(root: Path) -> None:
    """The tokenizer, the model's configuration and the train and validation text files."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>", bos_token="<eos>",
                            model_input_names=["input_ids", "attention_mask"]).save_pretrained(root / "tokenizer")
    GPT2Config(vocab_size=len(vocab), n_positions=32, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
               embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=1).save_pretrained(root / "config")
    _hf_shims.write_sentences(root, WORDS, {"train.txt": 96, "validation.txt": 24})


def _script():
    """run_clm_flax, imported at the first call of main(), not with this driver: it imports
    `transformers.testing_utils`, which starts JAX's backend (`jax.default_backend()`), and run as
    several processes joined after import, JAX must not start before they join. With the shim."""
    import transformers

    auto = transformers.FlaxAutoModelForCausalLM
    if not getattr(auto, "_drops_use_auth_token", False):
        from_config = auto.from_config.__func__
        auto.from_config = classmethod(lambda cls, config, use_auth_token=None, **kw: from_config(cls, config, **kw))
        auto._drops_use_auth_token = True
    import run_clm_flax

    return run_clm_flax


def main():
    run_clm_flax = _script()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _inputs(root)
        out = root / "out"
        sys.argv = ["run_clm_flax.py", f"--output_dir={out}", f"--cache_dir={root / 'cache'}", "--model_type=gpt2",
                    f"--config_name={root / 'config'}", f"--tokenizer_name={root / 'tokenizer'}",
                    f"--train_file={root / 'train.txt'}", f"--validation_file={root / 'validation.txt'}",
                    "--do_train", "--do_eval", "--block_size=16", "--per_device_train_batch_size=1",
                    "--per_device_eval_batch_size=1", "--num_train_epochs=2", "--learning_rate=3e-3",
                    "--warmup_steps=2", "--logging_steps=1", "--eval_steps=5", "--save_steps=1",
                    "--overwrite_output_dir", "--seed=0", "--preprocessing_num_workers=1"]
        run_clm_flax.main()
        if jax.process_index() != 0:
            return {"process": np.int32(jax.process_index())}
        params = _hf_shims.saved_params(out)
        metrics = json.loads((out / "eval_results.json").read_text())
    return {"params": params,
            "eval": {k: np.float32(v) for k, v in metrics.items()}}
