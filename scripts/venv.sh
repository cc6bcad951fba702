# Sourced by scripts/quickstart and scripts/test: make ./.venv hold Juru with the given extras.
# The install is skipped when nothing it depends on changed since the last one (a stamp file).
ensure_venv() {
  local extras="$1" python="${PYTHON:-python3}" digest stamp
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  digest=$(cat pyproject.toml constraints.txt | .venv/bin/python -c \
    'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])')
  stamp=".venv/.juru-installed-$digest"
  if [ -f "$stamp-dev" ] || [ -f "$stamp-$extras" ]; then
    return 0
  fi
  local target="."
  [ "$extras" = "base" ] || target=".[$extras]"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e "$target"
  rm -f .venv/.juru-installed-*
  touch "$stamp-$extras"
}

# ./.venv-mcp2: the newest official MCP SDK (2.x, which cannot share .venv with the 1.x line
# that langchain-mcp-adapters needs), for the test that runs a 2.x server against Juru's client.
MCP2_REQUIREMENT="mcp==2.3.0"
ensure_mcp2_venv() {
  local python="${PYTHON:-python3}" stamp
  stamp=".venv-mcp2/.juru-installed-$(echo "$MCP2_REQUIREMENT" | tr -c 'a-z0-9.' '_')"
  [ -f "$stamp" ] && return 0
  rm -rf .venv-mcp2
  if "$python" -m venv .venv-mcp2 \
    && .venv-mcp2/bin/python -m pip install --quiet --disable-pip-version-check "$MCP2_REQUIREMENT"
  then
    touch "$stamp"
  else
    rm -rf .venv-mcp2
    return 1
  fi
}
