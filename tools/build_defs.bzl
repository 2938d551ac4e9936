"""Shared compiler options for the project's own code."""

# Warnings on and fatal for streamledger's sources (not for third-party code).
LDG_COPTS = [
    "-std=c11",
    "-D_GNU_SOURCE",
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
