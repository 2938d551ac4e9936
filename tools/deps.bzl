"""Repositories streamledger needs, for its own WORKSPACE and for embedders.

In another workspace:

    local_repository(name = "streamledger", path = "/path/to/streamledger")
    load("@streamledger//tools:deps.bzl", "streamledger_deps")
    streamledger_deps()

then depend on "@streamledger//ledger".
"""

def streamledger_deps(urcu_prefix = "/usr", cuda_prefix = "/usr/local/cuda"):
    """Declares @urcu (system liburcu) and @cuda_headers unless present.

    Args:
      urcu_prefix: where liburcu's include/ and lib/ live.
      cuda_prefix: where the CUDA toolkit's include/ lives.
    """
    if "urcu" not in native.existing_rules():
        native.new_local_repository(
            name = "urcu",
            build_file = "@streamledger//third_party:urcu.BUILD",
            path = urcu_prefix,
        )
    if "cuda_headers" not in native.existing_rules():
        native.new_local_repository(
            name = "cuda_headers",
            build_file = "@streamledger//third_party:cuda_headers.BUILD",
            path = cuda_prefix,
        )
