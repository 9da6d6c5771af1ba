"""specab patch-author API. Copied next to the generated `sitecustomize.py` of every arm
that has patches; stdlib only, because it runs inside whatever interpreter serves the arm.

A patch is a plain Python file listed in an experiment's `patches`. Its name is its file
stem. It runs at interpreter start in every server process (API server, engine core,
workers; spawned children run it again, forked children inherit it) and typically does::

    from specab_patch import report_applied, when_imported

    def _patch(mod):
        mod.some_function = fixed_function
        report_applied("my_patch", "replaced some_function")

    when_imported("vllm.some.module", _patch)

The boot fails, naming the patch, unless the engine-core process (or one of its model
workers) reported the patch applied; an exception in a patch or a hook is recorded and fails
the boot the same way. A patch that finds the build already behaves as fixed says so with
`report_applied(name, detail, changed=False)`: that boot fails too (its arm would silently
equal its baseline) unless the arm sets `allow_noop_patches = true`.
"""

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
import traceback

__all__ = ["current_patch", "report_applied", "when_imported"]

_lock = threading.RLock()
_hooks = {}  # module name -> [(patch name, fn)]
_applied = []  # (patch name, detail, changed) reported in this process
_current = []  # stack of patch names whose code is running
_finding = set()


def current_patch():
    """Name of the patch whose code (module body or hook) is running, or None."""
    return _current[-1] if _current else None


def _process_name():
    mp = sys.modules.get("multiprocessing")
    try:
        return mp.current_process().name if mp else "MainProcess"
    except Exception:
        return "?"


def _write(record):
    path = os.environ.get("SPECAB_PATCH_REPORT")
    record.update(pid=os.getpid(), process=_process_name(), argv0=sys.argv[0] if sys.argv else "")
    if not path:
        return
    data = (json.dumps(record, default=str) + "\n").encode()
    # One write on an O_APPEND descriptor: lines from concurrent processes never interleave.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:  # never break the server's imports; the check then fails the boot
        sys.stderr.write(f"specab: cannot write patch report {path}: {exc}\n")


def report_applied(name, detail="", changed=True):
    """Record that patch `name` (its file stem) ran in this process.

    changed=True (default): it changed what this build computes. changed=False: it found
    nothing to change ("not needed in this build", e.g. the bug is already fixed here). A
    patch whose engine-side reports all say changed=False fails the boot unless its arm
    allows no-op patches; any changed=True report from the engine side counts as applied.
    """
    changed = bool(changed)
    with _lock:
        _applied.append((str(name), str(detail), changed))
    _write({"patch": str(name), "event": "applied", "detail": str(detail), "changed": changed})


def _run(patch, fn, *args):
    _current.append(patch)
    try:
        fn(*args)
    except BaseException as exc:  # recorded and failing the boot, never killing the import
        where = getattr(fn, "__qualname__", repr(fn))
        msg = f"{type(exc).__name__}: {exc}"
        _write({"patch": patch, "event": "error", "error": msg, "where": where})
        sys.stderr.write(f"specab: patch {patch!r} failed in {where}: {msg}\n")
        traceback.print_exc()
    finally:
        _current.pop()


def _fire(name, module):
    with _lock:
        hooks = _hooks.pop(name, [])
    for patch, fn in hooks:
        _run(patch, fn, module)


def when_imported(module_name, fn):
    """Call fn(module) right after `module_name` is first imported (at once if it already is).

    The hook runs before any other module can import names from the target module, so
    replacing a function there also replaces it for `from target import function` users.
    """
    patch = current_patch() or "?"
    mod = sys.modules.get(module_name)
    spec = getattr(mod, "__spec__", None)
    if mod is not None and not getattr(spec, "_initializing", False):
        _run(patch, fn, mod)
        return
    with _lock:
        _hooks.setdefault(module_name, []).append((patch, fn))
    _write({"patch": patch, "event": "waiting", "module": module_name})


