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
