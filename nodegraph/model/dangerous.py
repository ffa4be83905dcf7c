"""Callables of well-known packages that do more than compute, and what each can do.

Trusting a module (`nodegraph.model.allowlist`) opens its own functions and classes. Most
of a numerical library computes; a few read or write files, unpickle (which runs any code
a file holds), start processes, open the network or load native code: ``numpy:load`` with
``allow_pickle`` runs a shell command from a crafted .npy, ``numpy:save`` writes anywhere.
This table names them, so the trust prompt and the ``--trust`` line say what such a name
can do, and trust grants one only by its full name (``--grant numpy:load``), never with its
module. A name is looked up as the file writes it (before anything is imported) and, once
its module is imported, by identity, so an alias (``numpy.lib._npyio_impl:load``) is the
same callable. ``tests/test_trust_grants.py`` checks that every name here exists in the
installed package. Keep it maintained: a new reader or writer of these packages belongs
here.

torch and the standard library are never trusted (only the allowlist opens them), so their
entries only make messages say what a refused name would have done.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

READS = "reads files"
WRITES = "writes files"
UNPICKLES = "unpickles (runs code stored in the file)"
PROCESSES = "runs processes"
NETWORK = "opens the network"
NATIVE = "loads native code"

R, W, U, P, N, C = READS, WRITES, UNPICKLES, PROCESSES, NETWORK, NATIVE


def _each(module: str, names: str, *powers: str) -> dict[str, tuple[str, ...]]:
    return {f"{module}:{name}": powers for name in names.split()}


TABLE: dict[str, tuple[str, ...]] = {
    # numpy: np.load unpickles object arrays when allow_pickle is set; the text readers
    # take URLs through numpy's DataSource
    **_each("numpy", "load", R, U),
    **_each("numpy", "save savez savez_compressed savetxt", W),
    **_each("numpy", "loadtxt genfromtxt", R, N),
    **_each("numpy", "fromfile fromregex", R),
    **_each("numpy", "memmap", R, W),
    **_each("numpy", "ndarray.tofile", W),
    **_each("numpy", "ndarray.dump", W),
    **_each("numpy.lib.format", "read_array", R, U),
    **_each("numpy.lib.format", "write_array", W),
    **_each("numpy.lib.format", "open_memmap", R, W),
    **_each("numpy.lib.npyio", "DataSource", R, W, N),
    **_each("numpy.ctypeslib", "load_library", C),
    # torch (never trusted; what its refused names would do)
    **_each("torch", "load", R, U),
    **_each("torch", "save", W),
    **_each("torch", "from_file", R, W),
    **_each("torch", "UntypedStorage.from_file", R, W),
    **_each("torch.serialization", "load", R, U),
    **_each("torch.serialization", "save", W),
    **_each("torch.jit", "load", R, C),
    **_each("torch.jit", "save", W),
    **_each("torch.hub", "load", N, W, R, U, C),
    **_each("torch.hub", "load_state_dict_from_url", N, W, U),
    **_each("torch.hub", "download_url_to_file", N, W),
    **_each("torch.package", "PackageImporter", R, U),
    **_each("torch.package", "PackageExporter", W),
    **_each("torch.utils.cpp_extension", "load load_inline", P, W, C),
    **_each("torch.ops", "load_library", C),
    **_each("torch.multiprocessing", "spawn start_processes", P),
    **_each("torch.onnx", "export", W),
    **_each("torch.utils.tensorboard", "SummaryWriter", W),
    # scipy
    **_each("scipy.io", "loadmat readsav mmread hb_read", R),
    **_each("scipy.io", "savemat mmwrite hb_write", W),
    **_each("scipy.io", "netcdf_file FortranFile", R, W),
    **_each("scipy.io.wavfile", "read", R),
    **_each("scipy.io.wavfile", "write", W),
    **_each("scipy.sparse", "load_npz", R),
    **_each("scipy.sparse", "save_npz", W),
    **_each("scipy.datasets", "ascent face electrocardiogram download_all", N, W),
    # pandas: the readers take URLs (and read_sql a database connection)
    **_each("pandas", "read_pickle", R, N, U),
    **_each("pandas", "read_csv read_table read_fwf read_json read_html read_xml "
                      "read_excel read_parquet read_feather read_orc read_stata read_sas "
                      "read_spss read_hdf", R, N),
    **_each("pandas", "read_sql read_sql_query read_sql_table", N, R, W),
    **_each("pandas", "read_clipboard", P),
    **_each("pandas", "to_pickle", W),
    **_each("pandas", "HDFStore", R, W),
    **_each("pandas", "ExcelFile", R),
    **_each("pandas", "ExcelWriter", W),
    **{f"pandas:{cls}.{m}": (W,) for cls in ("DataFrame", "Series")
       for m in "to_csv to_json to_pickle to_excel to_hdf to_parquet to_feather to_stata "
                "to_html to_latex to_markdown to_xml to_orc to_string".split()
       if not (cls == "Series" and m in ("to_parquet", "to_feather", "to_stata", "to_html",
                                          "to_xml", "to_orc"))},
    **{f"pandas:{cls}.to_sql": (N, W) for cls in ("DataFrame", "Series")},
    **{f"pandas:{cls}.to_clipboard": (P,) for cls in ("DataFrame", "Series")},
    # scikit-learn and joblib: models are saved with pickle; fetchers download and cache
    **_each("joblib", "load", R, U),
    **_each("joblib", "dump", W),
    **_each("joblib", "Memory", R, W, U),
    **_each("joblib", "Parallel", P),
    **_each("sklearn.datasets", "fetch_openml fetch_california_housing fetch_covtype "
                                "fetch_kddcup99 fetch_lfw_people fetch_lfw_pairs "
                                "fetch_olivetti_faces fetch_rcv1 fetch_20newsgroups "
                                "fetch_20newsgroups_vectorized fetch_species_distributions",
            N, W, U),
    **_each("sklearn.datasets", "load_svmlight_file load_svmlight_files load_files", R),
    **_each("sklearn.datasets", "dump_svmlight_file", W),
    # the standard library (never trusted; what its refused names would do)
    **_each("pickle", "load loads Unpickler", U),
    **_each("pickle", "dump", W),
    **_each("os", "system popen execv execve execl execlp execvp spawnv spawnl "
                  "posix_spawn fork kill", P),
    **_each("os", "remove unlink rmdir removedirs rename replace mkdir makedirs chmod "
                  "symlink link truncate", W),
    **_each("os", "open", R, W),
    **_each("os", "listdir scandir walk", R),
    **_each("subprocess", "run Popen call check_call check_output getoutput "
                          "getstatusoutput", P),
    **_each("shutil", "copy copy2 copyfile copytree move make_archive unpack_archive", R, W),
    **_each("shutil", "rmtree chown", W),
}


def powers(path: str) -> tuple[str, ...]:
    """What `path` (``module:qualname``, as a file writes it) can do beyond computing, by
    name alone (nothing is imported); () for a name the table does not list."""
    return TABLE.get(path, ())


def powers_of(obj: Any, path: str) -> tuple[str, ...]:
    """What the imported object `obj` (named `path`) can do beyond computing: by its name,
    else by identity with a listed callable of the same package whose module is imported
    already (an alias such as ``numpy.lib._npyio_impl:load``). Imports nothing."""
    found = powers(path)
    if found:
        return found
    top = path.partition(":")[0].split(".")[0]
    for listed, listed_powers in TABLE.items():
        if listed.split(".", 1)[0].split(":", 1)[0] == top and _listed(listed) is obj:
            return listed_powers
    return ()


def _listed(path: str) -> Any:
    """The object a table entry names, when its module is imported already; else None."""
    module_name, _, qualname = path.partition(":")
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        if obj is None:
            return None
        obj = vars(obj).get(part) if isinstance(obj, types.ModuleType) else getattr(
            obj, part, None)
    return obj


def resolve_listed(path: str) -> Any:
    """The object a table entry names, importing its module (for the table's own test)."""
    module_name, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def describe(powers_: tuple[str, ...]) -> str:
    """``reads files, unpickles (runs code stored in the file)``."""
    return ", ".join(powers_)
