from sklearn.datasets import make_moons

import nodegraph

x, y = make_moons(1000, noise=0.2, random_state=0)
x_val, y_val = make_moons(200, noise=0.2, random_state=1)
x_new, _ = make_moons(7, noise=0.2, random_state=2)

g = nodegraph.Graph("moons")
g.add("data.Arrays", id="data", x_shape=[2], target_kind="class", normalize="zscore")
g.add("layers.Linear", id="hidden", out_features=16)
g.add("activations.ReLU", id="relu")
g.add("layers.Linear", id="out", out_features=2)
g.add("losses.CrossEntropy", id="loss")
g.add("optimizers.Adam", id="opt", lr=0.01)
g.add("metrics.Accuracy", id="accuracy")
for src, dst in [("data.x", "hidden.input"), ("hidden.output", "relu.input"),
                 ("relu.output", "out.input"), ("out.output", "loss.input"),
                 ("data.y", "loss.target"), ("loss.loss", "opt.loss"),
                 ("out.output", "accuracy.input"), ("data.y", "accuracy.target")]:
    g.connect(tuple(src.split(".")), tuple(dst.split(".")))
g.set_training(patience=10, monitor="val.loss")  # early stopping, back to the best epoch

m = nodegraph.fit(g, x=x, y=y, validation_data=(x_val, y_val), epochs=100, batch_size=32,
                  checkpoint_dir="moons_checkpoints")
print(m.evaluate(x=x_val, y=y_val)["accuracy"])
print(m.predict(x_new).argmax(1))
m.save("moons.ngz")
m = nodegraph.load_model("moons.ngz")
