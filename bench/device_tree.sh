#!/usr/bin/env bash
# The device tool copies the working tree (tracked files and untracked ones git does not ignore) to the GPU machine,
# at most 64 MiB in all; the tracked tree is larger since the stores of the complete bundled run were committed
# (bench/results/full_run: about 41 MB, every shard ended; their rows are all in kill_matrix/ too). No device call
# reads them: device_call.sh restores only a shard that has not ended, and fault_tail.py's prepare (which reads
# them) runs here, its work folder carried (carry: ["out/fault_tail"]). Run from the repository root:
#
#   bash bench/device_tree.sh park     removes those stores from the working tree (they stay committed) and
#                                      prints the size of what a device call would copy
#   bash bench/device_tree.sh unpark   restores them from the last commit
set -euo pipefail
stores=(bench/results/full_run/shard* bench/results/full_run/reobserve*/)
case "${1:-}" in
park)
    for store in "${stores[@]}"; do
        [ -d "$store" ] && rm -rf "$store"
    done
    git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "tracked files here: %.1f MiB\n", $1 / 1048576}'
    ;;
unpark)
    git checkout -- bench/results/full_run
    ;;
*)
    echo "device_tree.sh: park or unpark" >&2
    exit 2
    ;;
esac
