"""Helpers shared by the builders of the generative examples (autoencoders, VAE, GAN,
diffusion, flow): a chain of layers in one call, and the training settings they share.

Graphs are laid out and saved by `_classic.save_example`, like every other example.
"""

from __future__ import annotations

from _classic import wire
from _networks import chain

from nodegraph.model.graph import Graph
from nodegraph.model.groups import GroupDef


def layers(g: Graph, source: str, *steps: tuple[str, str, dict]) -> str:
    """Add `(id, type, params)` steps wired output → input after `source` ("node.port");
    returns the last step's id."""
    for node, block, params in steps:
        g.add(block, id=node, **params)
    wire(g, f"{source} -> {steps[0][0]}.input")
    chain(g, *(node for node, _, _ in steps))
    return steps[-1][0]


def mlp(prefix: str, sizes: list[int], activation: str = "activations.ReLU",
        last: str | None = None) -> list[tuple[str, str, dict]]:
    """Steps of an MLP: Linear `prefix`1 → activation → ... → Linear `prefix`K, then the
    `last` activation if given (a Sigmoid for pixels in [0, 1])."""
    steps: list[tuple[str, str, dict]] = []
    for i, width in enumerate(sizes, 1):
        if i > 1:
            steps.append((f"{prefix}_act{i - 1}", activation, {}))
        steps.append((f"{prefix}{i}", "layers.Linear", {"out_features": width}))
    if last is not None:
        steps.append((f"{prefix}_out", last, {}))
    return steps


def training(g: Graph, epochs: int, **extra) -> None:
    """The training section every generative example uses: seed 0, any device."""
    g.update_training(epochs=epochs, seed=0, device="auto", **extra)


def define_group(g: Graph, name: str, body: Graph, inputs: dict[str, list[str]],
                 outputs: dict[str, str]) -> None:
    """Add group `name` to `g` with `body` as its inside; ports map to "node.port" refs
    (an input may feed several inner ports). The body keeps no positions: the editor lays
    it out when its tab opens (the files never held them: a definition's ui is its body's,
    and the layout would tie the example files to the auto-layout's spacing)."""
    def ref(text: str) -> tuple[str, str]:
        node, port = text.split(".")
        return node, port

    g.define_group(GroupDef(name, body, {port: [ref(t) for t in targets]
                                         for port, targets in inputs.items()},
                            {port: ref(src) for port, src in outputs.items()}))


def adversarial_game(g: Graph, generator: Graph, discriminator: Graph, latent: int,
                     real: str, first: tuple[str, str], scopes: tuple[list[str], list[str]],
                     adam: dict) -> list[str]:
    """The GAN around two group bodies: noise → generator; one discriminator instanced on
    the real batch (`real`, "node.port"), on the detached fakes and on the fakes again (the
    latter two share the first's weights); the discriminator and non-saturating generator
    losses, each with its Adam over its network (`scopes`: the instances' inner nodes,
    INSTANCE__INNER, as validation sees them on the flattened graph), and prior samples.
    `first` names the inner node each body's input feeds. Returns the wires to make."""
    define_group(g, "generator", generator, {"z": [f"{first[0]}.input"]},
                 {"fake": "pixels.output"})
    define_group(g, "discriminator", discriminator, {"x": [f"{first[1]}.input"]},
                 {"logits": "logit.output"})
    g.add("samplers.PriorSample", id="noise", latent_dim=latent)
    g.add("group.generator", id="generator")
    g.add("layers.StopGradient", id="detach")
    g.add("group.discriminator", id="d_real")
    g.add("group.discriminator", id="d_fake", share="d_real")
    g.add("group.discriminator", id="d_gen", share="d_real")
    g.add("generative.GANDiscriminatorLoss", id="d_loss")
    g.add("generative.GANGeneratorLoss", id="g_loss", form="non_saturating")
    g.add("optimizers.Adam", id="opt_d", scope=scopes[0], **adam)
    g.add("optimizers.Adam", id="opt_g", scope=scopes[1], **adam)
    g.add("procedures.SamplePrior", id="samples", model="generator", count=16,
          image_shape=[8, 8])
    return ["data.x -> noise.like", "noise.output -> generator.z",
            "generator.fake -> detach.input", f"{real} -> d_real.x",
            "detach.output -> d_fake.x", "generator.fake -> d_gen.x",
            "d_real.logits -> d_loss.real_logits", "d_fake.logits -> d_loss.fake_logits",
            "d_gen.logits -> g_loss.fake_logits", "d_loss.loss -> opt_d.loss",
            "g_loss.loss -> opt_g.loss"]


def body(name: str, *steps: tuple[str, str, dict]) -> Graph:
    """A group body holding `steps` (id, type, params) chained output → input."""
    inside = Graph(name)
    for node, block, params in steps:
        inside.add(block, id=node, **params)
    chain(inside, *(node for node, _, _ in steps))
    return inside
