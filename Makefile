# The README's commands, and the benchmark. `make bench BENCH_ARGS="--db sqlite --quick"`.
.PHONY: install serve test bench bench-quick

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
