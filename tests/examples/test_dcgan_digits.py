"""examples/dcgan_digits.json: a convolutional GAN on the 8x8 digits, trained briefly.

Checked on what the generator learned, not only on its losses: a logistic-regression
classifier fitted to the real training digits reads the samples as digits of many classes,
with confident predictions; each sample lies much closer to some real digit than uniform
noise or the untrained generator's output does; and the discriminator has not won (its
loss stays far from 0, and it still gives the generated digits a fair chance of being
real). The discriminator is one set of weights for its three instances, each optimizer
moves only its own network's weights, and the generator's samples are in [-1, 1] like the
rescaled data.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch
from classic_support import assert_builder_writes_files, example, run
from sklearn.linear_model import LogisticRegression

import nodegraph
from nodegraph.interop.export import to_python
from nodegraph.runtime.procedure import run_procedure

QUICK = 12
# training the module's model takes ~40 s quiet (its fixture): the slow step runs these
pytestmark = pytest.mark.slow
COUNT = 200
# ConvTranspose2d weights are (in, out, k, k); BatchNorm adds γ and β per channel
G_PARAMS = ((32 * 128 * 2 * 2 + 128) + 2 * 128 + (128 * 64 * 4 * 4 + 64) + 2 * 64
            + (64 * 1 * 4 * 4 + 1))
D_PARAMS = (1 * 32 * 4 * 4 + 32) + (32 * 64 * 4 * 4 + 64) + 2 * 64 + (64 * 2 * 2 + 1)


@pytest.fixture(scope="module")
def result():
    torch.set_num_threads(1)
    return run("dcgan_digits", epochs=QUICK)


def samples(compiled) -> np.ndarray:
    frames = run_procedure(compiled, "samples", count=COUNT)
    return np.array([f["image"] for f in frames], dtype=np.float64).reshape(COUNT, 64)


@pytest.fixture(scope="module")
def real(result):
    """The training digits on the generator's scale, [-1, 1], one row per image."""
    tensors = result.compiled.datasets["data"].tensors("train")
    return 2 * tensors["x"].double().numpy().reshape(-1, 64) - 1, tensors["y"].numpy()


def nearest_distance(images: np.ndarray, real: np.ndarray) -> float:
    """Mean over `images` of the Euclidean distance to the closest real digit."""
    return torch.cdist(torch.from_numpy(images), torch.from_numpy(real)).min(1).values.mean()


def test_a_classifier_of_real_digits_reads_the_samples_as_digits(result, real):
    x, y = real
    classifier = LogisticRegression(max_iter=2000).fit(x, y)
    probabilities = classifier.predict_proba(samples(result.compiled))
    classes = np.bincount(probabilities.argmax(1), minlength=10)
    assert probabilities.max(1).mean() > 0.6, probabilities.max(1).mean()
    # many digits, not one: no mode collapse onto a single class
    assert (classes >= 5).sum() >= 7 and classes.max() < 0.4 * COUNT, classes


def test_samples_lie_close_to_real_digits(result, real):
    x, _ = real
    trained = samples(result.compiled)
    untrained = samples(nodegraph.compile(example("dcgan_digits"), device="cpu", seed=0))
    noise = np.random.default_rng(0).uniform(-1, 1, trained.shape)
    assert trained.min() >= -1 and trained.max() <= 1
    d_trained = nearest_distance(trained, x)
    assert d_trained < 0.6 * nearest_distance(untrained, x)
    assert d_trained < 0.6 * nearest_distance(noise, x)


def test_the_discriminator_has_not_won(result):
    for h in result.history:
        assert math.isfinite(h["train"]["d_loss"]) and math.isfinite(h["train"]["g_loss"])
    last = result.history[-1]["train"]
    # a discriminator that wins drives its loss to 0 and the generator's up without bound
    assert last["d_loss"] > 0.6 and last["g_loss"] < 2.5, last


def test_the_discriminator_is_counted_once(result):
    assert result.compiled.parameter_count() == G_PARAMS + D_PARAMS
    shared = result.module.module_of("d_real__conv1")
    assert shared is result.module.module_of("d_fake__conv1")
    assert shared is result.module.module_of("d_gen__conv1")


def weights(module, prefix: str) -> dict[str, torch.Tensor]:
    """The trainable weights of one network (BatchNorm's running statistics left out: they
    follow every forward pass in training mode, whichever optimizer steps)."""
    return {k: v.detach().clone() for k, v in module.named_parameters()
            if k.startswith(f"blocks.{prefix}")}


@pytest.mark.parametrize("opt, mine, other", [("opt_d", "d_real__", "generator__"),
                                              ("opt_g", "generator__", "d_real__")])
def test_each_optimizer_changes_only_its_network(opt, mine, other):
    g = example("dcgan_digits")
    g.set_training("stages", [{"name": opt, "epochs": 1, "optimizers": [opt]}])
    before = nodegraph.compile(g, device="cpu", seed=0).module
    after = nodegraph.train(g, device="cpu").module
    assert weights(before, other) and weights(before, mine)
    for key, value in weights(before, other).items():
        assert torch.equal(weights(after, other)[key], value), key
    for key, value in weights(before, mine).items():
        assert not torch.equal(weights(after, mine)[key], value), key


@pytest.fixture(scope="module")
def one_epoch_each(tmp_path_factory):
    """The first epoch of the exported plain-PyTorch script (`nodegraph export --to
    python`) and of nodegraph itself."""
    graph = example("dcgan_digits")
    path = to_python(graph, tmp_path_factory.mktemp("export") / "dcgan_digits.py").path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    _, mine = script.train(1, log=lambda line: None)
    return mine["history"][0], nodegraph.train(graph, epochs=1, device="cpu").history[0]


@pytest.mark.parametrize("key", ["d_loss", "g_loss"])
def test_the_exported_script_trains_like_nodegraph(one_epoch_each, key):
    """Two optimizers, BatchNorm, sampled noise: the same training losses."""
    mine, theirs = one_epoch_each
    assert mine["train"][key] == pytest.approx(theirs["train"][key], rel=1e-6)


def test_the_exported_script_evaluates_like_nodegraph(one_epoch_each):
    mine, theirs = one_epoch_each
    assert mine["val"]["d_loss"] == pytest.approx(theirs["val"]["d_loss"], rel=1e-5)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("dcgan_digits")
