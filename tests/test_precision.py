"""`training.precision` and `training.accumulate` (`nodegraph.runtime.precision`).

Accumulating K batches of B gives the step of one batch of K·B; bf16-mixed runs the
forward in bfloat16 with float32 weights; 16-mixed scales the loss with a GradScaler; the
float32 default keeps the trainer's own step (its numbers unchanged), and the Python export
trains to the same numbers under every setting.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

import nodegraph
from nodegraph.interop.export import to_python
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.callbacks.base import Callback


def line_fit(batch_size: int, **training):
    g = nodegraph.load("examples/line_fit.json")
    g.set_param("data", "batch_size", batch_size)
    g.set_param("data", "shuffle", False)
    g.update_training(training)
    return g


def _weights(result):
    return [p.detach().clone() for p in result.compiled.module.parameters()]


def test_accumulating_k_batches_steps_like_one_batch_k_times_larger():
    # 160 training samples: 8 batches of 20, 2 windows of 4; or 2 batches of 80
    small = nodegraph.train(line_fit(20, accumulate=4), epochs=6)
    large = nodegraph.train(line_fit(80), epochs=6)
    for a, b in zip(_weights(small), _weights(large), strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert small.history[-1]["val"]["loss"] == pytest.approx(large.history[-1]["val"]["loss"],
                                                             rel=1e-4)


def test_a_short_last_window_is_averaged_over_its_own_batches():
    # 8 batches of 20 in windows of 3: 3, 3 and a last window of 2 (40 samples)
    g = line_fit(20, accumulate=3)
    mine = _weights(nodegraph.train(g, epochs=1))
    torch.manual_seed(0)
    compiled = nodegraph.compile(line_fit(20), device="cpu")
    model, opt = compiled.module, compiled.optimizers[0]
    batches = list(compiled.datasets["data"].batches("train", node="data"))
    for window in (batches[0:3], batches[3:6], batches[6:8]):
        opt.optimizer.zero_grad()
        for values in window:
            (model.run(opt.plan, dict(values))[opt.loss_key] / len(window)).backward()
        opt.optimizer.step()
    for a, b in zip(mine, model.parameters(), strict=True):
        assert torch.allclose(a, b.detach(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_mixed_precision_trains_with_float32_weights(precision):
    plain = nodegraph.train(line_fit(20), epochs=8)
    mixed = nodegraph.train(line_fit(20, precision=precision), epochs=8)
    assert all(p.dtype == torch.float32 for p in mixed.compiled.module.parameters())
    last = mixed.history[-1]["train"]["loss"]
    assert last < 0.2 * mixed.history[0]["train"]["loss"]
    # close to float32, not equal: the forward ran in the lower precision
    assert last == pytest.approx(plain.history[-1]["train"]["loss"], rel=0.1)
    assert last != plain.history[-1]["train"]["loss"]


def test_the_forward_runs_in_the_mixed_dtype():
    seen = []
    g = line_fit(20, precision="bf16-mixed")

    def prepare(compiled):
        block = compiled.module.blocks["model"] if "model" in compiled.module.blocks else \
            next(iter(compiled.module.blocks.values()))
        block.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    nodegraph.train(g, epochs=1, prepare=prepare)
    assert torch.bfloat16 in seen


def test_accumulation_is_refused_where_it_would_be_wrong():
    gan = nodegraph.load("examples/gan_digits.json")
    gan.set_training("accumulate", 2)
    with pytest.raises(NodegraphError, match="accumulate needs one optimizer"):
        nodegraph.train(gan, epochs=1)
    lbfgs = nodegraph.load("examples/cholesterol_lbfgs.json")
    lbfgs.set_training("precision", "bf16-mixed")
    with pytest.raises(NodegraphError, match="L-BFGS"):
        nodegraph.train(lbfgs, epochs=1)


@pytest.mark.parametrize(("precision", "accumulate"),
                         [("bf16-mixed", 3), ("16-mixed", 1), ("32", 2), ("16-mixed", 2)])
def test_the_python_export_trains_to_the_same_numbers(tmp_path, precision, accumulate):
    g = nodegraph.load("examples/line_fit.json")
    g.update_training(precision=precision, accumulate=accumulate)
    path = to_python(g, tmp_path / "line_fit.py", "line_fit.json").path
    spec = importlib.util.spec_from_file_location("line_fit_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, mine = module.train(4, log=lambda line: None)
    theirs = nodegraph.train(g, epochs=4, device="cpu")
    for a, b in zip(mine["history"], theirs.history, strict=True):
        assert a["train"]["loss"] == pytest.approx(b["train"]["loss"], rel=1e-6)
        assert a["val"]["loss"] == pytest.approx(b["val"]["loss"], rel=1e-6)


class _Scaled(Callback):
    """Sets the loss scale by hand after epoch 1 (as an overflow would halve it) and keeps
    the scaler's state at the end of the run."""

    def __init__(self):
        self.end = None

    def on_epoch_end(self, trainer) -> None:
        if trainer.state.epoch == 1:
            trainer.precision.scaler.update(new_scale=1024.0)

    def on_run_end(self, trainer) -> None:
        self.end = trainer.precision.scaler.state_dict()


