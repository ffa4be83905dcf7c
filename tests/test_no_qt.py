"""The core and the blocks import and train in an environment without Qt."""

from __future__ import annotations

import subprocess
import sys

BLOCK_QT = """
import importlib.abc, sys
class NoQt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6'}:
            raise ImportError('Qt is not installed here')
sys.meta_path.insert(0, NoQt())
"""


def test_core_and_blocks_work_without_qt():
    code = BLOCK_QT + """
import nodegraph, nodes
from nodegraph.model.spec import default_registry
assert len(default_registry()) > 10
result = nodegraph.train(nodegraph.load('examples/xor.json'), epochs=5)
assert len(result.history) == 5
assert not any(m.split('.')[0] in {'PySide6', 'pyqtgraph'} for m in sys.modules)
print('ok')
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_edit_without_qt_says_what_to_install():
    code = BLOCK_QT + """
from nodegraph.cli.main import main
sys.exit(main(['edit', 'examples/xor.json']))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert "pip install 'nodegraph[gui]'" in proc.stderr and "Traceback" not in proc.stderr
