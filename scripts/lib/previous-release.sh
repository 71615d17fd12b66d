# shellcheck shell=bash
# The release before this checkout: the newest `vX.Y.Z` tag reachable from HEAD that does not
# point at HEAD itself (on the tagged commit, the one before it). Prints nothing when there is
# none (the first release, or a copy without git history).
previous_release_tag() {
  git rev-parse --verify --quiet HEAD^ >/dev/null || return 0
  git describe --tags --abbrev=0 --match 'v[0-9]*.[0-9]*.[0-9]*' HEAD^ 2>/dev/null || true
}

# A shallow clone, or one made without tags, cannot see the previous release: fetch the
# history and the tags from its origin when it has one (best effort, bounded), and say so
# when there is still no release to compare with.
ensure_release_history() {
  git rev-parse --git-dir >/dev/null 2>&1 || return 0
  local shallow
  shallow=$(git rev-parse --is-shallow-repository 2>/dev/null || echo false)
  if [ "$shallow" = true ] || [ -z "$(git tag --list 'v[0-9]*')" ]; then
    if git remote get-url origin >/dev/null 2>&1; then
      echo "==> fetching the release tags from origin (this clone is shallow or has no tags)"
      local unshallow=""
      [ "$shallow" = true ] && unshallow=--unshallow
      timeout 120 git fetch --quiet --tags $unshallow origin 2>&1 || echo "    (could not fetch them)"
    fi
  fi
  [ -n "$(previous_release_tag)" ] \
    || echo "==> no previous release tag in this clone: the migrations check and the upgrade test have no release to compare with"
}
