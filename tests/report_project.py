"""A small project for the report's tests: every category, every pmap route but the global view,
a file whose name is markup and a message that quotes markup from the code."""

from __future__ import annotations

from pathlib import Path

XSS_FILE = "<img src=x onerror=alert(1)>.py"
XSS_CODE = "<img src=x onerror=document.title='pwned'>"

FILES = {
    # JM101 keeps the exact rewrite (a step built once, in the driver, over replicated values);
    # the global view is blocked at line 15 (the step's output, returned by `main`, is dropped
    # there with its device axis), whose code (quoted in the message) is markup.
    "steps.py": (
        "import jax\n\n\n"
        "def train_step(params, batch):\n"
        '    return jax.lax.pmean(params * batch, "batch")\n\n\n'
        "def main(batch):\n"
        '    step = jax.pmap(train_step, axis_name="batch")\n'
        f'    return step(jax.device_put_replicated(load("{XSS_CODE}"), jax.devices()),\n'
        "                jax.device_put_replicated(batch, jax.devices()))\n\n\n"
        'if __name__ == "__main__":\n'
        f'    main(load("{XSS_CODE}"))\n'
    ),
    # One safe fix, one finding suppressed.
    XSS_FILE: "import jax\n\na = jax.tree_map(f, t)\nb = jax.tree_map(g, t)  # noqa: JM601\n",
    # Two findings of a rule with no fix: one reason, counted twice.
    "data/shard.py": (
        "import jax\n\n\ndef split(x):\n    return x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n\n\n"
        "def split_again(y):\n    return y.reshape((jax.local_device_count(), -1) + y.shape[1:])\n"
    ),
    # A pmap kept as it is: `devices=` blocks every rewrite.
    "data/kept.py": "import jax\n\nstep = jax.pmap(f, devices=jax.devices()[:2])\n",
}


def make(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root
