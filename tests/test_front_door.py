"""The public functions' argument checks (issue #35, item 5) and `set_training(**settings)`
(item 8): what was given, what is wanted, the close match; never an AttributeError from
deep inside."""

from __future__ import annotations

import numpy as np
import pytest

import nodegraph
from nodegraph.model.errors import NodegraphError


def xor():
    return nodegraph.load("examples/xor.json")


@pytest.mark.parametrize("call, function", [
    (lambda: nodegraph.fit("x.json"), "fit"),
    (lambda: nodegraph.train("x.json"), "train"),
    (lambda: nodegraph.validate("x.json"), "validate"),
    (lambda: nodegraph.summary("x.json"), "summary"),
])
def test_a_file_name_where_a_graph_goes_says_to_load_it(call, function):
    with pytest.raises(NodegraphError, match=rf"^{function}\(\) needs a Graph \(got str "
                       r"'x.json': load it with nodegraph.load\)$"):
        call()


def test_other_wrong_things_where_a_graph_goes():
    with pytest.raises(NodegraphError, match=r"needs a Graph \(got str 'm.ngz': a saved model "
                       "loads with nodegraph.load_model"):
        nodegraph.fit("m.ngz")
    with pytest.raises(NodegraphError, match=r"needs a Graph \(got dict\)"):
        nodegraph.validate({"nodes": {}})
    with pytest.raises(NodegraphError, match="load_model\\(\\) takes the path of a saved "
                       "model \\(got int 3\\)"):
        nodegraph.load_model(3)


def test_unknown_keywords_list_the_valid_ones_with_the_close_match():
    with pytest.raises(NodegraphError) as e:
        nodegraph.fit(xor(), epoch=3)
    assert "unknown keyword 'epoch' (did you mean epochs?)" in str(e.value)
    assert "it takes: batch_size, callbacks, checkpoint_dir" in str(e.value)
    with pytest.raises(NodegraphError, match=r"unknown keyword 'lr' \(a learning rate is the "
                       r"optimizer block's param: g.set_param\('opt', 'lr', 0.1\)\)"):
        nodegraph.fit(xor(), lr=0.1)


def test_callbacks_must_be_nodegraph_callbacks():
    class Duck:
        def on_epoch_end(self, trainer):
            pass

    for bad, name in ((print, "print"), (Duck(), "Duck")):
        with pytest.raises(NodegraphError, match=rf"callbacks\[0\] is {name}, not a "
                           "nodegraph.Callback; subclass nodegraph.Callback"):
            nodegraph.fit(xor(), epochs=1, callbacks=[bad])
    with pytest.raises(NodegraphError, match=r"takes a list of nodegraph.Callback \(got int"):
        nodegraph.fit(xor(), epochs=1, callbacks=3)

    class Counting(nodegraph.Callback):
        seen = 0

        def on_epoch_end(self, trainer):
            Counting.seen += 1

    nodegraph.fit(xor(), epochs=2, callbacks=Counting())  # one callback alone is a list of one
    assert Counting.seen == 2


def test_numbers_and_arguments_that_do_not_fit():
    with pytest.raises(NodegraphError, match=r"fit\(epochs=\.\.\.\) takes a whole number >= 0 "
                       r"\(got str '3'\)"):
        nodegraph.fit(xor(), epochs="3")
    with pytest.raises(NodegraphError, match=r"batch_size=\.\.\.\) takes a whole number >= 1"):
        nodegraph.fit(xor(), epochs=1, batch_size=0)
    with pytest.raises(NodegraphError, match="validation_data=...\\) goes with your own"):
        nodegraph.fit(xor(), epochs=1, validation_data=(np.zeros((4, 2)), np.zeros(4)))
    m = nodegraph.fit(xor(), epochs=1)
    with pytest.raises(NodegraphError, match=r"evaluate\(\) takes a split's name, or x= and y="):
        m.evaluate(np.zeros((4, 2)))
    with pytest.raises(NodegraphError, match="class_weight and metrics are chosen by the first"):
        m.fit(epochs=1, class_weight="balanced")


def test_set_training_takes_several_settings_and_the_one_pair():
    g = xor()
    g.set_training(epochs=50, seed=3)
    assert g.training["epochs"] == 50 and g.training["seed"] == 3
    g.set_training("epochs", 7)
    assert g.training["epochs"] == 7
    g.set_training("seed", None)  # None removes it, as before
    assert "seed" not in g.training
    seen = []
    g.events.subscribe(lambda e: seen.append((e.name, e.value)))
    g.set_training(epochs=9, patience=2)  # one event per setting, as the editor follows them
    assert seen == [("epochs", 9), ("patience", 2)]
    with pytest.raises(TypeError, match="needs its value"):
        g.set_training("epochs")
    with pytest.raises(TypeError, match="given twice"):
        g.set_training("epochs", 3, epochs=4)
