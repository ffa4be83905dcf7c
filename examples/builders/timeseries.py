"""A lag-window MLP against an LSTM on a chaotic series, judged on the free run.

A course exercise forecasts the Santa Fe laser (1000 training steps, 100 test steps) by feeding
each prediction back into the input window, and find the LSTM (lag 50, 100 hidden: test
MSE 418) far better than the best one-hidden-layer MLP (lag 100, 50 hidden: 2463). The
Santa Fe file is not shipped; data.ChaoticSeries is its stand-in (the Lorenz system the
laser obeys, observed as the intensity x²), 1200 samples cut chronologically into train,
validation and a final test stretch, scaled to [0, 1] with the training range.

Both models sit in a group (`forecaster`) so procedures.RecursiveForecast can loop around
the whole predictor: it starts from the first test window and predicts `steps` values,
each fed back as the newest lag.

    timeseries_mlp.json   lag 10 (flat) -> Linear 50 -> tanh -> Linear 1
    timeseries_lstm.json  lag 10 (sequence) -> LSTM 32 -> last state -> Linear 1

Both read the same 10 lags (the exercise's shorter LSTM lag) and forecast 30 steps; smaller
than the exercise's sizes so that they train in seconds on a CPU.

    python examples/builders/timeseries.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _networks import chain

from nodegraph.model.graph import Graph
from nodegraph.model.groups import make_group

# the series and its split, shared so both models see the same numbers
SERIES = {"n": 1200, "val_fraction": 0.15, "test_fraction": 0.1, "batch_size": 64}
FORECAST_STEPS = 30


def _finish(g: Graph, model_nodes: list[str], last: str, epochs: int) -> Graph:
    g.add("losses.MSE", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    wire(g, f"{last}.output -> loss.input", "data.y -> loss.target", "loss.loss -> opt.loss")
    make_group(g, model_nodes, "forecaster", instance="model")
    g.add("procedures.RecursiveForecast", id="forecast", model="model",
          steps=FORECAST_STEPS, split="test")
    g.update_training(epochs=epochs, seed=0, device="auto", patience=10,
                      monitor="val.loss")
    return g


def mlp(window: int = 10, hidden: int = 50) -> Graph:
    g = Graph("timeseries-mlp")
    g.add("data.ChaoticSeries", id="data", window=window, layout="flat", **SERIES)
    g.add("layers.Linear", id="hidden", out_features=hidden)
    g.add("activations.Tanh", id="act")
    g.add("layers.Linear", id="out", out_features=1)
    wire(g, "data.x -> hidden.input")
    chain(g, "hidden", "act", "out")
    return _finish(g, ["hidden", "act", "out"], "out", epochs=100)


def lstm(window: int = 10, hidden: int = 32) -> Graph:
    g = Graph("timeseries-lstm")
    g.add("data.ChaoticSeries", id="data", window=window, layout="sequence", **SERIES)
    g.add("recurrent.LSTM", id="lstm", hidden_size=hidden)
    g.add("layers.Linear", id="out", out_features=1)
    wire(g, "data.x -> lstm.input", "lstm.last -> out.input")
    return _finish(g, ["lstm", "out"], "out", epochs=40)


def build() -> dict[str, Graph]:
    return {"timeseries_mlp": mlp(), "timeseries_lstm": lstm()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
