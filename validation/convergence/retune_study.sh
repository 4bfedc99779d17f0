#!/usr/bin/env bash
# The convergence study behind the shipped numerics of configs/default.yaml and
# configs/si_lines_metrology.yaml: Ψ/Δ of every sweep point for a ladder of harmonics at a fine slicing
# and a ladder of slicings at many harmonics, saved per setting (JSON) for
# validation/convergence/retune_table.py. Settings are M:slice_factor:richardson.
#   usage: validation/convergence/retune_study.sh GRATINGSIM OUTDIR [seconds per case, default 200]
set -uo pipefail
exe=${1:?usage: retune_study.sh GRATINGSIM OUTDIR [seconds]}
out=${2:?usage: retune_study.sh GRATINGSIM OUTDIR [seconds]}
limit=${3:-200}
here=$(dirname "$0")
mkdir -p "$out"
study() {  # study NAME CASE SETTINGS...
  local name=$1 case=$2; shift 2
  timeout "$limit" python3 "$here/metrology_convergence.py" "$case" --gratingsim "$exe" --save "$out/$name.json" \
    --settings "$@" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"; cat "$out/$name.txt"
}
study default "$here/../../configs/default.yaml" \
  12:1:0 12:1:1 16:4:1 24:4:1 32:4:1 40:4:1 48:1:1 48:2:1 48:3:1 48:4:1 48:6:1 64:4:1 64:6:1
study si_lines "$here/../../configs/si_lines_metrology.yaml" \
  20:1:1 24:4:1 32:4:1 40:4:1 48:1:1 48:2:1 48:3:1 48:4:1 48:6:1 64:6:1
