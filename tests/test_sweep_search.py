"""Searches on Optuna (`nodegraph sweep --search`): a study on a SQLite file shared by two
processes finds the best of a known grid; a diverging trial is pruned from its per-epoch
numbers; `--write` saves the best graph; bad search spaces are named with node and param."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodegraph.cli.main import main
from nodegraph.cli.search_plot import best_so_far, text_plot, write_plot
from nodegraph.model import fileformat
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter
from nodegraph.runtime.callbacks.base import LoopState, Stage
from nodegraph.runtime.callbacks.pruning import TrialPruning
from nodegraph.runtime.search import SearchResult, Space, TrialRow, parse_space
from nodegraph.runtime.train import train

optuna = pytest.importorskip("optuna")

ROOT = Path(__file__).resolve().parent.parent
XOR = str(ROOT / "examples" / "xor.json")
# on XOR after 20 epochs (train.loss): lr 0.1 with 8 hidden units 0.218, with 2 units 0.552;
# lr 0.001: 0.693 / 0.711 — the grid's best is lr 0.1 with 8 units
GRID = ["--param", "opt.lr=choice:0.001,0.1", "--param", "hidden.out_features=choice:2,8"]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_two_processes_share_one_study_on_sqlite_and_find_the_best(tmp_path):
    """Two `nodegraph sweep` commands started at once on one SQLite file."""
    db = tmp_path / "study.db"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    # the first process also starts a helper of its own (--jobs 2): three on one study
    procs = [subprocess.Popen(
        [sys.executable, "-m", "nodegraph", "sweep", XOR, "--search", "grid", *GRID,
         "--epochs", "20", "--pruner", "none", "--study", f"sqlite:///{db}",
         "--study-name", "xor-grid", "-o", str(tmp_path / f"out{i}"),
         *(["--jobs", "2"] if i == 0 else [])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
        for i in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    study = optuna.load_study(study_name="xor-grid", storage=f"sqlite:///{db}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # every combination ran (the grid sampler may run one twice when the processes race)
    assert {(t.params["opt.lr"], t.params["hidden.out_features"]) for t in done} == {
        (0.001, 2), (0.001, 8), (0.1, 2), (0.1, 8)}
    assert len(done) == len(study.trials)
    # all three processes drew trials from the one study: each runs at least one before it
    # sees the grid used up
    assert len({t.user_attrs["worker"] for t in done}) == 3
    assert "trial" in (tmp_path / "out0" / "worker-1.log").read_text()
    assert study.best_params == {"opt.lr": 0.1, "hidden.out_features": 8}
    for text in outputs:
        assert "best: trial" in text and "opt.lr=0.1  hidden.out_features=8" in text
    # the summary lists the whole study, the best starred; the first process waited for its
    # helper, so its summary holds every trial
    rows = _rows(tmp_path / "out0" / "summary.csv")
    assert len(rows) == len(study.trials)
    starred = [r for r in rows if r["best"] == "*"]
    assert len(starred) == 1 and starred[0]["opt.lr"] == "0.1"
    assert float(starred[0]["train.loss"]) == pytest.approx(study.best_value)


def test_a_diverging_trial_is_pruned_early_and_write_saves_the_best(tmp_path, capsys):
    best = tmp_path / "best.json"
    out = tmp_path / "search"
    # lr 30 sends the XOR loss from 0.70 to above 14 in its second epoch: a threshold of 2
    # prunes it there, whatever the order of the trials
    code = main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1,30",
                 "--epochs", "20", "--pruner", "threshold:2", "-o", str(out),
                 "--write", str(best)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rows = {r["opt.lr"]: r for r in _rows(out / "summary.csv")}
    assert rows["30"]["state"] == "PRUNED" and int(rows["30"]["epochs"]) == 2
    assert rows["0.1"]["state"] == "COMPLETE" and int(rows["0.1"]["epochs"]) == 20
    assert rows["0.1"]["best"] == "*" and rows["30"]["best"] == ""
    graph = fileformat.load(best)
    assert graph.node("opt").params["lr"] == 0.1
    assert graph.node("hidden").params["out_features"] == 4  # untouched params stay
    assert "PRUNED" in printed.out and "wrote" in printed.out
    plot = (out / "trials.png") if (out / "trials.png").exists() else out / "trials.txt"
    assert plot.exists() and plot.stat().st_size > 0


class _Trial:
    """A trial that asks to be pruned once it has seen `prune_at` reports."""

    def __init__(self, prune_at: int):
        self.prune_at, self.reports = prune_at, []

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return len(self.reports) >= self.prune_at


def test_the_pruning_callback_reports_each_epoch_and_ends_the_run():
    graph = fileformat.load(XOR)
    trial = _Trial(prune_at=3)
    pruning = TrialPruning(trial, "train.loss")
    result = train(graph, epochs=10, callbacks=[pruning])
    assert pruning.pruned and result.stopped_early
    assert len(result.history) == 3
    assert trial.reports == [(e["epoch"], e["train"]["loss"]) for e in result.history]
    # a run that is never pruned reports every epoch and runs them all
    trial = _Trial(prune_at=99)
    result = train(graph, epochs=4, callbacks=[TrialPruning(trial, "train.loss")])
    assert len(result.history) == 4 and len(trial.reports) == 4 and not result.stopped_early


def test_a_missing_number_is_the_users_mistake_and_nan_prunes_at_once():
    pruning = TrialPruning(_Trial(prune_at=99), "val.loss")  # xor keeps no validation split
    with pytest.raises(NodegraphError, match=r"no val.loss .* among train.loss, "
                                             r"train.accuracy"):
        train(fileformat.load(XOR), epochs=5, callbacks=[pruning])
    # a diverged epoch (the loop's state after its validation) ends the run at once
    trial = _Trial(prune_at=99)
    pruning = TrialPruning(trial, "train.loss")
    state = LoopState([Stage("main", 10, ["opt"], [])])
    trainer = SimpleNamespace(state=state, events=Emitter())
    for loss in (0.7, float("inf")):
        state.epoch += 1
        state.train = {"loss": loss}
        pruning.on_validation_end(trainer)
        state.index += 1
        pruning.on_epoch_end(trainer)
    assert pruning.pruned and state.finished and state.stopped_early
    assert trial.reports[0] == (1, 0.7) and trial.reports[1][0] == 2
    assert math.isnan(trial.reports[1][1])


def test_random_and_tpe_draw_within_the_spaces_and_a_stored_study_resumes(tmp_path, capsys):
    db = tmp_path / "s.db"
    for sampler in ("random", "tpe"):
        args = ["sweep", XOR, "--search", sampler, "--param", "opt.lr=loguniform:1e-3:1e-1",
                "--param", "hidden.out_features=int:2:8:2", "--trials", "3", "--epochs", "3",
                "--study", str(db), "--study-name", sampler, "--sampler-seed", "1",
                "-o", str(tmp_path / sampler), "--log-dir", str(tmp_path / f"tb-{sampler}")]
        assert main(args) == 0, capsys.readouterr().err
        study = optuna.load_study(study_name=sampler, storage=f"sqlite:///{db}")
        assert len(study.trials) == 3
        for t in study.trials:
            assert 1e-3 <= t.params["opt.lr"] <= 1e-1
            assert t.params["hidden.out_features"] in (2, 4, 6, 8)
        # each trial has its own TensorBoard folder
        folders = sorted(p.name for p in (tmp_path / f"tb-{sampler}").iterdir())
        assert folders == ["trial-000", "trial-001", "trial-002"]
        assert all(any((tmp_path / f"tb-{sampler}" / f).iterdir()) for f in folders)
        # the same command again joins the stored study, which already holds its 3 trials
        capsys.readouterr()
        assert main(args) == 0
        assert "already holds 3 finished trials" in capsys.readouterr().out
        assert len(optuna.load_study(study_name=sampler, storage=f"sqlite:///{db}").trials) == 3


@pytest.mark.parametrize("spec, words", [
    ("opt.nope=float:0:1", ["node 'opt'", "param 'nope'", "has no param 'nope'"]),
    ("ghost.lr=float:0:1", ["--param ghost.lr", "no node 'ghost'"]),
    ("opt.lr=loguniform:0:1", ["node 'opt'", "param 'lr'", "0 < LOW"]),
    ("opt.lr=uniform:1:0.1", ["node 'opt'", "param 'lr'", "LOW must not exceed HIGH"]),
    ("opt.lr=gauss:0:1", ["node 'opt'", "param 'lr'", "unknown kind 'gauss'"]),
    ("opt.lr=float:a:b", ["node 'opt'", "param 'lr'", "not a number"]),
    ("hidden.out_features=int:2.5:8", ["node 'hidden'", "param 'out_features'",
                                       "whole numbers"]),
    ("hidden.out_features=choice:4,-3", ["node 'hidden'", "param 'out_features'", "-3"]),
    ("lr=float:0:1", ["NODE.PARAM=KIND"]),
])
def test_bad_search_spaces_name_the_node_and_param(tmp_path, capsys, spec, words):
    code = main(["sweep", XOR, "--search", "tpe", "--param", spec, "--trials", "2",
                 "-o", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 1
    for w in words:
        assert w in err, err
    assert not (tmp_path / "s").exists()  # nothing ran


def test_grid_needs_values_and_search_flags_need_a_search(tmp_path, capsys):
    assert main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=float:0.01:0.1",
                 "-o", str(tmp_path / "s")]) == 1
    assert "grid sampler needs a list of values" in capsys.readouterr().err
    assert main(["sweep", XOR, "--search", "tpe", "--param", "opt.lr=float:0.01:0.1",
                 "-o", str(tmp_path / "s")]) == 1
    assert "needs --trials" in capsys.readouterr().err
    assert main(["sweep", XOR, "--grid", "opt.lr=0.1", "--trials", "3"]) == 1
    assert "add --search" in capsys.readouterr().err
    assert main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1",
                 "--jobs", "2"]) == 1
    assert "give --study" in capsys.readouterr().err
    # a number the runs do not compute stops the search at its first trial
    assert main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1,0.01",
                 "--metric", "val.loss", "--epochs", "2", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "no val.loss to watch" in err and "train.accuracy" in err
    assert err.count("no val.loss") == 1
    assert main(["sweep", XOR, "--search", "tpe", "--param", "opt.lr=float:0.01:0.1",
                 "--trials", "2", "--pruner", "median:x"]) == 1
    assert "--pruner" in capsys.readouterr().err


def test_grid_flags_become_choices_of_a_search(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["sweep", XOR, "--search", "grid", "--grid", "opt.lr=0.001,0.1",
                 "--param", "hidden.out_features=choice:2,8", "--epochs", "20",
                 "--pruner", "none", "-o", str(out)]) == 0, capsys.readouterr().err
    rows = _rows(out / "summary.csv")
    assert len(rows) == 4 and {r["state"] for r in rows} == {"COMPLETE"}
    best = [r for r in rows if r["best"] == "*"]
    assert [(b["opt.lr"], b["hidden.out_features"]) for b in best] == [("0.1", "8")]


def test_search_spaces_parse():
    assert parse_space("opt.lr=loguniform:1e-4:1e-1") == Space("opt.lr", "loguniform", 1e-4, 0.1)
    assert parse_space("fc.out_features=int:8:64:8") == Space("fc.out_features", "int", 8, 64, 8)
    s = parse_space("conv.kernel_size=choice:[3,3],[5,5],7")
    assert s.choices == ([3, 3], [5, 5], 7)
    assert s.grid() == ["[3, 3]", "[5, 5]", 7]  # Optuna stores lists as JSON text
    assert parse_space("act.kind=choice:relu,tanh").choices == ("relu", "tanh")
    assert parse_space("fc.out_features=int:2:8:2").grid() == [2, 4, 6, 8]
    with pytest.raises(NodegraphError, match="STEP must be positive"):
        parse_space("opt.lr=float:0:1:0")


def test_text_plot_and_best_so_far():
    rows = [TrialRow(0, {}, 0.5, "COMPLETE", [(1, 0.5)]),
            TrialRow(1, {}, None, "PRUNED", [(1, 0.9), (2, 1.3)]),
            TrialRow(2, {}, 0.1, "COMPLETE", [(1, 0.1)], best=True),
            TrialRow(3, {}, 0.3, "COMPLETE", [(1, 0.3)])]
    result = SearchResult(rows, "val.loss", False, "s")
    assert best_so_far(result) == [(0, 0.5), (1, 0.5), (2, 0.1), (3, 0.1)]
    lines = text_plot(result).splitlines()
    # bars run from 1 (the lowest, 0.1) to 40 characters (the highest shown, 1.3: the pruned
    # trial's last report), in proportion
    assert lines[2].endswith("#" * 40) and "PRUNED" in lines[2]
    assert lines[3].endswith("#  * best") and lines[3].count("#") == 1
    assert lines[1].count("#") == round(40 * (0.5 - 0.1) / 1.2)
    rising = SearchResult(rows, "val.accuracy", True, "s")
    assert best_so_far(rising) == [(0, 0.5), (1, 0.5), (2, 0.5), (3, 0.5)]


def test_help_does_not_import_optuna():
    code = ("import sys\nfrom nodegraph.cli.main import main\n"
            "for argv in (['--help'], ['sweep', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print('optuna' in sys.modules, 'sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.strip().splitlines()[-1] == "False False"


def _result() -> SearchResult:
    return SearchResult([TrialRow(0, {"opt.lr": 0.1}, 0.5, "COMPLETE", [(1, 0.7), (2, 0.5)]),
                         TrialRow(1, {"opt.lr": 30}, 9.0, "PRUNED", [(1, 0.7), (2, 9.0)]),
                         TrialRow(2, {"opt.lr": 0.01}, 0.2, "COMPLETE", [(1, 0.6), (2, 0.2)],
                                  best=True)], "train.loss", False, "s")


def test_without_matplotlib_the_plot_is_the_text_chart(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    path = write_plot(_result(), tmp_path)
    assert path == tmp_path / "trials.txt"
    assert path.read_text() == text_plot(_result()) + "\n"


def test_with_matplotlib_the_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = write_plot(_result(), tmp_path)
    assert path == tmp_path / "trials.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_a_failing_trial_is_recorded_and_the_search_goes_on(tmp_path, capsys):
    out = tmp_path / "s"
    # 3 outputs against XOR's one target column: that trial's graph does not validate
    assert main(["sweep", XOR, "--search", "grid", "--param", "out.out_features=choice:1,3",
                 "--epochs", "3", "--metric", "train.accuracy", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    rows = {r["out.out_features"]: r for r in _rows(out / "summary.csv")}
    assert rows["3"]["state"] == "FAIL" and "'loss'" in rows["3"]["error"]
    assert rows["1"]["state"] == "COMPLETE" and rows["1"]["best"] == "*"
    assert "1 trial(s) failed" in err


def test_an_unknown_storage_is_a_users_error(tmp_path, capsys):
    for url, words in (("foo://bar", "Optuna cannot open this storage"),
                       (str(tmp_path / "no" / "s.db"), "does not exist")):
        assert main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1",
                     "--study", url, "-o", str(tmp_path / "o")]) == 1
        assert words in capsys.readouterr().err


def test_a_stored_study_keeps_its_direction(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    base = ["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1", "--epochs", "2",
            "--study", db, "--study-name", "one", "-o", str(tmp_path / "o")]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "--metric", "train.accuracy"]) == 1
    err = capsys.readouterr().err
    assert "seeks to minimize" in err and "would maximize" in err


def test_the_files_log_dir_becomes_one_folder_per_trial(tmp_path, capsys):
    logs = tmp_path / "tb"
    assert main(["sweep", XOR, "--search", "grid", "--param", "opt.lr=choice:0.1,0.01",
                 "--epochs", "2", "--set", f"training.log_dir={json.dumps(str(logs))}",
                 "-o", str(tmp_path / "o")]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in logs.iterdir()) == ["trial-000", "trial-001"]
