# Sourced by the example tests that need PyTorch: `torch_python MODULES`
# prints the first of /usr/bin/python3 and python3 that imports MODULES
# ("torch" or "torch, numpy"), or nothing.
torch_python() {
  local p
  for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import $1" >/dev/null 2>&1; then
      echo "$p"
      return
    fi
  done
}
