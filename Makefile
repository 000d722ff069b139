# `make train` and `make test` are the two commands of the README. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup train test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU build of torch first, from local disk; the package's own bound admits it.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,video,sb3,minatar,ray,mujoco,envpool-api,integrations,wandb,multiagent,tune,minigrid,dm-control,robotics,box2d,highway,vizdoom]'
	touch $(STAMP)

train: $(STAMP)
	$(VENV)/bin/seedpool train ppo --env CartPole-v1

test: $(STAMP)
	# Two workers (pytest-xdist): the learning tests run in two fixed groups, one per worker (tests/conftest.py).
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=25 tests

bench: $(STAMP)
	$(VENV)/bin/seedpool bench

clean:
	rm -rf $(VENV) runs
