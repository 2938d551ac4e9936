"""Shared compiler options for the project's own code."""

# Warnings on and fatal for streamledger's sources (not for third-party code).
# Strict C11: a source that needs POSIX or GNU declarations defines its feature
# macro itself, so no -D_GNU_SOURCE reaches anyone who builds these files.
# One section per function: the shared library (//packaging) is linked with
# --gc-sections and drops what it does not export or use (the test-only
# fault-injection switches of ledger_testing.h).
LDG_COPTS = [
    "-std=c11",
    "-ffunction-sections",
    "-fdata-sections",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-Wno-unused-parameter",
]

# Tests and benchmarks: same warnings, but they may use non-prototype helpers.
LDG_TEST_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
]
