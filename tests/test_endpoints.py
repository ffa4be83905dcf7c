"""Nothing waits in silence: an MLflow server or a study's database that does not answer is
named at once ("connecting to ..."), and an error follows within the connect timeout,
before any training; a file that is no graph says what it is and what opens it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from nodegraph.model.errors import GraphFileError, NodegraphError
from nodegraph.runtime import endpoint

ROOT = Path(__file__).resolve().parents[1]


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, read, closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextmanager
def silent_server():
    """A port whose accept queue is full: a connection attempt gets no answer at all."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port = s.getsockname()[1]
    held = socket.create_connection(("127.0.0.1", port), timeout=5)  # fills the queue
    try:
        yield port
    finally:
        held.close()
        s.close()


@contextmanager
def mute_server():
    """A server that accepts connections and never answers a request."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def cli(*args: str, timeout: str = "10") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NODEGRAPH_CONNECT_TIMEOUT": timeout}
    return subprocess.run([sys.executable, "-m", "nodegraph", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=500)


def test_a_closed_port_is_named_after_a_line_that_says_whom_we_wait_for(capsys):
    port = closed_port()
    with pytest.raises(NodegraphError) as e:
        endpoint.reach("MLflow", f"http://127.0.0.1:{port}", "--mlflow")
    assert capsys.readouterr().err == f"connecting to MLflow at http://127.0.0.1:{port} …\n"
    assert str(e.value).startswith(f"--mlflow http://127.0.0.1:{port}: cannot connect to "
                                   f"127.0.0.1:{port} (Connection refused)")


def test_a_server_that_does_not_answer_ends_after_the_timeout(monkeypatch, capsys):
    monkeypatch.setenv(endpoint.TIMEOUT_VAR, "0.5")
    with silent_server() as port, pytest.raises(NodegraphError) as e:
        endpoint.reach("the study's database", f"postgresql://me:secret@127.0.0.1:{port}/db",
                       "--study")
    message = str(e.value)
    assert f"no answer from 127.0.0.1:{port} within 0.5 s" in message
    assert "NODEGRAPH_CONNECT_TIMEOUT" in message
    assert "secret" not in message and "me:***@" in message  # the password is not shown
    assert "secret" not in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1e9"])
def test_a_bad_timeout_setting_is_named(monkeypatch, value):
    monkeypatch.setenv(endpoint.TIMEOUT_VAR, value)
    with pytest.raises(NodegraphError, match="NODEGRAPH_CONNECT_TIMEOUT"):
        endpoint.reach("MLflow", "http://127.0.0.1:1", "--mlflow")


def test_local_stores_are_not_network_endpoints():
    for url in ("file:///tmp/mlruns", "sqlite:///x.db", "study.db", "mlruns", "databricks"):
        assert endpoint.address(url) is None
    assert endpoint.address("postgresql+psycopg2://u@db.example/x") == ("db.example", 5432)
    assert endpoint.address("https://mlflow.example") == ("mlflow.example", 443)


def test_mlflow_client_on_a_closed_port_fails_before_importing_anything_slow():
    from nodegraph.runtime.callbacks.mlflow import mlflow_client

    port = closed_port()
    with pytest.raises(NodegraphError, match=f"--mlflow http://127.0.0.1:{port}: cannot "):
        mlflow_client(f"http://127.0.0.1:{port}")


def test_mlflow_server_that_accepts_but_never_answers_ends_in_an_error(monkeypatch):
    pytest.importorskip("mlflow")
    from nodegraph.runtime.callbacks.mlflow import mlflow_client

    monkeypatch.setenv(endpoint.TIMEOUT_VAR, "1")
    with mute_server() as port, pytest.raises(NodegraphError) as e:
        mlflow_client(f"http://127.0.0.1:{port}")
    assert str(e.value).startswith(f"--mlflow http://127.0.0.1:{port}: the server took the "
                                   "connection but did not answer within 1 s")
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ  # the run's own requests keep theirs


def test_run_with_mlflow_on_a_closed_port_says_so_and_trains_nothing():
    port = closed_port()
    p = cli("run", "examples/xor.json", "--epochs", "1", "--mlflow", f"http://127.0.0.1:{port}")
    assert p.returncode == 1
    first, *rest = p.stderr.splitlines()
    assert first == f"connecting to MLflow at http://127.0.0.1:{port} …"
    assert f"cannot connect to 127.0.0.1:{port}" in p.stderr
    assert "epoch" not in p.stdout + p.stderr.lower().replace("--epochs", "")


def test_a_search_on_a_database_at_a_closed_port_says_so():
    pytest.importorskip("optuna")
    port = closed_port()
    url = f"postgresql://me:secret@127.0.0.1:{port}/studies"
    p = cli("sweep", "examples/xor.json", "--search", "random", "--trials", "1",
            "--param", "opt.lr=loguniform:1e-3:1e-1", "--study", url)
    assert p.returncode == 1, p.stdout + p.stderr
    shown = f"postgresql://me:***@127.0.0.1:{port}/studies"
    assert p.stderr.splitlines()[0] == f"connecting to the study's database at {shown} …"
    assert f"--study {shown}: cannot connect to 127.0.0.1:{port}" in p.stderr
    assert "secret" not in p.stdout + p.stderr


def test_search_from_python_reaches_the_database_first(capsys):
    pytest.importorskip("optuna")
    from nodegraph.runtime.search import storage_for

    port = closed_port()
    with pytest.raises(NodegraphError, match=f"cannot connect to 127.0.0.1:{port}"):
        storage_for(f"mysql://u@127.0.0.1:{port}/s")
    assert "connecting to the study's database" in capsys.readouterr().err


# -- files that are not graphs ------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A model, its weights, a torch pickle and an array, each as their writers write them."""
    import numpy as np
    import torch

    import nodegraph

    folder = tmp_path_factory.mktemp("files")
    m = nodegraph.fit(nodegraph.load(ROOT / "examples" / "xor.json"), epochs=1)
    m.save(folder / "model.ngz")
    m.export("weights", folder / "model.safetensors")
    torch.save(m.compiled.module.state_dict(), folder / "model.pt")
    np.save(folder / "x.npy", np.zeros(3))
    try:
        import onnx  # noqa: F401

        m.export("onnx", folder / "model.onnx")
    except ImportError:
        pass
    return folder


