# Sourced by the doc-test (test/docs/readme.test.ts) before a Markdown file's shell blocks.
# `curl` becomes a function around the real one that lets every 2xx through and stops the run at
# any other status (or no answer) unless the text announced it with `# → NNN`.

__doc_fail() {
  printf 'doc-test: %s\n' "$*" >&2
  printf '%s\n' "$*" >>"$DOCTEST_DIR/failures"
}

__doc_block() {
  printf '\n>>> %s\n' "$1" >&2
}

__doc_expect() {
  __DOC_EXPECT=$1
  __DOC_EXPECT_LINE=$2
  rm -f "$DOCTEST_DIR/answered"
}

__doc_expect_done() {
  if [[ ! -s "$DOCTEST_DIR/answered" ]]; then
    __doc_fail "line $__DOC_EXPECT_LINE announces $__DOC_EXPECT, but no request was answered"
    unset __DOC_EXPECT __DOC_EXPECT_LINE
    return 1
  fi
  unset __DOC_EXPECT __DOC_EXPECT_LINE
}

curl() {
  local out rc=0 status
  out=$(mktemp "$DOCTEST_DIR/curl.XXXXXX")
  command curl --no-progress-meter "$@" --write-out '%{http_code}' >"$out" || rc=$?
  status=$(tail -c 3 "$out")
  head -c -3 "$out"
  if [[ $status == 000 ]]; then
    __doc_fail "no HTTP answer (curl exit $rc): curl $*"
    rm -f "$out"
    return 1
  fi
  if [[ -n ${__DOC_EXPECT:-} ]]; then
    echo "$status" >>"$DOCTEST_DIR/answered"
    if [[ $status != "$__DOC_EXPECT" ]]; then
      __doc_fail "line $__DOC_EXPECT_LINE announces $__DOC_EXPECT, the answer was $status: $(head -c -3 "$out" | head -c 600)"
      rm -f "$out"
      return 1
    fi
    rm -f "$out"
    return 0
  fi
  if [[ $status != 2?? ]]; then
    __doc_fail "answered $status, which the text does not announce (# → $status): curl $* → $(head -c -3 "$out" | head -c 600)"
    rm -f "$out"
    return 1
  fi
  rm -f "$out"
  return "$rc"
}

trap '__doc_fail "a command failed (exit $?) at script line $LINENO"' ERR
set -eo pipefail
