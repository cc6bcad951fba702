# The README's commands, and the benchmark. `make bench BENCH_ARGS="--db sqlite --quick"`.
.PHONY: install serve test bench bench-quick bench-peers

BENCH_ARGS ?= --db both --write-results

install:
	bash -c 'source scripts/venv.sh && ensure_venv dev'

serve:
	./scripts/quickstart

test:
	./scripts/test

# The bench needs Juru in .venv (quick start or test set-up) and py-spy for the CPU split.
bench:
	bash -c 'source scripts/venv.sh && ensure_venv base'
	[ -x .venv/bin/py-spy ] || .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	.venv/bin/python -m bench.run $(BENCH_ARGS)

bench-quick:
	$(MAKE) bench BENCH_ARGS="--db both --quick"

# The peers (bare LangGraph, Juru playground, Aegra in bench/.aegra-venv): docs/development.md.
bench-peers:
	$(MAKE) bench BENCH_ARGS="--db both --scenarios bare,playground,aegra --quick"
