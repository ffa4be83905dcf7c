"""`nodegraph.forward` and `nodegraph forward`: one batch through a graph, in one call."""

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model.errors import NodegraphError

XOR = "examples/xor.json"
X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)


def test_forward_equals_the_compiled_module_on_the_same_batch():
    g = nodegraph.load(XOR)
    compiled = nodegraph.compile(g, for_training=False)
    out = nodegraph.forward(g, compiled=compiled)
    x = out["data", "x"]
    manual = compiled.module.blocks["hidden"](x)
    manual = compiled.module.blocks["out"](compiled.module.blocks["act"](manual))
    torch.testing.assert_close(out["out", "output"], manual, rtol=0, atol=0)
    expected_loss = torch.nn.functional.binary_cross_entropy_with_logits(manual,
                                                                        out["data", "y"])
    torch.testing.assert_close(out["loss", "loss"], expected_loss)


def test_forward_on_given_arrays_runs_what_it_can_and_leaves_out_the_loss():
    g = nodegraph.load(XOR)
    result = nodegraph.train(g, epochs=300, seed=0, device="cpu")
    out = nodegraph.forward(g, {"data.x": X}, compiled=result.compiled)
    assert ("loss", "loss") not in out  # no target given
    predicted = (out["out", "output"] > 0).int().flatten().tolist()
    assert predicted == [0, 1, 1, 0]  # the trained weights, not fresh ones


def test_forward_limits_the_run_to_what_a_node_needs():
    g = nodegraph.load(XOR)
    out = nodegraph.forward(g, nodes={"hidden"})
    assert ("hidden", "output") in out and ("out", "output") not in out


@pytest.mark.parametrize("inputs, message", [
    ({"nope.x": X}, "no node 'nope'"),
    ({"hidden.input": X}, "has no output port 'input'"),
    ({"data.x": X[0]}, r"expects \(N, 2\)"),
    ({"x": X}, "name it 'node.port'"),
])
def test_bad_inputs_name_the_node_and_port(inputs, message):
    with pytest.raises(NodegraphError, match=message):
        nodegraph.forward(nodegraph.load(XOR), inputs)


def test_forward_needs_no_loss_or_optimizer():
    g = nodegraph.Graph("forward only")
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="fc", out_features=3)
    g.connect(("data", "x"), ("fc", "input"))
    with pytest.raises(nodegraph.ValidationError, match="for_training=False"):
        nodegraph.compile(g)  # training is the default, and it says how to ask for inference
    out = nodegraph.forward(g, {"data.x": X})
    assert out["fc", "output"].shape == (4, 3)


def test_the_forward_command_writes_every_output(tmp_path, capsys):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **{"data.x": X})
    out = tmp_path / "out.npz"
    assert main(["forward", XOR, "--inputs", str(inputs), "-o", str(out)]) == 0
    with np.load(out) as arrays:
        assert arrays["out.output"].shape == (4, 1) and "loss.loss" not in arrays.files
    assert "wrote 4 arrays" in capsys.readouterr().out
    assert main(["forward", XOR, "-o", str(tmp_path / "batch.npz"), "--split", "train"]) == 0
    with np.load(tmp_path / "batch.npz") as arrays:
        assert "loss.loss" in arrays.files


def test_the_forward_command_refuses_a_bad_inputs_file(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_text("not an archive")
    assert main(["forward", XOR, "--inputs", str(bad), "-o", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err
    assert "bad.npz" in err and "internal error" not in err
    assert not (tmp_path / "o.npz").exists()
