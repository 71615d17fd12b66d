# The tests' Python tools (from PyPI), in one virtual environment under .build/, made on first
# use and reused: `ensure_python_tools schemathesis==4.32.5 …` installs what is missing.
ensure_python_tools() {
  local venv=.build/python-tools
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || {
      echo "Cannot make a Python virtual environment; install python3-venv (apt-get install python3-venv)." >&2
      return 1
    }
  fi
  local missing=()
  for requirement in "$@"; do
    "$venv/bin/python" -m pip show -q "${requirement%%[=<>]*}" >/dev/null 2>&1 || missing+=("$requirement")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]} from PyPI into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}"
  fi
  PYTHON_TOOLS="$PWD/$venv/bin"
  export PYTHON_TOOLS
}
