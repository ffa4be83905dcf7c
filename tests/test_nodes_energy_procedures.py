"""procedures.GibbsChain: the chain is the RBM's own Gibbs step, seeded; clamped rows never
change; from noise, a trained RBM's chains end closer to the data than noise is."""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.errors import NodegraphError, NodeRuntimeError
from nodegraph.graph import Graph
from nodegraph.procedure import run_procedure


def rbm_graph(epochs: int) -> Graph:
    """Digits binarised by Step (x > 0) → RBM of 32 hidden units, CD-1 with SGD."""
    g = Graph("rbm")
    g.add("data.Digits", id="data", batch_size=32)
    g.add("activations.Step", id="binary")
    g.add("energy.BernoulliRBM", id="rbm", n_components=32)
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.add("procedures.GibbsChain", id="chain", model="rbm", image_shape=[8, 8], count=64,
          split="val")
    g.connect(("data", "x"), ("binary", "input"))
    g.connect(("binary", "output"), ("rbm", "input"))
    g.connect(("rbm", "loss"), ("opt", "loss"))
    g.training.update(epochs=epochs, seed=0)
    return g


@pytest.fixture(scope="module")
def trained():
    return nodegraph.train(rbm_graph(5), device="cpu").compiled


def test_the_chain_starts_at_the_binarised_data_and_is_seeded(trained):
    frames = run_procedure(trained, "chain", steps=2)
    x = trained.datasets["data"].tensors("val")["x"][:64]
    assert torch.equal(torch.tensor(frames[0]["visible"]), (x > 0).float())
    assert [f["step"] for f in frames] == [0, 1, 2]
    assert torch.tensor(frames[1]["image"]).shape == (64, 8, 8)
    again = run_procedure(trained, "chain", steps=2)
    assert again[2]["visible"] == frames[2]["visible"]
    other = run_procedure(trained, "chain", steps=2, seed=1)
    assert other[2]["visible"] != frames[2]["visible"]


def test_frames_are_the_rbms_gibbs_steps(trained):
    """With the same seed, the frames are P(v|h) of the block's own gibbs_step, k per frame."""
    frames = run_procedure(trained, "chain", steps=2, k=3, count=4)
    rbm = trained.module.module_of("rbm")
    v = torch.tensor(frames[0]["visible"])
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(0)))
    torch.manual_seed(seed)
    with torch.no_grad():
        for frame in frames[1:]:
            for _ in range(3):
                v, probs = rbm.gibbs_step(v)
            assert torch.tensor(frame["visible"]) == pytest.approx(probs, abs=1e-6)
    assert frames[-1]["step"] == 6


def test_clamped_rows_never_change_and_the_others_do(trained):
    frames = run_procedure(trained, "chain", start="noise", clamp_rows=[0, 1, 2, 3], steps=10)
    images = torch.tensor([f["image"] for f in frames])  # (frames, chains, 8, 8)
    data = torch.tensor(frames[0]["data"]).reshape(64, 8, 8)
    assert (images[:, :, :4] == data[:, :4]).all()
    assert not (images[:, :, 4:] == images[0, :, 4:]).all()
    assert torch.tensor(frames[0]["clamped"]).reshape(8, 8)[:4].all()


def nearest_distance(samples: torch.Tensor, data: torch.Tensor) -> float:
    """Mean over samples of the squared distance to the nearest data image."""
    return torch.cdist(samples, data).min(1).values.pow(2).mean().item()


def test_a_trained_rbm_samples_closer_to_the_data_than_noise(trained):
    data = (trained.datasets["data"].tensors("train")["x"] > 0).float()
    frames = run_procedure(trained, "chain", start="noise", steps=50)
    samples = torch.tensor(frames[-1]["visible"])
    noise = torch.tensor(frames[0]["visible"])
    assert nearest_distance(samples, data) < 0.5 * nearest_distance(noise, data)
    untrained = nodegraph.compile(rbm_graph(0), device="cpu", for_training=False)
    chains = torch.tensor(run_procedure(untrained, "chain", start="noise", steps=50)[-1]
                          ["visible"])
    assert nearest_distance(samples, data) < 0.5 * nearest_distance(chains, data)


def test_clamp_rows_need_an_image_shape_and_the_model_an_rbm(trained):
    with pytest.raises((NodegraphError, NodeRuntimeError), match="image_shape"):
        run_procedure(trained, "chain", clamp_rows=[0], image_shape=[])
    with pytest.raises((NodegraphError, NodeRuntimeError), match="outside"):
        run_procedure(trained, "chain", clamp_rows=[8])
    with pytest.raises((NodegraphError, NodeRuntimeError), match="BernoulliRBM"):
        run_procedure(trained, "chain", model="binary")
