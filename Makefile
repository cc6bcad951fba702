# The README's commands, and the benchmark. `make bench BENCH_ARGS="--db sqlite --quick"`.
.PHONY: install serve test bench bench-quick bench-peers docs docs-build

BENCH_ARGS ?= --db both --write-results

install:
	bash -c 'source scripts/venv.sh && ensure_venv dev'

serve:
	./scripts/quickstart

test:
	./scripts/test

# The documentation site (mkdocs.yml; the docs tools are in the dev extra). `make docs` serves it
# on http://127.0.0.1:8001, the origin the server's default PLAYGROUND_ORIGINS allows;
# `make docs-build` builds it into site/, failing on any warning. NO_MKDOCS_2_WARNING silences
# Material's end-of-life banner (docs/decisions.md, "Documentation site").
DOCS_ENV = NO_MKDOCS_2_WARNING=1

docs:
	bash -c 'source scripts/venv.sh && ensure_venv dev'
	$(DOCS_ENV) .venv/bin/python -m mkdocs serve -a 127.0.0.1:8001

docs-build:
	bash -c 'source scripts/venv.sh && ensure_venv dev'
	$(DOCS_ENV) .venv/bin/python -m mkdocs build --strict --site-dir site

# The bench needs Juru in .venv (quick start or test set-up), py-spy for the CPU split and
# valgrind for the instruction count (installed with apt-get where it can be).
bench:
	bash -c 'source scripts/venv.sh && ensure_venv base'
	[ -x .venv/bin/py-spy ] || .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	command -v valgrind >/dev/null || apt-get install -y -q valgrind || sudo -n apt-get install -y -q valgrind || true
	.venv/bin/python -m bench.run $(BENCH_ARGS)

bench-quick:
	$(MAKE) bench BENCH_ARGS="--db both --quick"

# The peers (bare LangGraph, Juru playground, Aegra in bench/.aegra-venv): docs/development.md.
bench-peers:
	$(MAKE) bench BENCH_ARGS="--db both --scenarios bare,playground,aegra --quick"
