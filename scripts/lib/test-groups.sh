# The groups of tests that scripts/test runs apart from the rest (or that a run may leave out),
# said once. Each group is both a Swift Testing tag on its suites (Sources/TestTags/Tags.swift)
# and the prefix of those suites' type names; runs select a group by the prefix.
#
# Why by name: `swift test` in the toolchain this package builds with (Swift 6.3) takes
# `--filter`/`--skip` as regular expressions on test names ("Module.Type/test()") and has no
# tag option, and its Swift Testing reads `--filter tag:NAME` as a name pattern too (it matches
# nothing); the `tag:` prefix came to Swift Testing after 6.3. check_test_groups fails the run
# when a suite's tag and its name disagree, so the tags and the selection stay in step.
#
# Patterns: a dot and the prefix, i.e. the start of a suite's type name after its module's.
TIMING_TESTS='\.Timing'            # tag .timing: measures elapsed time, runs alone
RELIABILITY_TESTS='\.Reliability'  # tag .reliability: faults under load, runs alone, last
BROWSER_TESTS='\.BoardBrowser'     # tag .browser: headless Chromium (`--skip "$BROWSER_TESTS"`)
KIT_TESTS='\.OrderFlowKit'         # tag .kit: OrderFlowKit, the app's half: runs apart, in its own process

# Every suite whose type name starts with a group's prefix carries the group's tag, and every
# suite carrying the tag has the prefix. Reads the `@Suite(…)` line above each type.
check_test_groups() {
  local mismatches
  mismatches=$(find Tests -name '*.swift' -print0 | sort -z | xargs -0 awk \
    -v groups="timing=${TIMING_TESTS#\\.} reliability=${RELIABILITY_TESTS#\\.} browser=${BROWSER_TESTS#\\.} kit=${KIT_TESTS#\\.}" '
    BEGIN { count = split(groups, pairs, " ") }
    /^@Suite/ { suite = $0; next }
    suite != "" && /^(struct|final class|class|enum|actor) / {
      name = ($1 == "final") ? $3 : $2
      sub(/[^A-Za-z0-9_].*/, "", name)
      for (i = 1; i <= count; i++) {
        split(pairs[i], pair, "=")
        tagged = (suite ~ ("[.]tags[(][^)]*[.]" pair[1] "[,)]"))
        named = (index(name, pair[2]) == 1)
        if (tagged != named) printf "  %s: %s: tag .%s and the name prefix %s go together\n", FILENAME, name, pair[1], pair[2]
      }
      suite = ""
    }
    /^[^@ ]/ && !/^@Suite/ { suite = "" }
  ')
  if [ -n "$mismatches" ]; then
    echo "==> a suite's group tag and its name disagree (scripts/lib/test-groups.sh):" >&2
    echo "$mismatches" >&2
    return 1
  fi
}