def test_a_resumed_16_mixed_run_keeps_its_loss_scale(tmp_path):
    """GradScaler works on the CPU: its scale and growth count travel in the checkpoint,
    and --resume continues with them (a fresh scaler would start at 65536 again)."""
    whole = _Scaled()
    straight = nodegraph.train(line_fit(20, precision="16-mixed"), epochs=4, device="cpu",
                               callbacks=[whole])
    first, second = _Scaled(), _Scaled()
    nodegraph.train(line_fit(20, precision="16-mixed"), epochs=2, device="cpu",
                    checkpoint_dir=tmp_path, callbacks=[first])
    saved = json.loads((tmp_path / "last" / "trainer.json").read_text())["precision"]
    assert saved["scaler"] == first.end and saved["scaler"]["scale"] == 1024.0
    assert saved["scaler"]["_growth_tracker"] > 0  # steps without overflow, counted
    resumed = nodegraph.train(line_fit(20, precision="16-mixed"), epochs=4, device="cpu",
                              checkpoint_dir=tmp_path, resume=True, callbacks=[second])
    assert second.end == whole.end
    assert whole.end["_growth_tracker"] > saved["scaler"]["_growth_tracker"]
    assert [h["train"]["loss"] for h in resumed.history] == \
        [h["train"]["loss"] for h in straight.history]


def test_a_malformed_loss_scale_in_a_checkpoint_is_refused(tmp_path):
    nodegraph.train(line_fit(20, precision="16-mixed"), epochs=1, device="cpu",
                    checkpoint_dir=tmp_path)
    info = tmp_path / "last" / "trainer.json"
    state = json.loads(info.read_text())
    state["precision"]["scaler"]["scale"] = -1
    info.write_text(json.dumps(state))
    with pytest.raises(NodegraphError, match="loss-scaler state is malformed"):
        nodegraph.train(line_fit(20, precision="16-mixed"), epochs=2, device="cpu",
                        checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_mixed_precision_on_a_cpu_warns_of_the_measured_slowdown(precision):
    from nodegraph.model.events import Emitter, Message

    events, messages = Emitter(), []
    events.subscribe(messages.append, Message)
    nodegraph.train(line_fit(20, precision=precision, device="cpu"), epochs=1, events=events)
    said = [m.text for m in messages if "slower, not faster" in m.text]
    assert len(said) == 1 and precision in said[0] and "as long as in float32" in said[0]
    events, messages = Emitter(), []
    events.subscribe(messages.append, Message)
    nodegraph.train(line_fit(20, device="cpu"), epochs=1, events=events)  # float32: quiet
    assert not [m for m in messages if "slower, not faster" in m.text]