@pytest.mark.parametrize("name, says", [
    ("model.ngz", "a model saved by Model.save"),
    ("model.safetensors", "weights (safetensors), not a graph"),
    ("model.pt", "a PyTorch file (torch.save, a pickle)"),
    ("x.npy", "a NumPy array"),
    ("model.onnx", "an ONNX model"),
])
def test_load_names_what_the_file_is_and_what_opens_it(saved, name, says):
    import nodegraph

    path = saved / name
    if not path.exists():
        pytest.skip("onnx is not installed")
    with pytest.raises(GraphFileError) as e:
        nodegraph.load(path)
    message = str(e.value)
    assert message.startswith(f"{path}: {says}")
    assert "codec" not in message
    instead = {"model.ngz": "nodegraph.load_model(", "model.safetensors": "--init-weights",
               "model.pt": "nodegraph import", "x.npy": "data.NumPy",
               "model.onnx": "onnxruntime"}[name]
    assert instead in message


def test_the_cli_says_the_same_for_a_model_file(saved):
    p = cli("validate", str(saved / "model.ngz"))
    assert p.returncode != 0
    assert "a model saved by Model.save" in p.stderr and "nodegraph.load_model(" in p.stderr
    assert "codec" not in p.stderr


def test_a_graph_file_is_still_a_graph_file(saved):
    import nodegraph

    (saved / "g.json").write_text((ROOT / "examples" / "xor.json").read_text("utf-8"), "utf-8")
    assert "hidden" in nodegraph.load(saved / "g.json").nodes
