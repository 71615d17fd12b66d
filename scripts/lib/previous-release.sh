# shellcheck shell=bash
# The release before this checkout: the newest `vX.Y.Z` tag reachable from HEAD that does not
# point at HEAD itself (on the tagged commit, the one before it). Prints nothing when there is
# none (the first release, or a copy without git history).
previous_release_tag() {
  git rev-parse --verify --quiet HEAD^ >/dev/null || return 0
  git describe --tags --abbrev=0 --match 'v[0-9]*.[0-9]*.[0-9]*' HEAD^ 2>/dev/null || true
}