def _spec_from_others(me, finding, fullname, path, target):
    """The spec every other finder on sys.meta_path would give; `finding` guards against
    being asked again for the same name while they answer."""
    finding.add(fullname)
    try:
        for finder in sys.meta_path:
            if finder is me or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None
    finally:
        finding.discard(fullname)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the other finders, then makes the loader fire our hooks."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _hooks or fullname in _finding:
            return None
        spec = _spec_from_others(self, _finding, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _fire(fullname, module)

        if isinstance(loader, type):  # class-level loaders are shared: wrap, don't mutate
            spec.loader = _Wrapped(loader, exec_module)
        else:
            loader.exec_module = exec_module  # per-module loader instance (file loaders)
        return spec


class _Wrapped:
    def __init__(self, inner, exec_module):
        self._inner = inner
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _after_fork_in_child():
    # A forked child inherits patched modules; say so from its own pid.
    for patch, detail, changed in list(_applied):
        _write(
            {
                "patch": patch,
                "event": "applied",
                "detail": detail,
                "changed": changed,
                "inherited": True,
            }
        )


class _PatchedSource(importlib.machinery.SourceFileLoader):
    """Loads a module from its patched source: `__file__` stays the build's file (vLLM finds
    data files beside its modules), the code object's file is the patched one (tracebacks,
    and compile caches that hash traced files, see the patched text). No bytecode cache is
    read or written, so an unpatched process never picks up patched code."""

    def __init__(self, fullname, origin, patched, patch, noop):
        super().__init__(fullname, origin)
        self._patched = patched
        self._patch = patch
        self._noop = noop

    def get_source(self, fullname):
        with open(self._patched, encoding="utf-8") as f:
            return f.read()

    def get_code(self, fullname):
        with open(self._patched, "rb") as f:
            return compile(f.read(), self._patched, "exec", dont_inherit=True)

    def exec_module(self, module):
        super().exec_module(module)
        what = "unchanged (the build already has it)" if self._noop else "patched"
        report_applied(self._patch, f"served {what} {module.__name__}", changed=not self._noop)


class _DiffFinder(importlib.abc.MetaPathFinder):
    """Serves the modules a diff patch changes: the build's own spec (asked of the other
    finders), its file checked against the sha256 the diff was applied to, then loaded
    from the patched source."""

    def __init__(self):
        self.served = {}  # module name -> (patch name, module entry, patch_dir, noop)
        self.finding = set()  # its own guard: the post-import finder asks this one

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.served or fullname in self.finding:
            return None
        patch, entry, patch_dir, noop = self.served[fullname]
        spec = _spec_from_others(self, self.finding, fullname, path, target)
        origin = getattr(spec, "origin", None)
        if spec is None and entry["original_sha256"] is None and path:
            origin = os.path.join(next(iter(path)), os.path.basename(entry["path"]))
        if not origin or not _same_build(patch, entry, origin):
            return spec
        if entry.get("deleted"):  # the diff removes this module (or renames it away)
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        loader = _PatchedSource(
            fullname, origin, os.path.join(patch_dir, entry["file"]), patch, noop
        )
        locations = getattr(spec, "submodule_search_locations", None)
        return importlib.util.spec_from_file_location(
            fullname, origin, loader=loader, submodule_search_locations=locations
        )


def _same_build(patch, entry, origin):
    """The file this process would import is the one the diff was applied to."""
    want = entry["original_sha256"]
    try:
        with open(origin, "rb") as f:
            have = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        have = None
    if have == want:
        return True
    error = (
        f"{entry['path']} here ({origin}) is not the file the diff was applied to "
        f"(sha256 {str(have)[:12]}, expected {str(want)[:12]}): another vLLM build"
    )
    _write({"patch": patch, "event": "error", "error": error, "where": entry["module"]})
    sys.stderr.write(f"specab: patch {patch!r}: {error}\n")
    return False


_diffs = _DiffFinder()


def _serve_data(patch_dir, entry, files):
    """A diff's data files (and deleted modules), in effect from now on in this process."""
    import specab_served_files

    root = specab_served_files.build_root()
    for f in files:
        if f.get("data"):
            patched = None if f.get("deleted") else os.path.join(patch_dir, f["file"])
            error = (
                specab_served_files.serve(root, f["path"], patched, f["original_sha256"])
                if root
                else "this interpreter has no vllm package to serve it beside"
            )
            if error:
                _write({"patch": entry["name"], "event": "error", "error": error,
                        "where": f["path"]})  # fmt: skip
                continue
        what = "deleted" if f.get("deleted") else "served"
        report_applied(entry["name"], f"{what} {f['path']}", changed=not entry.get("noop"))


def _serve_diff(patch_dir, entry):
    other = [f for f in entry["modules"] if f.get("data") or f.get("deleted")]
    if other:
        _serve_data(patch_dir, entry, other)
    for module in entry["modules"]:
        if module.get("data"):
            continue
        name = module["module"]
        _diffs.served[name] = (entry["name"], module, patch_dir, bool(entry.get("noop")))
        _write({"patch": entry["name"], "event": "waiting", "module": name})
    if _diffs not in sys.meta_path:
        # After the post-import finder, which then wraps the patched loader: a .py patch's
        # hooks on a module a diff changes still fire.
        first = sys.meta_path[:1]
        at = 1 if first and isinstance(first[0], _PostImportFinder) else 0
        sys.meta_path.insert(at, _diffs)


def run_patches(patch_dir):
    """Run every patch listed in patch_dir/specab_patches.json (called by sitecustomize):
    a .py patch runs; a diff's patched modules are served from then on."""
    with open(os.path.join(patch_dir, "specab_patches.json"), encoding="utf-8") as f:
        entries = json.load(f)["patches"]
    for entry in entries:
        if entry.get("kind") == "diff":
            _serve_diff(patch_dir, entry)
            continue
        name = entry["name"]
        path = os.path.join(patch_dir, entry["file"])

        def _load(name=name, path=path):
            spec = importlib.util.spec_from_file_location(f"specab_patches.{name}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            _write({"patch": name, "event": "loaded"})

        _run(name, _load)


if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _PostImportFinder())
    os.register_at_fork(after_in_child=_after_fork_in_child)
